package termchat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// TestRunPiped: input from a pipe gets the replies alone on Out, each
// turn sends the history, commands apply, and the end of input ends Run.
func TestRunPiped(t *testing.T) {
	f := newFake(t)
	in := strings.Join([]string{
		"hello",
		`"""`, "two", "lines", `"""`,
		"/system Be brief.",
		"after system",
		"/set temperature 0.2",
		"/set max_tokens 5",
		`continued \`, "here",
		"/reset",
		"fresh",
		"/unset max_tokens",
		`"""/bye"""`,
		"",
		"last",
	}, "\n") // no newline after the last line: it is still a line
	var out, errOut strings.Builder
	err := Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, In: strings.NewReader(in), Out: &out, Err: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	want := "echo: hello\necho: two\nlines\necho: after system\necho: continued \nhere\necho: fresh\necho: /bye\necho: last\n"
	if out.String() != want || errOut.Len() != 0 {
		t.Fatalf("output %q (errors %q), want %q", out.String(), errOut.String(), want)
	}
	reqs := f.requests()
	type M = []Message
	wantMsgs := []M{
		{{"user", "hello"}},
		{{"user", "hello"}, {"assistant", "echo: hello"}, {"user", "two\nlines"}},
		{{"system", "Be brief."}, {"user", "after system"}},
		{{"system", "Be brief."}, {"user", "after system"}, {"assistant", "echo: after system"}, {"user", "continued \nhere"}},
		{{"system", "Be brief."}, {"user", "fresh"}},
		{{"system", "Be brief."}, {"user", "fresh"}, {"assistant", "echo: fresh"}, {"user", "/bye"}},
	}
	if len(reqs) != 7 {
		t.Fatalf("%d requests, want 7", len(reqs))
	}
	for i, w := range wantMsgs {
		if !reflect.DeepEqual(reqs[i].Messages, w) {
			t.Errorf("request %d: %+v, want %+v", i, reqs[i].Messages, w)
		}
	}
	for i, r := range reqs {
		if r.Model != "first-model" {
			t.Errorf("request %d asked %q, want the server's first model", i, r.Model)
		}
	}
	if reqs[2].Temperature != nil || reqs[3].Temperature == nil || *reqs[3].Temperature != 0.2 || *reqs[3].MaxTokens != 5 || reqs[5].MaxTokens != nil {
		t.Errorf("settings not applied: %+v", reqs)
	}
}

// TestRunPipedErrors: without a person to tell, the first failure ends Run
// with its error.
func TestRunPipedErrors(t *testing.T) {
	f := newFake(t)
	f.setScript(func(w http.ResponseWriter, _ *http.Request, _ sent) {
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"bad request"}}`))
	})
	for _, tc := range []struct{ in, want string }{
		{"hi\nnever sent\n", "bad request"},
		{"/nonsense\n", "unknown command"},
		{"\"\"\"\nunfinished\n", "was not sent"},
	} {
		var out strings.Builder
		err := Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, Model: "m", In: strings.NewReader(tc.in), Out: &out, Err: &out})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.want)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want 1 (Run goes on after an error)", n)
	}
}

// startChat runs an interactive chat on a pipe and returns its input, its
// output (and errors) and Run's result.
func startChat(t *testing.T, cfg Config) (*io.PipeWriter, *syncbuf.Buffer, chan os.Signal, <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	out := &syncbuf.Buffer{}
	intr := make(chan os.Signal, 1)
	cfg.In, cfg.Out, cfg.Err, cfg.Interrupt, cfg.Interactive = pr, out, out, intr, true
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg) }()
	t.Cleanup(func() { pw.Close() })
	return pw, out, intr, done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// TestRunInterrupt: Ctrl-C while a reply streams stops it (the server sees
// the request end), keeps the part shown in the history, and returns to
// the prompt; Ctrl-C at the prompt shows the hint and drops an open block;
// the end of input then ends Run without error.
func TestRunInterrupt(t *testing.T) {
	f := newFake(t)
	left := make(chan struct{})
	f.setScript(endless(left))
	in, out, intr, done := startChat(t, Config{Client: &Client{BaseURL: f.URL}, Model: "m"})
	waitFor(t, out, Prompt, 1)
	io.WriteString(in, "go on forever\n")
	waitFor(t, out, "tok tok ", 1)
	intr <- os.Interrupt
	<-left // the request was cancelled
	waitFor(t, out, Prompt, 2)
	if !strings.Contains(out.String(), InterruptedMark) {
		t.Fatalf("no %q after the interrupted reply:\n%s", InterruptedMark, out.String())
	}

	f.setScript(echo)
	io.WriteString(in, "next\n")
	waitFor(t, out, "echo: next", 1)
	waitFor(t, out, Prompt, 3)
	reqs := f.requests()
	msgs := reqs[1].Messages
	if len(msgs) != 3 || msgs[0] != (Message{"user", "go on forever"}) || msgs[1].Role != "assistant" ||
		!strings.HasPrefix(msgs[1].Content, "tok tok ") || msgs[2] != (Message{"user", "next"}) {
		t.Fatalf("the interrupted reply is not in the history: %+v", msgs)
	}

	// At the prompt: the hint, and the open block is dropped.
	io.WriteString(in, "\"\"\"\nhalf a block\n")
	waitFor(t, out, PromptContinue, 2)
	intr <- os.Interrupt
	waitFor(t, out, ExitHint, 1)
	waitFor(t, out, Prompt, 4)
	io.WriteString(in, "whole\n")
	waitFor(t, out, "echo: whole", 1)
	if got := f.requests()[2].Messages; got[len(got)-1].Content != "whole" {
		t.Fatalf("the dropped block was sent: %+v", got)
	}
	waitFor(t, out, Prompt, 5)
	in.Close() // Ctrl-D
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestRunInterruptBeforeAnyText: a reply stopped before its first word is
// dropped together with its question, so the roles keep alternating.
func TestRunInterruptBeforeAnyText(t *testing.T) {
	f := newFake(t)
	started := make(chan struct{})
	f.setScript(func(w http.ResponseWriter, r *http.Request, req sent) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
	})
	in, out, intr, done := startChat(t, Config{Client: &Client{BaseURL: f.URL}, Model: "m"})
	io.WriteString(in, "slow\n")
	<-started
	intr <- os.Interrupt
	waitFor(t, out, Prompt, 2)
	f.setScript(echo)
	io.WriteString(in, "then\n")
	waitFor(t, out, "echo: then", 1)
	reqs := f.requests()
	if got := reqs[len(reqs)-1].Messages; !reflect.DeepEqual(got, []Message{{"user", "then"}}) {
		t.Fatalf("after a reply stopped before any text: %+v", got)
	}
	in.Close()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestRunInteractiveErrors: a person is told what failed and the chat goes
// on; the failed turn leaves no trace in the history.
func TestRunInteractiveErrors(t *testing.T) {
	f := newFake(t)
	f.setScript(func(w http.ResponseWriter, _ *http.Request, _ sent) {
		w.WriteHeader(400)
		w.Write([]byte(`{"error":{"message":"the prompt is too long"}}`))
	})
	in, out, _, done := startChat(t, Config{Client: &Client{BaseURL: f.URL}, Model: "m"})
	io.WriteString(in, "too long\n")
	waitFor(t, out, "Error: ", 1)
	waitFor(t, out, Prompt, 2)
	io.WriteString(in, "/set temperature 9\n")
	waitFor(t, out, "0 to 2", 1)
	io.WriteString(in, "/what\n")
	waitFor(t, out, "unknown command /what", 1)
	f.setScript(echo)
	io.WriteString(in, "short\n")
	waitFor(t, out, "echo: short", 1)
	reqs := f.requests()
	if got := reqs[len(reqs)-1].Messages; !reflect.DeepEqual(got, []Message{{"user", "short"}}) {
		t.Fatalf("the failed turn is in the history: %+v", got)
	}
	if !strings.Contains(out.String(), "the prompt is too long") {
		t.Fatalf("the server's message is not shown:\n%s", out.String())
	}
	io.WriteString(in, "/exit\n")
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

// TestRunShowAndHelp: /show reports the settings as /set left them, /help
// lists the commands, and both appear in a piped chat too.
func TestRunShowAndHelp(t *testing.T) {
	f := newFake(t)
	var out strings.Builder
	in := "/system Be brief.\nhi\n/set temperature 0.3\n/set ignore_eos true\n/show\n/help\n"
	if err := Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, Model: "m", In: strings.NewReader(in), Out: &out, Err: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model: m\n", "system: Be brief.\n", "temperature: 0.3\n", "max_tokens: the server's default\n",
		"ignore_eos: true\n", "exchanges in the conversation: 1\n", "/set max_tokens N", "/bye, /exit"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

func TestRunThinking(t *testing.T) {
	f := newFake(t)
	f.setScript(func(w http.ResponseWriter, _ *http.Request, _ sent) {
		event(w, chunk(map[string]any{"reasoning_content": "Hmm"}, nil))
		event(w, chunk(map[string]any{"reasoning_content": ", yes.\x1b]0;pwned\x07"}, nil))
		event(w, chunk(map[string]any{"content": "Answer\x1b[2J."}, nil))
		event(w, chunk(map[string]any{}, "stop"))
		event(w, "[DONE]")
	})
	for _, tc := range []struct {
		name           string
		terminal, hide bool
		want           string
	}{
		{"to a pipe", false, false, "Thinking...\nHmm, yes.\x1b]0;pwned\x07\n...done thinking.\n\nAnswer\x1b[2J.\n"},
		{"to a terminal", true, false, "\x1b[2mThinking...\nHmm, yes.\uFFFD]0;pwned\uFFFD\n...done thinking.\n\x1b[0m\nAnswer\uFFFD[2J.\n"},
		{"hidden", false, true, "Answer\x1b[2J.\n"},
	} {
		var out strings.Builder
		err := Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, Model: "m", In: strings.NewReader("q\n"), Out: &out, Err: &out,
			Terminal: tc.terminal, HideThinking: tc.hide})
		if err != nil || out.String() != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, out.String(), err, tc.want)
		}
	}
	// The reasoning is not sent back.
	for _, r := range f.requests() {
		if len(r.Messages) != 1 {
			t.Fatalf("history across Runs: %+v", r.Messages)
		}
	}
}

// TestRunInterruptedThinking: a reply stopped while it thinks leaves the
// terminal's colours reset.
func TestRunInterruptedThinking(t *testing.T) {
	f := newFake(t)
	f.setScript(func(w http.ResponseWriter, r *http.Request, _ sent) {
		event(w, chunk(map[string]any{"reasoning_content": "deep thought"}, nil))
		<-r.Context().Done()
	})
	in, out, intr, done := startChat(t, Config{Client: &Client{BaseURL: f.URL}, Model: "m", Terminal: true})
	io.WriteString(in, "q\n")
	waitFor(t, out, "deep thought", 1)
	intr <- os.Interrupt
	waitFor(t, out, Prompt, 2)
	if s := out.String(); !strings.Contains(s, "deep thought"+ansiReset+"\n") {
		t.Fatalf("colours not reset after the interrupted thinking: %q", s)
	}
	in.Close()
	wait(t, done)
}

// TestRunPipedInterrupt: without a person at the prompt, Ctrl-C ends the
// chat with ErrInterrupted.
func TestRunPipedInterrupt(t *testing.T) {
	f := newFake(t)
	left := make(chan struct{})
	f.setScript(endless(left))
	intr := make(chan os.Signal, 1)
	out := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, Model: "m", In: strings.NewReader("q\n"), Out: out, Err: out, Interrupt: intr})
	}()
	waitFor(t, out, "tok", 1)
	intr <- os.Interrupt
	if err := wait(t, done); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("%v, want ErrInterrupted", err)
	}
	<-left
}

// TestRunContextEnd: the command's context ending (SIGTERM) stops the
// reply and ends Run without error.
func TestRunContextEnd(t *testing.T) {
	f := newFake(t)
	left := make(chan struct{})
	f.setScript(endless(left))
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Client: &Client{BaseURL: f.URL}, Model: "m", In: pr, Out: out, Err: out, Interactive: true})
	}()
	io.WriteString(pw, "q\n")
	waitFor(t, out, "tok", 1)
	cancel()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	<-left
}

func TestRunNoModels(t *testing.T) {
	f := newFake(t)
	f.models = nil
	err := Run(context.Background(), Config{Client: &Client{BaseURL: f.URL}, In: strings.NewReader("hi\n"), Out: io.Discard, Err: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "no models") {
		t.Fatalf("%v", err)
	}
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\n":     "plain\ttext\n",
		"über ✓":            "über ✓",
		"a\rb":              "a\uFFFDb",
		"\x1b[31mred":       "\uFFFD[31mred",
		"del\x7f c1\u009b.": "del\uFFFD c1\uFFFD.",
	} {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRunInterruptModels: Ctrl-C while the server is asked for its models
// (a server that does not answer) gives up.
func TestRunInterruptModels(t *testing.T) {
	asked := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(asked)
		<-r.Context().Done()
	}))
	defer srv.Close()
	intr := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Config{Client: &Client{BaseURL: srv.URL}, In: strings.NewReader(""), Out: io.Discard, Err: io.Discard, Interrupt: intr, Interactive: true})
	}()
	<-asked
	intr <- os.Interrupt
	if err := wait(t, done); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("%v, want ErrInterrupted", err)
	}
}

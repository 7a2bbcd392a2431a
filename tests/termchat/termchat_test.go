// Package termchat runs `troupe chat` on the built-in demo model under a
// pseudo-terminal and types at it as a person does: the prompt, streamed
// replies, Ctrl-C stopping a reply without ending the chat, /reset, and
// Ctrl-D leaving with status 0.
package termchat

import (
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/troupe-ai/troupe/internal/syncbuf"
	"github.com/troupe-ai/troupe/tests/internal/serveproc"
)

// timeout bounds each wait: generous, for a shared two-core machine.
const timeout = 90 * time.Second

// screen is what the chat wrote to its terminal; next is where the next
// expectation starts looking.
type screen struct {
	out  *syncbuf.Buffer
	next int
	done chan struct{}
}

// expect waits until want appears after the last expectation and moves past
// it, returning what came before it.
func (s *screen) expect(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		all := s.out.String()
		if i := strings.Index(all[s.next:], want); i >= 0 {
			before := all[s.next : s.next+i]
			s.next += i + len(want)
			return before
		}
		select {
		case <-s.done:
			t.Fatalf("troupe chat exited before %q; the terminal showed:\n%s", want, all)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v; the terminal showed:\n%s", want, timeout, all)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// grown waits until at least n bytes follow the last expectation.
func (s *screen) grown(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(timeout); len(s.out.String())-s.next < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d bytes of reply within %v:\n%s", n, timeout, s.out.String())
		}
	}
}

func TestChatUnderTerminal(t *testing.T) {
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "chat", "--threads", "1")
	term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	s := &screen{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	go func() { io.Copy(s.out, term) }() // ends with EIO when the chat exits
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); exited <- err; close(s.done) }()
	defer func() {
		select {
		case <-s.done:
		default:
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("the terminal showed:\n%q", s.out.String())
		}
	}()
	typeIn := func(text string) {
		t.Helper()
		if _, err := io.WriteString(term, text); err != nil {
			t.Fatal(err)
		}
	}

	s.expect(t, "loading troupe-demo")
	s.expect(t, "Chatting with troupe-demo")
	s.expect(t, ">>> ")

	// A short reply streams and the prompt comes back.
	typeIn("/set max_tokens 8\n")
	s.expect(t, "Set max_tokens to 8.")
	s.expect(t, ">>> ")
	typeIn("/set ignore_eos true\n")
	s.expect(t, ">>> ")
	typeIn("hello\n")
	s.expect(t, "hello\r\n") // the terminal's echo
	if reply := s.expect(t, ">>> "); strings.TrimSpace(reply) == "" {
		t.Fatal("no reply before the prompt came back")
	}

	// A long reply: Ctrl-C while it streams stops it and the prompt comes
	// back; the chat goes on.
	typeIn("/set max_tokens 3000\n")
	s.expect(t, ">>> ")
	typeIn("tell me a long story\n")
	s.expect(t, "story\r\n")
	s.grown(t, 40) // the reply is streaming
	typeIn("\x03")
	shown := s.expect(t, "[interrupted]")
	if strings.Contains(shown, "Use Ctrl + d") {
		t.Fatal("the reply had ended before Ctrl-C (the hint for an idle prompt appeared)")
	}
	s.expect(t, ">>> ")
	select {
	case <-s.done:
		t.Fatal("Ctrl-C ended troupe chat")
	default:
	}
	typeIn("/show\n")
	s.expect(t, "exchanges in the conversation: 2") // the interrupted reply was kept
	s.expect(t, ">>> ")

	// Ctrl-C at the prompt shows the hint and leaves the chat running.
	typeIn("\x03")
	s.expect(t, "Use Ctrl + d or /bye to exit.")
	s.expect(t, ">>> ")

	// /reset clears the conversation; a new turn works after it.
	typeIn("/reset\n")
	s.expect(t, "Cleared the conversation.")
	s.expect(t, ">>> ")
	typeIn("/show\n")
	s.expect(t, "exchanges in the conversation: 0")
	s.expect(t, ">>> ")
	typeIn("/set max_tokens 4\n")
	s.expect(t, ">>> ")
	typeIn("\"\"\"\nfirst line\nsecond line\n\"\"\"\n")
	s.expect(t, "... ")
	s.expect(t, ">>> ")
	typeIn("/show\n")
	s.expect(t, "exchanges in the conversation: 1")
	s.expect(t, ">>> ")

	// Ctrl-D at an empty prompt leaves with status 0.
	typeIn("\x04")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("troupe chat after Ctrl-D: %v (want exit status 0)", err)
		}
	case <-time.After(timeout):
		t.Fatalf("troupe chat still running %v after Ctrl-D", timeout)
	}
}

// Package browser drives the chat page troupe serves at / in a real
// headless Chromium (through the DevTools protocol, with chromedp) against
// a real `troupe serve`: what an operator does in the browser, checked in
// the DOM.
//
// Without a Chromium the tests skip, except under CI=true, where they fail:
// CI must install it (Debian: apt-get install chromium).
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/tests/internal/serveproc"
)

// chromium finds the browser: TROUPE_CHROMIUM, else chromium (Debian's
// package) or another Chrome on PATH. Without one the test skips, or fails
// under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TROUPE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "/usr/bin/chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium found (install Debian's chromium package: apt-get install -y chromium, or set TROUPE_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: the browser test must run")
	}
	t.Skip(msg)
	return ""
}

// script is what the test model says after the Qwen3 chat template's
// generation prompt ("<|im_start|>assistant\n"): some reasoning, then "Hi!"
// over and over (" Hi" follows "!" and "!" follows " Hi"), until max_tokens.
// Each token has one successor, as model init --script requires.
const script = "assistant\n<think>Plan: greet.</think>Hi! Hi!"

// scriptModel makes a tiny Qwen3-shaped script model with the real Qwen3
// tokenizer: a real forward pass whose answer the test knows. Its 151k-token
// vocabulary makes each token take milliseconds on one thread, so a long
// answer streams for many seconds; its context is long enough for one.
func scriptModel(t *testing.T, bin string) string {
	t.Helper()
	cfg := map[string]any{
		"architectures": []string{"Qwen3ForCausalLM"}, "model_type": "qwen3",
		"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512,
		"rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 16384,
		"bos_token_id": 1, "eos_token_id": 2,
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "model")
	cmd := exec.Command(bin, "model", "init", "--config", cfgPath, "--seed", "2",
		"--tokenizer", fixtures.Path(t, "tokenizers", "qwen3"), "--script", script, "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("model init: %v\n%s", err, b)
	}
	return out
}

// pageView is what the test reads of the page at one moment; the last
// assistant turn's parts.
type pageView struct {
	State           string `json:"state"`
	Turns           int    `json:"turns"`
	Text            string `json:"text"`
	Meta            string `json:"meta"`
	Usage           bool   `json:"usage"`
	Stopped         bool   `json:"stopped"`
	Reasoning       string `json:"reasoning"`
	ReasoningHidden bool   `json:"reasoningHidden"`
	ReasoningOpen   bool   `json:"reasoningOpen"`
	User            string `json:"user"`
	Prompt          string `json:"prompt"`
	StopHidden      bool   `json:"stopHidden"`
	SendDisabled    bool   `json:"sendDisabled"`
	Error           string `json:"error"`
	ModelName       string `json:"modelName"`
	ModelDetails    string `json:"modelDetails"`
}

// String shows the view with the texts cut short, for failure messages.
func (v pageView) String() string {
	short := func(s string) string {
		if len(s) > 60 {
			return fmt.Sprintf("%q… (%d bytes)", s[:60], len(s))
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("state %s, %d replies, last reply %s, meta %q, usage %v, stopped %v, reasoning %s (hidden %v, open %v), "+
		"last user message %s, message box %s, stop hidden %v, send disabled %v, error %q, model %q (%s)",
		v.State, v.Turns, short(v.Text), v.Meta, v.Usage, v.Stopped, short(v.Reasoning), v.ReasoningHidden, v.ReasoningOpen,
		short(v.User), short(v.Prompt), v.StopHidden, v.SendDisabled, v.Error, v.ModelName, v.ModelDetails)
}

const viewJS = `(() => {
  const q = (s) => document.querySelector(s);
  const all = document.querySelectorAll('#messages .message.assistant');
  const a = all[all.length - 1];
  const users = document.querySelectorAll('#messages .message.user .content');
  const r = a && a.querySelector('details.reasoning');
  return {
    state: document.body.dataset.state,
    turns: all.length,
    text: a ? a.querySelector('.content').textContent : '',
    meta: a ? a.querySelector('.meta').textContent : '',
    usage: !!(a && a.querySelector('.meta.usage')),
    stopped: !!(a && a.classList.contains('stopped')),
    reasoning: r ? r.querySelector('.reasoning-text').textContent : '',
    reasoningHidden: r ? r.hidden : true,
    reasoningOpen: r ? r.open : false,
    user: users.length ? users[users.length - 1].textContent : '',
    prompt: q('#prompt').value,
    stopHidden: q('#stop').hidden,
    sendDisabled: q('#send').disabled,
    error: q('#error').hidden ? '' : q('#error').textContent,
    modelName: q('#model-name').textContent,
    modelDetails: q('#model-details').textContent,
  };
})()`

func view(ctx context.Context, t *testing.T) pageView {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[pageView](viewJS))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	return v
}

// waitView polls the page until ok holds, failing after timeout with the
// last view.
func waitView(ctx context.Context, t *testing.T, what string, timeout time.Duration, ok func(pageView) bool) pageView {
	t.Helper()
	var v pageView
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		if v = view(ctx, t); ok(v) {
			return v
		}
	}
	t.Fatalf("%s: not within %v; page: %v", what, timeout, v)
	return v
}

// pressEnter presses Enter (with Shift when shift) in the focused element
// as a keyboard does: one keyDown carrying the key's text, so the browser
// types a newline only when the page lets the keydown through. (chromedp's
// KeyEvent sends the text as a separate char event, which types it even
// when the page prevented the keydown.)
func pressEnter(shift bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter",
			WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r"}
		if shift {
			down.Modifiers = int64(chromedp.ModifierShift)
		}
		up := down
		up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
		for _, ev := range []input.DispatchKeyEventParams{down, up} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, ev); err != nil {
				return fmt.Errorf("pressing Enter: %w", err)
			}
		}
		return nil
	})
}

// screenshot saves the page as name in TROUPE_ARTIFACTS (when set) or the
// test's temporary folder, and logs where.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("TROUPE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", path)
}

// TestChatPage: an operator opens the page of a server that needs a key and
// is told so (on load, and when sending, which gives the message back),
// enters the key, sends again (the reply streams in, its reasoning folded,
// then a usage line), and stops a long reply midway (the text stops, the
// page is ready again, and the server runs and generates nothing). The page
// must raise no script error and no Content-Security-Policy report.
func TestChatPage(t *testing.T) {
	browserPath := chromium(t)
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	model := scriptModel(t, bin)
	const key = "browser-key"
	srv := serveproc.Start(t, bin, model, "--threads", "1", "--parallel", "2", "--api-key", key, "--served-model-name", "webui-script")
	srv.WaitReady(t, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	var mu sync.Mutex
	var problems []string // uncaught exceptions and security (CSP) reports
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	err = chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			problems = append(problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Source == cdplog.EntrySourceSecurity {
				problems = append(problems, "security: "+ev.Entry.Text)
			}
		}
	})
	if err != nil {
		t.Fatalf("starting %s: %v", browserPath, err)
	}
	defer func() {
		mu.Lock()
		for _, p := range problems {
			t.Errorf("browser reported %s", p)
		}
		mu.Unlock()
		if t.Failed() {
			screenshot(bctx, t, "webui-chat-failed.png")
		}
	}()

	// The page loads without a key; the model list it asks for needs one.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("prompt"))); err != nil {
		t.Fatalf("opening the page: %v", err)
	}
	v := waitView(bctx, t, "the page asks for the key", 10*time.Second, func(v pageView) bool { return v.Error != "" })
	if !strings.Contains(v.Error, "API key") || !strings.Contains(v.Error, "401") || v.State != "ready" {
		t.Fatalf("without a key: error %q, state %q", v.Error, v.State)
	}
	// A message of two lines (Shift+Enter), sent with Enter, without the
	// key: the same message, no turn left behind, and the message back in
	// its box to send again.
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("prompt"), "Hello"),
		pressEnter(true),
		chromedp.SendKeys(chromedp.ID("prompt"), "there"),
		pressEnter(false),
	); err != nil {
		t.Fatal(err)
	}
	v = waitView(bctx, t, "the refused message comes back", 10*time.Second, func(v pageView) bool {
		return v.State == "ready" && v.Prompt == "Hello\nthere"
	})
	if v.Turns != 0 || v.User != "" || !strings.Contains(v.Error, "API key") {
		t.Fatalf("a send refused with 401 left %v", v)
	}
	// Typing the key (it is saved on change) loads the model's details.
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("api-key"), key+kb.Tab)); err != nil {
		t.Fatal(err)
	}
	v = waitView(bctx, t, "model information", 10*time.Second, func(v pageView) bool { return v.ModelName == "webui-script" })
	if v.Error != "" || !strings.Contains(v.ModelDetails, "owned by") || !strings.Contains(v.ModelDetails, "troupe") {
		t.Fatalf("model information: name %q, details %q, error %q", v.ModelName, v.ModelDetails, v.Error)
	}
	if stored, err := chromedp.Run(bctx, chromedp.Evaluate[string](`localStorage.getItem('troupe.apiKey')`)); err != nil || stored != key {
		t.Fatalf("the key is not kept in localStorage: %q, %v", stored, err)
	}

	// The message sent again with the key, for a 300-token answer at
	// temperature 0.
	if err := chromedp.Do(bctx,
		chromedp.SendKeys(chromedp.ID("temperature"), "0"),
		chromedp.SendKeys(chromedp.ID("max-tokens"), "300"),
		chromedp.Focus(chromedp.ID("prompt")),
		pressEnter(false),
	); err != nil {
		t.Fatal(err)
	}
	var lengths []int // the reply's length at each look while it streams
	v = waitView(bctx, t, "the reply's usage line", 60*time.Second, func(v pageView) bool {
		if !v.Usage && v.State == "generating" && (len(lengths) == 0 || lengths[len(lengths)-1] != len(v.Text)) {
			lengths = append(lengths, len(v.Text))
		}
		return v.Usage
	})
	// Streaming: at least two partial lengths, growing, before the end.
	partial := 0
	for i, n := range lengths {
		if i > 0 && n < lengths[i-1] {
			t.Fatalf("the reply shrank while streaming: %v", lengths)
		}
		if n > 0 && n < len(v.Text) {
			partial++
		}
	}
	if partial < 2 {
		t.Fatalf("the reply did not stream in (lengths seen while generating: %v, final %d)", lengths, len(v.Text))
	}
	if v.User != "Hello\nthere" {
		t.Errorf("user message %q, want the two lines typed", v.User)
	}
	if !strings.HasPrefix(v.Text, "Hi! Hi! Hi!") || v.Reasoning != "Plan: greet." || v.ReasoningHidden || v.ReasoningOpen {
		t.Errorf("reply %.40q, reasoning %q (hidden %v, open %v): want the script's answer, its reasoning in a folded block",
			v.Text, v.Reasoning, v.ReasoningHidden, v.ReasoningOpen)
	}
	usage := regexp.MustCompile(`^prompt (\d+) tokens \((\d+) cached, (\d+)%\) · reply 300 tokens · .* · finish: length$`)
	if m := usage.FindStringSubmatch(v.Meta); m == nil || m[1] == "0" {
		t.Errorf("usage line %q", v.Meta)
	}
	if v.State != "ready" || !v.StopHidden || v.SendDisabled {
		t.Errorf("after the reply: state %q, stop hidden %v, send disabled %v", v.State, v.StopHidden, v.SendDisabled)
	}

	// A long answer (8,000 tokens: about half a minute here), stopped once
	// it is streaming.
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("max-tokens"), ""),
		chromedp.SendKeys(chromedp.ID("max-tokens"), "8000"),
		chromedp.SendKeys(chromedp.ID("prompt"), "Go on"),
		pressEnter(false),
	); err != nil {
		t.Fatal(err)
	}
	first := waitView(bctx, t, "the long reply starts", 30*time.Second, func(v pageView) bool {
		return v.Turns == 2 && v.State == "generating" && len(v.Text) > 30
	})
	waitView(bctx, t, "the long reply grows", 30*time.Second, func(v pageView) bool {
		return v.State == "generating" && len(v.Text) > len(first.Text)
	})
	if first.StopHidden || !first.SendDisabled {
		t.Errorf("while generating: stop hidden %v, send disabled %v", first.StopHidden, first.SendDisabled)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("stop"))); err != nil {
		t.Fatal(err)
	}
	stopped := waitView(bctx, t, "ready after Stop", 10*time.Second, func(v pageView) bool { return v.State == "ready" })
	if !stopped.Stopped || !strings.Contains(stopped.Meta, "stopped") || stopped.Usage || !strings.HasPrefix(stopped.Text, "Hi! Hi!") {
		t.Errorf("after Stop: stopped %v, meta %q, usage %v, text %.40q: want the partial reply kept and marked stopped",
			stopped.Stopped, stopped.Meta, stopped.Usage, stopped.Text)
	}
	if stopped.User != "Go on" || stopped.Prompt != "" {
		t.Errorf("after the second send: user message %q, message box %q", stopped.User, stopped.Prompt)
	}
	if !stopped.StopHidden || stopped.SendDisabled {
		t.Errorf("after Stop: stop hidden %v, send disabled %v", stopped.StopHidden, stopped.SendDisabled)
	}
	// The server lets the generation go: nothing runs and no token is made.
	for deadline := time.Now().Add(10 * time.Second); srv.Metric(t, "troupe_running_sequences") != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a sequence still runs 10s after Stop")
		}
	}
	generated := srv.Metric(t, "troupe_generated_tokens_total")
	time.Sleep(time.Second)
	if after := view(bctx, t); after.Text != stopped.Text || after.State != "ready" {
		t.Errorf("the reply changed after Stop: %d then %d characters, state %q", len(stopped.Text), len(after.Text), after.State)
	}
	if now := srv.Metric(t, "troupe_generated_tokens_total"); now != generated {
		t.Errorf("the server generated %v more tokens after Stop", now-generated)
	}
	t.Logf("streamed lengths %v; stopped after %d characters", lengths, len(stopped.Text))
	screenshot(bctx, t, "webui-chat.png")
}

package http_test

import (
	"github.com/troupe-ai/troupe/internal/syncbuf"
	"log/slog"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestAccessLog: every request logs one line when its answer is complete,
// generations with their token counts, time to first token and finish; a
// stream's line comes when the stream ends; probes stay out of the info log.
func TestAccessLog(t *testing.T) {
	logs := &syncbuf.Buffer{}
	cfg := troupehttp.Config{Parallel: 2, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s := startWith(t, troupe.Options{KVBudget: 64 << 20, Parallel: 2}, cfg, nil)
	s.waitReady(t)
	s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"ignore_eos":true}`)
	s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":7,"ignore_eos":true,"stream":true}`)
	s.post(t, "/v1/messages", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3}`, "anthropic-version", "2023-06-01")
	s.post(t, "/v1/completions", `{"prompt":"Hi","max_tokens":4,"ignore_eos":true,"n":2}`)
	s.post(t, "/tokenize", `{"content":"hello"}`)
	s.post(t, "/v1/chat/completions", `{"messages":[]}`)
	s.get(t, "/health")
	var lines []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		lines = nil
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=request") {
				lines = append(lines, l)
			}
		}
		if len(lines) >= 6 {
			break
		}
	}
	want := []struct{ contains []string }{
		{[]string{"method=POST", "route=/v1/chat/completions", "status=200", "generated_tokens=5", "prompt_tokens=", "ttft=", "prepare=", "finish=length"}},
		{[]string{"route=/v1/chat/completions", "status=200", "generated_tokens=7", "finish=length"}},
		{[]string{"route=/v1/messages", "status=200", "generated_tokens="}},
		{[]string{"route=/v1/completions", "status=200", "generated_tokens=8", "finish=length"}}, // n=2: both choices
		{[]string{"route=/tokenize", "status=200"}},
		{[]string{"route=/v1/chat/completions", "status=400"}},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d request lines, want %d (the /health probe at debug level):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	// A stream's line comes when its body ends, which may be after the
	// next request's: match the lines in any order.
	left := append([]string(nil), lines...)
	for _, w := range want {
		found := -1
		for i, l := range left {
			ok := true
			for _, c := range w.contains {
				ok = ok && strings.Contains(l, c)
			}
			if ok {
				found = i
				break
			}
		}
		if found < 0 {
			t.Errorf("no line with %q among:\n%s", w.contains, strings.Join(lines, "\n"))
			continue
		}
		left = append(left[:found], left[found+1:]...)
	}
	for _, l := range lines {
		if strings.Contains(l, "route=/tokenize") && strings.Contains(l, "generated_tokens") {
			t.Errorf("an inspection line with generation figures: %s", l)
		}
	}
}

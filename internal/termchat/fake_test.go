package termchat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// sent is one chat request as the fake server received it.
type sent struct {
	Auth        string
	Model       string    `json:"model"`
	Messages    []Message `json:"messages"`
	Stream      bool      `json:"stream"`
	Temperature *float64  `json:"temperature"`
	MaxTokens   *int      `json:"max_tokens"`
	IgnoreEOS   bool      `json:"ignore_eos"`
}

// fake is an OpenAI-compatible server that records the chat requests and
// answers each with its script (by default it streams "echo: " and the
// last message in two pieces).
type fake struct {
	*httptest.Server
	mu     sync.Mutex
	reqs   []sent
	models []string
	script func(w http.ResponseWriter, r *http.Request, req sent)
}

func newFake(t *testing.T) *fake {
	f := &fake{models: []string{"first-model", "second-model"}, script: echo}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		data := []map[string]string{}
		for _, m := range f.models {
			data = append(data, map[string]string{"id": m, "object": "model"})
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req sent
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		req.Auth = r.Header.Get("Authorization")
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		script := f.script
		f.mu.Unlock()
		script(w, r, req)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.reqs...)
}

func (f *fake) setScript(s func(w http.ResponseWriter, r *http.Request, req sent)) {
	f.mu.Lock()
	f.script = s
	f.mu.Unlock()
}

// event writes one SSE data event and flushes it.
func event(w http.ResponseWriter, data string) {
	fmt.Fprintf(w, "data: %s\n\n", data)
	w.(http.Flusher).Flush()
}

// chunk is a chat.completion.chunk with one delta.
func chunk(delta map[string]any, finish any) string {
	b, _ := json.Marshal(map[string]any{"object": "chat.completion.chunk",
		"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
	return string(b)
}

func echo(w http.ResponseWriter, _ *http.Request, req sent) {
	w.Header().Set("Content-Type", "text/event-stream")
	last := req.Messages[len(req.Messages)-1].Content
	event(w, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	event(w, chunk(map[string]any{"content": "echo: "}, nil))
	event(w, chunk(map[string]any{"content": last}, nil))
	event(w, chunk(map[string]any{}, "stop"))
	event(w, "[DONE]")
}

// waitFor waits until buf holds want n times in all, failing the test
// after a generous deadline.
func waitFor(t *testing.T, buf *syncbuf.Buffer, want string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(buf.String(), want) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no %d× %q in the output:\n%s", n, want, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

package http_test

import (
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/templates"
)

// apiError is an error answer in either API's shape.
type apiError struct {
	Type  string `json:"type"` // Anthropic: "error"
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func decodeError(t *testing.T, path string, resp *nethttp.Response, body []byte) apiError {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: content type %q, want JSON: %s", path, ct, body)
	}
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("%s: not an error object: %s", path, body)
	}
	if anthropicPath(path) != (e.Type == "error") {
		t.Fatalf("%s: error in the wrong API's shape: %s", path, body)
	}
	return e
}

func anthropicPath(path string) bool { return strings.HasPrefix(path, "/v1/messages") }

// messageContent is the first message's content (or the completion prompt)
// of a request as the preparer sees it.
func messageContent(p *actors.Prepare) string {
	if p.Request.Messages == nil {
		return p.Request.Prompt
	}
	if d, ok := p.Request.Messages[0].(*templates.Dict); ok {
		c, _ := d.Get("content")
		s, _ := c.(string)
		return s
	}
	return ""
}

// TestStreamTooLongIs400: a request whose prompt + max tokens exceed the
// model's positions gets a JSON 400 in its API's shape before any stream
// starts, streaming or not, naming the field to change (the max-tokens
// field, or the prompt's when the prompt alone is too long); the metrics
// record the 400.
func TestStreamTooLongIs400(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	long := strings.Repeat("x", 5000) // > the demo model's 4096 positions
	tests := []struct {
		name, path, body, param string
	}{
		{"chat max_tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000%s}`, "max_tokens"},
		{"chat prompt", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}],"max_tokens":1%s}`, "messages"},
		{"completions max_tokens", "/v1/completions", `{"prompt":"hi","max_tokens":100000%s}`, "max_tokens"},
		{"completions prompt", "/v1/completions", `{"prompt":"` + long + `","max_tokens":1%s}`, "prompt"},
		{"responses max_output_tokens", "/v1/responses", `{"input":"hi","max_output_tokens":100000%s}`, "max_output_tokens"},
		{"responses input", "/v1/responses", `{"input":"` + long + `"%s}`, "input"},
		{"anthropic max_tokens", "/v1/messages", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":100000%s}`, "max_tokens"},
		{"anthropic prompt", "/v1/messages", `{"messages":[{"role":"user","content":"` + long + `"}],"max_tokens":1%s}`, "messages"},
	}
	for _, tc := range tests {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.name, stream), func(t *testing.T) {
				counter := s.rt.Metrics().Requests.WithLabelValues(tc.path, "400")
				before := testutil.ToFloat64(counter)
				resp, body := s.post(t, tc.path, fmt.Sprintf(tc.body, fmt.Sprintf(`,"stream":%v`, stream)))
				if resp.StatusCode != 400 {
					t.Fatalf("status %d, want 400: %.300s", resp.StatusCode, body)
				}
				e := decodeError(t, tc.path, resp, body)
				if e.Error.Type != "invalid_request_error" {
					t.Fatalf("error type %q: %s", e.Error.Type, body)
				}
				if anthropicPath(tc.path) {
					if !strings.Contains(e.Error.Message, tc.param) {
						t.Fatalf("message does not name %s: %s", tc.param, body)
					}
				} else if e.Error.Param == nil || *e.Error.Param != tc.param {
					t.Fatalf("param %v, want %q: %s", e.Error.Param, tc.param, body)
				}
				if !strings.Contains(e.Error.Message, "positions") {
					t.Fatalf("message does not give the limit: %s", body)
				}
				if got := testutil.ToFloat64(counter) - before; got != 1 {
					t.Fatalf("metrics recorded %v requests with status 400, want 1", got)
				}
			})
		}
	}
}

// TestTemplateErrorHidesPath: a chat template that raises answers 400 with
// the template's reason and no server file path, on each API, and names
// the prompt's field.
func TestTemplateErrorHidesPath(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "secret-location", "template.jinja")
	if err := os.MkdirAll(filepath.Dir(tmpl), 0o755); err != nil {
		t.Fatal(err)
	}
	src := "{% for m in messages %}{{ m.content }}\n{% endfor %}{{ raise_exception('roles must alternate user/assistant') }}"
	if err := os.WriteFile(tmpl, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, troupe.Options{ChatTemplate: tmpl}, troupehttp.Config{})
	s.waitReady(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ path, body, param string }{
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":2}`, "messages"},
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":2,"stream":true}`, "messages"},
		{"/v1/chat/completions/input_tokens", `{` + msgs + `}`, "messages"},
		{"/apply-template", `{` + msgs + `}`, "messages"},
		{"/tokenize", `{` + msgs + `}`, "messages"},
		{"/v1/responses", `{"input":"hi","max_output_tokens":2}`, "input"},
		{"/v1/responses/input_tokens", `{"input":"hi"}`, "input"},
		{"/v1/messages", `{` + msgs + `,"max_tokens":2}`, ""},
		{"/v1/messages/count_tokens", `{` + msgs + `}`, ""},
	} {
		resp, body := s.post(t, tc.path, tc.body)
		if resp.StatusCode != 400 {
			t.Fatalf("%s: status %d, want 400: %s", tc.path, resp.StatusCode, body)
		}
		e := decodeError(t, tc.path, resp, body)
		if strings.Contains(string(body), dir) || strings.Contains(string(body), "secret-location") || strings.Contains(string(body), ".jinja") {
			t.Fatalf("%s: the error leaks the server path: %s", tc.path, body)
		}
		if !strings.Contains(e.Error.Message, "roles must alternate user/assistant") {
			t.Fatalf("%s: the error does not give the template's reason: %s", tc.path, body)
		}
		if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
			t.Fatalf("%s: param %v, want %q", tc.path, e.Error.Param, tc.param)
		}
	}
}

// TestPrepareTimeoutIs503: a request whose preparation does not finish
// within the prepare timeout gets 503 with Retry-After in its API's shape
// (never a 500), on every route that prepares.
func TestPrepareTimeoutIs503(t *testing.T) {
	hook := func(p *actors.Prepare) {
		if messageContent(p) == "SLOW" {
			time.Sleep(1500 * time.Millisecond)
		}
	}
	s := start(t, troupe.Options{PrepareHook: hook, Preparers: 2, PrepareTimeout: 300 * time.Millisecond}, troupehttp.Config{})
	s.waitReady(t)
	msgs := `"messages":[{"role":"user","content":"SLOW"}]`
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":2}`},
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":2,"stream":true}`},
		{"/v1/completions", `{"prompt":"SLOW","max_tokens":2,"stream":true}`},
		{"/v1/responses", `{"input":"SLOW","max_output_tokens":2,"stream":true}`},
		{"/v1/messages", `{` + msgs + `,"max_tokens":2,"stream":true}`},
		{"/v1/chat/completions/input_tokens", `{` + msgs + `}`},
		{"/v1/responses/input_tokens", `{"input":"SLOW"}`},
		{"/v1/messages/count_tokens", `{` + msgs + `}`},
		{"/apply-template", `{` + msgs + `}`},
		{"/tokenize", `{` + msgs + `}`},
	} {
		resp, body := s.post(t, tc.path, tc.body)
		if resp.StatusCode != 503 {
			t.Fatalf("%s: status %d, want 503: %s", tc.path, resp.StatusCode, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", tc.path)
		}
		e := decodeError(t, tc.path, resp, body)
		if want := map[bool]string{false: "server_error", true: "api_error"}[anthropicPath(tc.path)]; e.Error.Type != want {
			t.Fatalf("%s: error type %q, want %q", tc.path, e.Error.Type, want)
		}
	}
	// Once the slow preparations are over the server serves as before.
	time.Sleep(1600 * time.Millisecond)
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 200 {
		t.Fatalf("after the timeouts: %d %s", resp.StatusCode, body)
	}
}

// TestBigPrepareDoesNotBlockSmall: while huge prompts are being prepared,
// a small chat request still finds a preparer at once (it neither queues
// behind a busy preparer nor waits for the big ones).
func TestBigPrepareDoesNotBlockSmall(t *testing.T) {
	const slow = 3 * time.Second
	var inHook atomic.Int32
	hook := func(p *actors.Prepare) {
		if len(messageContent(p)) > 100_000 {
			inHook.Add(1)
			time.Sleep(slow)
		}
	}
	s := start(t, troupe.Options{PrepareHook: hook, Preparers: 2}, troupehttp.Config{})
	s.waitReady(t)
	big := `{"messages":[{"role":"user","content":"` + strings.Repeat("word ", 60_000) + `"}]}`
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, body := s.post(t, "/v1/messages/count_tokens", big); resp.StatusCode != 200 {
				t.Errorf("big count_tokens: %d %.200s", resp.StatusCode, body)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for inHook.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the other big ones reach the pool
	for i := 0; i < 3; i++ {
		began := time.Now()
		resp, body := s.post(t, "/v1/chat/completions", hello)
		if resp.StatusCode != 200 {
			t.Fatalf("small request: %d %s", resp.StatusCode, body)
		}
		if took := time.Since(began); took > slow/2 {
			t.Fatalf("small request %d took %v behind big preparations", i, took)
		}
	}
	wg.Wait()
}

// TestInspectionAdmission: inspection routes run under their own bound:
// past MaxInspections in flight each inspection route answers 429 with
// Retry-After in its API's shape, and serves again once a slot is free.
func TestInspectionAdmission(t *testing.T) {
	hold := make(chan struct{})
	var held atomic.Int32
	hook := func(p *actors.Prepare) {
		if messageContent(p) == "HOLD" {
			held.Add(1)
			<-hold
		}
	}
	s := start(t, troupe.Options{PrepareHook: hook, Preparers: 3, MaxInspections: 2}, troupehttp.Config{})
	s.waitReady(t)
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	defer release()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if resp, body := s.post(t, "/apply-template", `{"messages":[{"role":"user","content":"HOLD"}]}`); resp.StatusCode != 200 {
				t.Errorf("held inspection: %d %s", resp.StatusCode, body)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for held.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	routes := []struct{ path, body string }{
		{"/tokenize", `{"content":"hi"}`},
		{"/tokenize", `{` + msgs + `}`},
		{"/detokenize", `{"tokens":[72]}`},
		{"/apply-template", `{` + msgs + `}`},
		{"/v1/chat/completions/input_tokens", `{` + msgs + `}`},
		{"/v1/responses/input_tokens", `{"input":"hi"}`},
		{"/v1/messages/count_tokens", `{` + msgs + `}`},
	}
	for _, r := range routes {
		resp, body := s.post(t, r.path, r.body)
		if resp.StatusCode != 429 {
			t.Fatalf("%s past the bound: %d, want 429: %s", r.path, resp.StatusCode, body)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 429 without Retry-After", r.path)
		}
		e := decodeError(t, r.path, resp, body)
		if e.Error.Type != "rate_limit_error" {
			t.Fatalf("%s: error type %q", r.path, e.Error.Type)
		}
	}
	// Generation is not held back by the inspections' bound.
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 200 {
		t.Fatalf("chat while inspections are at their bound: %d %s", resp.StatusCode, body)
	}
	release()
	wg.Wait()
	for _, r := range routes {
		if resp, body := s.post(t, r.path, r.body); resp.StatusCode != 200 {
			t.Fatalf("%s after the bound freed: %d %s", r.path, resp.StatusCode, body)
		}
	}
}

// TestInspectionLimits: an inspection's input and answer are bounded: past
// the input limit or the output limit the answer is 413 naming the field
// and the limit, in the route's API shape.
func TestInspectionLimits(t *testing.T) {
	s := start(t, troupe.Options{InspectMaxInput: 1000, InspectMaxOutput: 4000}, troupehttp.Config{})
	s.waitReady(t)
	text := strings.Repeat("a", 1500)
	small := strings.Repeat("ab ", 200) // 600 bytes: ids fit 4000 bytes, pieces do not
	for _, tc := range []struct {
		name, path, body, param, mention string
	}{
		{"tokenize content", "/tokenize", `{"content":"` + text + `"}`, "content", "1000"},
		{"tokenize prompt", "/tokenize", `{"prompt":"` + text + `"}`, "prompt", "1000"},
		{"tokenize messages", "/tokenize", `{"messages":[{"role":"user","content":"` + text + `"}]}`, "messages", "1000"},
		{"tokenize pieces", "/tokenize", `{"content":"` + small + `","with_pieces":true}`, "with_pieces", "4000"},
		{"detokenize", "/detokenize", `{"tokens":[` + strings.Repeat("72,", 1200) + `72]}`, "tokens", "1000"},
		{"apply-template", "/apply-template", `{"messages":[{"role":"user","content":"` + text + `"}]}`, "messages", "1000"},
		{"chat input_tokens", "/v1/chat/completions/input_tokens", `{"messages":[{"role":"user","content":"` + text + `"}]}`, "messages", "1000"},
		{"responses input_tokens", "/v1/responses/input_tokens", `{"input":"` + text + `"}`, "input", "1000"},
		{"count_tokens", "/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"` + text + `"}]}`, "", "1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.post(t, tc.path, tc.body)
			if resp.StatusCode != 413 {
				t.Fatalf("status %d, want 413: %.300s", resp.StatusCode, body)
			}
			e := decodeError(t, tc.path, resp, body)
			if !strings.Contains(e.Error.Message, tc.mention) {
				t.Fatalf("message does not name the limit %s: %s", tc.mention, body)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Fatalf("param %v, want %q", e.Error.Param, tc.param)
			}
		})
	}
	if resp, body := s.post(t, "/tokenize", `{"content":"`+small+`"}`); resp.StatusCode != 200 {
		t.Fatalf("ids within the limits: %d %.200s", resp.StatusCode, body)
	}
}

// TestTokenizePiecesMemory: tokenizing a large text with pieces allocates
// a small multiple of the answer's size (not hundreds of times the input),
// and the answer is valid JSON that decodes to the tokens and pieces.
func TestTokenizePiecesMemory(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	text := func(size int) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, "word%d \\\"quoted\\\" <tag> \\u00e9t\\u00e9\\n ", i)
		}
		return b.String()
	}
	// The answer decodes, pieces and all.
	resp, out := s.post(t, "/tokenize", `{"content":"`+text(4096)+`","with_pieces":true}`)
	var got struct {
		Tokens []struct {
			ID    int32  `json:"id"`
			Piece string `json:"piece"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal(out, &got); err != nil || resp.StatusCode != 200 || len(got.Tokens) < 1000 {
		t.Fatalf("answer %d is not the tokens (%v): %.300s", resp.StatusCode, err, out)
	}
	_, ids := s.post(t, "/tokenize", `{"content":"`+text(4096)+`"}`)
	var plain struct{ Tokens []int32 }
	json.Unmarshal(ids, &plain)
	for i, tok := range got.Tokens {
		if tok.ID != plain.Tokens[i] || tok.Piece == "" {
			t.Fatalf("token %d: %+v, want id %d with its piece", i, tok, plain.Tokens[i])
		}
	}
	// A large one, read without keeping it, allocates a few times its
	// answer on the server.
	body := `{"content":"` + text(512<<10) + `","with_pieces":true}`
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := nethttp.Post(s.url+"/tokenize", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, r.Body)
	r.Body.Close()
	runtime.ReadMemStats(&after)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("status %d, %v", r.StatusCode, err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	bound := uint64(len(body)) + 6*uint64(n)
	t.Logf("input %d bytes, answer %d bytes, allocated %d bytes (%.1fx the input)", len(body), n, allocated, float64(allocated)/float64(len(body)))
	if allocated > bound {
		t.Fatalf("tokenize with pieces allocated %d bytes for a %d-byte input and a %d-byte answer (bound %d)", allocated, len(body), n, bound)
	}
}

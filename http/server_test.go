package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
)

type server struct {
	rt  *troupe.Runtime
	url string
}

// start runs a runtime and its HTTP server on a loopback port, with the
// tests' defaults (4 running sequences, 64 MiB of KV, one thread).
func start(t *testing.T, opts troupe.Options, cfg troupehttp.Config) *server {
	t.Helper()
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	opts.Parallel = cfg.Parallel
	opts.KVBudget = 64 << 20
	return startWith(t, opts, cfg, nil)
}

func (s *server) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := s.rt.Status(context.Background())
		if err == nil && st.Ready {
			return
		}
		if err == nil && st.Error != "" {
			t.Fatalf("load failed: %s", st.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("model not ready after 30s")
}

func (s *server) post(t *testing.T, path, body string, header ...string) (*nethttp.Response, []byte) {
	t.Helper()
	return s.send(t, "POST", path, body, header...)
}

// send sends method path with body (may be empty) and headers (name, value
// pairs), and returns the response with its whole body.
func (s *server) send(t *testing.T, method, path, body string, header ...string) (*nethttp.Response, []byte) {
	t.Helper()
	req, _ := nethttp.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := nethttp.Get(s.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

const hello = `{"model":"troupe-demo","messages":[{"role":"user","content":"Hello!"}],"max_tokens":8}`

func TestOperationalRoutesAndChat(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	if code, body := s.get(t, "/health"); code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("/health %d %s once loaded", code, body)
	}
	if code, body := s.get(t, "/ready"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/ready %d %s", code, body)
	}
	if _, body := s.get(t, "/v1/models"); !strings.Contains(body, `"id":"troupe-demo"`) {
		t.Fatalf("/v1/models %s", body)
	}
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"troupe-demo","messages":[{"role":"user","content":"Hello!"}],"max_tokens":8,"ignore_eos":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("chat %d %s", resp.StatusCode, body)
	}
	var out struct {
		Object  string
		Choices []struct {
			Message      struct{ Role, Content string }
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	// The ChatML render of one user message with the byte tokenizer:
	// "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n" is three
	// special tokens plus one token per byte of the rest (11 + 1 + 10).
	wantPrompt := 3 + len("user\nHello!") + len("\n") + len("assistant\n")
	if out.Object != "chat.completion" || len(out.Choices) != 1 || out.Choices[0].Message.Role != "assistant" ||
		out.Usage.PromptTokens != wantPrompt || out.Usage.CompletionTokens != 8 {
		t.Fatalf("unexpected response %s (want %d prompt tokens)", body, wantPrompt)
	}
	// Streaming: role chunk, content chunks, a finish chunk, usage, [DONE].
	resp, body = s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := sse(string(body))
	if len(events) < 4 || events[len(events)-1] != "[DONE]" || !strings.Contains(events[0], `"role":"assistant"`) ||
		!strings.Contains(events[len(events)-2], `"usage":{"completion_tokens":4`) || !strings.Contains(events[len(events)-3], `"finish_reason":"length"`) {
		t.Fatalf("unexpected stream:\n%s", body)
	}
	_, m := s.get(t, "/metrics")
	for _, want := range []string{
		`troupe_requests_total{route="/v1/chat/completions",status="200"} 2`,
		"troupe_time_to_first_token_seconds_count 2",
		"troupe_inter_token_latency_seconds_count 10", // 7 + 3 gaps
		"troupe_generated_tokens_total 12",
		"troupe_kv_pages_used 0",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(m, "troupe_"))
		}
	}
}

func sse(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBadInput: every malformed request is a 4xx in OpenAI's error shape
// with a message that names the field.
func TestBadInput(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{BodyLimit: 4096})
	s.waitReady(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, path, body string
		status           int
		param, mention   string
	}{
		{"invalid json", "/v1/chat/completions", `{"messages": [`, 400, "", "invalid JSON"},
		{"empty body", "/v1/chat/completions", ``, 400, "", "empty"},
		{"wrong type", "/v1/chat/completions", `{` + msgs + `,"temperature":"hot"}`, 400, "temperature", "temperature"},
		{"messages missing", "/v1/chat/completions", `{"max_tokens":3}`, 400, "messages", "messages"},
		{"messages empty", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "empty"},
		{"messages not array", "/v1/chat/completions", `{"messages":{"role":"user"}}`, 400, "messages", "array"},
		{"bad role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "messages[0].role", "role"},
		{"content missing", "/v1/chat/completions", `{"messages":[{"role":"user"}]}`, 400, "messages[0].content", "content"},
		{"content wrong type", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content", "content"},
		{"n=0", "/v1/chat/completions", `{` + msgs + `,"n":0}`, 400, "n", "between 1 and 128"},
		{"n past the running cap", "/v1/chat/completions", `{` + msgs + `,"n":5}`, 400, "n", "at most 4"},
		{"n past 128", "/v1/completions", `{"prompt":"x","n":129}`, 400, "n", "between 1 and 128"},
		{"negative max_tokens", "/v1/chat/completions", `{` + msgs + `,"max_tokens":-1}`, 400, "max_tokens", "max_tokens"},
		{"zero max_tokens", "/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":0}`, 400, "max_tokens", "max_tokens"},
		{"absurd max_tokens", "/v1/chat/completions", `{` + msgs + `,"max_tokens":99999999999}`, 400, "max_tokens", "max_tokens"},
		{"temperature too high", "/v1/chat/completions", `{` + msgs + `,"temperature":7}`, 400, "temperature", "temperature"},
		{"top_p negative", "/v1/chat/completions", `{` + msgs + `,"top_p":-0.5}`, 400, "top_p", "top_p"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{` + msgs + `,"top_logprobs":3}`, 400, "top_logprobs", "logprobs"},
		{"too many stops", "/v1/chat/completions", `{` + msgs + `,"stop":["a","b","c","d","e"]}`, 400, "stop", "stop"},
		{"top_k past int32", "/v1/chat/completions", `{` + msgs + `,"top_k":4294967297}`, 400, "top_k", "top_k"},
		{"top_k below -1", "/v1/chat/completions", `{` + msgs + `,"top_k":-2}`, 400, "top_k", "top_k"},
		{"repetition_penalty 0", "/v1/chat/completions", `{` + msgs + `,"repetition_penalty":0}`, 400, "repetition_penalty", "> 0"},
		{"seed not an integer", "/v1/chat/completions", `{` + msgs + `,"seed":1.5}`, 400, "seed", "seed"},
		{"n past int32", "/v1/chat/completions", `{` + msgs + `,"n":4294967297}`, 400, "n", "between 1 and 128"},
		{"prompt_cache_key of 1025", "/v1/chat/completions", `{` + msgs + `,"prompt_cache_key":"` + strings.Repeat("k", 1025) + `"}`, 400, "prompt_cache_key", "1024"},
		{"top_logprobs past int32", "/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":4294967297}`, 400, "top_logprobs", "top_logprobs"},
		{"tools entry not an object", "/v1/chat/completions", `{` + msgs + `,"tools":[1]}`, 400, "tools[0]", "tools[0]"},
		{"tool without a function", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function"}]}`, 400, "tools[0].function", "tools[0]"},
		{"tool without a name", "/v1/chat/completions", `{` + msgs + `,"tools":[{"type":"function","function":{"description":"x"}}]}`, 400, "tools[0].function.name", "name"},
		{"tool_choice wrong type", "/v1/chat/completions", `{` + msgs + `,"tool_choice":5}`, 400, "tool_choice", "tool_choice"},
		{"tool_choice names no tool", "/v1/chat/completions", `{` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, 400, "tool_choice", `"f"`},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, 400, "messages[0].content[1]", "image inputs are not supported"},
		{"tool call without function", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]}]}`, 400, "messages[1].tool_calls[0].function", "function"},
		{"tool call arguments a number", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":5}}]}]}`, 400, "messages[1].tool_calls[0].function.arguments", "arguments"},
		{"tool_call_id not a string", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":7,"content":"r"}]}`, 400, "messages[1].tool_call_id", "tool_call_id"},
		{"tool_calls on a user message", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x","tool_calls":[]}]}`, 400, "messages[0].tool_calls", "assistant"},
		{"detokenize null", "/detokenize", `{"tokens":null}`, 400, "tokens", "tokens"},
		{"detokenize missing", "/detokenize", `{}`, 400, "tokens", "tokens"},
		{"detokenize not an array", "/detokenize", `{"tokens":"abc"}`, 400, "tokens", "tokens"},
		{"detokenize past int32", "/detokenize", `{"tokens":[4294967297]}`, 400, "tokens", "tokens"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-99",` + msgs + `}`, 404, "model", "gpt-99"},
		{"too long for the model", "/v1/chat/completions", `{` + msgs + `,"max_tokens":100000}`, 400, "", "positions"},
		{"oversized body", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "", "too large"},
		{"completion without prompt", "/v1/completions", `{"max_tokens":3}`, 400, "prompt", "prompt"},
		{"completion prompt wrong type", "/v1/completions", `{"prompt":{"a":1}}`, 400, "prompt", "prompt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.post(t, tc.path, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var e struct {
				Error struct {
					Message string
					Type    string
					Param   *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("not an OpenAI error: %s", body)
			}
			if !strings.Contains(e.Error.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tc.mention)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %q", e.Error.Param, tc.param)
			}
		})
	}
	// The server still serves after all that.
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 200 {
		t.Fatalf("after bad input: %d %s", resp.StatusCode, body)
	}
}

func TestAPIKey(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"sekret"}})
	s.waitReady(t)
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 401 || !strings.Contains(string(body), "authentication_error") {
		t.Fatalf("without key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.post(t, "/v1/chat/completions", hello, "Authorization", "Bearer wrong"); resp.StatusCode != 401 {
		t.Fatalf("wrong key: %d", resp.StatusCode)
	}
	if resp, body := s.post(t, "/v1/chat/completions", hello, "Authorization", "Bearer sekret"); resp.StatusCode != 200 {
		t.Fatalf("right key: %d %s", resp.StatusCode, body)
	}
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Fatal("/health must not need a key")
	}
}

// TestCancelFreesKV: a streaming client that goes away stops its
// generation and frees its KV pages, on every API's stream. Greedy decoding
// on the demo model keeps the runs deterministic: Responses and Messages
// have no ignore_eos, and the demo model's greedy answer to "Please
// continue" is 1,082 tokens long (to "Go on" only 17, which raced the
// check below).
func TestCancelFreesKV(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":3000,"stream":true,"ignore_eos":true}`},
		{"/v1/responses", `{"input":"Please continue","max_output_tokens":3000,"stream":true,"temperature":0}`},
		{"/v1/messages", `{"messages":[{"role":"user","content":"Please continue"}],"max_tokens":3000,"stream":true,"temperature":0}`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before, _ := s.rt.SchedulerStats(context.Background())
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := nethttp.NewRequestWithContext(ctx, "POST", s.url+tc.path, strings.NewReader(tc.body))
			resp, err := nethttp.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(resp.Body)
			for deltas := 0; deltas < 4; { // a few tokens in
				line, err := r.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(line, "delta") || strings.Contains(line, `"content":"`) {
					deltas++
				}
			}
			st, _ := s.rt.SchedulerStats(context.Background())
			if st.Running != 1 || st.PagesUsed == 0 {
				t.Fatalf("while streaming: %+v", st)
			}
			cancel()
			resp.Body.Close()
			deadline := time.Now().Add(5 * time.Second)
			for {
				st, _ = s.rt.SchedulerStats(context.Background())
				if st.Running == 0 && st.PagesUsed == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("5s after the client left: %+v", st)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if n := st.GeneratedTokens - before.GeneratedTokens; n >= 3000 {
				t.Fatalf("generation ran to the end (%d tokens) although the client left", n)
			}
		})
	}
}

// TestQueueFull: past running + max-queue requests the answer is 429 with
// Retry-After.
func TestQueueFull(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{Parallel: 1, MaxQueue: 1})
	s.waitReady(t)
	long := `{"messages":[{"role":"user","content":"x"}],"max_tokens":1500,"ignore_eos":true}`
	var wg sync.WaitGroup
	codes := make(chan int, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := s.post(t, "/v1/chat/completions", long)
			if resp.StatusCode == 429 && resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	n429 := 0
	for c := range codes {
		if c == 429 {
			n429++
		} else if c != 200 {
			t.Errorf("status %d", c)
		}
	}
	if n429 == 0 {
		t.Fatal("4 concurrent requests against a capacity of 2 got no 429")
	}
}

// TestPreparerPanic: a panic while preparing one request fails that request
// with a 500; the supervisor restarts the preparer and the server serves on.
func TestPreparerPanic(t *testing.T) {
	hook := func(p *actors.Prepare) {
		if len(p.Request.Messages) > 0 {
			if d, ok := p.Request.Messages[0].(*templates.Dict); ok {
				if c, _ := d.Get("content"); c == "PANIC" {
					panic("injected")
				}
			}
		}
	}
	s := start(t, troupe.Options{PrepareHook: hook, Preparers: 1}, troupehttp.Config{})
	s.waitReady(t)
	resp, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"PANIC"}],"max_tokens":3}`)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "server_error") {
		t.Fatalf("panicking request: %d %s", resp.StatusCode, body)
	}
	for i := 0; i < 3; i++ {
		if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 200 {
			t.Fatalf("request %d after the panic: %d %s", i, resp.StatusCode, body)
		}
	}
}

// TestConcurrentStreams: many concurrent requests (under -race) each get a
// complete, well-formed answer.
func TestConcurrentStreams(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{Parallel: 4})
	s.waitReady(t)
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := i%2 == 0
			resp, body := s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":"request %d"}],"max_tokens":6,"ignore_eos":true,"stream":%v}`, i, stream))
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d %s", i, resp.StatusCode, body)
				return
			}
			if stream && !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
				t.Errorf("request %d: stream not terminated", i)
			}
			if !stream && !strings.Contains(string(body), `"completion_tokens":6`) {
				t.Errorf("request %d: %s", i, body)
			}
		}()
	}
	wg.Wait()
	st, _ := s.rt.SchedulerStats(context.Background())
	if st.PagesUsed != 0 || st.Running != 0 {
		t.Fatalf("after all requests: %+v", st)
	}
}

// conversation is a chat request with an earlier assistant turn, so a
// history boundary exists.
func conversation() *chat.Request {
	v, err := templates.DecodeJSON([]byte(`[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello there."},{"role":"user","content":"How are you?"}]`))
	if err != nil {
		panic(err)
	}
	return &chat.Request{Messages: v.([]any), MaxTokens: 2}
}

func renders(rt *troupe.Runtime, outcome string) float64 {
	return testutil.ToFloat64(rt.Metrics().HistoryRenders.WithLabelValues(outcome))
}

// mambaDir writes a tiny Mamba checkpoint with the byte tokenizer: a
// snapshot-reuse model that can serve chat.
func mambaDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mamba")
	cfg, _ := checkpoint.Tiny("mamba")
	cfg["vocab_size"], cfg["eos_token_id"] = checkpoint.ByteVocab, 258
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCapabilityGate: the invariants of the seed design. During a slowed
// load, requests are prepared fail-open and carry their boundary; after
// readiness a dense model renders no boundary at all and a snapshot-reuse
// model renders one per chat request.
func TestCapabilityGate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      func(*testing.T) string
		snapshot bool
	}{
		{"dense", func(*testing.T) string { return "" }, false},
		{"snapshot", mambaDir, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, troupe.Options{Model: tc.dir(t), PromptCache: true, LoadDelay: 3 * time.Second}, troupehttp.Config{})
			ctx := context.Background()
			// Queued during load: prepared fail-open, boundary included.
			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p, err := s.rt.Prepare(ctx, conversation(), true)
					if err != nil {
						t.Error(err)
						return
					}
					if p.Capability != actors.CapabilityUnknownYet || !p.Prepared.BoundaryRendered || p.Prepared.Boundary == 0 {
						t.Errorf("prepared during load: capability %v, boundary rendered %v (%d tokens, %s)",
							p.Capability, p.Prepared.BoundaryRendered, p.Prepared.Boundary, p.Prepared.BoundaryNote)
					}
				}()
			}
			wg.Wait()
			if st, _ := s.rt.Status(ctx); st.Ready {
				t.Fatal("the slowed load finished before the requests were prepared")
			}
			// /health is 503 while the model loads, as llama-server's is.
			if code, body := s.get(t, "/health"); code != 503 || !strings.Contains(body, `"status":"loading"`) {
				t.Fatalf("/health during the load: %d %s", code, body)
			}
			if got := renders(s.rt, metrics.FailOpen); got != 3 {
				t.Fatalf("fail_open renders %v, want 3", got)
			}
			s.waitReady(t)
			for i := 0; i < 4; i++ {
				p, err := s.rt.Prepare(ctx, conversation(), true)
				if err != nil {
					t.Fatal(err)
				}
				if p.Capability == actors.CapabilityUnknownYet {
					t.Fatal("a request prepared after readiness lacks the capability")
				}
				if p.Prepared.BoundaryRendered != tc.snapshot {
					t.Fatalf("after readiness: boundary rendered %v on a snapshot=%v model", p.Prepared.BoundaryRendered, tc.snapshot)
				}
			}
			// A real generation after readiness goes through the same gate.
			if resp, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":2}`); resp.StatusCode != 200 {
				t.Fatalf("chat: %d %s", resp.StatusCode, body)
			}
			wantRendered, wantSkipped := 0.0, 5.0
			if tc.snapshot {
				wantRendered, wantSkipped = 5, 0
			}
			if r, sk, fo := renders(s.rt, metrics.Rendered), renders(s.rt, metrics.SkippedDense), renders(s.rt, metrics.FailOpen); r != wantRendered || sk != wantSkipped || fo != 3 {
				t.Fatalf("renders: rendered %v skipped_dense %v fail_open %v; want %v %v 3", r, sk, fo, wantRendered, wantSkipped)
			}
		})
	}
}

// TestLoadFailure: a model that cannot load leaves readiness false with the
// error on /ready and /health (503, as llama-server answers).
func TestLoadFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "broken")
	cfg, _ := checkpoint.Tiny("llama")
	cfg["vocab_size"] = checkpoint.ByteVocab
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	// Claim a larger hidden size than the weights have.
	cfg["hidden_size"] = 128
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, troupe.Options{Model: dir}, troupehttp.Config{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := s.get(t, "/ready")
		if code != 503 {
			t.Fatalf("/ready %d %s", code, body)
		}
		if strings.Contains(body, `"phase":"failed"`) {
			if !strings.Contains(body, "model.embed_tokens.weight") || !strings.Contains(body, "shape") {
				t.Fatalf("the error does not say what failed: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure reported: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := s.get(t, "/health"); code != 503 || !strings.Contains(body, `"status":"failed"`) || !strings.Contains(body, "model.embed_tokens.weight") {
		t.Fatalf("/health %d %s after a failed load", code, body)
	}
	// Requests get an answer (not a hang) in each API's error shape.
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		resp, body := s.post(t, path, `{"messages":[{"role":"user","content":"x"}],"input":"x","max_tokens":2}`)
		if resp.StatusCode != 503 || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("%s after a failed load: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestPromptCacheUsage: with the prompt cache on, a second turn reports the
// reused history in usage.prompt_tokens_details.cached_tokens, the cache
// endpoints report it, and a reset empties the cache.
func TestPromptCacheUsage(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	turn1 := `{"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Hi"}],"max_tokens":4,"temperature":0,"ignore_eos":true}`
	resp, body := s.post(t, "/v1/chat/completions", turn1)
	if resp.StatusCode != 200 {
		t.Fatalf("turn 1: %d %s", resp.StatusCode, body)
	}
	turn2 := `{"messages":[{"role":"system","content":"You are a terse assistant."},{"role":"user","content":"Hi"},{"role":"assistant","content":"x"},{"role":"user","content":"Again"}],"max_tokens":4,"temperature":0,"ignore_eos":true}`
	_, body = s.post(t, "/v1/chat/completions", turn2)
	var out struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			Details      struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	// The shared prefix is the system message and the first user turn.
	shared := 3 + len("system\nYou are a terse assistant.") + 1 + len("user\nHi") + 1
	if out.Usage.Details.Cached < shared-1 || out.Usage.Details.Cached >= out.Usage.PromptTokens {
		t.Fatalf("turn 2 reused %d of %d prompt tokens, want at least %d: %s", out.Usage.Details.Cached, out.Usage.PromptTokens, shared-1, body)
	}
	waitWarmUps(t, s, 2) // each turn's history is prefilled ahead for the next
	_, stats := s.get(t, "/v1/cache/stats")
	var cs struct {
		Enabled bool
		Hits    int
	}
	if err := json.Unmarshal([]byte(stats), &cs); err != nil || !cs.Enabled || cs.Hits < 1 {
		t.Fatalf("cache stats: %s", stats)
	}
	if _, m := s.get(t, "/metrics"); !strings.Contains(m, "troupe_prompt_cache_hits_total") || strings.Contains(m, "troupe_prompt_cache_hits_total 0\n") {
		t.Fatalf("prometheus cache counters:\n%s", grep(m, "prompt_cache"))
	}
	resp, body = s.post(t, "/v1/cache/reset", ``)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"cached_pages":0`) || !strings.Contains(string(body), `"pages_used":0`) {
		t.Fatalf("reset: %d %s", resp.StatusCode, body)
	}
}

// TestSnapshotPromptCache: on a snapshot-reuse model the history boundary a
// preparer renders becomes a snapshot during prefill, so the next turn
// reuses the whole history even though the reply text was chosen by the
// client, and /v1/cache/stats reports the snapshot cache.
func TestSnapshotPromptCache(t *testing.T) {
	s := start(t, troupe.Options{Model: mambaDir(t), PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	turn := func(msgs string) int {
		_, body := s.post(t, "/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":3,"ignore_eos":true}`)
		var out struct {
			Usage struct {
				Details struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return out.Usage.Details.Cached
	}
	turn(`[{"role":"user","content":"Hi"}]`)
	two := `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"How?"}]`
	turn(two)
	three := `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"How?"},{"role":"assistant","content":"Fine."},{"role":"user","content":"Good"}]`
	// The history of turn 2 ("...Hello!<|im_end|>\n") was stored as a
	// snapshot when turn 2 was prefilled; turn 3 extends it.
	history := 3 + len("user\nHi") + 1 + len("assistant\nHello!") + 1
	if got := turn(three); got < history {
		t.Fatalf("turn 3 reused %d tokens, want at least the %d of turn 2's history", got, history)
	}
	_, stats := s.get(t, "/v1/cache/stats")
	if !strings.Contains(stats, `"kind":"snapshot"`) || strings.Contains(stats, `"snapshots":0`) {
		t.Fatalf("cache stats: %s", stats)
	}
}

// TestPromptInspection: the inspection routes answer through the same
// preparer as generation: the prompt and ids the chat route prefills, the
// boundary decision, and what the cache would reuse now.
func TestPromptInspection(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	msgs := `"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"},{"role":"user","content":"More"}]`
	_, body := s.post(t, "/apply-template", `{`+msgs+`}`)
	want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nYo<|im_end|>\n<|im_start|>user\nMore<|im_end|>\n<|im_start|>assistant\n"
	var at struct{ Prompt string }
	if json.Unmarshal(body, &at); at.Prompt != want {
		t.Fatalf("apply-template: %s", body)
	}
	_, body = s.post(t, "/tokenize", `{"content":"Hi!","with_pieces":true}`)
	if string(body) != `{"tokens":[{"id":72,"piece":"H"},{"id":105,"piece":"i"},{"id":33,"piece":"!"}]}` {
		t.Fatalf("tokenize: %s", body)
	}
	_, body = s.post(t, "/tokenize", `{`+msgs+`}`)
	var tk struct{ Tokens []int32 }
	json.Unmarshal(body, &tk)
	_, body = s.post(t, "/detokenize", fmt.Sprintf(`{"tokens":%s}`, mustJSON(tk.Tokens)))
	var dt struct{ Content string }
	if json.Unmarshal(body, &dt); dt.Content != want {
		t.Fatalf("detokenize of the tokenized chat: %s", body)
	}
	if resp, body := s.post(t, "/detokenize", `{"tokens":[99999]}`); resp.StatusCode != 400 || !strings.Contains(string(body), "tokens[0]") {
		t.Fatalf("bad token: %d %s", resp.StatusCode, body)
	}
	probe := func() map[string]any {
		_, body := s.post(t, "/v1/chat/completions/input_tokens", `{`+msgs+`}`)
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := probe()
	if out["prompt"] != want || int(out["input_tokens"].(float64)) != len(tk.Tokens) || out["cached_tokens"].(float64) != 0 {
		t.Fatalf("input_tokens before any request: %v", out)
	}
	if hb := out["history_boundary"].(map[string]any); hb["rendered"] != false || !strings.Contains(hb["reason"].(string), "dense") {
		t.Fatalf("boundary on a dense model: %v", hb)
	}
	if resp, body := s.post(t, "/v1/chat/completions", `{`+msgs+`,"max_tokens":2}`); resp.StatusCode != 200 {
		t.Fatalf("chat: %s", body)
	}
	if out := probe(); out["cached_tokens"].(float64) != float64(len(tk.Tokens)-1) {
		t.Fatalf("after the same prompt ran, the cache would reuse %v of %d tokens", out["cached_tokens"], len(tk.Tokens))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// gatePaths are the eight routes that prepare a chat prompt, each with a
// conversation that has an earlier assistant turn (so a history boundary
// exists): the four generating or inspecting APIs and the llama.cpp-style
// inspection routes.
var gatePaths = []struct{ path, body string }{
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":1}`},
	{"/v1/chat/completions/input_tokens", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
	{"/v1/responses", `{"input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_output_tokens":1}`},
	{"/v1/responses/input_tokens", `{"input":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
	{"/v1/messages", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}],"max_tokens":1}`},
	{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
	{"/apply-template", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
	{"/tokenize", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}]}`},
}

// TestCapabilityGateEveryPath: the capability gate reaches every route that
// prepares a chat prompt. Requests sent during a slowed load are all
// prepared fail-open (boundary rendered); after readiness a dense model
// renders no boundary on any route and a snapshot-reuse model renders one
// on every route. The input_tokens routes report the same decision.
func TestCapabilityGateEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      func(*testing.T) string
		snapshot bool
	}{
		{"dense", func(*testing.T) string { return "" }, false},
		{"snapshot", mambaDir, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := start(t, troupe.Options{Model: tc.dir(t), PromptCache: true, LoadDelay: 3 * time.Second}, troupehttp.Config{})
			n := float64(len(gatePaths))
			var wg sync.WaitGroup
			for _, p := range gatePaths {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, body := s.post(t, p.path, p.body)
					if resp.StatusCode != 200 {
						t.Errorf("%s during load: %d %s", p.path, resp.StatusCode, body)
						return
					}
					if strings.HasSuffix(p.path, "/input_tokens") && !boundaryRendered(t, body) {
						t.Errorf("%s during load reports no boundary: %s", p.path, body)
					}
				}()
			}
			// Every route is prepared before the load ends, fail-open.
			deadline := time.Now().Add(2 * time.Second)
			for renders(s.rt, metrics.FailOpen) < n && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if st, _ := s.rt.Status(context.Background()); st.Ready {
				t.Fatal("the slowed load finished before every route was prepared")
			}
			if got := renders(s.rt, metrics.FailOpen); got != n {
				t.Fatalf("fail_open renders %v, want %v (one per route)", got, n)
			}
			wg.Wait()
			s.waitReady(t)
			rendered, skipped := renders(s.rt, metrics.Rendered), renders(s.rt, metrics.SkippedDense)
			for _, p := range gatePaths {
				resp, body := s.post(t, p.path, p.body)
				if resp.StatusCode != 200 {
					t.Fatalf("%s after readiness: %d %s", p.path, resp.StatusCode, body)
				}
				if strings.HasSuffix(p.path, "/input_tokens") && boundaryRendered(t, body) != tc.snapshot {
					t.Fatalf("%s after readiness on a snapshot=%v model: %s", p.path, tc.snapshot, body)
				}
			}
			dr, ds := renders(s.rt, metrics.Rendered)-rendered, renders(s.rt, metrics.SkippedDense)-skipped
			if tc.snapshot && (dr != n || ds != 0) || !tc.snapshot && (dr != 0 || ds != n) {
				t.Fatalf("after readiness: %v rendered, %v skipped as dense over %v routes (snapshot model: %v)", dr, ds, n, tc.snapshot)
			}
			if fo := renders(s.rt, metrics.FailOpen); fo != n {
				t.Fatalf("fail_open renders grew to %v after readiness", fo)
			}
		})
	}
}

// boundaryRendered reads history_boundary.rendered from an input_tokens
// answer.
func boundaryRendered(t *testing.T, body []byte) bool {
	t.Helper()
	var v struct {
		HistoryBoundary struct {
			Rendered bool `json:"rendered"`
		} `json:"history_boundary"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("input_tokens answer %s: %v", body, err)
	}
	return v.HistoryBoundary.Rendered
}

// TestMaxModelLen: --max-model-len (Options.MaxModelLen) caps one request's
// context below the model's positions; /v1/models reports it as vLLM's
// max_model_len, and a request past it is a 400 that names the cap.
func TestMaxModelLen(t *testing.T) {
	s := start(t, troupe.Options{MaxModelLen: 48}, troupehttp.Config{})
	s.waitReady(t)
	_, body := s.get(t, "/v1/models")
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			Created     int64  `json:"created"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &models); err != nil || len(models.Data) != 1 {
		t.Fatalf("/v1/models %s: %v", body, err)
	}
	if m := models.Data[0]; m.MaxModelLen != 48 || m.Created < time.Now().Add(-time.Hour).Unix() || m.Created > time.Now().Unix() {
		t.Fatalf("/v1/models %s", body)
	}
	resp, out := s.post(t, "/v1/completions", `{"prompt":"`+strings.Repeat("a", 40)+`","max_tokens":16}`)
	if resp.StatusCode != 400 || !strings.Contains(string(out), "context length of 48") {
		t.Fatalf("past the cap: %d %s", resp.StatusCode, out)
	}
	// Without max_tokens the answer fits in what the cap leaves.
	resp, out = s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"ignore_eos":true}`)
	var chat struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(out, &chat) != nil || chat.Usage.Prompt+chat.Usage.Completion != 48 {
		t.Fatalf("fitted to the cap: %d %s", resp.StatusCode, out)
	}
}

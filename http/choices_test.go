package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// choice is one choice of a chat or completions answer, either shape.
type choice struct {
	Index        int
	Text         string
	Message      struct{ Content string }
	FinishReason string `json:"finish_reason"`
}

type completion struct {
	Choices []choice
	Usage   struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
}

// texts are the choices' texts in order; it fails unless their indexes
// are 0..n-1 in order.
func (c completion) texts(t *testing.T) []string {
	t.Helper()
	var out []string
	for i, ch := range c.Choices {
		if ch.Index != i {
			t.Fatalf("choice %d has index %d", i, ch.Index)
		}
		out = append(out, ch.Text+ch.Message.Content)
	}
	return out
}

func (s *server) complete(t *testing.T, path, body string) completion {
	t.Helper()
	resp, data := s.post(t, path, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, data)
	}
	var c completion
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// streamedChoices replays a chat or completions stream: the text of each
// choice index, how many finish chunks each had (with the last reason),
// which indexes opened with a role chunk, the usage chunks, and the first
// text chunk of each index. It checks the stream ends with the usage (when
// asked) and [DONE].
type streamedChoices struct {
	texts, first map[int]string
	finishes     map[int]int
	finish       map[int]string
	roles        map[int]bool
	usage        []completion
}

func replay(t *testing.T, body string) streamedChoices {
	t.Helper()
	out := streamedChoices{texts: map[int]string{}, first: map[int]string{}, finishes: map[int]int{}, finish: map[int]string{}, roles: map[int]bool{}}
	events := sse(body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]:\n%s", body)
	}
	for k, ev := range events[:len(events)-1] {
		var chunk struct {
			Choices []struct {
				Index        int
				Text         *string
				Delta        struct{ Role, Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *json.RawMessage
		}
		if err := json.Unmarshal([]byte(ev), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", ev, err)
		}
		if chunk.Usage != nil && string(*chunk.Usage) != "null" {
			var u completion
			json.Unmarshal([]byte(ev), &u)
			out.usage = append(out.usage, u)
			if k != len(events)-2 || len(chunk.Choices) != 0 {
				t.Fatalf("usage chunk %d of %d, with %d choices", k, len(events)-1, len(chunk.Choices))
			}
		}
		if len(chunk.Choices) > 1 {
			t.Fatalf("a chunk with %d choices", len(chunk.Choices))
		}
		for _, c := range chunk.Choices {
			if out.finishes[c.Index] > 0 {
				t.Fatalf("choice %d sent a chunk after its finish", c.Index)
			}
			text := c.Delta.Content
			if c.Text != nil {
				text = *c.Text
			}
			if _, ok := out.first[c.Index]; !ok && text != "" {
				out.first[c.Index] = text
			}
			out.texts[c.Index] += text
			if c.Delta.Role == "assistant" {
				out.roles[c.Index] = true
			}
			if c.FinishReason != nil {
				out.finishes[c.Index]++
				out.finish[c.Index] = *c.FinishReason
			}
		}
	}
	return out
}

// TestChoices: n choices on both OpenAI routes, streamed and not: indexed
// 0..n-1; greedy choices identical; seeded choices reproducible, choice i
// being what n=1 with seed+i gives; the stream carries each choice's text
// under its index with one finish chunk each and one usage chunk; usage
// counts the prompt once and the completion tokens of every choice.
func TestChoices(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{Parallel: 4})
	s.waitReady(t)
	routes := []struct {
		path, input string
	}{
		{"/v1/completions", `"prompt":"Once upon a time"`},
		{"/v1/chat/completions", `"messages":[{"role":"user","content":"Tell me a story"}]`},
	}
	for _, rt := range routes {
		t.Run(rt.path, func(t *testing.T) {
			body := func(extra string) string {
				return `{` + rt.input + `,"max_tokens":8,"ignore_eos":true,` + extra + `}`
			}
			one := s.complete(t, rt.path, body(`"temperature":0`))
			tests := []struct {
				name, params string
				n            int
				identical    bool
			}{
				{"greedy", `"temperature":0`, 3, true},
				{"seeded", `"temperature":1.5,"seed":7`, 3, false},
				{"two seeded", `"temperature":1.5,"seed":1000`, 2, false},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req := body(tc.params + `,"n":` + strconv.Itoa(tc.n))
					got := s.complete(t, rt.path, req)
					texts := got.texts(t)
					if len(texts) != tc.n {
						t.Fatalf("%d choices, want %d", len(texts), tc.n)
					}
					u := got.Usage
					if u.PromptTokens != one.Usage.PromptTokens || u.CompletionTokens != 8*tc.n || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
						t.Errorf("usage %+v: want the prompt's %d tokens once and %d completion tokens", u, one.Usage.PromptTokens, 8*tc.n)
					}
					distinct := map[string]bool{}
					for i, text := range texts {
						distinct[text] = true
						if got.Choices[i].FinishReason != "length" {
							t.Errorf("choice %d finished with %q", i, got.Choices[i].FinishReason)
						}
					}
					if tc.identical {
						if len(distinct) != 1 || texts[0] != one.texts(t)[0] {
							t.Errorf("greedy choices %q, n=1 gave %q", texts, one.texts(t)[0])
						}
					} else {
						if len(distinct) == 1 {
							t.Errorf("sampled choices all alike: %q", texts)
						}
						if again := s.complete(t, rt.path, req).texts(t); fmt.Sprint(again) != fmt.Sprint(texts) {
							t.Errorf("the same seed gave %q, then %q", texts, again)
						}
						seed, _ := strconv.Atoi(tc.params[strings.Index(tc.params, `"seed":`)+len(`"seed":`):])
						for i := range texts {
							alone := s.complete(t, rt.path, body(strings.Replace(tc.params, strconv.Itoa(seed), strconv.Itoa(seed+i), 1)))
							if alone.texts(t)[0] != texts[i] {
								t.Errorf("choice %d is %q, n=1 with seed %d gives %q", i, texts[i], seed+i, alone.texts(t)[0])
							}
						}
					}
					// The stream carries the same choices.
					resp, data := s.post(t, rt.path, body(tc.params+`,"n":`+strconv.Itoa(tc.n)+`,"stream":true,"stream_options":{"include_usage":true}`))
					if resp.StatusCode != 200 {
						t.Fatalf("stream: %d %s", resp.StatusCode, data)
					}
					st := replay(t, string(data))
					for i := range tc.n {
						if st.texts[i] != texts[i] {
							t.Errorf("streamed choice %d: %q, want %q", i, st.texts[i], texts[i])
						}
						if st.finishes[i] != 1 || st.finish[i] != "length" {
							t.Errorf("choice %d: %d finish chunks, last %q", i, st.finishes[i], st.finish[i])
						}
						if strings.Contains(rt.path, "chat") != st.roles[i] {
							t.Errorf("choice %d: role chunk %v", i, st.roles[i])
						}
					}
					if len(st.texts) != tc.n {
						t.Errorf("stream has choices %v, want %d", st.texts, tc.n)
					}
					if len(st.usage) != 1 || st.usage[0].Usage.CompletionTokens != 8*tc.n || st.usage[0].Usage.PromptTokens != one.Usage.PromptTokens {
						t.Errorf("usage chunks %+v", st.usage)
					}
				})
			}
		})
	}
}

// metric reads one counter of /metrics.
func (s *server) metric(t *testing.T, name string) int {
	t.Helper()
	_, m := s.get(t, "/metrics")
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(f)
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// TestChoicesPromptOnce: the n choices prefill their prompt once: the
// engine's prompt-token counter grows by the prompt (less what the cache
// already held) plus one token for each further choice, which reuses the
// first one's prompt from the cache; on a dense-KV model (pages) and a
// state-space one (a snapshot the first choice stores mid-prefill) alike.
func TestChoicesPromptOnce(t *testing.T) {
	mamba, _ := qwen3Model(t, "mamba")
	for _, model := range []struct{ name, dir string }{{"dense", ""}, {"mamba", mamba}} {
		t.Run(model.name, func(t *testing.T) {
			s := start(t, troupe.Options{Model: model.dir, PromptCache: true}, troupehttp.Config{Parallel: 4})
			s.waitReady(t)
			choicesPromptOnce(t, s)
		})
	}
}

func choicesPromptOnce(t *testing.T, s *server) {
	for _, tc := range []struct {
		name, extra string
		n           int
	}{
		{"n=3", `"n":3`, 3},
		{"n=4 streamed", `"n":4,"stream":true,"stream_options":{"include_usage":true}`, 4},
		{"n=2 sampled", `"n":2,"temperature":1,"seed":3`, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A prompt of its own: nothing of it is cached but the start.
			prompt := tc.name + ": the quick brown fox jumps over the lazy dog"
			prefilled := s.metric(t, "troupe_prompt_tokens_total")
			cached := s.metric(t, "troupe_prompt_cache_cached_tokens_total")
			resp, data := s.post(t, "/v1/completions", `{"prompt":`+strconv.Quote(prompt)+`,"max_tokens":4,"ignore_eos":true,`+tc.extra+`}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, data)
			}
			var u completion
			if strings.Contains(tc.extra, "stream") {
				st := replay(t, string(data))
				if len(st.usage) != 1 {
					t.Fatalf("usage chunks %+v", st.usage)
				}
				u = st.usage[0]
			} else if err := json.Unmarshal(data, &u); err != nil {
				t.Fatal(err)
			}
			l, c := u.Usage.PromptTokens, u.Usage.PromptTokensDetails.CachedTokens
			if l < 8 || u.Usage.CompletionTokens != 4*tc.n {
				t.Fatalf("usage %+v", u.Usage)
			}
			if got, want := s.metric(t, "troupe_prompt_tokens_total")-prefilled, l-c+tc.n-1; got != want {
				t.Errorf("%d prompt tokens prefilled for a %d-token prompt (%d cached) and %d choices, want %d", got, l, c, tc.n, want)
			}
			if got, want := s.metric(t, "troupe_prompt_cache_cached_tokens_total")-cached, c+(tc.n-1)*(l-1); got != want {
				t.Errorf("%d prompt tokens reused, want %d", got, want)
			}
		})
	}
}

// TestChoicesAdmission: each choice takes a place under the queue bound:
// with room for 3 sequences, a request for 2 choices is refused with 429
// while another holds 2, and served once that one has left; n past the
// running-sequence cap is a 400 (it could never run at once).
func TestChoicesAdmission(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{Parallel: 2, MaxQueue: 1})
	s.waitReady(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := nethttp.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions",
		strings.NewReader(`{"prompt":"Go on","max_tokens":3000,"ignore_eos":true,"n":2,"stream":true}`))
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	for seen := map[string]bool{}; len(seen) < 2; { // both choices are generating
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"index":0`) {
			seen["0"] = true
		}
		if strings.Contains(line, `"index":1`) {
			seen["1"] = true
		}
	}
	two := `{"prompt":"Hi","max_tokens":2,"n":2}`
	full, data := s.post(t, "/v1/completions", two)
	if full.StatusCode != 429 || full.Header.Get("Retry-After") == "" || !strings.Contains(string(data), "capacity") {
		t.Fatalf("2 choices with one place left: %d %s", full.StatusCode, data)
	}
	if code, m := s.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"n":3}`); code != 400 || errParam(m) != "n" {
		t.Fatalf("n=3 past --parallel 2: %d %v", code, m)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, data := s.post(t, "/v1/completions", two)
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("after the first request left: %d %s", resp.StatusCode, data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, _ := s.rt.SchedulerStats(context.Background())
	if st.Running != 0 || st.Waiting != 0 {
		t.Fatalf("after all requests: %+v", st)
	}
}

// TestEcho: echo puts the prompt before each choice's text (a token-id
// prompt's decoded text), and first in a stream; with logprobs it is a
// 400, since the prompt tokens' logprobs are not computed.
func TestEcho(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{Parallel: 4})
	s.waitReady(t)
	code, tok := s.do(t, "POST", "/tokenize", `{"prompt":"Hi there"}`)
	if code != 200 {
		t.Fatalf("tokenize: %d %v", code, tok)
	}
	ids, _ := json.Marshal(tok["tokens"])
	for _, tc := range []struct {
		name, prompt, echoed string
	}{
		{"text", `"Once upon"`, "Once upon"},
		{"token ids", string(ids), "Hi there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := func(extra string) string {
				return `{"prompt":` + tc.prompt + `,"max_tokens":6,"ignore_eos":true,"temperature":0` + extra + `}`
			}
			plain := s.complete(t, "/v1/completions", body("")).texts(t)[0]
			got := s.complete(t, "/v1/completions", body(`,"echo":true,"n":2`))
			for i, text := range got.texts(t) {
				if text != tc.echoed+plain {
					t.Errorf("choice %d: %q, want %q", i, text, tc.echoed+plain)
				}
			}
			if got.Usage.CompletionTokens != 12 {
				t.Errorf("usage %+v", got.Usage)
			}
			resp, data := s.post(t, "/v1/completions", body(`,"echo":true,"n":2,"stream":true`))
			if resp.StatusCode != 200 {
				t.Fatalf("stream: %d %s", resp.StatusCode, data)
			}
			st := replay(t, string(data))
			for i := range 2 {
				if st.first[i] != tc.echoed || st.texts[i] != tc.echoed+plain {
					t.Errorf("streamed choice %d: first chunk %q, text %q; want %q then %q", i, st.first[i], st.texts[i], tc.echoed, plain)
				}
			}
		})
	}
	if code, m := s.do(t, "POST", "/v1/completions", `{"prompt":"x","echo":true,"logprobs":2}`); code != 400 || errParam(m) != "echo" || !strings.Contains(errMessage(m), "logprobs") {
		t.Fatalf("echo with logprobs: %d %v", code, m)
	}
}

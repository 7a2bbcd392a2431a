package http_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestAnthropicCacheControlBadInput: a malformed cache_control, one on a
// block that cannot carry it, or more than four of them is a 400 in
// Anthropic's error shape naming the field, on /v1/messages and
// count_tokens alike; well-formed ones are accepted wherever Anthropic
// accepts them.
func TestAnthropicCacheControlBadInput(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	const m, ct = "/v1/messages", "/v1/messages/count_tokens"
	cc := `"cache_control":{"type":"ephemeral"}`
	text := func(s, extra string) string { return `{"type":"text","text":"` + s + `"` + extra + `}` }
	user := func(blocks ...string) string {
		return `{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`
	}
	body := func(parts ...string) string { return `{"max_tokens":3,` + strings.Join(parts, ",") + `}` }
	msgs := func(ms ...string) string { return `"messages":[` + strings.Join(ms, ",") + `]` }
	thinking := `{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"x",` + cc + `},{"type":"text","text":"ok"}]}`
	redacted := `{"role":"assistant","content":[{"type":"redacted_thinking","data":"x",` + cc + `},{"type":"text","text":"ok"}]}`
	tool := `{"name":"f","input_schema":{"type":"object"},` + cc + `}`
	five := msgs(user(text("a", ","+cc), text("b", ","+cc), text("c", ","+cc), text("d", ","+cc), text("e", ","+cc)))
	tests := []struct {
		name, path, body string
		status           int
		mention          string
	}{
		{"type unknown", m, body(msgs(user(text("hi", `,"cache_control":{"type":"persistent"}`)))), 400, "messages[0].content[0].cache_control.type"},
		{"type missing", m, body(msgs(user(text("hi", `,"cache_control":{}`)))), 400, "messages[0].content[0].cache_control.type"},
		{"ttl unknown", m, body(msgs(user(text("hi", `,"cache_control":{"type":"ephemeral","ttl":"10m"}`)))), 400, "messages[0].content[0].cache_control.ttl"},
		{"not an object", m, body(msgs(user(text("hi", `,"cache_control":"ephemeral"`)))), 400, "messages[0].content[0].cache_control"},
		{"on a system block", m, body(`"system":[`+text("sys", `,"cache_control":{"type":"x"}`)+`]`, msgs(`{"role":"user","content":"hi"}`)), 400, "system[0].cache_control.type"},
		{"on a tool", m, body(`"tools":[{"name":"f","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"2h"}}]`, msgs(`{"role":"user","content":"hi"}`)), 400, "tools[0].cache_control.ttl"},
		{"inside a tool_result", m, body(msgs(user(`{"type":"tool_result","tool_use_id":"a","content":[` + text("r", `,"cache_control":[]`) + `]}`))), 400, "messages[0].content[0].content[0].cache_control"},
		{"on a thinking block", m, body(msgs(`{"role":"user","content":"hi"}`, thinking, `{"role":"user","content":"more"}`)), 400, "messages[1].content[0].cache_control"},
		{"on a redacted_thinking block", m, body(msgs(`{"role":"user","content":"hi"}`, redacted, `{"role":"user","content":"more"}`)), 400, "redacted_thinking"},
		{"five breakpoints", m, body(five), 400, "maximum of 4"},
		{"five with the tools", m, body(`"tools":[`+tool+`]`, `"system":[`+text("s", ","+cc)+`]`, msgs(user(text("a", ","+cc), text("b", ","+cc), text("c", ","+cc)))), 400, "maximum of 4"},
		{"count_tokens: five breakpoints", ct, body(five), 400, "maximum of 4"},
		{"count_tokens: ttl unknown", ct, body(msgs(user(text("hi", `,"cache_control":{"type":"ephemeral","ttl":5}`)))), 400, "cache_control.ttl"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, data := s.anthPost(t, tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, data)
			}
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(data, &e); err != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" {
				t.Fatalf("not an Anthropic invalid_request_error: %s", data)
			}
			if !strings.Contains(e.Error.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tc.mention)
			}
		})
	}
	// Four, in every place that takes one (a null one is none), with both
	// TTLs: accepted.
	ok := body(`"tools":[`+tool+`]`, `"system":[`+text("s", `,"cache_control":{"type":"ephemeral","ttl":"1h"}`)+`]`,
		msgs(user(text("a", ","+cc), `{"type":"tool_result","tool_use_id":"a","content":"r","cache_control":{"type":"ephemeral","ttl":"5m"}}`, text("n", `,"cache_control":null`)),
			`{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"a","name":"f","input":{}}]}`, `{"role":"user","content":"go"}`))
	if n := s.anthCount(t, ok); n < 1 {
		t.Fatalf("count_tokens %d", n)
	}
	s.anthNew(t, ok)
}

// TestAnthropicCacheControl: a system-block breakpoint is written to the
// cache by the first request (cache_creation_input_tokens: the prompt up
// to the end of the system turn) and read by the next one with another
// question (cache_read_input_tokens covering it, nothing created); the
// three usage numbers always add up to the prompt, in the message and in
// the stream's message_start and message_delta. Without the prompt cache
// nothing is created.
func TestAnthropicCacheControl(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{KeepAlive: time.Minute})
	s.waitReady(t)
	system := strings.Repeat("You are a terse assistant. ", 4)
	req := func(question string) string {
		return `{"max_tokens":4,"temperature":0,"system":[{"type":"text","text":` + mustJSON(system) +
			`,"cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":` + mustJSON(question) + `}]}`
	}
	// ChatML over a byte tokenizer: <|im_start|>system\n...<|im_end|>\n<|im_start|>user\n
	bp := 1 + len("system\n"+system) + 1 + 1 + 1 + len("user\n")
	sum := func(u anthUsage) int { return u.InputTokens + *u.CacheCreationTokens + *u.CacheReadTokens }

	first := req("Hi")
	prompt := s.anthCount(t, first)
	m := s.anthNew(t, first)
	if u := m.Usage; *u.CacheReadTokens != 0 || *u.CacheCreationTokens != bp || sum(u) != prompt {
		t.Fatalf("first request usage %+v: want %d tokens written to the cache, none read, %d in all", u, bp, prompt)
	}
	_, stats := s.get(t, "/v1/cache/stats")
	var cs struct {
		Pins         *int64 `json:"pins"`
		PinEvictions *int64 `json:"pin_evictions"`
	}
	if err := json.Unmarshal([]byte(stats), &cs); err != nil || cs.Pins == nil || *cs.Pins < 1 || cs.PinEvictions == nil {
		t.Fatalf("/v1/cache/stats after a breakpoint: %s", stats)
	}
	second := req("What now?")
	prompt = s.anthCount(t, second)
	m = s.anthNew(t, second)
	if u := m.Usage; *u.CacheReadTokens < bp || *u.CacheCreationTokens != 0 || sum(u) != prompt || u.InputTokens < 1 {
		t.Fatalf("second request usage %+v: want at least %d tokens read from the cache, none written, %d in all", u, bp, prompt)
	}
	st := s.anthStream(t, req("And then?"))
	for name, u := range map[string]anthUsage{"message_start": st.Start.Usage, "message_delta": st.Final.Usage} {
		if *u.CacheReadTokens < bp || *u.CacheCreationTokens != 0 || u.InputTokens < 1 {
			t.Errorf("%s usage %+v: want the system prompt read from the cache", name, u)
		}
	}

	off := start(t, troupe.Options{}, troupehttp.Config{})
	off.waitReady(t)
	m = off.anthNew(t, first)
	if u := m.Usage; *u.CacheReadTokens != 0 || *u.CacheCreationTokens != 0 {
		t.Fatalf("without the prompt cache: usage %+v", u)
	}
}

package http_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// anthMessage is Anthropic's message object.
type anthMessage struct {
	ID, Type, Role, Model string
	Content               []anthBlock
	StopReason            *string `json:"stop_reason"`
	StopSequence          *string `json:"stop_sequence"`
	Usage                 anthUsage
}

type anthBlock struct {
	Type, Text, Thinking, Signature, ID, Name string
	Input                                     json.RawMessage
}

type anthUsage struct {
	InputTokens         int  `json:"input_tokens"`
	OutputTokens        int  `json:"output_tokens"`
	CacheCreationTokens *int `json:"cache_creation_input_tokens"`
	CacheReadTokens     *int `json:"cache_read_input_tokens"`
}

type anthEvent struct {
	Name string
	Data map[string]json.RawMessage
	Raw  string
}

// anthEvents parses an Anthropic event stream: every event has an event:
// line naming it and a data: line whose type repeats the name.
func anthEvents(t *testing.T, body string) []anthEvent {
	t.Helper()
	var out []anthEvent
	for _, chunk := range strings.Split(strings.TrimSpace(body), "\n\n") {
		var ev anthEvent
		for _, line := range strings.Split(chunk, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.Name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.Raw = v
				if err := json.Unmarshal([]byte(v), &ev.Data); err != nil {
					t.Fatalf("event data %q: %v", v, err)
				}
			}
		}
		var typ string
		json.Unmarshal(ev.Data["type"], &typ)
		if ev.Name == "" || typ != ev.Name {
			t.Fatalf("event %q with data type %q:\n%s", ev.Name, typ, body)
		}
		out = append(out, ev)
	}
	return out
}

func (e anthEvent) field(t *testing.T, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(e.Data[name], v); err != nil {
		t.Fatalf("%s.%s: %v in %s", e.Name, name, err, e.Raw)
	}
}

// anthStreamed is what a client accumulates from an event stream, checking
// the order of the events and the consistency of the block indexes as it
// goes.
type anthStreamed struct {
	Start, Final anthMessage
	Names        []string
	Deltas       map[string]int // delta types seen
}

func anthAccumulate(t *testing.T, body string) anthStreamed {
	t.Helper()
	evs := anthEvents(t, body)
	s := anthStreamed{Deltas: map[string]int{}}
	open := -1 // the open block's index
	for i, ev := range evs {
		s.Names = append(s.Names, ev.Name)
		switch ev.Name {
		case "message_start":
			if i != 0 {
				t.Fatalf("message_start at %d:\n%s", i, body)
			}
			ev.field(t, "message", &s.Start)
			s.Final = s.Start
		case "ping":
		case "content_block_start":
			var idx int
			var b anthBlock
			ev.field(t, "index", &idx)
			ev.field(t, "content_block", &b)
			if open >= 0 || idx != len(s.Final.Content) {
				t.Fatalf("block %d starts while %d is open, after %d blocks:\n%s", idx, open, len(s.Final.Content), body)
			}
			open = idx
			s.Final.Content = append(s.Final.Content, b)
		case "content_block_delta":
			var idx int
			var d struct{ Type, Text, Thinking, Signature, PartialJSON string }
			ev.field(t, "index", &idx)
			ev.field(t, "delta", &d)
			var raw map[string]string
			ev.field(t, "delta", &raw)
			d.PartialJSON = raw["partial_json"]
			if idx != open {
				t.Fatalf("delta for block %d while %d is open:\n%s", idx, open, body)
			}
			b := &s.Final.Content[idx]
			s.Deltas[d.Type]++
			switch d.Type {
			case "text_delta":
				if b.Type != "text" {
					t.Fatalf("text_delta in a %s block", b.Type)
				}
				b.Text += d.Text
			case "thinking_delta":
				if b.Type != "thinking" || b.Signature != "" {
					t.Fatalf("thinking_delta in a %s block (signature %q)", b.Type, b.Signature)
				}
				b.Thinking += d.Thinking
			case "signature_delta":
				if b.Type != "thinking" {
					t.Fatalf("signature_delta in a %s block", b.Type)
				}
				b.Signature += d.Signature
			case "input_json_delta":
				if b.Type != "tool_use" {
					t.Fatalf("input_json_delta in a %s block", b.Type)
				}
				if string(b.Input) == "{}" {
					b.Input = nil
				}
				b.Input = append(b.Input, d.PartialJSON...)
			default:
				t.Fatalf("unknown delta %q", d.Type)
			}
		case "content_block_stop":
			var idx int
			ev.field(t, "index", &idx)
			if idx != open {
				t.Fatalf("stop of block %d while %d is open:\n%s", idx, open, body)
			}
			if b := s.Final.Content[idx]; b.Type == "thinking" && b.Signature == "" {
				t.Fatalf("thinking block %d stopped without a signature", idx)
			}
			open = -1
		case "message_delta":
			var d struct {
				StopReason   *string `json:"stop_reason"`
				StopSequence *string `json:"stop_sequence"`
			}
			var u anthUsage // not into Final.Usage: its pointers are message_start's
			ev.field(t, "delta", &d)
			ev.field(t, "usage", &u)
			s.Final.Usage = u
			s.Final.StopReason, s.Final.StopSequence = d.StopReason, d.StopSequence
			if open >= 0 {
				t.Fatalf("message_delta while block %d is open", open)
			}
		case "message_stop":
			if i != len(evs)-1 || evs[i-1].Name != "message_delta" {
				t.Fatalf("message_stop at %d of %d, not after message_delta:\n%s", i, len(evs), body)
			}
		default:
			t.Fatalf("unexpected event %q:\n%s", ev.Name, body)
		}
	}
	if len(s.Names) < 2 || s.Names[1] != "ping" || s.Names[len(s.Names)-1] != "message_stop" {
		t.Fatalf("events %v", s.Names)
	}
	return s
}

func (s *server) anthPost(t *testing.T, path, body string, header ...string) (int, []byte) {
	t.Helper()
	resp, data := s.post(t, path, body, append([]string{"anthropic-version", "2023-06-01"}, header...)...)
	return resp.StatusCode, data
}

func (s *server) anthNew(t *testing.T, body string) anthMessage {
	t.Helper()
	code, data := s.anthPost(t, "/v1/messages", body)
	if code != 200 {
		t.Fatalf("messages: %d %s", code, data)
	}
	var m anthMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if !strings.HasPrefix(m.ID, "msg_") || m.Type != "message" || m.Role != "assistant" || m.StopReason == nil ||
		m.Usage.CacheCreationTokens == nil || m.Usage.CacheReadTokens == nil || len(m.Content) == 0 {
		t.Fatalf("not a message: %s", data)
	}
	return m
}

func (s *server) anthStream(t *testing.T, body string) anthStreamed {
	t.Helper()
	body = strings.Replace(body, "{", `{"stream":true,`, 1)
	resp, data := s.post(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	return anthAccumulate(t, string(data))
}

func (s *server) anthCount(t *testing.T, body string) int {
	t.Helper()
	code, data := s.anthPost(t, "/v1/messages/count_tokens", body)
	var out struct {
		InputTokens *int `json:"input_tokens"`
	}
	if err := json.Unmarshal(data, &out); code != 200 || err != nil || out.InputTokens == nil {
		t.Fatalf("count_tokens: %d %s", code, data)
	}
	return *out.InputTokens
}

func anthText(m anthMessage) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// TestAnthropicMessages: the Messages API on the demo model (byte
// tokenizer, ChatML, random weights): the message and its stream carry the
// same answer, events in Anthropic's order with consistent block indexes,
// and usage that adds up to what count_tokens says the prompt is.
func TestAnthropicMessages(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	req := `{"model":"troupe-demo","max_tokens":12,"temperature":0,"metadata":{"user_id":"u1"},"system":"Be brief.","messages":[{"role":"user","content":"Hello!"}]}`
	// "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n":
	// five special tokens and one token per byte of the rest.
	prompt := 5 + len("system\nBe brief.") + 1 + len("user\nHello!") + 1 + len("assistant\n")
	if n := s.anthCount(t, req); n != prompt {
		t.Fatalf("count_tokens %d, want %d", n, prompt)
	}
	m := s.anthNew(t, req)
	if m.Model != "troupe-demo" || len(m.Content) != 1 || m.Content[0].Type != "text" {
		t.Fatalf("message: %+v", m)
	}
	if m.Usage.InputTokens+*m.Usage.CacheReadTokens != prompt || *m.Usage.CacheReadTokens != 0 || *m.Usage.CacheCreationTokens != 0 {
		t.Fatalf("usage %+v, want %d prompt tokens, none cached (no prompt cache)", m.Usage, prompt)
	}
	switch *m.StopReason {
	case "max_tokens":
		if m.Usage.OutputTokens != 12 {
			t.Fatalf("max_tokens after %d tokens", m.Usage.OutputTokens)
		}
	case "end_turn":
		if m.Usage.OutputTokens < 1 || m.Usage.OutputTokens > 12 {
			t.Fatalf("end_turn after %d tokens: %q", m.Usage.OutputTokens, m.Content[0].Text)
		}
	default:
		t.Fatalf("stop_reason %q", *m.StopReason)
	}
	if m.StopSequence != nil {
		t.Fatalf("stop_sequence %q without stop sequences", *m.StopSequence)
	}

	st := s.anthStream(t, req)
	f := st.Final
	if st.Start.ID == "" || st.Start.ID == m.ID || st.Start.Model != "troupe-demo" || len(st.Start.Content) != 0 ||
		st.Start.StopReason != nil || st.Start.Usage.OutputTokens > 1 || st.Start.Usage.InputTokens != prompt {
		t.Fatalf("message_start: %+v", st.Start)
	}
	if len(f.Content) != 1 || f.Content[0].Type != "text" || f.Content[0].Text != m.Content[0].Text {
		t.Fatalf("streamed %+v, non-streamed %+v (both greedy)", f.Content, m.Content)
	}
	if *f.StopReason != *m.StopReason || f.StopSequence != nil || f.Usage.OutputTokens != m.Usage.OutputTokens ||
		f.Usage.InputTokens+*f.Usage.CacheReadTokens != prompt {
		t.Fatalf("stream ended %v with usage %+v; message %v %+v", *f.StopReason, f.Usage, *m.StopReason, m.Usage)
	}
	if m.Content[0].Text != "" && st.Deltas["text_delta"] == 0 {
		t.Fatalf("no text_delta: %v", st.Names)
	}

	// Content as blocks, system as blocks, a conversation with tools and
	// tool_choice none (the tools are then not shown to the model).
	blocks := `{"max_tokens":3,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"Hello!","cache_control":{"type":"ephemeral"}}]}]}`
	if n := s.anthCount(t, blocks); n != prompt {
		t.Fatalf("count_tokens of the same request as blocks: %d, want %d", n, prompt)
	}
	none := `{"max_tokens":3,"system":"Be brief.","tool_choice":{"type":"none"},"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Hello!"}]}`
	if n := s.anthCount(t, none); n != prompt {
		t.Fatalf("count_tokens with tool_choice none: %d, want %d", n, prompt)
	}
	s.anthNew(t, none)
}

// TestAnthropicStreamEdges: keep-alive pings while the model is silent
// (message_start then goes out before the first token and message_delta
// carries the final usage), and a generation the engine would refuse (too
// long for the model) is refused before the stream begins.
func TestAnthropicStreamEdges(t *testing.T) {
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{KeepAlive: time.Millisecond})
	s.waitReady(t)
	req := `{"max_tokens":16,"messages":[{"role":"user","content":"Hello there, how are you?"}]}`
	prompt := s.anthCount(t, req)
	for range 2 { // the second reads the prompt from the cache
		st := s.anthStream(t, req)
		if u := st.Final.Usage; u.InputTokens+*u.CacheReadTokens != prompt || u.OutputTokens < 1 || u.OutputTokens > 16 {
			t.Fatalf("usage %+v, want %d prompt tokens", u, prompt)
		}
		if u := st.Start.Usage; u.InputTokens+*u.CacheReadTokens != prompt || u.OutputTokens > 1 {
			t.Fatalf("message_start usage %+v (cached %d), want %d prompt tokens", u, *u.CacheReadTokens, prompt)
		}
	}
	// A stream the engine would refuse (too long for the model) is refused
	// before it begins: a JSON 400, not an error event after a 200.
	resp, data := s.post(t, "/v1/messages", `{"stream":true,"max_tokens":100000,"messages":[{"role":"user","content":"x"}]}`)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != 400 || e.Type != "error" ||
		e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "positions") {
		t.Fatalf("refused stream: %d %s", resp.StatusCode, data)
	}
}

// anthThinkingTemplate renders every message and tool as JSON (so a prompt's
// length pins the translation down to the byte) and opens a <think> block
// in the generation prompt, so the output starts as reasoning.
const anthThinkingTemplate = `<|im_start|>{{ messages | tojson }}{% if tools %}{{ tools | tojson }}{% endif %}<|im_end|>
<|im_start|>assistant
<think>
`

func anthTemplateFile(t *testing.T, src string) string {
	path := filepath.Join(t.TempDir(), "template.jinja")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAnthropicTranslation: an Anthropic conversation with system blocks,
// thinking, tool_use and tool_result blocks renders exactly as its OpenAI
// equivalent does (the same tokens), and thinking comes back as a signed
// thinking block, streamed as thinking_delta then signature_delta.
func TestAnthropicTranslation(t *testing.T) {
	s := start(t, troupe.Options{ChatTemplate: anthTemplateFile(t, anthThinkingTemplate)}, troupehttp.Config{})
	s.waitReady(t)
	anth := `{"max_tokens":4,"temperature":0,"system":[{"type":"text","text":"Sys A"},{"type":"text","text":"Sys B"}],
	"tools":[{"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
	"tool_choice":{"type":"tool","name":"get_weather"},
	"messages":[
	 {"role":"user","content":[{"type":"text","text":"Weather in Paris?"},{"type":"text","text":"And Rome?"}]},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"Need a tool.","signature":"c2lnbmVk"},{"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"Checking."},
	  {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris","n":1.0}},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"Rome"}}]},
	 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18C"}]},{"type":"tool_result","tool_use_id":"toolu_2","content":"sunny","is_error":true},{"type":"text","text":"Thanks"}]},
	 {"role":"assistant","content":"You're welcome."},
	 {"role":"user","content":"Bye"}]}`
	oai := `{"messages":[
	 {"role":"system","content":"Sys A\nSys B"},
	 {"role":"user","content":"Weather in Paris?\nAnd Rome?"},
	 {"role":"assistant","content":"Checking.","reasoning_content":"Need a tool.","tool_calls":[
	  {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","n":1.0}}},
	  {"id":"toolu_2","type":"function","function":{"name":"get_weather","arguments":{"city":"Rome"}}}]},
	 {"role":"tool","tool_call_id":"toolu_1","content":"18C"},
	 {"role":"tool","tool_call_id":"toolu_2","content":"sunny"},
	 {"role":"user","content":"Thanks"},
	 {"role":"assistant","content":"You're welcome."},
	 {"role":"user","content":"Bye"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]}`
	_, data := s.post(t, "/tokenize", oai)
	var tk struct{ Tokens []int32 }
	if err := json.Unmarshal(data, &tk); err != nil || len(tk.Tokens) == 0 {
		t.Fatalf("tokenize: %s", data)
	}
	if n := s.anthCount(t, anth); n != len(tk.Tokens) {
		t.Fatalf("the Anthropic request renders to %d tokens, its OpenAI equivalent to %d", n, len(tk.Tokens))
	}

	// The generation prompt opened <think>: the answer is reasoning.
	req := `{"max_tokens":6,"temperature":0,"messages":[{"role":"user","content":"Think."}]}`
	m := s.anthNew(t, req)
	if m.Content[0].Type != "thinking" || m.Content[0].Thinking == "" || m.Content[0].Signature == "" || m.Content[len(m.Content)-1].Type != "text" {
		t.Fatalf("reasoning answer: %+v", m.Content)
	}
	st := s.anthStream(t, req)
	if len(st.Final.Content) != len(m.Content) || st.Final.Content[0].Thinking != m.Content[0].Thinking || st.Final.Content[0].Signature != m.Content[0].Signature || st.Deltas["signature_delta"] != 1 || st.Deltas["thinking_delta"] == 0 {
		t.Fatalf("streamed %+v (deltas %v), non-streamed %+v", st.Final.Content, st.Deltas, m.Content)
	}
	// The thinking block goes back with its signature; it is rendered as
	// the assistant message's reasoning_content.
	th, _ := json.Marshal(map[string]string{"type": "thinking", "thinking": m.Content[0].Thinking, "signature": m.Content[0].Signature})
	next := `{"max_tokens":2,"messages":[{"role":"user","content":"Think."},{"role":"assistant","content":[` + string(th) + `,{"type":"text","text":"Done."}]},{"role":"user","content":"More"}]}`
	oaiNext := `{"messages":[{"role":"user","content":"Think."},{"role":"assistant","content":"Done.","reasoning_content":` + mustJSON(m.Content[0].Thinking) + `},{"role":"user","content":"More"}]}`
	_, data = s.post(t, "/tokenize", oaiNext)
	if err := json.Unmarshal(data, &tk); err != nil {
		t.Fatalf("tokenize: %s", data)
	}
	if n := s.anthCount(t, next); n != len(tk.Tokens) {
		t.Fatalf("with the thinking block sent back: %d tokens, want %d (as reasoning_content)", n, len(tk.Tokens))
	}
	s.anthNew(t, next)
}

// TestAnthropicStopSequences: a stop sequence taken from the greedy answer
// ends the same greedy answer there, reported as stop_sequence with the
// sequence that matched, streamed or not.
func TestAnthropicStopSequences(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	req := `{"max_tokens":24,"temperature":0,"messages":[{"role":"user","content":"Tell me a story."}]}`
	full := anthText(s.anthNew(t, req))
	// A stop sequence from the middle of the answer (whole characters, not
	// the replacement character an invalid byte decodes to).
	runes := []rune(full)
	var stop string
	for i := len(runes) / 2; i < len(runes) && stop == ""; i++ {
		if runes[i] != utf8.RuneError && runes[i] != '\n' {
			stop = string(runes[i])
		}
	}
	if stop == "" {
		t.Fatalf("the greedy answer %q has no character to stop at", full)
	}
	want := full[:strings.Index(full, stop)]
	stopReq := strings.Replace(req, "{", `{"stop_sequences":["never-generated",`+mustJSON(stop)+`],`, 1)
	m := s.anthNew(t, stopReq)
	if *m.StopReason != "stop_sequence" || m.StopSequence == nil || *m.StopSequence != stop || anthText(m) != want {
		t.Fatalf("stopped %v at %v with %q; want stop_sequence %q after %q (full %q)", *m.StopReason, m.StopSequence, anthText(m), stop, want, full)
	}
	st := s.anthStream(t, stopReq)
	if f := st.Final; *f.StopReason != "stop_sequence" || f.StopSequence == nil || *f.StopSequence != stop || anthText(f) != want {
		t.Fatalf("stream stopped %v at %v with %q; want %q after %q", *f.StopReason, f.StopSequence, anthText(f), stop, want)
	}
}

// TestAnthropicPromptCache: the second turn of a conversation reads its
// history from the prompt cache, reported as cache_read_input_tokens and
// left out of input_tokens, the message and the stream's message_start
// alike.
func TestAnthropicPromptCache(t *testing.T) {
	// A long keep-alive: message_start waits for the first token.
	s := start(t, troupe.Options{PromptCache: true}, troupehttp.Config{KeepAlive: time.Minute})
	s.waitReady(t)
	system := strings.Repeat("You are a terse assistant. ", 4)
	turn1 := `{"max_tokens":4,"temperature":0,"system":` + mustJSON(system) + `,"messages":[{"role":"user","content":"Hi"}]}`
	first := s.anthNew(t, turn1)
	if *first.Usage.CacheReadTokens != 0 {
		t.Fatalf("turn 1 read %d tokens from an empty cache", *first.Usage.CacheReadTokens)
	}
	turn2 := `{"max_tokens":4,"temperature":0,"system":` + mustJSON(system) + `,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"x"},{"role":"user","content":"Again"}]}`
	prompt := s.anthCount(t, turn2)
	m := s.anthNew(t, turn2)
	shared := 3 + len("system\n"+system) + 1 + len("user\nHi") + 1
	if cached := *m.Usage.CacheReadTokens; cached < shared-1 || m.Usage.InputTokens+cached != prompt || m.Usage.InputTokens < 1 {
		t.Fatalf("turn 2 usage %+v: want at least %d of %d prompt tokens read from the cache", m.Usage, shared-1, prompt)
	}
	st := s.anthStream(t, turn2)
	if u := st.Start.Usage; *u.CacheReadTokens < shared-1 || u.InputTokens+*u.CacheReadTokens != prompt {
		t.Fatalf("message_start usage %+v: want the cached history counted", u)
	}
	if u := st.Final.Usage; *u.CacheReadTokens < shared-1 || u.InputTokens+*u.CacheReadTokens != prompt {
		t.Fatalf("message_delta usage %+v", u)
	}
}

// TestAnthropicBadInput: every malformed request is a 4xx in Anthropic's
// error shape with the error type of its status and a message that names
// the field.
func TestAnthropicBadInput(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{BodyLimit: 4096})
	s.waitReady(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	ok := `"max_tokens":3,` + msgs
	const m, ct = "/v1/messages", "/v1/messages/count_tokens"
	tests := []struct {
		name, path, body string
		status           int
		mention          string
	}{
		{"invalid json", m, `{"messages": [`, 400, "invalid JSON"},
		{"empty body", m, ``, 400, "empty"},
		{"max_tokens missing", m, `{` + msgs + `}`, 400, "max_tokens"},
		{"max_tokens zero", m, `{"max_tokens":0,` + msgs + `}`, 400, "max_tokens"},
		{"max_tokens wrong type", m, `{"max_tokens":"ten",` + msgs + `}`, 400, "max_tokens"},
		{"messages missing", m, `{"max_tokens":3}`, 400, "messages"},
		{"messages empty", m, `{"max_tokens":3,"messages":[]}`, 400, "empty"},
		{"messages not array", m, `{"max_tokens":3,"messages":{"role":"user"}}`, 400, "array"},
		{"bad role", m, `{"max_tokens":3,"messages":[{"role":"system","content":"x"}]}`, 400, "messages[0].role"},
		{"content missing", m, `{"max_tokens":3,"messages":[{"role":"user"}]}`, 400, "messages[0].content"},
		{"content wrong type", m, `{"max_tokens":3,"messages":[{"role":"user","content":5}]}`, 400, "messages[0].content"},
		{"block without type", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, 400, "messages[0].content[0].type"},
		{"text block without text", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, "messages[0].content[0].text"},
		{"image block", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`, 400, `messages[0].content[1]: content block type "image"`},
		{"document block", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"}}]}]}`, 400, `"document"`},
		{"tool_use in a user message", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, 400, "user message"},
		{"tool_use without id", m, `{"max_tokens":3,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`, 400, "messages[1].content[0].id"},
		{"tool_use input not object", m, `{"max_tokens":3,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]}]}`, 400, "input"},
		{"tool_result without tool_use_id", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, 400, "tool_use_id"},
		{"tool_result with an image", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{}}]}]}]}`, 400, `"image"`},
		{"system wrong type", m, `{` + ok + `,"system":5}`, 400, "system"},
		{"system image block", m, `{` + ok + `,"system":[{"type":"image"}]}`, 400, "system[0]"},
		{"temperature above 1", m, `{` + ok + `,"temperature":1.5}`, 400, "temperature"},
		{"top_p above 1", m, `{` + ok + `,"top_p":2}`, 400, "top_p"},
		{"top_k negative", m, `{` + ok + `,"top_k":-1}`, 400, "top_k"},
		{"stop_sequences not strings", m, `{` + ok + `,"stop_sequences":[1]}`, 400, "stop_sequences"},
		{"thinking budget too small", m, `{"max_tokens":4000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":100}}`, 400, "budget_tokens"},
		{"thinking budget not below max_tokens", m, `{"max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled","budget_tokens":2000}}`, 400, "budget_tokens"},
		{"thinking budget missing", m, `{"max_tokens":2000,` + msgs + `,"thinking":{"type":"enabled"}}`, 400, "budget_tokens"},
		{"thinking type unknown", m, `{` + ok + `,"thinking":{"type":"deep"}}`, 400, "thinking.type"},
		{"tools not array", m, `{` + ok + `,"tools":{"name":"f"}}`, 400, "tools"},
		{"tool without name", m, `{` + ok + `,"tools":[{"input_schema":{"type":"object"}}]}`, 400, "tools[0].name"},
		{"tool without input_schema", m, `{` + ok + `,"tools":[{"name":"f"}]}`, 400, "tools[0].input_schema"},
		{"server tool", m, `{` + ok + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, 400, "tools[0].type"},
		{"tool_choice unknown type", m, `{` + ok + `,"tool_choice":{"type":"some"}}`, 400, "tool_choice.type"},
		{"tool_choice tool without name", m, `{` + ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"}}`, 400, "tool_choice.name"},
		{"tool_choice names no tool", m, `{` + ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"}}`, 400, `"g"`},
		{"stream with a bad body", m, `{"stream":true,` + msgs + `}`, 400, "max_tokens"},
		{"image block", m, `{"max_tokens":3,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}`, 400, "messages[0].content[0]: content block type \"image\": image inputs are not supported"},
		{"top_k past int32", m, `{"top_k":4294967297,` + ok + `}`, 400, "top_k"},
		{"top_k negative", m, `{"top_k":-1,` + ok + `}`, 400, "top_k"},
		{"metadata not an object", m, `{"metadata":5,` + ok + `}`, 400, "metadata"},
		{"metadata user_id not a string", m, `{"metadata":{"user_id":5},` + ok + `}`, 400, "metadata"},
		{"unknown model", m, `{"model":"claude-opus-4",` + ok + `}`, 404, "claude-opus-4"},
		{"too long for the model", m, `{"max_tokens":100000,` + msgs + `}`, 400, "positions"},
		{"oversized body", m, `{"max_tokens":3,"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "too large"},
		{"count_tokens messages empty", ct, `{"messages":[]}`, 400, "empty"},
		{"count_tokens unknown model", ct, `{"model":"claude-opus-4",` + msgs + `}`, 404, "claude-opus-4"},
		{"unknown route", "/v1/messages/batches", `{}`, 404, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := s.anthPost(t, tc.path, tc.body)
			if code != tc.status {
				t.Fatalf("status %d, want %d: %s", code, tc.status, body)
			}
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Message == "" {
				t.Fatalf("not an Anthropic error: %s", body)
			}
			want := map[int]string{400: "invalid_request_error", 404: "not_found_error", 413: "request_too_large"}[tc.status]
			if e.Error.Type != want {
				t.Errorf("error type %q, want %q", e.Error.Type, want)
			}
			if !strings.Contains(e.Error.Message, tc.mention) {
				t.Errorf("message %q does not mention %q", e.Error.Message, tc.mention)
			}
		})
	}
	// count_tokens needs no max_tokens; the server still serves after all
	// that.
	if n := s.anthCount(t, `{`+msgs+`}`); n < 1 {
		t.Fatalf("count_tokens %d", n)
	}
	s.anthNew(t, `{`+ok+`}`)
}

// TestAnthropicAPIKey: with keys configured, Anthropic's x-api-key and
// OpenAI's bearer token are both accepted, and a missing or wrong key is
// Anthropic's authentication_error.
func TestAnthropicAPIKey(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"sekret"}})
	s.waitReady(t)
	req := `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, h := range [][]string{nil, {"x-api-key", "wrong"}, {"Authorization", "Bearer wrong"}} {
			code, body := s.anthPost(t, path, req, h...)
			if code != 401 || !strings.Contains(string(body), `"type":"authentication_error"`) || !strings.Contains(string(body), `"type":"error"`) {
				t.Fatalf("%s with %v: %d %s", path, h, code, body)
			}
		}
		for _, h := range [][]string{{"x-api-key", "sekret"}, {"Authorization", "Bearer sekret"}} {
			if code, body := s.anthPost(t, path, req, h...); code != 200 {
				t.Fatalf("%s with %v: %d %s", path, h, code, body)
			}
		}
	}
}

// TestAnthropicToolUse: with a script model (Qwen3's tokenizer and
// template, output known in advance) the reply's reasoning, text and tool
// call come out as a signed thinking block, a text block and a tool_use
// block, stop_reason tool_use; streamed, the tool_use block starts with an
// empty input and its input_json_delta partial_json joins to the call's
// arguments.
func TestAnthropicToolUse(t *testing.T) {
	s := start(t, troupe.Options{Model: scriptModel(t), PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	req := `{"max_tokens":64,"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],` +
		`"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	check := func(m anthMessage) {
		t.Helper()
		if len(m.Content) != 3 || m.StopReason == nil || *m.StopReason != "tool_use" || m.StopSequence != nil || m.Usage.OutputTokens < 1 {
			t.Fatalf("message: %+v", m)
		}
		th, text, tu := m.Content[0], m.Content[1], m.Content[2]
		if th.Type != "thinking" || th.Thinking != "Plan: call the tool." || th.Signature == "" {
			t.Fatalf("thinking block %+v", th)
		}
		if text.Type != "text" || text.Text != "Sure" {
			t.Fatalf("text block %+v", text)
		}
		if tu.Type != "tool_use" || !strings.HasPrefix(tu.ID, "toolu_") || len(tu.ID) <= len("toolu_") || tu.Name != "get_weather" || !jsonEqual(tu.Input, `{"city": "Paris"}`) {
			t.Fatalf("tool_use block %+v (input %s)", tu, tu.Input)
		}
	}
	m := s.anthNew(t, req)
	check(m)

	// One stream, read as a client accumulates it and event by event.
	resp, data := s.post(t, "/v1/messages", strings.Replace(req, "{", `{"stream":true,`, 1), "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, data)
	}
	st := anthAccumulate(t, string(data))
	check(st.Final)
	if st.Final.Content[0].Signature != m.Content[0].Signature || st.Deltas["thinking_delta"] == 0 || st.Deltas["signature_delta"] != 1 ||
		st.Deltas["text_delta"] == 0 || st.Deltas["input_json_delta"] == 0 {
		t.Fatalf("streamed %+v (deltas %v), non-streamed %+v", st.Final.Content, st.Deltas, m.Content)
	}
	if st.Final.Usage.OutputTokens != m.Usage.OutputTokens {
		t.Fatalf("streamed usage %+v, non-streamed %+v", st.Final.Usage, m.Usage)
	}
	// The tool_use block starts with its id and name and an empty input;
	// its input_json_delta partial_json joins to the call's arguments.
	var partial strings.Builder
	starts := 0
	for _, ev := range anthEvents(t, string(data)) {
		switch ev.Name {
		case "content_block_start":
			var b map[string]json.RawMessage
			ev.field(t, "content_block", &b)
			if string(b["type"]) == `"tool_use"` {
				starts++
				if string(b["input"]) != "{}" || !strings.HasPrefix(string(b["id"]), `"toolu_`) || string(b["name"]) != `"get_weather"` {
					t.Fatalf("tool_use content_block_start %s", ev.Raw)
				}
			}
		case "content_block_delta":
			var d map[string]string
			ev.field(t, "delta", &d)
			if d["type"] == "input_json_delta" {
				partial.WriteString(d["partial_json"])
			}
		}
	}
	if starts != 1 || !json.Valid([]byte(partial.String())) || !jsonEqual(json.RawMessage(partial.String()), `{"city": "Paris"}`) {
		t.Fatalf("%d tool_use blocks, partial_json joined to %q", starts, partial.String())
	}
}

// jsonEqual says whether a JSON text is the same value as want.
func jsonEqual(got json.RawMessage, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) == string(bb)
}

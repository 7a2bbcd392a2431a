package output

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// byteTok is the demo model's tokenizer: one token per byte, so a text's
// bytes are its ids and every token boundary gets exercised.
func byteTok(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestProcessor(t *testing.T) {
	tok := byteTok(t)
	tests := []struct {
		name      string
		opts      Options
		gen       string
		content   string
		reasoning string
		stop      string // the stop string expected to end the output
		calls     []ToolCall
	}{
		{name: "plain", gen: "Hello, wörld 🎉", content: "Hello, wörld 🎉"},
		{name: "stop across tokens", opts: Options{Stop: []string{"STOP"}}, gen: "Hello STOP world", content: "Hello ", stop: "STOP"},
		{name: "earliest of two stops", opts: Options{Stop: []string{"world", "lo"}}, gen: "Hello world", content: "Hel", stop: "lo"},
		{name: "partial stop is released", opts: Options{Stop: []string{"STOP"}}, gen: "a STAR b ST", content: "a STAR b ST"},
		{name: "think block", opts: Options{Reasoning: true}, gen: "<think>plan it</think>\n\nThe answer.", reasoning: "plan it", content: "The answer."},
		{name: "prompt opened think", opts: Options{Reasoning: true, Prompt: "<|im_start|>assistant\n<think>\n"}, gen: "plan</think>\n\nDone", reasoning: "plan", content: "Done"},
		{name: "no think block", opts: Options{Reasoning: true}, gen: "Just text <think> later", content: "Just text <think> later"},
		{name: "stop inside reasoning", opts: Options{Reasoning: true, Stop: []string{"X"}}, gen: "<think>abXcd</think>e", reasoning: "ab", stop: "X"},
		{name: "hermes tool call", opts: Options{Tools: true}, gen: "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			content: "Let me check.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`, Complete: true}}},
		{name: "two hermes calls", opts: Options{Tools: true}, gen: "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":1}}</tool_call>",
			calls: []ToolCall{{Name: "a", Arguments: "{}", Complete: true}, {Name: "b", Arguments: `{"x":1}`, Complete: true}}},
		{name: "llama3 json call", opts: Options{Tools: true}, gen: `{"name": "lookup", "parameters": {"q": "go"}}`,
			calls: []ToolCall{{Name: "lookup", Arguments: `{"q": "go"}`, Complete: true}}},
		{name: "broken tool call is content", opts: Options{Tools: true}, gen: "<tool_call>{not json", content: "<tool_call>{not json"},
		{name: "arguments as a JSON string", opts: Options{Tools: true}, gen: `<tool_call>{"name": "f", "arguments": "{\"q\": \"a\\\"b \u00e9\ud83c\udf89\"}"}</tool_call>`,
			calls: []ToolCall{{Name: "f", Arguments: `{"q": "a\"b é🎉"}`, Complete: true}}},
		{name: "arguments before the name", opts: Options{Tools: true}, gen: `<tool_call>{"arguments": {"n": [1, 2]}, "name": "g"}</tool_call>`,
			calls: []ToolCall{{Name: "g", Arguments: `{"n": [1, 2]}`, Complete: true}}},
		{name: "no arguments", opts: Options{Tools: true}, gen: `<tool_call>{"name": "now"}</tool_call>`,
			calls: []ToolCall{{Name: "now", Arguments: `{}`, Complete: true}}},
		{name: "braces and tags inside strings", opts: Options{Tools: true}, gen: `<tool_call>{"name": "echo", "arguments": {"s": "}</tool_call>{"}}</tool_call>`,
			calls: []ToolCall{{Name: "echo", Arguments: `{"s": "}</tool_call>{"}`, Complete: true}}},
		{name: "two llama3 calls", opts: Options{Tools: true}, gen: `{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"y": true}}`,
			calls: []ToolCall{{Name: "a", Arguments: `{"x": 1}`, Complete: true}, {Name: "b", Arguments: `{"y": true}`, Complete: true}}},
		{name: "cut short after it began", opts: Options{Tools: true}, gen: `Hm.<tool_call>{"name": "f", "arguments": {"city": "Par`,
			content: "Hm.", calls: []ToolCall{{Name: "f", Arguments: `{"city": "Par`}}},
		{name: "no closing tag at the end", opts: Options{Tools: true}, gen: `<tool_call>{"name": "f", "arguments": {"a": 1}}`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`, Complete: true}}},
		{name: "text after the calls is dropped", opts: Options{Tools: true}, gen: `<tool_call>{"name": "f", "arguments": {}}</tool_call> and more`,
			calls: []ToolCall{{Name: "f", Arguments: `{}`, Complete: true}}},
		{name: "mistral nemo list", opts: Options{Tools: true, Syntax: SyntaxMistral},
			gen:     `Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcDEF123"}, {"name": "now", "arguments": {}}]`,
			content: "Sure.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`, Complete: true}, {Name: "now", Arguments: `{}`, Complete: true}}},
		{name: "mistral nemo arguments as a string", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `[TOOL_CALLS][{"name": "f", "arguments": "{\"a\": 1}"}]`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`, Complete: true}}},
		{name: "mistral nemo cut short", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `[TOOL_CALLS][{"name": "f", "arguments": {"a": "b`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": "b`}}},
		{name: "mistral nemo list without its bracket", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`, Complete: true}}},
		{name: "mistral args calls", opts: Options{Tools: true, Syntax: SyntaxMistral},
			gen:   `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[CALL_ID]abcDEF123[ARGS]{"tz": "CET"}`,
			calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`, Complete: true}, {Name: "get_time", Arguments: `{"tz": "CET"}`, Complete: true}}},
		{name: "mistral args cut short", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `OK [TOOL_CALLS]f[ARGS]{"a": [1, 2`,
			content: "OK ", calls: []ToolCall{{Name: "f", Arguments: `{"a": [1, 2`}}},
		{name: "mistral name without arguments is content", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `[TOOL_CALLS]f and more`, content: `[TOOL_CALLS]f and more`},
		{name: "mistral reads no hermes tags nor bare json", opts: Options{Tools: true, Syntax: SyntaxMistral}, gen: `{"name": "f", "parameters": {}}<tool_call>`,
			content: `{"name": "f", "parameters": {}}<tool_call>`},
		{name: "harmony reasoning then answer", opts: Options{Syntax: SyntaxHarmony},
			gen:       "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hi there!<|return|>",
			reasoning: "The user greets.", content: "Hi there!"},
		{name: "harmony call as the template renders it", opts: Options{Tools: true, Syntax: SyntaxHarmony},
			gen:   ` to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris", "n": 2}<|call|>`,
			calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris", "n": 2}`, Complete: true}}},
		{name: "harmony call after reasoning", opts: Options{Tools: true, Syntax: SyntaxHarmony},
			gen:       `<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`,
			reasoning: "Need the weather.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`, Complete: true}}},
		{name: "harmony preamble then call", opts: Options{Tools: true, Syntax: SyntaxHarmony},
			gen:     `<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>`,
			content: "Checking.", calls: []ToolCall{{Name: "f", Arguments: `{}`, Complete: true}}},
		{name: "harmony call cut short", opts: Options{Tools: true, Syntax: SyntaxHarmony}, gen: `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": "b`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": "b`}}},
		{name: "harmony stop in the answer", opts: Options{Syntax: SyntaxHarmony, Stop: []string{"STOP"}}, gen: "<|channel|>final<|message|>one STOP two<|return|>", content: "one ", stop: "STOP"},
		{name: "harmony without headers is content", opts: Options{Syntax: SyntaxHarmony}, gen: "Plain text.", content: "Plain text."},
		{name: "harmony call without tools is content", opts: Options{Syntax: SyntaxHarmony}, gen: `<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>`, content: "{}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tok, tc.opts)
			var content, reasoning string
			var streamed []ToolCall // the calls as their deltas build them
			pieces := map[int]int{} // argument deltas per call
			tools := func(ds []ToolDelta) {
				for _, td := range ds {
					if td.ID != "" {
						if td.Index != len(streamed) || td.Name == "" {
							t.Fatalf("announcement %+v after %d calls", td, len(streamed))
						}
						streamed = append(streamed, ToolCall{ID: td.ID, Name: td.Name})
					} else if td.Index >= len(streamed) || td.Name != "" {
						t.Fatalf("delta %+v before its announcement", td)
					}
					streamed[td.Index].Arguments += td.Arguments
					if td.Arguments != "" {
						pieces[td.Index]++
					}
				}
			}
			for _, b := range []byte(tc.gen) {
				d := p.Add(int32(b))
				if !utf8.ValidString(d.Content) || !utf8.ValidString(d.Reasoning) {
					t.Fatalf("delta splits a UTF-8 character: %q %q", d.Content, d.Reasoning)
				}
				content += d.Content
				reasoning += d.Reasoning
				tools(d.Tools)
				if p.Stopped() {
					break
				}
			}
			d := p.Finish()
			content += d.Content
			reasoning += d.Reasoning
			tools(d.Tools)
			if content != tc.content || reasoning != tc.reasoning || p.Stopped() != (tc.stop != "") || p.StopString() != tc.stop {
				t.Fatalf("content %q reasoning %q stop %q\nwant    %q           %q         %q", content, reasoning, p.StopString(), tc.content, tc.reasoning, tc.stop)
			}
			calls, ok := p.ToolCalls()
			if ok != (tc.calls != nil) || len(calls) != len(tc.calls) {
				t.Fatalf("tool calls %+v (ok %v), want %+v", calls, ok, tc.calls)
			}
			if len(streamed) != len(calls) {
				t.Fatalf("%d calls streamed, %d final", len(streamed), len(calls))
			}
			for i := range calls {
				if len(calls[i].ID) != 24 || streamed[i].ID != calls[i].ID {
					t.Fatalf("call %d id %q, streamed as %q", i, calls[i].ID, streamed[i].ID)
				}
				want := tc.calls[i]
				want.ID = calls[i].ID
				if calls[i] != want {
					t.Fatalf("call %d: %+v, want %+v", i, calls[i], want)
				}
				// The deltas join to the final arguments exactly, one token
				// (here one byte) of them at a time.
				if streamed[i] != (ToolCall{ID: want.ID, Name: want.Name, Arguments: want.Arguments}) {
					t.Fatalf("call %d streamed as %+v, final %+v", i, streamed[i], want)
				}
				nameFirst := strings.Index(tc.gen, `"name"`) < strings.Index(tc.gen, `"arguments"`) || strings.Contains(tc.gen, `"parameters"`) || tc.opts.Syntax != SyntaxDefault
				if nameFirst && len(want.Arguments) > 4 && pieces[i] < 2 {
					t.Fatalf("call %d: arguments came in %d pieces", i, pieces[i])
				}
			}
		})
	}
}

// FuzzToolCalls: whatever the model generates, in any syntax, the
// processor neither panics nor streams tool-call pieces that disagree with
// the final calls.
func FuzzToolCalls(f *testing.F) {
	for _, s := range []string{
		`<tool_call>{"name": "f", "arguments": {"a": "b\"c"}}</tool_call>`,
		`<tool_call>{"name": "f", "arguments": "{\"a\": \"\ud83c\udf89\"}"}</tool_call>`,
		`{"name": "a", "parameters": {"x": [1, {"y": null}]}}; {"name": "b"}`,
		`<tool_call>{"arguments": 5, "name": "n"}</tool_call><tool_call>{"name"`,
		`text <tool_call>{"name": "f", "arguments": {"s": "\u00`,
	} {
		f.Add(s, uint8(SyntaxDefault))
	}
	for _, s := range []string{
		`[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}, {"name": "g"`,
		`a[TOOL_CALLS]f[CALL_ID]abcDEF123[ARGS]{"a": "\u00e9"}[TOOL_CALLS]g[ARGS]5`,
	} {
		f.Add(s, uint8(SyntaxMistral))
	}
	for _, s := range []string{
		`<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>`,
		` to=functions.f<|channel|>commentary json<|message|>{"a"<|start|>assistant<|channel|>final<|message|>hi`,
	} {
		f.Add(s, uint8(SyntaxHarmony))
	}
	tok := byteTok(f)
	f.Fuzz(func(t *testing.T, gen string, syntax uint8) {
		p := New(tok, Options{Tools: true, Syntax: Syntax(syntax % 3)})
		var streamed []ToolCall
		add := func(ds []ToolDelta) {
			for _, td := range ds {
				if td.ID != "" {
					streamed = append(streamed, ToolCall{ID: td.ID, Name: td.Name})
				}
				if td.Index >= len(streamed) {
					t.Fatalf("delta %+v before its announcement", td)
				}
				streamed[td.Index].Arguments += td.Arguments
			}
		}
		for _, b := range []byte(gen) {
			add(p.Add(int32(b)).Tools)
		}
		add(p.Finish().Tools)
		calls, _ := p.ToolCalls()
		if len(calls) != len(streamed) {
			t.Fatalf("%d calls, %d streamed", len(calls), len(streamed))
		}
		for i, c := range calls {
			if (ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}) != streamed[i] {
				t.Fatalf("call %+v streamed as %+v", c, streamed[i])
			}
		}
	})
}

package output

import (
	"testing"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// byteTok is the demo model's tokenizer: one token per byte, so a text's
// bytes are its ids and every token boundary gets exercised.
func byteTok(t *testing.T) *tokenizer.Tokenizer {
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
			content: "Let me check.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}},
		{name: "two hermes calls", opts: Options{Tools: true}, gen: "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>\n<tool_call>{\"name\":\"b\",\"arguments\":{\"x\":1}}</tool_call>",
			calls: []ToolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"x":1}`}}},
		{name: "llama3 json call", opts: Options{Tools: true}, gen: `{"name": "lookup", "parameters": {"q": "go"}}`,
			calls: []ToolCall{{Name: "lookup", Arguments: `{"q": "go"}`}}},
		{name: "broken tool call is content", opts: Options{Tools: true}, gen: "<tool_call>{not json", content: "<tool_call>{not json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tok, tc.opts)
			var content, reasoning string
			for _, b := range []byte(tc.gen) {
				d := p.Add(int32(b))
				if !utf8.ValidString(d.Content) || !utf8.ValidString(d.Reasoning) {
					t.Fatalf("delta splits a UTF-8 character: %q %q", d.Content, d.Reasoning)
				}
				content += d.Content
				reasoning += d.Reasoning
				if p.Stopped() {
					break
				}
			}
			d := p.Finish()
			content += d.Content
			reasoning += d.Reasoning
			if content != tc.content || reasoning != tc.reasoning || p.Stopped() != (tc.stop != "") || p.StopString() != tc.stop {
				t.Fatalf("content %q reasoning %q stop %q\nwant    %q           %q         %q", content, reasoning, p.StopString(), tc.content, tc.reasoning, tc.stop)
			}
			calls, ok := p.ToolCalls()
			if ok != (tc.calls != nil) || len(calls) != len(tc.calls) {
				t.Fatalf("tool calls %+v (ok %v), want %+v", calls, ok, tc.calls)
			}
			for i := range calls {
				if calls[i] != tc.calls[i] {
					t.Fatalf("call %d: %+v, want %+v", i, calls[i], tc.calls[i])
				}
			}
		})
	}
}

package output

import (
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// mistralTok is the byte tokenizer with Mistral's tool-call markers and
// EOS added as special tokens, as Mistral's tokenizers have them.
func mistralTok(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizerSpecials(dir, "</s>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[INST]"); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestSpecialMarkers: the markers of a syntax reach the parser although
// they are special tokens (skipped by the plain decoder), while the other
// special tokens (EOS, stray control tokens) stay out of the text.
func TestSpecialMarkers(t *testing.T) {
	mistral := mistralTok(t)
	gptoss, err := tokenizer.Load(fixtures.Path(t, "tokenizers", "gptoss"), tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name               string
		tok                *tokenizer.Tokenizer
		opts               Options
		gen                string
		content, reasoning string
		calls              []ToolCall
	}{
		{name: "mistral nemo", tok: mistral, opts: Options{Tools: true, Syntax: SyntaxMistral},
			gen:   `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}]</s>`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`, Complete: true}}},
		{name: "mistral small", tok: mistral, opts: Options{Tools: true, Syntax: SyntaxMistral},
			gen:   `[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[CALL_ID]abcDEF123[ARGS]{}</s>`,
			calls: []ToolCall{{Name: "f", Arguments: `{"a": 1}`, Complete: true}, {Name: "g", Arguments: `{}`, Complete: true}}},
		{name: "mistral content skips other specials", tok: mistral, opts: Options{Tools: true, Syntax: SyntaxMistral},
			gen: "Hi[INST] there</s>", content: "Hi there"},
		{name: "mistral markers are skipped by the default syntax", tok: mistral, opts: Options{Tools: true},
			gen: `[TOOL_CALLS]f[ARGS]{}</s>`, content: `f{}`},
		{name: "mistral markers are skipped without tools", tok: mistral, opts: Options{Syntax: SyntaxMistral},
			gen: `[TOOL_CALLS]f[ARGS]{}</s>`, content: `f{}`},
		{name: "gpt-oss answer", tok: gptoss, opts: Options{Syntax: SyntaxHarmony},
			gen:       "<|channel|>analysis<|message|>Greeting: answer briefly.<|end|><|start|>assistant<|channel|>final<|message|>Hello! 👋<|return|>",
			reasoning: "Greeting: answer briefly.", content: "Hello! 👋"},
		{name: "gpt-oss call", tok: gptoss, opts: Options{Tools: true, Syntax: SyntaxHarmony},
			gen:       `<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`,
			reasoning: "Need weather.", calls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`, Complete: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.tok, tc.opts)
			var content, reasoning string
			var streamed []ToolCall
			add := func(d Delta) {
				content += d.Content
				reasoning += d.Reasoning
				for _, td := range d.Tools {
					if td.ID != "" {
						streamed = append(streamed, ToolCall{ID: td.ID, Name: td.Name})
					}
					streamed[td.Index].Arguments += td.Arguments
				}
			}
			specials := 0
			for _, id := range tc.tok.EncodeIDs(tc.gen, false) {
				if tc.tok.IsSpecial(id) {
					specials++
				}
				add(p.Add(id))
			}
			if specials < 2 {
				t.Fatalf("%d special tokens in the generation", specials)
			}
			add(p.Finish())
			if content != tc.content || reasoning != tc.reasoning {
				t.Fatalf("content %q reasoning %q, want %q %q", content, reasoning, tc.content, tc.reasoning)
			}
			calls, _ := p.ToolCalls()
			if len(calls) != len(tc.calls) || len(streamed) != len(calls) {
				t.Fatalf("calls %+v streamed %+v, want %+v", calls, streamed, tc.calls)
			}
			for i, c := range calls {
				want := tc.calls[i]
				want.ID = c.ID
				if c != want || (ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}) != streamed[i] {
					t.Fatalf("call %d %+v streamed %+v, want %+v", i, c, streamed[i], want)
				}
			}
		})
	}
}

package chat_test

import (
	"os"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// qwen3Assets are Qwen3's chat template and tokenizer from the fixtures.
func qwen3Assets(t *testing.T) *chat.Assets {
	t.Helper()
	src, err := os.ReadFile(fixtures.Path(t, "templates", "templates", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(fixtures.Path(t, "tokenizers", "qwen3"), tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := templates.Compile(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return &chat.Assets{Tokenizer: tok, Template: tmpl}
}

// TestBreakpoints resolves cache breakpoints on Qwen3's template: each
// lands where the marked block's render ends in the prompt (with what the
// template writes after it as far as the prompt has it too), positions
// rise strictly, duplicates merge keeping the longer TTL, and the last
// prompt token is never covered.
func TestBreakpoints(t *testing.T) {
	a := qwen3Assets(t)
	tools := msgs(t, `[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
	sys := `{"role":"system","content":"You are terse."}`
	user := `{"role":"user","content":"Part one.\nPart two."}`
	asst := `{"role":"assistant","content":"Hello.","reasoning_content":"Greet back."}`
	more := `{"role":"user","content":"More?"}`
	conv := "[" + sys + "," + user + "," + asst + "," + more + "]"
	type want struct {
		prefix string // the prompt text the position covers
		ttl    time.Duration
	}
	tests := []struct {
		name  string
		req   chat.Request
		wants []want
	}{
		{name: "system block",
			req: chat.Request{Messages: msgs(t, conv), Breakpoints: []chat.Breakpoint{
				{Messages: msgs(t, "["+sys+"]")}}},
			wants: []want{{"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n", chat.DefaultCacheTTL}}},
		{name: "inside a user message",
			req: chat.Request{Messages: msgs(t, conv), Breakpoints: []chat.Breakpoint{
				{Messages: msgs(t, "["+sys+`,{"role":"user","content":"Part one."}]`), TTL: time.Hour}}},
			wants: []want{{"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nPart one", time.Hour}}},
		{name: "assistant turn, its think block dropped as in the prompt",
			req: chat.Request{Messages: msgs(t, conv), Breakpoints: []chat.Breakpoint{
				{Messages: msgs(t, "["+sys+","+user+","+asst+"]")}}},
			wants: []want{{"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nPart one.\nPart two.<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n", chat.DefaultCacheTTL}}},
		{name: "tools",
			req:   chat.Request{Messages: msgs(t, "["+user+"]"), Tools: tools, Breakpoints: []chat.Breakpoint{{Tools: tools}}},
			wants: []want{{"", chat.DefaultCacheTTL}}}, // checked below: up to the first user turn
		{name: "the last message: all but the last prompt token",
			req:   chat.Request{Messages: msgs(t, "["+user+"]"), Breakpoints: []chat.Breakpoint{{Messages: msgs(t, "["+user+"]")}}},
			wants: []want{{"<|im_start|>user\nPart one.\nPart two.<|im_end|>\n<|im_start|>assistant", chat.DefaultCacheTTL}}},
		{name: "several, out of order, one twice",
			req: chat.Request{Messages: msgs(t, conv), Breakpoints: []chat.Breakpoint{
				{Messages: msgs(t, "["+sys+","+user+","+asst+"]")},
				{Messages: msgs(t, "["+sys+"]"), TTL: time.Hour},
				{Messages: msgs(t, "["+sys+"]")}}},
			wants: []want{
				{"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n", time.Hour},
				{"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nPart one.\nPart two.<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n", chat.DefaultCacheTTL}}},
		{name: "none", req: chat.Request{Messages: msgs(t, conv)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.PrepareWith(&tc.req, chat.PrepareOptions{PromptCache: true})
			if err != nil {
				t.Fatal(err)
			}
			if off, err := a.Prepare(&tc.req, false); err != nil || off.Breakpoints != nil {
				t.Fatalf("with the prompt cache off: breakpoints %v, %v", off.Breakpoints, err)
			}
			if len(p.Breakpoints) != len(tc.wants) {
				t.Fatalf("breakpoints %+v, want %d", p.Breakpoints, len(tc.wants))
			}
			prev := 0
			for i, w := range tc.wants {
				bp := p.Breakpoints[i]
				if bp.Pos <= prev || bp.Pos >= len(p.IDs) || bp.TTL != w.ttl {
					t.Fatalf("breakpoint %d: %+v (previous %d, prompt %d tokens, want TTL %v)", i, bp, prev, len(p.IDs), w.ttl)
				}
				prev = bp.Pos
				got := a.Tokenizer.Decode(p.IDs[:bp.Pos], false)
				if w.prefix == "" { // tools: the system turn with the tools, up to the user's text
					w.prefix = p.Prompt[:len(p.Prompt)-len("Part one.\nPart two.<|im_end|>\n<|im_start|>assistant\n")]
				}
				if got != w.prefix {
					t.Errorf("breakpoint %d covers %q,\nwant %q", i, got, w.prefix)
				}
			}
			if p.CacheEnd() != prev {
				t.Fatalf("CacheEnd %d, want %d", p.CacheEnd(), prev)
			}
		})
	}
}

package chat_test

import (
	"os"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
)

// TestThinkingSwitch renders the fixture templates that have a thinking
// switch with Thinking on and off: the switch must reach the variable each
// template reads, a template without one renders as if unset, and
// chat_template_kwargs win over it.
func TestThinkingSwitch(t *testing.T) {
	tests := []struct {
		template string
		thinking *chat.Thinking
		kwargs   string
		has, not string // substrings the prompt must (not) contain
	}{
		{template: "qwen3", thinking: &chat.Thinking{Enabled: false}, has: "<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{template: "qwen3", thinking: &chat.Thinking{Enabled: true}, not: "</think>"},
		{template: "qwen3", thinking: &chat.Thinking{Enabled: false}, kwargs: `{"enable_thinking": true}`, not: "</think>"},
		{template: "deepseek-v3.1", thinking: &chat.Thinking{Enabled: true}, has: "<｜Assistant｜><think>"},
		{template: "deepseek-v3.1", thinking: &chat.Thinking{Enabled: false}, has: "<｜Assistant｜></think>"},
		{template: "granite-3.3", thinking: &chat.Thinking{Enabled: true}, has: "Write your thoughts between <think></think>"},
		{template: "granite-3.3", thinking: &chat.Thinking{Enabled: false}, not: "Write your thoughts"},
		{template: "gpt-oss", thinking: &chat.Thinking{Enabled: true, Effort: "high"}, has: "Reasoning: high"},
		{template: "gpt-oss", thinking: nil, has: "Reasoning: medium"},
		{template: "llama3.1", thinking: &chat.Thinking{Enabled: true, Effort: "high"}, not: "think"},
	}
	for _, tc := range tests {
		name := tc.template
		if tc.thinking != nil {
			name += map[bool]string{true: "/on", false: "/off"}[tc.thinking.Enabled]
		}
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(fixtures.Path(t, "templates", "templates", tc.template+".jinja"))
			if err != nil {
				t.Fatal(err)
			}
			a := assets(t, string(src))
			a.SpecialTokens = templates.NewDict(2)
			a.SpecialTokens.Set("bos_token", "<s>")
			a.SpecialTokens.Set("eos_token", "</s>")
			r := &chat.Request{Messages: msgs(t, `[{"role":"user","content":"Hi"}]`), Thinking: tc.thinking}
			if tc.kwargs != "" {
				v, err := templates.DecodeJSON([]byte(tc.kwargs))
				if err != nil {
					t.Fatal(err)
				}
				r.Kwargs = v.(*templates.Dict)
			}
			p, err := a.Prepare(r, false)
			if err != nil {
				t.Fatal(err)
			}
			if tc.has != "" && !strings.Contains(p.Prompt, tc.has) {
				t.Errorf("prompt lacks %q:\n%s", tc.has, p.Prompt)
			}
			if tc.not != "" && strings.Contains(p.Prompt, tc.not) {
				t.Errorf("prompt has %q:\n%s", tc.not, p.Prompt)
			}
		})
	}
}

package http_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/loadgen"
	"github.com/troupe-ai/troupe/tokenizer"
)

// stripTemplate is a ChatML template with Hermes tool calls that never
// renders earlier reasoning (<think> blocks), as QwQ-style templates do.
const stripTemplate = `{%- if tools %}<|im_start|>system
Tools: {% for t in tools %}{{ t | tojson }}{% endfor %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' %}<|im_start|>assistant
{{ (m.content or '').split('</think>')[-1] | trim }}{% for c in m.tool_calls or [] %}<tool_call>{{ {"name": c.function.name, "arguments": c.function.arguments} | tojson }}</tool_call>{% endfor %}<|im_end|>
{% elif m.role == 'tool' %}<|im_start|>user
<tool_response>{{ m.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestAgentLoop runs 6 steps of (reasoning + tool call, then its result)
// over chat completions, Responses and Anthropic Messages, with a client
// that drops the reasoning it was shown: from step 2 on, only the new tool
// result and the turn boundary around it (+ 8 tokens) are computed — on a
// dense model with Qwen3's thinking template (reasoning re-attached) and
// with a template that strips reasoning, and on Mamba (snapshots; calls
// forced, its random weights would not call).
func TestAgentLoop(t *testing.T) {
	qwen3Fresh := func(result string) string {
		return "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + result + "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
	}
	stripFresh := func(result string) string {
		return "<|im_end|>\n<|im_start|>user\n<tool_response>" + result + "</tool_response><|im_end|>\n<|im_start|>assistant\n"
	}
	tests := []struct {
		name     string
		model    func(t *testing.T) (string, *tokenizer.Tokenizer)
		template string
		force    bool
		fresh    func(string) string
	}{
		{name: "dense-qwen3", model: scriptModelTok, fresh: qwen3Fresh},
		{name: "dense-strip", model: scriptModelTok, template: stripTemplate, fresh: stripFresh},
		{name: "mamba-qwen3", model: func(t *testing.T) (string, *tokenizer.Tokenizer) { return qwen3Model(t, "mamba") }, force: true, fresh: qwen3Fresh},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, tok := tc.model(t)
			opts := troupe.Options{Model: dir, PromptCache: true}
			if tc.template != "" {
				opts.ChatTemplate = filepath.Join(t.TempDir(), "strip.jinja")
				if err := os.WriteFile(opts.ChatTemplate, []byte(tc.template), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := start(t, opts, troupehttp.Config{})
			s.waitReady(t)
			steps := 0
			for _, api := range []string{loadgen.APIChat, loadgen.APIResponses, loadgen.APIMessages} {
				rep, err := loadgen.AgentLoop(context.Background(), loadgen.AgentConfig{URL: s.url, API: api, Steps: 6,
					ForceTool: tc.force, AfterStep: func(loadgen.AgentStep) {
						steps++
						waitWarmUps(t, s, steps) // the tool's latency, as long as the warm-up needs
					}})
				if err != nil {
					t.Fatal(err)
				}
				for i, st := range rep.Steps {
					if st.ToolCalls == 0 {
						t.Fatalf("%s step %d: no tool call: %+v", api, st.Step, st)
					}
					if i == 0 {
						continue
					}
					fresh := len(tok.EncodeIDs(tc.fresh(rep.Steps[i-1].ToolResult), false))
					if st.Computed > fresh+8 {
						t.Errorf("%s step %d: %d of %d prompt tokens computed, want at most %d (tool result and boundary %d + 8)",
							api, st.Step, st.Computed, st.Prompt, fresh+8, fresh)
					}
				}
				if t.Failed() {
					t.Log(rep.Table())
				}
			}
		})
	}
}

// TestPreserveThinkingCacheOff: the cache changes cost, never tokens — an
// agent loop with preserve_thinking on renders the same prompts and gets
// the same replies on a server with the prompt cache on as on one with it
// off.
func TestPreserveThinkingCacheOff(t *testing.T) {
	dir, _ := scriptModelTok(t)
	var runs [2]*loadgen.AgentReport
	for i, cache := range []bool{true, false} {
		s := start(t, troupe.Options{Model: dir, PromptCache: cache}, troupehttp.Config{})
		s.waitReady(t)
		rep, err := loadgen.AgentLoop(context.Background(), loadgen.AgentConfig{URL: s.url, API: loadgen.APIChat, Steps: 4,
			Kwargs: map[string]any{"preserve_thinking": true}})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = rep
	}
	for i := range runs[0].Steps {
		on, off := runs[0].Steps[i], runs[1].Steps[i]
		if on.Prompt != off.Prompt || on.Reply != off.Reply || on.Completion != off.Completion {
			t.Fatalf("step %d differs with the cache on and off:\non  %+v\noff %+v", i+1, on, off)
		}
		if i > 0 && on.Cached == 0 {
			t.Fatalf("step %d: nothing cached with the cache on", i+1)
		}
	}
	// the reasoning was re-attached: without preserve_thinking the same
	// loop's prompts are shorter from step 2 on
	s := start(t, troupe.Options{Model: dir, PromptCache: true}, troupehttp.Config{})
	s.waitReady(t)
	without, err := loadgen.AgentLoop(context.Background(), loadgen.AgentConfig{URL: s.url, API: loadgen.APIChat, Steps: 2,
		Kwargs: map[string]any{"preserve_thinking": false}})
	if err != nil {
		t.Fatal(err)
	}
	if with, wo := runs[0].Steps[1].Prompt, without.Steps[1].Prompt; with <= wo {
		t.Fatalf("step 2's prompt: %d tokens with preserve_thinking, %d without: the reasoning was not re-attached", with, wo)
	}
}

// scriptModelTok is scriptModel with its tokenizer.
func scriptModelTok(t *testing.T) (string, *tokenizer.Tokenizer) {
	t.Helper()
	dir := scriptModel(t)
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, tok
}

package chat_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
)

// preserveVarTemplate keeps earlier reasoning only when preserve_thinking
// is set, as Qwen's newer templates do.
const preserveVarTemplate = `{% for m in messages %}<|{{ m.role }}|>` +
	`{% if m.role == 'assistant' and m.reasoning_content and (preserve_thinking or loop.last) %}<think>{{ m.reasoning_content }}</think>{% endif %}` +
	`{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function.name }} {{ c.function.arguments | tojson }}</call>{% endfor %}{% endif %}` +
	`<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}`

func fixtureAssets(t *testing.T, name string) *chat.Assets {
	t.Helper()
	src, err := os.ReadFile(fixtures.Path(t, "templates", "templates", name+".jinja"))
	if err != nil {
		t.Fatal(err)
	}
	a := assets(t, string(src))
	a.SpecialTokens = templates.NewDict(2)
	a.SpecialTokens.Set("bos_token", "<s>")
	a.SpecialTokens.Set("eos_token", "</s>")
	return a
}

// TestPreserveSupport: the probe finds what each template does with
// earlier reasoning, by rendering.
func TestPreserveSupport(t *testing.T) {
	tests := []struct {
		name string
		a    func(t *testing.T) *chat.Assets
		want chat.PreserveSupport
	}{
		// Qwen3 keeps the reasoning of the turns since the last user message
		{"qwen3", func(t *testing.T) *chat.Assets { return fixtureAssets(t, "qwen3") }, chat.PreserveSupport{ToolLoop: true}},
		// R1 distills strip every earlier turn's reasoning
		{"deepseek-r1-distill-qwen", func(t *testing.T) *chat.Assets { return fixtureAssets(t, "deepseek-r1-distill-qwen") }, chat.PreserveSupport{}},
		{"llama3.1", func(t *testing.T) *chat.Assets { return fixtureAssets(t, "llama3.1") }, chat.PreserveSupport{}},
		{"preserve variable", func(t *testing.T) *chat.Assets { return assets(t, preserveVarTemplate) },
			chat.PreserveSupport{Variable: true, History: true, ToolLoop: true}},
		{"no template", func(t *testing.T) *chat.Assets { return assets(t, "") }, chat.PreserveSupport{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a(t).PreserveThinking(false)
			if got != tc.want {
				t.Fatalf("PreserveThinking = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// agentLoop is a user question, a reasoned tool call (sent back without
// its reasoning, as the OpenAI SDKs do) and its result.
const agentLoop = `[{"role":"user","content":"Weather in Paris?"},
 {"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
 {"role":"tool","tool_call_id":"call_1","content":"sunny"}]`

// TestPreserveReattach: with preserve_thinking on (the default with the
// prompt cache and a capable template), an assistant turn sent back
// without reasoning renders with the reasoning the server kept for it; a
// request's preserve_thinking false, the cache off, an unknown reply or an
// incapable template render the history as it came.
func TestPreserveReattach(t *testing.T) {
	const reasoning = "The user wants weather; call the tool."
	reply := chat.Reply{Content: "Let me look.", Reasoning: reasoning,
		Calls: []chat.Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	tests := []struct {
		name        string
		template    string
		kwargs      string
		promptCache bool
		remember    *chat.Reply
		want        bool // the reasoning is in the prompt
	}{
		{name: "qwen3 default with cache", template: "qwen3", promptCache: true, remember: &reply, want: true},
		{name: "qwen3 cache off", template: "qwen3", remember: &reply},
		{name: "qwen3 cache off, request on", template: "qwen3", kwargs: `{"preserve_thinking": true}`, remember: &reply, want: true},
		{name: "qwen3 request off", template: "qwen3", kwargs: `{"preserve_thinking": false}`, promptCache: true, remember: &reply},
		{name: "qwen3 unknown reply", template: "qwen3", promptCache: true},
		{name: "qwen3 other arguments", template: "qwen3", promptCache: true,
			remember: &chat.Reply{Content: reply.Content, Reasoning: reasoning, Calls: []chat.Call{{Name: "get_weather", Arguments: `{"city":"Rome"}`}}}},
		{name: "r1 strips", template: "deepseek-r1-distill-qwen", promptCache: true, remember: &reply},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := fixtureAssets(t, tc.template)
			if tc.remember != nil {
				a.Remember(*tc.remember)
			}
			r := &chat.Request{Messages: msgs(t, agentLoop)}
			if tc.kwargs != "" {
				v, err := templates.DecodeJSON([]byte(tc.kwargs))
				if err != nil {
					t.Fatal(err)
				}
				r.Kwargs = v.(*templates.Dict)
			}
			p, err := a.PrepareWith(r, chat.PrepareOptions{PromptCache: tc.promptCache})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(p.Prompt, reasoning); got != tc.want {
				t.Fatalf("reasoning in prompt = %v, want %v:\n%s", got, tc.want, p.Prompt)
			}
			if tc.want && !p.PreserveThinking {
				t.Fatal("PreserveThinking not reported")
			}
		})
	}
}

// TestPreserveVariable: a template that reads preserve_thinking gets it
// set when preserve_thinking is on by default, and keeps an earlier
// exchange's reasoning.
func TestPreserveVariable(t *testing.T) {
	a := assets(t, preserveVarTemplate)
	a.Remember(chat.Reply{Content: "Hello.", Reasoning: "greet back"})
	r := &chat.Request{Messages: msgs(t, `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"More?"}]`)}
	for _, cache := range []bool{false, true} {
		p, err := a.PrepareWith(r, chat.PrepareOptions{PromptCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(p.Prompt, "<think>greet back</think>"); got != cache {
			t.Fatalf("cache %v: kept reasoning rendered = %v:\n%s", cache, got, p.Prompt)
		}
	}
}

// TestWarmUpToolCalls: the warm-up of a reply of tool calls covers the
// history up to the tool result's text, rendered as the next request
// (sent back without reasoning) will render it.
func TestWarmUpToolCalls(t *testing.T) {
	a := fixtureAssets(t, "qwen3")
	first := msgs(t, `[{"role":"user","content":"Weather in Paris?"}]`)
	reply := chat.Reply{Content: "Let me look.", Reasoning: "call the tool",
		Calls: []chat.Call{{ID: "call_1", Name: "get_weather", Arguments: `{"city": "Paris"}`}}}
	for _, cache := range []bool{false, true} {
		warm, err := a.WarmUp(&chat.Request{Messages: first}, reply, cache)
		if err != nil {
			t.Fatal(err)
		}
		if cache {
			a.Remember(reply)
		}
		next, err := a.PrepareWith(&chat.Request{Messages: msgs(t, agentLoop)}, chat.PrepareOptions{PromptCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < len(warm) && n < len(next.IDs) && warm[n] == next.IDs[n] {
			n++
		}
		if n != len(warm) {
			t.Fatalf("cache %v: warm-up diverges from the next prompt at %d of %d", cache, n, len(warm))
		}
		rest := a.Tokenizer.Decode(next.IDs[n:], false)
		if rest != "sunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n" {
			t.Fatalf("cache %v: the next prompt computes %q past the warm-up", cache, rest)
		}
		if got := strings.Contains(next.Prompt, "call the tool"); got != cache {
			t.Fatalf("cache %v: reasoning in the next prompt = %v", cache, got)
		}
	}
}

// TestReasoningMemory: bounded in bytes (least recently used out), in
// time, keyed by content and calls with their arguments as canonical JSON.
func TestReasoningMemory(t *testing.T) {
	now := time.Unix(1000, 0)
	m := chat.NewReasoningMemory(20, time.Minute, func() time.Time { return now })
	m.Remember(chat.Reply{Content: " a ", Reasoning: "0123456789", Calls: []chat.Call{{Name: "f", Arguments: `{"x": 1, "y": [2]}`}}})
	if r, ok := m.Recall("a", []chat.Call{{Name: "f", Arguments: `{"y":[2],"x":1}`}}); !ok || r != "0123456789" {
		t.Fatalf("recall with respaced, reordered arguments = %q, %v", r, ok)
	}
	for _, miss := range [][]chat.Call{nil, {{Name: "g", Arguments: `{"x": 1, "y": [2]}`}}, {{Name: "f", Arguments: `{"x": 2, "y": [2]}`}}} {
		if _, ok := m.Recall("a", miss); ok {
			t.Fatalf("recall with calls %v matched", miss)
		}
	}
	m.Remember(chat.Reply{Content: "b", Reasoning: "abcdefghij"})
	m.Recall("a", []chat.Call{{Name: "f", Arguments: `{"x":1,"y":[2]}`}}) // a is now the most recent
	m.Remember(chat.Reply{Content: "c", Reasoning: "ABCDEFGHIJ"})         // over 20 bytes: b goes
	if _, ok := m.Recall("b", nil); ok {
		t.Fatal("the least recently used entry was kept past the byte bound")
	}
	if _, ok := m.Recall("c", nil); !ok || m.Bytes() != 20 {
		t.Fatalf("c kept: %v, bytes %d", ok, m.Bytes())
	}
	m.Remember(chat.Reply{Content: "big", Reasoning: strings.Repeat("x", 21)})
	if _, ok := m.Recall("big", nil); ok {
		t.Fatal("a reasoning over the whole budget was kept")
	}
	now = now.Add(time.Minute)
	if _, ok := m.Recall("c", nil); ok || m.Bytes() != 10 {
		t.Fatalf("expired entry recalled (%v), bytes %d", ok, m.Bytes())
	}
	var zero chat.ReasoningMemory
	zero.Remember(chat.Reply{Content: "z", Reasoning: "r"})
	if _, ok := zero.Recall("z", nil); ok {
		t.Fatal("the zero memory kept something")
	}
}

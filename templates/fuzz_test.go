package templates_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// knownErrorTypes are the exception types a render may fail with; an
// InternalError (a recovered Go panic) or any non-*Error is a bug.
var knownErrorTypes = map[string]bool{
	"TemplateError": true, "TemplateSyntaxError": true, "TemplateAssertionError": true,
	"TemplateRuntimeError": true, "UndefinedError": true, "TypeError": true, "ValueError": true,
	"SecurityError": true, "ZeroDivisionError": true, "OverflowError": true, "RecursionError": true,
	"IndexError": true, "KeyError": true, "AttributeError": true, "LimitError": true,
	"NotImplementedError": true, "SyntaxError": true, "FilterArgumentError": true,
	"AssertionError": true, "RuntimeError": true,
}

func checkFuzzErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var te *templates.Error
	if !errors.As(err, &te) {
		t.Fatalf("non-template error: %v", err)
	}
	if !knownErrorTypes[te.Type] {
		t.Fatalf("unexpected error type %s: %s", te.Type, te.Message)
	}
}

// inlineChatTemplates are small chat templates in the styles of the
// fixture ones (ChatML with tools and reasoning, Llama 3 with tool calls and
// raise_exception), so FuzzRenderChat runs without fixtures.
var inlineChatTemplates = map[string]string{
	"chatml": `{%- if tools %}<|im_start|>system
# Tools
{% for t in tools %}{{ t | tojson }}
{% endfor %}<|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == "assistant" and m.tool_calls %}<|im_start|>assistant
{% for c in m.tool_calls %}<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif m.role == "assistant" and m.content is string and "</think>" in m.content %}<|im_start|>assistant
{{ m.content.split("</think>")[-1].lstrip("\n") }}<|im_end|>
{% else %}<|im_start|>{{ m.role }}
{{ m.content if m.content is string else m.content | tojson }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}`,
	"llama3": `{{- bos_token }}{%- set ns = namespace(sys="") %}
{%- if messages[0].role == "system" %}{%- set ns.sys = messages[0].content | trim %}{%- set messages = messages[1:] %}{%- endif %}
<|start_header_id|>system<|end_header_id|>

{{ ns.sys }}{% if tools is not none %}{% for t in tools %}{{ t | tojson(indent=4) }}{% endfor %}{% endif %}<|eot_id|>
{%- for m in messages %}
{%- if m.role not in ["user", "assistant", "tool", "system"] %}{{ raise_exception("bad role " ~ m.role) }}{% endif %}
{%- if m.tool_calls is defined and m.tool_calls %}
{%- if m.tool_calls | length != 1 %}{{ raise_exception("one tool call only") }}{% endif %}
{%- set c = m.tool_calls[0].function %}<|start_header_id|>assistant<|end_header_id|>

{"name": "{{ c.name }}", "parameters": {{ c.arguments | tojson }}}<|eot_id|>
{%- elif m.role == "tool" %}<|start_header_id|>ipython<|end_header_id|>

{{ m.content | tojson if m.content is mapping else m.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim if m.content is string else m.content }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`,
}

// compileChatTemplates compiles sources with the fuzz clock and limits, in
// name order.
func compileChatTemplates(t testing.TB, sources map[string]string) []*templates.Template {
	var list []*templates.Template
	for _, name := range sortedNames(sources) {
		tpl, err := templates.Compile(sources[name], templates.WithName(name),
			templates.WithClock(func() time.Time { return time.Date(2025, 1, 15, 10, 30, 0, 0, time.Local) }),
			templates.WithLimits(templates.Limits{MaxOutput: 4 << 20, MaxSteps: 200000}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		list = append(list, tpl)
	}
	return list
}

func addRenderChatSeeds(f *testing.F) {
	f.Add("Hello!", []byte(`[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}}]`), []byte(`{"x": 1.0}`), uint8(0))
	f.Add("{{ raise_exception('boom') }}{% for x in range(99999) %}{% endfor %}", []byte(`null`), []byte(`"{\"a\": 1}"`), uint8(1))
	f.Add("<think>\nr\n</think>\n\nanswer", []byte(`{}`), []byte(`[1, 2]`), uint8(2))
	f.Add("\x00\xff\u2028 é 😀 '\"\\", []byte(`[{"function": {"name": 5, "parameters": {"properties": {"p": {"type": ["string", "null"], "items": {}}}}}}]`), []byte(`{"__class__": 1}`), uint8(3))
	f.Add("", []byte(`[{"type": "function", "function": {"name": "n", "description": null, "parameters": null}}]`), []byte(`null`), uint8(4))
	f.Add("x", []byte(`[1, "a", null, 2.5e300]`), []byte(`{"b": {"c": [{}]}}`), uint8(5))
}

// renderChatFuzz renders arbitrary message contents and tool JSON with one
// of list. A render may fail as jinja2 would (a *Error of a known type) but
// never panics, and message text is data: template syntax inside it is
// never evaluated.
func renderChatFuzz(t *testing.T, list []*templates.Template, content string, toolJSON, argsJSON []byte, which uint8) {
	tools, err := templates.DecodeJSON(toolJSON)
	if err != nil {
		tools = string(toolJSON)
	}
	args, err := templates.DecodeJSON(argsJSON)
	if err != nil {
		args = string(argsJSON)
	}
	msg := func(kv ...any) *templates.Dict {
		d := templates.NewDict(len(kv) / 2)
		for i := 0; i < len(kv); i += 2 {
			d.Set(kv[i].(string), kv[i+1])
		}
		return d
	}
	call := msg("id", "abc123DEF", "type", "function", "function", msg("name", "f", "arguments", args))
	shapes := [][]any{
		{msg("role", "user", "content", content)},
		{msg("role", "system", "content", content), msg("role", "user", "content", content), msg("role", "assistant", "content", content)},
		{msg("role", "user", "content", "q"), msg("role", "assistant", "content", nil, "tool_calls", []any{call}), msg("role", "tool", "tool_call_id", "abc123DEF", "content", content)},
		{msg("role", content, "content", content)},
		{msg("role", "user", "content", args)},
	}
	tpl := list[int(which)%len(list)]
	for i, msgs := range shapes {
		in := templates.ChatInput{Messages: msgs, Tools: tools, AddGenerationPrompt: i%2 == 0}
		if i%3 == 1 {
			in.Tools = nil
		}
		out, err := tpl.RenderChat(in)
		checkFuzzErr(t, err)
		// Message text is data: when a simple chat-ML template renders a
		// user turn, the content appears exactly as given.
		if err == nil && i == 0 && (tpl.Name() == "qwen2.5" || tpl.Name() == "chatml") && !strings.Contains(out, "<|im_start|>user\n"+content+"<|im_end|>") {
			t.Fatalf("content not rendered verbatim: %q", out)
		}
		if _, _, err := tpl.HistoryBoundary(in, out, nil, nil); err != nil {
			checkFuzzErr(t, err)
		}
	}
}

// FuzzRenderChat fuzzes the chat rendering on the inline templates: it
// needs no fixtures.
func FuzzRenderChat(f *testing.F) {
	addRenderChatSeeds(f)
	list := compileChatTemplates(f, inlineChatTemplates)
	f.Fuzz(func(t *testing.T, content string, toolJSON, argsJSON []byte, which uint8) {
		renderChatFuzz(t, list, content, toolJSON, argsJSON, which)
	})
}

// FuzzRenderChatFixtures fuzzes the chat rendering on the 17 fixture
// templates (skipped with a message without fixtures, failed under
// CI=true).
func FuzzRenderChatFixtures(f *testing.F) {
	addRenderChatSeeds(f)
	list := compileChatTemplates(f, loadFixtures(f).sources)
	f.Fuzz(func(t *testing.T, content string, toolJSON, argsJSON []byte, which uint8) {
		renderChatFuzz(t, list, content, toolJSON, argsJSON, which)
	})
}

// FuzzCompileRender compiles arbitrary template sources and renders them
// with a small chat context: no panic, no hang (the render limits hold),
// only jinja2-style errors.
func FuzzCompileRender(f *testing.F) {
	for _, src := range []string{
		"{{ messages[0].content|trim }}{% for m in messages %}{{ loop.index }}{{ m.role|upper }}{% endfor %}",
		"{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
		"{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
		"{{ 'a' * 100000000 }}",
		"{{ ''.__class__.__mro__ }}{{ messages.__class__ }}{{ range.__globals__ }}",
		"{% set ns = namespace(l=[]) %}{% for i in range(30) %}{% set ns.l = ns.l + ns.l + [i] %}{% endfor %}{{ ns.l|length }}",
		"{{ x|tojson(indent=2) }}{{ 2 ** 99999999 }}",
		"{% raw %}{{ x }}{% endraw %}{#- c -#}{%- if true -%} {{- 1 -}} {%+ endif +%}",
		"{{ '%s %d %r' % ('a', 1, none) }}{{ '{0} {x}'.format(1, x=2) }}{{ 1e308 * 10 }}",
		"{% for a, b in [[1]] %}{% endfor %}{{ [1][::0] }}",
	} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4096 {
			return
		}
		tpl, err := templates.Compile(src, templates.WithLimits(templates.Limits{MaxOutput: 1 << 20, MaxSteps: 100000, MaxDepth: 50, MaxRange: 1000}))
		if err != nil {
			checkFuzzErr(t, err)
			return
		}
		msgs, _ := templates.DecodeJSON([]byte(`[{"role": "user", "content": " Hi {{ x }} "}, {"role": "assistant", "content": "ok", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1.0}}}]}]`))
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = tpl.RenderChat(templates.ChatInput{Messages: msgs.([]any), AddGenerationPrompt: true})
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("render did not finish: %q", src)
		}
		checkFuzzErr(t, err)
	})
}

func sortedNames(m map[string]string) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	return names
}

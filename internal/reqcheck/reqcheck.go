// Package reqcheck holds the invariants every API translator's result must
// satisfy, for the translators' fuzz tests: a body either fails with a
// client error (4xx, naming what is wrong) or becomes a chat.Request that
// is well formed and that the preparer renders and tokenizes without a
// server error.
package reqcheck

import (
	"fmt"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// chatTemplate is a ChatML template in the style of Qwen's: tools, tool
// calls with object arguments, tool results, reasoning_content and content
// parts, so translated requests reach every shape a real template reads.
const chatTemplate = `{%- if tools %}<|im_start|>system
{% if messages[0].role == "system" %}{{ messages[0].content }}

{% endif %}# Tools
<tools>{% for t in tools %}
{{ t | tojson }}{% endfor %}
</tools><|im_end|>
{% endif %}
{%- for m in messages %}
{%- if m.role == "system" and tools and loop.first %}
{%- elif m.role == "assistant" %}<|im_start|>assistant
{% if m.reasoning_content is defined and m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{% if m.content is string %}{{ m.content }}{% elif m.content %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}
<tool_call>
{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments | tojson }}}
</tool_call>{% endfor %}{% endif %}<|im_end|>
{% elif m.role == "tool" %}<|im_start|>user
<tool_response>
{{ m.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ m.role }}
{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == "text" %}{{ p.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}{% endif %}`

// roles are the message roles a translated request may hold.
var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// Checker checks translated requests against the invariants; it renders
// them with an inline ChatML template over the demo byte tokenizer, so it
// needs no fixtures.
type Checker struct {
	assets *chat.Assets
}

// New builds a Checker (its tokenizer files go to a temporary directory of
// tb).
func New(tb testing.TB) *Checker {
	tb.Helper()
	dir := tb.TempDir()
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tpl, err := templates.Compile(chatTemplate, templates.WithName("reqcheck-chatml"),
		templates.WithLimits(templates.Limits{MaxOutput: 8 << 20, MaxSteps: 1 << 20}))
	if err != nil {
		tb.Fatal(err)
	}
	return &Checker{assets: &chat.Assets{Tokenizer: tok, Template: tpl}}
}

// Limits are what the translator promises about a request it accepts.
type Limits struct {
	// MaxTokens is the largest max_tokens it lets through.
	MaxTokens int
	// MaxStops is the largest number of stop sequences (0: no limit).
	MaxStops int
}

// Check fails t unless err is a client error (4xx) and r is nil, or err is
// nil and r satisfies the invariants and prepares without a server error.
func (c *Checker) Check(t testing.TB, body []byte, r *chat.Request, err error, lim Limits) {
	t.Helper()
	if err != nil {
		if status, _ := apierr.Classify(err, ""); status < 400 || status > 499 {
			t.Fatalf("body %q: error %v classified as %d, want 4xx", body, err, status)
		}
		if err.Error() == "" {
			t.Fatalf("body %q: an error without a message", body)
		}
		return
	}
	if r == nil {
		t.Fatalf("body %q: no request and no error", body)
	}
	if msg := Invariants(r, lim); msg != "" {
		t.Fatalf("body %q: %s", body, msg)
	}
	if _, err := c.assets.Prepare(r, true); err != nil {
		if status, _ := apierr.Classify(err, "messages"); status < 400 || status > 499 {
			t.Fatalf("body %q: prepare failed with %v, classified as %d, want 4xx", body, err, status)
		}
	}
}

// Invariants returns what is wrong with an accepted request, or "".
func Invariants(r *chat.Request, lim Limits) string {
	if r.IsChat() {
		if len(r.Messages) == 0 {
			return "a chat request without messages"
		}
		if r.Prompt != "" || r.PromptIDs != nil {
			return "a chat request with a raw prompt"
		}
		for i, m := range r.Messages {
			d, ok := m.(*templates.Dict)
			if !ok {
				return fmt.Sprintf("messages[%d] is %T, not a dict", i, m)
			}
			role, _ := d.Get("role")
			if rs, ok := role.(string); !ok || !roles[rs] {
				return fmt.Sprintf("messages[%d] has role %v", i, role)
			}
			switch content, _ := d.Get("content"); content.(type) {
			case nil, string, []any:
			default:
				return fmt.Sprintf("messages[%d] has content of type %T", i, content)
			}
		}
	} else if r.Prompt == "" && len(r.PromptIDs) == 0 {
		return "a completion request without a prompt"
	}
	if r.MaxTokens < 1 || r.MaxTokens > lim.MaxTokens {
		return fmt.Sprintf("max tokens %d outside [1, %d]", r.MaxTokens, lim.MaxTokens)
	}
	if err := r.Sampling.Validate(); err != nil {
		return fmt.Sprintf("invalid sampling parameters: %v", err)
	}
	if lim.MaxStops > 0 && len(r.Stop) > lim.MaxStops {
		return fmt.Sprintf("%d stop sequences, at most %d allowed", len(r.Stop), lim.MaxStops)
	}
	for i, s := range r.Stop {
		if s == "" {
			return fmt.Sprintf("stop[%d] is empty", i)
		}
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 || (r.TopLogprobs > 0 && !r.Logprobs) {
		return fmt.Sprintf("top_logprobs %d (logprobs %v)", r.TopLogprobs, r.Logprobs)
	}
	return ""
}

// Assets are the tokenizer and template the Checker prepares with.
func (c *Checker) Assets() *chat.Assets { return c.assets }

package chat

import (
	"regexp"

	"github.com/troupe-ai/troupe/templates"
)

// Thinking is a request's reasoning switch in API-neutral form: OpenAI
// Responses' reasoning.effort and Anthropic's thinking map to it, and
// Prepare passes it to the template through the variable the template
// reads, when it reads one.
type Thinking struct {
	Enabled bool
	// Effort is "low", "medium" or "high" ("" leaves the template's default).
	Effort string
}

// Template variables that switch thinking, as the fixture templates spell
// them: Qwen3 reads enable_thinking, DeepSeek V3.1 and Granite 3.3 read
// thinking, gpt-oss reads reasoning_effort.
var (
	enableThinkingVar = regexp.MustCompile(`\benable_thinking\b`)
	thinkingVar       = regexp.MustCompile(`(?:\b(?:if|elif|not|and|or)\s+thinking\b|[^.\w\[]thinking\s+is\s+(?:not\s+)?defined)`)
	effortVar         = regexp.MustCompile(`\breasoning_effort\b`)
)

// thinkingKwargs returns the template variables with r's thinking switch
// set in the variable tmpl reads. Variables the request already sets
// (chat_template_kwargs) win; a template without a switch gets kw as is.
func thinkingKwargs(src string, th *Thinking, kw *templates.Dict) *templates.Dict {
	if th == nil {
		return kw
	}
	set := map[string]any{}
	switch {
	case enableThinkingVar.MatchString(src):
		set["enable_thinking"] = th.Enabled
	case thinkingVar.MatchString(src):
		set["thinking"] = th.Enabled
	}
	if effortVar.MatchString(src) && th.Effort != "" {
		set["reasoning_effort"] = th.Effort
	}
	if len(set) == 0 {
		return kw
	}
	out := templates.NewDict(len(set))
	if kw != nil {
		kw.Range(func(k, v any) bool {
			if s, ok := k.(string); ok {
				out.Set(s, v)
				delete(set, s)
			}
			return true
		})
	}
	for _, name := range []string{"enable_thinking", "thinking", "reasoning_effort"} {
		if v, ok := set[name]; ok {
			out.Set(name, v)
		}
	}
	return out
}

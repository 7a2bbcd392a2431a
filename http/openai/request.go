package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/structured"
	"github.com/troupe-ai/troupe/http/turn"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
)

// bad is a 400 naming the offending field.
func bad(param, format string, args ...any) error { return apierr.Bad(param, format, args...) }

// common are the sampling fields both OpenAI routes share (plus vLLM's
// top_k, min_p and repetition_penalty extensions).
type common struct {
	Model             *string         `json:"model"`
	MaxTokens         *int            `json:"max_tokens"`
	Temperature       *float64        `json:"temperature"`
	TopP              *float64        `json:"top_p"`
	TopK              *int            `json:"top_k"`
	MinP              *float64        `json:"min_p"`
	RepetitionPenalty *float64        `json:"repetition_penalty"`
	PresencePenalty   *float64        `json:"presence_penalty"`
	FrequencyPenalty  *float64        `json:"frequency_penalty"`
	Seed              *int64          `json:"seed"`
	N                 *int            `json:"n"`
	Stop              json.RawMessage `json:"stop"`
	Stream            bool            `json:"stream"`
	StreamOptions     *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	IgnoreEOS bool `json:"ignore_eos"`
	// Structured output: response_format and the vLLM and llama-server
	// extensions.
	structured.Fields
}

type chatRequest struct {
	common
	Messages            json.RawMessage `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
	PromptCacheKey      string          `json:"prompt_cache_key"`
}

type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
}

// maxTokensCap bounds max_tokens (the engine also checks the model's positions).
const maxTokensCap = 1 << 20

// sampling validates the shared fields into r.
func (c *common) sampling(r *chat.Request, defaultMax int) error {
	if c.N != nil && (*c.N < 1 || *c.N > turn.MaxChoices) {
		return bad("n", "n must be between 1 and %d, got %d", turn.MaxChoices, *c.N)
	}
	// An unset max_tokens is an upper bound lowered to the context the
	// prompt leaves (as vLLM's default), never a 400.
	r.MaxTokens, r.FitMaxTokens = defaultMax, c.MaxTokens == nil
	if c.MaxTokens != nil {
		r.MaxTokens = *c.MaxTokens
	}
	if r.MaxTokens < 1 || r.MaxTokens > maxTokensCap {
		return bad("max_tokens", "max_tokens must be between 1 and %d, got %d", maxTokensCap, r.MaxTokens)
	}
	format, err := c.Fields.Spec()
	if err != nil {
		return err
	}
	r.Format = format
	p := sample.Params{Temperature: 1}
	var set sample.Fields // those the model's defaults must not replace
	for _, f := range []struct {
		name   string
		v      *float64
		lo, hi float64
		dst    *float32
		field  sample.Fields
	}{
		{"temperature", c.Temperature, 0, 2, &p.Temperature, sample.FieldTemperature},
		{"top_p", c.TopP, 0, 1, &p.TopP, sample.FieldTopP},
		{"min_p", c.MinP, 0, 1, &p.MinP, sample.FieldMinP},
		{"repetition_penalty", c.RepetitionPenalty, 0, 2, &p.RepetitionPenalty, sample.FieldRepetitionPenalty},
		{"presence_penalty", c.PresencePenalty, -2, 2, &p.PresencePenalty, 0},
		{"frequency_penalty", c.FrequencyPenalty, -2, 2, &p.FrequencyPenalty, 0},
	} {
		if err := apierr.Number(f.name, f.v, f.lo, f.hi, f.dst); err != nil {
			return err
		}
		if f.v != nil {
			set |= f.field
		}
	}
	if c.RepetitionPenalty != nil && *c.RepetitionPenalty <= 0 {
		return bad("repetition_penalty", "repetition_penalty must be > 0 (1 is no penalty), got %g", *c.RepetitionPenalty)
	}
	if err := apierr.TopK(c.TopK, &p.TopK); err != nil {
		return err
	}
	if c.TopK != nil {
		set |= sample.FieldTopK
	}
	if c.Seed != nil {
		p.Seed, p.HasSeed = uint64(*c.Seed), true
	}
	if err := p.Validate(); err != nil {
		return bad("", "%v", err)
	}
	r.Sampling, r.SamplingSet = p, set
	r.IgnoreEOS = c.IgnoreEOS
	stop, err := stops(c.Stop)
	if err != nil {
		return err
	}
	r.Stop = stop
	return nil
}

func stops(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, bad("stop", "stop must be a string or an array of strings")
	}
	if len(list) > 4 {
		return nil, bad("stop", "stop takes at most 4 sequences, got %d", len(list))
	}
	out := list[:0]
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

var roles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// chatFromRequest validates an OpenAI chat request and translates it.
func chatFromRequest(req *chatRequest) (*chat.Request, error) {
	r := &chat.Request{}
	maxTok := 0
	if req.MaxCompletionTokens != nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	if req.MaxTokens == nil {
		maxTok = 512
	}
	if err := req.sampling(r, maxTok); err != nil {
		return nil, err
	}
	list, err := apierr.Array(req.Messages, "messages")
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, bad("messages", "messages is required")
	}
	if len(list) == 0 {
		return nil, bad("messages", "messages must not be empty")
	}
	for i, m := range list {
		d, ok := m.(*templates.Dict)
		if !ok {
			return nil, bad(fmt.Sprintf("messages[%d]", i), "messages[%d] must be an object", i)
		}
		if err := normalizeMessage(d, i); err != nil {
			return nil, err
		}
	}
	r.Messages = list
	tools, err := apierr.Array(req.Tools, "tools")
	if err != nil {
		return nil, err
	}
	names, err := validateTools(tools)
	if err != nil {
		return nil, err
	}
	mode, name, err := toolChoice(req.ToolChoice, names)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 && mode != "none" {
		r.Tools = tools
		r.ToolChoice, r.ToolName = mode, name
		r.OneToolCall = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
		for n, strict := range names {
			if strict {
				if r.StrictTools == nil {
					r.StrictTools = map[string]bool{}
				}
				r.StrictTools[n] = true
			}
		}
	} else if mode == chat.ToolRequired || mode == chat.ToolNamed {
		return nil, bad("tool_choice", "tool_choice %q needs tools", req.ToolChoice)
	}
	if len(req.ChatTemplateKwargs) > 0 && string(req.ChatTemplateKwargs) != "null" {
		kw, err := templates.DecodeJSON(req.ChatTemplateKwargs)
		if err != nil {
			return nil, bad("chat_template_kwargs", "chat_template_kwargs: %v", err)
		}
		d, ok := kw.(*templates.Dict)
		if !ok {
			return nil, bad("chat_template_kwargs", "chat_template_kwargs must be an object")
		}
		r.Kwargs = d
	}
	r.Logprobs = req.Logprobs
	if err := apierr.PromptCacheKey(req.PromptCacheKey); err != nil {
		return nil, err
	}
	r.CacheScope = req.PromptCacheKey
	if req.TopLogprobs != nil {
		if *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			return nil, bad("top_logprobs", "top_logprobs must be between 0 and 20, got %d", *req.TopLogprobs)
		}
		if !req.Logprobs && *req.TopLogprobs > 0 {
			return nil, bad("top_logprobs", "top_logprobs requires logprobs: true")
		}
		r.TopLogprobs = *req.TopLogprobs
	}
	return r, nil
}

// normalizeMessage checks a message and reshapes it the way templates
// expect: text parts joined into one string, tool-call arguments parsed from
// their JSON string into an object.
func normalizeMessage(d *templates.Dict, i int) error {
	at := func(f string) string { return fmt.Sprintf("messages[%d].%s", i, f) }
	role, _ := d.Get("role")
	rs, ok := role.(string)
	if !ok || !roles[rs] {
		return bad(at("role"), "%s must be one of system, developer, user, assistant, tool; got %v", at("role"), role)
	}
	content, _ := d.Get("content")
	switch c := content.(type) {
	case string:
	case nil: // an assistant message may carry only tool calls
		if rs != "assistant" {
			return bad(at("content"), "%s is required", at("content"))
		}
	case []any:
		var texts []string
		for j, p := range c {
			pd, ok := p.(*templates.Dict)
			if !ok {
				return bad(fmt.Sprintf("%s[%d]", at("content"), j), "content parts must be objects")
			}
			t, _ := pd.Get("type")
			if t != "text" {
				pat := fmt.Sprintf("%s[%d]", at("content"), j)
				ts, _ := t.(string)
				if strings.Contains(ts, "image") {
					return bad(pat, "%s: %v", pat, chat.ErrImageInput)
				}
				return bad(pat+".type", "%s.type %s is not supported: this server serves a text-only model; send text parts only", pat, show(t))
			}
			txt, ok := pd.Get("text")
			s, isStr := txt.(string)
			if !ok || !isStr {
				return bad(fmt.Sprintf("%s[%d].text", at("content"), j), "a text part needs a string text")
			}
			texts = append(texts, s)
		}
		d.Set("content", strings.Join(texts, "\n"))
	default:
		return bad(at("content"), "%s must be a string or an array of content parts", at("content"))
	}
	if id, ok := d.Get("tool_call_id"); ok && id != nil {
		if _, isStr := id.(string); !isStr {
			return bad(at("tool_call_id"), "%s must be a string", at("tool_call_id"))
		}
	}
	if calls, _ := d.Get("tool_calls"); calls != nil {
		list, ok := calls.([]any)
		if !ok {
			return bad(at("tool_calls"), "%s must be an array", at("tool_calls"))
		}
		if rs != "assistant" {
			return bad(at("tool_calls"), "%s: only assistant messages carry tool calls", at("tool_calls"))
		}
		for k, c := range list {
			cat := fmt.Sprintf("%s[%d]", at("tool_calls"), k)
			cd, ok := c.(*templates.Dict)
			if !ok {
				return bad(cat, "%s must be an object", cat)
			}
			if id, ok := cd.Get("id"); ok {
				if _, isStr := id.(string); !isStr {
					return bad(cat+".id", "%s.id must be a string", cat)
				}
			}
			fn, _ := cd.Get("function")
			fd, ok := fn.(*templates.Dict)
			if !ok {
				return bad(cat+".function", "%s.function must be an object with a name and arguments", cat)
			}
			if name, _ := fd.Get("name"); !isNonEmptyString(name) {
				return bad(cat+".function.name", "%s.function.name must be a non-empty string", cat)
			}
			switch args, _ := fd.Get("arguments"); args.(type) {
			case nil, string, *templates.Dict:
			default:
				return bad(cat+".function.arguments", "%s.function.arguments must be a JSON string", cat)
			}
		}
	}
	return nil
}

// completionFromRequest validates an OpenAI completions request.
func completionFromRequest(req *completionRequest) (*chat.Request, error) {
	r := &chat.Request{}
	if err := req.sampling(r, 16); err != nil {
		return nil, err
	}
	if req.Echo && req.Logprobs != nil {
		// vLLM answers echo with logprobs with the prompt tokens' logprobs,
		// which the engine does not compute.
		return nil, bad("echo", "echo with logprobs is not supported: it would need the prompt tokens' logprobs; send one or the other")
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 5 {
			return nil, bad("logprobs", "logprobs must be between 0 and 5, got %d", *req.Logprobs)
		}
		r.Logprobs, r.TopLogprobs = true, *req.Logprobs
	}
	raw := req.Prompt
	if len(raw) == 0 || string(raw) == "null" {
		return nil, bad("prompt", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		r.Prompt = s
	} else {
		var list []string
		var ids []int32
		switch {
		case json.Unmarshal(raw, &list) == nil && len(list) == 1:
			r.Prompt = list[0]
		case json.Unmarshal(raw, &ids) == nil && len(ids) > 0:
			r.PromptIDs = ids
		default:
			return nil, bad("prompt", "prompt must be a string, an array of one string, or an array of token ids")
		}
	}
	if r.Prompt == "" && r.PromptIDs == nil {
		return nil, bad("prompt", "prompt must not be empty")
	}
	return r, nil
}

func isNonEmptyString(v any) bool {
	s, ok := v.(string)
	return ok && s != ""
}

// show is a JSON value for an error message.
func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%v", v)
}

// validateTools checks OpenAI function tools: objects of type "function"
// with a function object naming it. It returns the names, each mapped to
// whether the tool is strict (its arguments must follow its schema).
func validateTools(tools []any) (map[string]bool, error) {
	names := map[string]bool{}
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		d, ok := t.(*templates.Dict)
		if !ok {
			return nil, bad(at, "%s must be an object like {\"type\": \"function\", \"function\": {\"name\": ...}}", at)
		}
		if typ, _ := d.Get("type"); typ != "function" {
			return nil, bad(at+".type", "%s.type must be \"function\", got %s", at, show(typ))
		}
		fn, _ := d.Get("function")
		fd, ok := fn.(*templates.Dict)
		if !ok {
			return nil, bad(at+".function", "%s.function must be an object", at)
		}
		name, _ := fd.Get("name")
		if !isNonEmptyString(name) {
			return nil, bad(at+".function.name", "%s.function.name must be a non-empty string", at)
		}
		if p, ok := fd.Get("parameters"); ok && p != nil {
			if _, isObj := p.(*templates.Dict); !isObj {
				return nil, bad(at+".function.parameters", "%s.function.parameters must be a JSON schema object", at)
			}
		}
		strict, _ := fd.Get("strict")
		if strict != nil {
			if _, ok := strict.(bool); !ok {
				return nil, bad(at+".function.strict", "%s.function.strict must be a boolean", at)
			}
		}
		if _, dup := names[name.(string)]; dup {
			return nil, bad(at+".function.name", "%s.function.name %q names another tool too", at, name)
		}
		names[name.(string)] = strict == true
	}
	return names, nil
}

// toolChoice validates tool_choice ("none", "auto", "required" or
// {"type": "function", "function": {"name": ...}} naming one of the tools)
// and returns its mode ("none", chat.ToolAuto, chat.ToolRequired or
// chat.ToolNamed with the name). "required" and a named function are
// enforced: the reply is tool calls.
func toolChoice(raw json.RawMessage, names map[string]bool) (mode, name string, err error) {
	const want = "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}"
	if len(raw) == 0 || string(raw) == "null" {
		return chat.ToolAuto, "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "none":
			return "none", "", nil
		case "auto":
			return chat.ToolAuto, "", nil
		case "required":
			return chat.ToolRequired, "", nil
		}
		return "", "", bad("tool_choice", want+"; got %q", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function == nil || named.Function.Name == "" {
		return "", "", bad("tool_choice", want)
	}
	if _, ok := names[named.Function.Name]; !ok {
		return "", "", bad("tool_choice", "tool_choice names the function %q, which is not among the tools", named.Function.Name)
	}
	return chat.ToolNamed, named.Function.Name, nil
}

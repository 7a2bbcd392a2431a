package responses

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/structured"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
)

// request is a Responses API body. Fields troupe cannot honour get a 400
// rather than silent neglect (background, non-text formats, non-function
// tools).
type request struct {
	Model              *string           `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              json.RawMessage   `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Reasoning          *reasoning        `json:"reasoning"`
	Store              *bool             `json:"store"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Stream             bool              `json:"stream"`
	Metadata           map[string]string `json:"metadata"`
	User               *string           `json:"user"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Truncation         *string           `json:"truncation"`
	Include            []string          `json:"include"`
	TopLogprobs        *int              `json:"top_logprobs"`
	Background         bool              `json:"background"`
	PromptCacheKey     string            `json:"prompt_cache_key"`
	Text               *struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

type reasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// Bounds on what a request stores beyond its input (OpenAI's for
// metadata).
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
	maxUser          = 256
)

// checkStored bounds the client-controlled fields a response keeps or
// echoes that no other check bounds: metadata (OpenAI's limits), user and
// prompt_cache_key (lengths in characters), reasoning.summary (its
// documented values).
func checkStored(req *request) error {
	if len(req.Metadata) > maxMetadataPairs {
		return bad("metadata", "metadata may have at most %d key-value pairs, got %d", maxMetadataPairs, len(req.Metadata))
	}
	for k, v := range req.Metadata {
		if n := utf8.RuneCountInString(k); n > maxMetadataKey {
			return bad("metadata", "metadata keys may have at most %d characters; key %.20q... has %d", maxMetadataKey, k, n)
		}
		if n := utf8.RuneCountInString(v); n > maxMetadataValue {
			return bad("metadata", "metadata values may have at most %d characters; the value of %q has %d", maxMetadataValue, k, n)
		}
	}
	if req.User != nil {
		if n := utf8.RuneCountInString(*req.User); n > maxUser {
			return bad("user", "user may have at most %d characters, got %d", maxUser, n)
		}
	}
	if err := apierr.PromptCacheKey(req.PromptCacheKey); err != nil {
		return err
	}
	if req.Reasoning != nil && req.Reasoning.Summary != nil {
		switch *req.Reasoning.Summary {
		case "auto", "concise", "detailed":
		default:
			return bad("reasoning.summary", "reasoning.summary must be one of auto, concise, detailed; got %.40q", *req.Reasoning.Summary)
		}
	}
	return nil
}

// defaultMaxOutput bounds a response that sets no max_output_tokens.
const defaultMaxOutput = 4096

const maxOutputCap = 1 << 20

func bad(param, format string, args ...any) error { return apierr.Bad(param, format, args...) }

// translate validates req and builds the internal request from the
// conversation so far (prior: a previous response's messages, nil when
// none) and req's input items (item references resolved).
func translate(req *request, prior, items []any) (*chat.Request, []any, error) {
	if err := checkStored(req); err != nil {
		return nil, nil, err
	}
	r := &chat.Request{MaxTokens: defaultMaxOutput, FitMaxTokens: true}
	if req.MaxOutputTokens != nil {
		r.MaxTokens, r.FitMaxTokens = *req.MaxOutputTokens, false
		if r.MaxTokens < 1 || r.MaxTokens > maxOutputCap {
			return nil, nil, bad("max_output_tokens", "max_output_tokens must be between 1 and %d, got %d", maxOutputCap, r.MaxTokens)
		}
	}
	p := sample.Params{Temperature: 1}
	if err := apierr.Number("temperature", req.Temperature, 0, 2, &p.Temperature); err != nil {
		return nil, nil, err
	}
	if err := apierr.Number("top_p", req.TopP, 0, 1, &p.TopP); err != nil {
		return nil, nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, nil, bad("", "%v", err)
	}
	r.Sampling = p
	// What the request sets, the model's defaults do not replace.
	if req.Temperature != nil {
		r.SamplingSet |= sample.FieldTemperature
	}
	if req.TopP != nil {
		r.SamplingSet |= sample.FieldTopP
	}
	if err := logprobs(req, r); err != nil {
		return nil, nil, err
	}
	r.CacheScope = req.PromptCacheKey
	if req.Background {
		return nil, nil, bad("background", "background responses are not supported; omit background or set it to false")
	}
	if req.Text != nil && len(req.Text.Format) > 0 && string(req.Text.Format) != "null" {
		format, err := structured.TextFormat(req.Text.Format)
		if err != nil {
			return nil, nil, err
		}
		r.Format = format
	}
	if req.Truncation != nil && *req.Truncation != "disabled" && *req.Truncation != "auto" {
		return nil, nil, bad("truncation", "truncation must be \"auto\" or \"disabled\", got %q", *req.Truncation)
	}
	if req.Reasoning != nil && req.Reasoning.Effort != nil {
		switch e := *req.Reasoning.Effort; e {
		case "none", "minimal":
			r.Thinking = &chat.Thinking{Enabled: false, Effort: "low"}
		case "low", "medium", "high":
			r.Thinking = &chat.Thinking{Enabled: true, Effort: e}
		default:
			return nil, nil, bad("reasoning.effort", "reasoning.effort must be one of none, minimal, low, medium, high; got %q", e)
		}
	}
	tools, err := functionTools(req.Tools)
	if err != nil {
		return nil, nil, err
	}
	choice, name, err := toolChoice(req.ToolChoice, tools)
	if err != nil {
		return nil, nil, err
	}
	if choice != "none" && len(tools) > 0 {
		r.Tools = tools
		r.ToolChoice, r.ToolName, r.ToolParamsField = choice, name, "tools[%d].parameters"
		r.StrictTools = structured.StrictTools(req.Tools)
		r.OneToolCall = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	} else if choice == chat.ToolRequired || choice == chat.ToolNamed {
		return nil, nil, bad("tool_choice", "tool_choice forces a tool call, but there are no tools")
	}
	input, err := inputMessages(items)
	if err != nil {
		return nil, nil, err
	}
	conv := append(append([]any{}, prior...), input...)
	msgs := conv
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]any{message("system", *req.Instructions)}, conv...)
	}
	if len(msgs) == 0 {
		return nil, nil, bad("input", "input is required")
	}
	r.Messages = msgs
	return r, conv, nil
}

// includeLogprobs is the include value that asks for the logprobs of the
// output text.
const includeLogprobs = "message.output_text.logprobs"

// logprobs checks top_logprobs (0 to 20) and, when include asks for
// message.output_text.logprobs, has the generation report each token's
// log-probability with that many alternatives. As OpenAI's, top_logprobs
// alone asks for nothing.
func logprobs(req *request, r *chat.Request) error {
	top := 0
	if req.TopLogprobs != nil {
		if top = *req.TopLogprobs; top < 0 || top > 20 {
			return bad("top_logprobs", "top_logprobs must be between 0 and 20, got %d", top)
		}
	}
	if slices.Contains(req.Include, includeLogprobs) {
		r.Logprobs, r.TopLogprobs = true, top
	}
	return nil
}

// functionTools turns Responses' flat function tools into the chat
// completions shape templates render ({"type": "function", "function":
// {...}}).
func functionTools(raw json.RawMessage) ([]any, error) {
	list, err := apierr.Array(raw, "tools")
	if err != nil || list == nil {
		return nil, err
	}
	out := make([]any, 0, len(list))
	for i, t := range list {
		at := fmt.Sprintf("tools[%d]", i)
		d, ok := t.(*templates.Dict)
		if !ok {
			return nil, bad(at, "%s must be an object", at)
		}
		if typ, _ := d.Get("type"); typ != "function" {
			return nil, bad(at+".type", "%s.type %v is not supported; only function tools", at, typ)
		}
		name, _ := d.Get("name")
		if s, ok := name.(string); !ok || s == "" {
			return nil, bad(at+".name", "%s.name must be a non-empty string", at)
		}
		fn := templates.NewDict(3)
		fn.Set("name", name)
		if desc, ok := d.Get("description"); ok && desc != nil {
			fn.Set("description", desc)
		}
		if params, ok := d.Get("parameters"); ok && params != nil {
			fn.Set("parameters", params)
		}
		tool := templates.NewDict(2)
		tool.Set("type", "function")
		tool.Set("function", fn)
		out = append(out, tool)
	}
	return out, nil
}

// toolChoice validates tool_choice and returns its mode: "none",
// chat.ToolAuto (also when absent), chat.ToolRequired, or chat.ToolNamed
// with the function's name. The last two are enforced: the reply is tool
// calls.
func toolChoice(raw json.RawMessage, tools []any) (mode, name string, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return chat.ToolAuto, "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto":
			return chat.ToolAuto, "", nil
		case "none":
			return "none", "", nil
		case "required":
			return chat.ToolRequired, "", nil
		}
		return "", "", bad("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or a function; got %q", s)
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
		return "", "", bad("tool_choice", "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}")
	}
	for _, t := range tools {
		fn, _ := t.(*templates.Dict).Get("function")
		if n, _ := fn.(*templates.Dict).Get("name"); n == named.Name {
			return chat.ToolNamed, named.Name, nil
		}
	}
	return "", "", bad("tool_choice", "tool_choice names %q, which is not among the tools", named.Name)
}

func message(role string, content any) *templates.Dict {
	d := templates.NewDict(2)
	d.Set("role", role)
	d.Set("content", content)
	return d
}

var inputRoles = map[string]bool{"user": true, "system": true, "developer": true, "assistant": true}

// inputItems decodes input (a string, or a list of items) into template
// values, one per item, and the JSON of each (a string is one user
// message). An item_reference (see isReference) is replaced by the item it names, which
// resolve finds among the tenant's stored responses; an unknown id is a 400
// naming input[i].id.
func inputItems(raw json.RawMessage, resolve func(id string) (json.RawMessage, bool)) ([]any, []json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		m := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
		js, err := json.Marshal(m)
		if err != nil {
			return nil, nil, fmt.Errorf("input: %w", err)
		}
		return []any{message("user", text)}, []json.RawMessage{js}, nil
	}
	v, err := templates.DecodeJSON(raw)
	if err != nil {
		return nil, nil, bad("input", "input: %v", err)
	}
	items, ok := v.([]any)
	var raws []json.RawMessage
	if !ok || json.Unmarshal(raw, &raws) != nil || len(raws) != len(items) {
		return nil, nil, bad("input", "input must be a string or an array of items")
	}
	for i, it := range items {
		d, ok := it.(*templates.Dict)
		if !ok {
			continue // inputMessages names it
		}
		if !isReference(d) {
			continue
		}
		at := fmt.Sprintf("input[%d].id", i)
		idv, _ := d.Get("id")
		id, ok := idv.(string)
		if !ok || id == "" {
			return nil, nil, bad(at, "%s: an item_reference needs a non-empty string id", at)
		}
		js, ok := resolve(id)
		if !ok {
			return nil, nil, bad(at, "%s: item %q not found among this key's stored responses (never stored, expired, or deleted)", at, id)
		}
		if items[i], err = templates.DecodeJSON(js); err != nil {
			return nil, nil, fmt.Errorf("stored item %s: %w", id, err)
		}
		raws[i] = js
	}
	return items, raws, nil
}

// isReference reports whether an input item is an item_reference: its
// type says so, or (as OpenAI's clients send it, type being optional) it
// has no type and no role, only an id.
func isReference(d *templates.Dict) bool {
	typ, hasType := d.Get("type")
	if hasType && typ != nil {
		return typ == "item_reference"
	}
	_, hasRole := d.Get("role")
	_, hasID := d.Get("id")
	return !hasRole && hasID
}

// inputMessages translates input items into template messages: messages
// with text parts, function calls (joined onto one assistant message with
// tool_calls, as chat templates expect), function call outputs (tool
// messages) and reasoning (the next assistant message's
// reasoning_content).
func inputMessages(items []any) ([]any, error) {
	var out []any
	var reasoningText string
	names := map[string]any{} // call_id → function name, for tool messages
	lastAssistant := func() *templates.Dict {
		if len(out) == 0 {
			return nil
		}
		d := out[len(out)-1].(*templates.Dict)
		if role, _ := d.Get("role"); role != "assistant" {
			return nil
		}
		return d
	}
	for i, it := range items {
		at := fmt.Sprintf("input[%d]", i)
		d, ok := it.(*templates.Dict)
		if !ok {
			return nil, bad(at, "%s must be an object", at)
		}
		typ, _ := d.Get("type")
		if typ == nil {
			typ = "message"
		}
		switch typ {
		case "message":
			role, _ := d.Get("role")
			rs, _ := role.(string)
			if !inputRoles[rs] {
				return nil, bad(at+".role", "%s.role must be one of user, system, developer, assistant; got %v", at, role)
			}
			content, err := messageText(d, at)
			if err != nil {
				return nil, err
			}
			m := message(rs, content)
			if rs == "assistant" && reasoningText != "" {
				m.Set("reasoning_content", reasoningText)
				reasoningText = ""
			}
			out = append(out, m)
		case "function_call":
			callID, _ := d.Get("call_id")
			name, _ := d.Get("name")
			args, _ := d.Get("arguments")
			cs, ok1 := callID.(string)
			ns, ok2 := name.(string)
			as, ok3 := args.(string)
			if !ok1 || !ok2 || !ok3 || cs == "" || ns == "" {
				return nil, bad(at, "%s: a function_call needs string call_id, name and arguments", at)
			}
			var parsed any = as
			if obj, err := templates.DecodeJSON([]byte(as)); err == nil {
				parsed = obj
			}
			fn := templates.NewDict(2)
			fn.Set("name", ns)
			fn.Set("arguments", parsed)
			call := templates.NewDict(3)
			call.Set("id", cs)
			call.Set("type", "function")
			call.Set("function", fn)
			names[cs] = ns
			m := lastAssistant()
			if m == nil {
				m = message("assistant", "")
				if reasoningText != "" {
					m.Set("reasoning_content", reasoningText)
					reasoningText = ""
				}
				out = append(out, m)
			}
			calls, _ := m.Get("tool_calls")
			list, _ := calls.([]any)
			m.Set("tool_calls", append(list, call))
		case "function_call_output":
			callID, _ := d.Get("call_id")
			cs, ok := callID.(string)
			if !ok || cs == "" {
				return nil, bad(at+".call_id", "%s.call_id must be a non-empty string", at)
			}
			output, _ := d.Get("output")
			os, ok := output.(string)
			if !ok {
				return nil, bad(at+".output", "%s.output must be a string", at)
			}
			m := message("tool", os)
			m.Set("tool_call_id", cs)
			if n, ok := names[cs]; ok {
				m.Set("name", n)
			}
			out = append(out, m)
		case "reasoning":
			reasoningText += reasoningItemText(d)
		default:
			return nil, bad(at+".type", "%s.type %v is not supported; use message, function_call, function_call_output, reasoning or item_reference", at, typ)
		}
	}
	return out, nil
}

// messageText joins a message item's text parts (input_text, output_text
// and plain text); other parts (images, files) are refused.
func messageText(d *templates.Dict, at string) (string, error) {
	content, _ := d.Get("content")
	switch c := content.(type) {
	case string:
		return c, nil
	case []any:
		var texts []string
		for j, p := range c {
			pat := fmt.Sprintf("%s.content[%d]", at, j)
			pd, ok := p.(*templates.Dict)
			if !ok {
				return "", bad(pat, "%s must be an object", pat)
			}
			switch t, _ := pd.Get("type"); t {
			case "input_text", "output_text", "text":
				txt, _ := pd.Get("text")
				s, ok := txt.(string)
				if !ok {
					return "", bad(pat+".text", "%s.text must be a string", pat)
				}
				texts = append(texts, s)
			case "refusal":
				txt, _ := pd.Get("refusal")
				s, _ := txt.(string)
				texts = append(texts, s)
			case "input_image":
				return "", bad(pat, "%s: %v", pat, chat.ErrImageInput)
			default:
				return "", bad(pat+".type", "%s.type %v is not supported; this server takes text parts only", pat, t)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", bad(at+".content", "%s.content must be a string or an array of content parts", at)
}

// reasoningItemText is a reasoning item's text: its reasoning_text content
// if it carries one, else its summary.
func reasoningItemText(d *templates.Dict) string {
	var b strings.Builder
	for _, field := range []string{"content", "summary"} {
		v, _ := d.Get(field)
		list, _ := v.([]any)
		for _, p := range list {
			if pd, ok := p.(*templates.Dict); ok {
				if s, ok := pd.Get("text"); ok {
					if str, ok := s.(string); ok {
						b.WriteString(str)
					}
				}
			}
		}
		if b.Len() > 0 {
			break
		}
	}
	return b.String()
}

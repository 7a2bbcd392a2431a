package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/structured"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
)

// bad is a 400 naming the offending field; the message starts with the
// field's path, as Anthropic's do.
func bad(param, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return apierr.Bad(param, "%s", msg)
}

// messagesRequest is the body of POST /v1/messages (and of count_tokens,
// where max_tokens may be left out). Fields the server cannot honour but
// that change nothing about the answer's shape (metadata, service_tier)
// are accepted and ignored; cache_control on blocks is honoured (see
// cache.go).
type messagesRequest struct {
	Model         *string         `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Messages      json.RawMessage `json:"messages"`
	System        json.RawMessage `json:"system"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	Stream        bool            `json:"stream"`
	Metadata      json.RawMessage `json:"metadata"`
	Tools         json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Thinking      json.RawMessage `json:"thinking"`
	// OutputFormat is the structured-outputs beta's {"type":
	// "json_schema", "schema": {...}}.
	OutputFormat json.RawMessage `json:"output_format"`
}

// maxTokensCap bounds max_tokens (the engine also checks the model's
// positions).
const maxTokensCap = 1 << 20

// minThinkingBudget is Anthropic's lower bound on thinking.budget_tokens.
const minThinkingBudget = 1024

// toRequest validates a Messages body and translates it into the internal
// request. requireMax is false for count_tokens, which takes the same body
// without max_tokens.
func toRequest(req *messagesRequest, requireMax bool) (*chat.Request, error) {
	r := &chat.Request{MaxTokens: 1}
	switch {
	case req.MaxTokens != nil:
		if *req.MaxTokens < 1 || *req.MaxTokens > maxTokensCap {
			return nil, bad("max_tokens", "must be between 1 and %d, got %d", maxTokensCap, *req.MaxTokens)
		}
		r.MaxTokens = *req.MaxTokens
	case requireMax:
		return nil, bad("max_tokens", "field required")
	}
	if err := sampling(req, r); err != nil {
		return nil, err
	}
	if err := metadata(req.Metadata); err != nil {
		return nil, err
	}
	for _, s := range req.StopSequences {
		if s != "" {
			r.Stop = append(r.Stop, s)
		}
	}
	th, err := thinking(req.Thinking, req.MaxTokens)
	if err != nil {
		return nil, err
	}
	r.Thinking = th

	var msgs []any
	sys, bps, marks, err := systemPrompt(req.System)
	if err != nil {
		return nil, err
	}
	if sys != "" {
		msgs = append(msgs, message("system", sys))
	}
	list, err := apierr.Array(req.Messages, "messages")
	if err != nil {
		return nil, err
	}
	if list == nil {
		return nil, bad("messages", "field required")
	}
	if len(list) == 0 {
		return nil, bad("messages", "must not be empty")
	}
	for i, m := range list {
		out, err := translateMessage(m, i)
		if err != nil {
			return nil, err
		}
		if d, ok := m.(*templates.Dict); ok {
			if c, ok := d.Get("content"); ok {
				if blocks, ok := c.([]any); ok {
					ms, err := blockMarks(blocks, fmt.Sprintf("messages[%d].content", i))
					if err != nil {
						return nil, err
					}
					if marks = append(marks, ms...); len(ms) > 0 {
						if err := checkBreakpoints(marks); err != nil {
							return nil, err
						}
						more, err := messageBreakpoints(m, i, msgs, ms)
						if err != nil {
							return nil, err
						}
						bps = append(bps, more...)
					}
				}
			}
		}
		msgs = append(msgs, out...)
	}
	r.Messages = msgs

	tools, names, toolMarks, err := translateTools(req.Tools)
	if err != nil {
		return nil, err
	}
	if err := checkBreakpoints(append(toolMarks, marks...)); err != nil {
		return nil, err
	}
	if len(req.OutputFormat) > 0 && string(req.OutputFormat) != "null" {
		var of struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		}
		if err := json.Unmarshal(req.OutputFormat, &of); err != nil {
			return nil, bad("output_format", "must be an object like {\"type\": \"json_schema\", \"schema\": {...}}")
		}
		if of.Type != "json_schema" {
			return nil, bad("output_format.type", "must be \"json_schema\", got %q", of.Type)
		}
		if len(of.Schema) == 0 || string(of.Schema) == "null" {
			return nil, bad("output_format.schema", "field required")
		}
		format, err := structured.Schema("output_format.schema", of.Schema)
		if err != nil {
			return nil, err
		}
		r.Format = format
	}
	mode, name, one, err := toolChoice(req.ToolChoice, names)
	if err != nil {
		return nil, err
	}
	if len(tools) > 0 && mode != "none" {
		r.Tools = tools
		r.ToolChoice, r.ToolName, r.ToolParamsField = mode, name, "tools[%d].input_schema"
		r.OneToolCall = one
		r.StrictTools = structured.StrictTools(req.Tools)
	} else if mode == chat.ToolRequired || mode == chat.ToolNamed {
		return nil, bad("tool_choice", "tool_choice forces a tool call, but there are no tools")
	}
	// Every prefix renders with the tools the model is shown; a breakpoint
	// on a tool covers the tools up to it (none when they are not shown).
	for i := range bps {
		bps[i].Tools = r.Tools
	}
	if r.Tools != nil {
		for _, m := range toolMarks {
			bps = append(bps, chat.Breakpoint{Tools: tools[:m.block+1], TTL: m.ttl, Field: m.at})
		}
	}
	if len(bps) > 0 {
		r.Breakpoints = bps
	}
	return r, nil
}

// metadata checks the metadata field's shape ({"user_id": string}); its
// content changes nothing here.
func metadata(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m struct {
		UserID *string `json:"user_id"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return bad("metadata", "must be an object like {\"user_id\": \"...\"}")
	}
	return nil
}

// sampling validates Anthropic's sampling fields (temperature is 0..1
// there) into r.
func sampling(req *messagesRequest, r *chat.Request) error {
	p := sample.Params{Temperature: 1}
	if err := apierr.Number("temperature", req.Temperature, 0, 1, &p.Temperature); err != nil {
		return err
	}
	if err := apierr.Number("top_p", req.TopP, 0, 1, &p.TopP); err != nil {
		return err
	}
	if req.TopK != nil && (*req.TopK < 0 || *req.TopK > apierr.MaxTopK) {
		return bad("top_k", "must be between 0 and %d, got %d", apierr.MaxTopK, *req.TopK)
	}
	if req.TopK != nil {
		p.TopK = *req.TopK
	}
	if err := p.Validate(); err != nil {
		return bad("", "%v", err)
	}
	r.Sampling = p
	// What the request sets, the model's defaults do not replace.
	if req.Temperature != nil {
		r.SamplingSet |= sample.FieldTemperature
	}
	if req.TopP != nil {
		r.SamplingSet |= sample.FieldTopP
	}
	if req.TopK != nil {
		r.SamplingSet |= sample.FieldTopK
	}
	return nil
}

// thinking maps {"type":"enabled","budget_tokens":N} (and "adaptive") to
// the template's thinking switch on, {"type":"disabled"} to off; absent
// leaves the template's default. The budget is checked as Anthropic checks
// it, but generation does not count thinking tokens against it.
func thinking(raw json.RawMessage, maxTokens *int) (*chat.Thinking, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var th struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	}
	if err := json.Unmarshal(raw, &th); err != nil {
		return nil, bad("thinking", "must be an object like {\"type\": \"enabled\", \"budget_tokens\": 2048}")
	}
	switch th.Type {
	case "enabled":
		if th.BudgetTokens == nil {
			return nil, bad("thinking.budget_tokens", "field required")
		}
		if *th.BudgetTokens < minThinkingBudget {
			return nil, bad("thinking.budget_tokens", "must be >= %d, got %d", minThinkingBudget, *th.BudgetTokens)
		}
		if maxTokens != nil && *th.BudgetTokens >= *maxTokens {
			return nil, bad("thinking.budget_tokens", "must be less than max_tokens (%d), got %d", *maxTokens, *th.BudgetTokens)
		}
		return &chat.Thinking{Enabled: true}, nil
	case "adaptive":
		return &chat.Thinking{Enabled: true}, nil
	case "disabled":
		return &chat.Thinking{Enabled: false}, nil
	}
	return nil, bad("thinking.type", "must be \"enabled\", \"adaptive\" or \"disabled\", got %q", th.Type)
}

// systemPrompt is the system field as one text: a string or text blocks.
// A block's cache_control makes a breakpoint covering the system text up
// to it (the Tools of the breakpoints are set by the caller); marks are
// those cache_controls.
func systemPrompt(raw json.RawMessage) (string, []chat.Breakpoint, []mark, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil, nil
	}
	v, err := templates.DecodeJSON(raw)
	if err != nil {
		return "", nil, nil, bad("system", "%v", err)
	}
	blocks, ok := v.([]any)
	if !ok {
		return "", nil, nil, bad("system", "must be a string or an array of text blocks")
	}
	texts := make([]string, 0, len(blocks))
	var bps []chat.Breakpoint
	var marks []mark
	for j, b := range blocks {
		at := fmt.Sprintf("system[%d]", j)
		d, ok := b.(*templates.Dict)
		if !ok {
			return "", nil, nil, bad(at, "must be a text block")
		}
		if typ, _ := d.Get("type"); typ != "text" {
			return "", nil, nil, bad(at, "only text blocks are supported in system, got type %v", typ)
		}
		t, err := textField(d, at)
		if err != nil {
			return "", nil, nil, err
		}
		texts = append(texts, t)
		ttl, ok, err := cacheControl(d, at)
		if err != nil {
			return "", nil, nil, err
		}
		if ok {
			marks = append(marks, mark{at: at, block: j, ttl: ttl})
			if err := checkBreakpoints(marks); err != nil {
				return "", nil, nil, err
			}
			bps = append(bps, chat.Breakpoint{Messages: []any{message("system", strings.Join(texts, "\n"))}, TTL: ttl, Field: at})
		}
	}
	return strings.Join(texts, "\n"), bps, marks, nil
}

func textField(d *templates.Dict, at string) (string, error) {
	v, _ := d.Get("text")
	s, ok := v.(string)
	if !ok {
		return "", bad(at+".text", "a text block needs a string text")
	}
	return s, nil
}

func message(role string, content any) *templates.Dict {
	d := templates.NewDict(2)
	d.Set("role", role)
	d.Set("content", content)
	return d
}

// translateMessage turns one Anthropic message into the template messages
// the OpenAI-shaped chat templates expect: a user message's tool_result
// blocks become "tool" messages (in order, with the text around them as
// user messages), an assistant message's tool_use blocks become its
// tool_calls (arguments as objects) and its thinking becomes
// reasoning_content.
func translateMessage(m any, i int) ([]any, error) {
	at := func(f string) string { return fmt.Sprintf("messages[%d].%s", i, f) }
	d, ok := m.(*templates.Dict)
	if !ok {
		return nil, bad(fmt.Sprintf("messages[%d]", i), "must be an object")
	}
	role, _ := d.Get("role")
	rs, _ := role.(string)
	if rs != "user" && rs != "assistant" {
		return nil, bad(at("role"), "must be \"user\" or \"assistant\", got %s", show(role))
	}
	content, present := d.Get("content")
	switch c := content.(type) {
	case string:
		return []any{message(rs, c)}, nil
	case []any:
		if rs == "user" {
			return userBlocks(c, at("content"))
		}
		am, err := assistantBlocks(c, at("content"))
		if err != nil {
			return nil, err
		}
		return []any{am}, nil
	case nil:
		if !present {
			return nil, bad(at("content"), "field required")
		}
	}
	return nil, bad(at("content"), "must be a string or an array of content blocks")
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("%v", v)
}

// blockType checks that b is a content block and returns its type.
func blockType(b any, at string) (*templates.Dict, string, error) {
	d, ok := b.(*templates.Dict)
	if !ok {
		return nil, "", bad(at, "a content block must be an object")
	}
	t, _ := d.Get("type")
	s, ok := t.(string)
	if !ok || s == "" {
		return nil, "", bad(at+".type", "a content block needs a type")
	}
	return d, s, nil
}

func unsupported(at, typ, role string) error {
	switch typ {
	case "image":
		return bad(at, "content block type %q: %v", typ, chat.ErrImageInput)
	case "document", "search_result", "container_upload":
		return bad(at, "content block type %q is not supported: this server serves a text-only model", typ)
	case "text", "tool_use", "tool_result", "thinking", "redacted_thinking":
		return bad(at, "content block type %q is not allowed in a %s message", typ, role)
	}
	return bad(at, "content block type %q is not supported", typ)
}

func userBlocks(blocks []any, at string) ([]any, error) {
	var out []any
	var texts []string
	flush := func() {
		if texts != nil {
			out = append(out, message("user", strings.Join(texts, "\n")))
			texts = nil
		}
	}
	for j, b := range blocks {
		bat := fmt.Sprintf("%s[%d]", at, j)
		d, typ, err := blockType(b, bat)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := textField(d, bat)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		case "tool_result":
			tm, err := toolResult(d, bat)
			if err != nil {
				return nil, err
			}
			flush()
			out = append(out, tm)
		default:
			return nil, unsupported(bat, typ, "user")
		}
	}
	if texts == nil && out == nil {
		texts = []string{""} // an empty block list is an empty message
	}
	flush()
	return out, nil
}

// toolResult is a tool_result block as a "tool" message.
func toolResult(d *templates.Dict, at string) (*templates.Dict, error) {
	id, _ := d.Get("tool_use_id")
	ids, ok := id.(string)
	if !ok || ids == "" {
		return nil, bad(at+".tool_use_id", "a tool_result block needs the tool_use_id it answers")
	}
	if e, ok := d.Get("is_error"); ok && e != nil {
		if _, isBool := e.(bool); !isBool {
			return nil, bad(at+".is_error", "must be a boolean")
		}
	}
	text := ""
	content, _ := d.Get("content")
	switch c := content.(type) {
	case nil:
	case string:
		text = c
	case []any:
		var texts []string
		for k, b := range c {
			bat := fmt.Sprintf("%s.content[%d]", at, k)
			bd, typ, err := blockType(b, bat)
			if err != nil {
				return nil, err
			}
			if typ != "text" {
				return nil, unsupported(bat, typ, "tool_result")
			}
			t, err := textField(bd, bat)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		}
		text = strings.Join(texts, "\n")
	default:
		return nil, bad(at+".content", "must be a string or an array of text blocks")
	}
	m := templates.NewDict(3)
	m.Set("role", "tool")
	m.Set("tool_call_id", ids)
	m.Set("content", text)
	return m, nil
}

func assistantBlocks(blocks []any, at string) (*templates.Dict, error) {
	var texts, thoughts []string
	var calls []any
	for j, b := range blocks {
		bat := fmt.Sprintf("%s[%d]", at, j)
		d, typ, err := blockType(b, bat)
		if err != nil {
			return nil, err
		}
		switch typ {
		case "text":
			t, err := textField(d, bat)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		case "thinking":
			// The signature is opaque and accepted as is: this server's own
			// (see signature) or anyone's.
			v, _ := d.Get("thinking")
			s, ok := v.(string)
			if !ok {
				return nil, bad(bat+".thinking", "a thinking block needs a string thinking")
			}
			thoughts = append(thoughts, s)
		case "redacted_thinking":
			// Encrypted upstream reasoning: nothing a local template can show.
		case "tool_use":
			call, err := toolUse(d, bat)
			if err != nil {
				return nil, err
			}
			calls = append(calls, call)
		default:
			return nil, unsupported(bat, typ, "assistant")
		}
	}
	m := message("assistant", strings.Join(texts, "\n"))
	if len(thoughts) > 0 {
		m.Set("reasoning_content", strings.Join(thoughts, "\n"))
	}
	if calls != nil {
		m.Set("tool_calls", calls)
	}
	return m, nil
}

// toolUse is a tool_use block as an OpenAI-style tool call, arguments an
// object (as templates that apply tojson to them expect).
func toolUse(d *templates.Dict, at string) (*templates.Dict, error) {
	id, _ := d.Get("id")
	ids, ok := id.(string)
	if !ok || ids == "" {
		return nil, bad(at+".id", "a tool_use block needs a string id")
	}
	name, _ := d.Get("name")
	ns, ok := name.(string)
	if !ok || ns == "" {
		return nil, bad(at+".name", "a tool_use block needs a string name")
	}
	input, present := d.Get("input")
	if !present || input == nil {
		input = templates.NewDict(0)
	}
	if _, ok := input.(*templates.Dict); !ok {
		return nil, bad(at+".input", "must be an object")
	}
	fn := templates.NewDict(2)
	fn.Set("name", ns)
	fn.Set("arguments", input)
	call := templates.NewDict(3)
	call.Set("id", ids)
	call.Set("type", "function")
	call.Set("function", fn)
	return call, nil
}

// translateTools turns Anthropic's custom tools ({name, description,
// input_schema}) into OpenAI-style function tools, the shape chat
// templates render. It also returns the tool names, and the tools'
// cache_control marks.
func translateTools(raw json.RawMessage) ([]any, map[string]bool, []mark, error) {
	list, err := apierr.Array(raw, "tools")
	if err != nil || list == nil {
		return nil, nil, nil, err
	}
	var marks []mark
	out := make([]any, 0, len(list))
	names := map[string]bool{}
	for i, t := range list {
		at := fmt.Sprintf("tools[%d]", i)
		d, ok := t.(*templates.Dict)
		if !ok {
			return nil, nil, nil, bad(at, "a tool must be an object")
		}
		if typ, ok := d.Get("type"); ok && typ != nil && typ != "custom" {
			return nil, nil, nil, bad(at+".type", "tool type %s is not supported: only custom tools (name, description, input_schema) are", show(typ))
		}
		name, _ := d.Get("name")
		ns, ok := name.(string)
		if !ok || ns == "" {
			return nil, nil, nil, bad(at+".name", "a tool needs a string name")
		}
		schema, _ := d.Get("input_schema")
		if _, ok := schema.(*templates.Dict); !ok {
			return nil, nil, nil, bad(at+".input_schema", "a tool needs an input_schema object (a JSON schema)")
		}
		fn := templates.NewDict(3)
		fn.Set("name", ns)
		if desc, ok := d.Get("description"); ok && desc != nil {
			s, isStr := desc.(string)
			if !isStr {
				return nil, nil, nil, bad(at+".description", "must be a string")
			}
			fn.Set("description", s)
		}
		fn.Set("parameters", schema)
		tool := templates.NewDict(2)
		tool.Set("type", "function")
		tool.Set("function", fn)
		ttl, ok, err := cacheControl(d, at)
		if err != nil {
			return nil, nil, nil, err
		}
		if ok {
			marks = append(marks, mark{at: at, block: i, ttl: ttl})
		}
		out = append(out, tool)
		names[ns] = true
	}
	return out, names, marks, nil
}

// toolChoice validates tool_choice and returns its mode: "none" (the tools
// are then not shown to the model), chat.ToolAuto, chat.ToolRequired for
// "any", chat.ToolNamed for "tool" with its name. "any" and "tool" are
// enforced: the reply is tool calls.
func toolChoice(raw json.RawMessage, names map[string]bool) (mode, name string, one bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return chat.ToolAuto, "", false, nil
	}
	var tc struct {
		Type            string `json:"type"`
		Name            string `json:"name"`
		DisableParallel bool   `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return "", "", false, bad("tool_choice", "must be an object like {\"type\": \"auto\"}")
	}
	switch tc.Type {
	case "auto":
		return chat.ToolAuto, "", tc.DisableParallel, nil
	case "any":
		return chat.ToolRequired, "", tc.DisableParallel, nil
	case "none":
		return "none", "", false, nil
	case "tool":
		if tc.Name == "" {
			return "", "", false, bad("tool_choice.name", "field required for type \"tool\"")
		}
		if !names[tc.Name] {
			return "", "", false, bad("tool_choice.name", "names no tool in tools: %q", tc.Name)
		}
		return chat.ToolNamed, tc.Name, true, nil
	}
	return "", "", false, bad("tool_choice.type", "must be \"auto\", \"any\", \"tool\" or \"none\", got %q", tc.Type)
}

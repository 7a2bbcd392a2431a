package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/templates"
)

// Tool-choice modes (Request.ToolChoice).
const (
	// ToolAuto lets the model decide; calls to strict tools follow their
	// schemas once opened (Hermes-style templates).
	ToolAuto = ""
	// ToolRequired forces one call or more, to any of the tools.
	ToolRequired = "required"
	// ToolNamed forces a call to Request.ToolName.
	ToolNamed = "named"
)

// toolSyntax is how a template's model writes a tool call.
type toolSyntax int

const (
	// hermesCalls: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
	// (Hermes, Qwen 2.5 and 3), several separated by a newline.
	hermesCalls toolSyntax = iota
	// llama3Calls: the whole reply is {"name": "f", "parameters": {...}}
	// (Llama 3.1 to 3.3 JSON tool calling), one call.
	llama3Calls
)

// syntaxOf reads the tool-call syntax off a template's source: Llama 3's
// templates ask for {"name": ..., "parameters": ...}; the others that
// render calls use the Hermes tags, which is also what the output parser
// reads from any template.
func syntaxOf(src string) toolSyntax {
	if !strings.Contains(src, "<tool_call>") && strings.Contains(src, `"parameters": dictionary of argument name`) {
		return llama3Calls
	}
	return hermesCalls
}

// thinkOpen and thinkClose delimit a reasoning block.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Guides returns the structured-output guides of the assets' vocabulary
// (made once; the vocabulary's trie is built on the first constrained
// request).
func (a *Assets) Guides() *grammar.Guides {
	a.guidesOnce.Do(func() { a.guides = grammar.NewGuides(a.Tokenizer.AllTokenBytes()) })
	return a.guides
}

// ConstraintKind names what r's output must follow, for the metrics:
// "tool_calls" (forced), "json_schema", "json", "regex", "choice",
// "grammar", "strict_tools" (calls the model opens); "" when nothing.
func (r *Request) ConstraintKind() string {
	switch {
	case r.Tools != nil && r.ToolChoice != ToolAuto:
		return "tool_calls"
	case r.Format != nil:
		return r.Format.Kind()
	case r.Tools != nil && len(r.StrictTools) > 0:
		return "strict_tools"
	}
	return ""
}

// constrained reports whether r asks for structured output.
func (r *Request) constrained() bool {
	return r.Format != nil || (r.Tools != nil && r.ToolChoice != ToolAuto) || len(r.StrictTools) > 0
}

// plan builds the encoded grammar.Plan of r (nil when its output is free)
// and compiles it once, so a bad schema is a 400 here: tmplSrc is the
// template's source (its tool-call syntax, whether it thinks) and prompt
// the rendered prompt (whether it ends inside an open reasoning block).
func (a *Assets) plan(r *Request, tmplSrc, prompt string) ([]byte, error) {
	if !r.constrained() {
		return nil, nil
	}
	p := &grammar.Plan{}
	calls := r.Tools != nil && r.ToolChoice != ToolAuto
	switch {
	case calls:
		spec, err := a.toolCalls(r, syntaxOf(tmplSrc), r.ToolChoice == ToolNamed)
		if err != nil {
			return nil, err
		}
		p.Spec = *spec
	case r.Format != nil:
		p.Spec = *r.Format
	case r.Tools != nil && syntaxOf(tmplSrc) == hermesCalls:
		// Auto with strict tools: once the model opens a call, the call
		// follows the tools' schemas (strict) or is a JSON object.
		body, err := a.hermesBody(r, false)
		if err != nil {
			return nil, err
		}
		p.Spec, p.Trigger = *body, "<tool_call>"
	default:
		return nil, nil // strict tools in a syntax with no opening tag: the model decides
	}
	if p.Trigger == "" && r.IsChat() && strings.Contains(tmplSrc, thinkOpen) {
		// Reasoning comes first: the prompt may have opened the block
		// (the constraint waits for its end), or the model may open it.
		open := strings.LastIndex(prompt, thinkOpen)
		switch {
		case open >= 0 && !strings.Contains(prompt[open:], thinkClose):
			p.After = thinkClose
		case !strings.HasSuffix(strings.TrimRight(prompt, " \n"), thinkClose):
			p.Open, p.After = thinkOpen, thinkClose
		}
	}
	enc := p.Marshal()
	if err := a.Guides().Check(enc); err != nil {
		return nil, &BadRequest{err}
	}
	return enc, nil
}

// tool is one function tool as the request declared it.
type tool struct {
	name   string
	params []byte // its parameters' JSON schema (nil: any object)
	strict bool
	field  string // the request field of its parameters
}

// tools reads r's function tools (chat completions shape).
func (a *Assets) tools(r *Request) ([]tool, error) {
	list, _ := r.Tools.([]any)
	var out []tool
	for i, t := range list {
		d, _ := t.(*templates.Dict)
		if d == nil {
			continue
		}
		fv, _ := d.Get("function")
		fn, _ := fv.(*templates.Dict)
		if fn == nil {
			continue
		}
		nv, _ := fn.Get("name")
		name, _ := nv.(string)
		tl := tool{name: name, strict: r.StrictTools[name], field: fmt.Sprintf(r.toolParamsField(), i)}
		if pv, ok := fn.Get("parameters"); ok && pv != nil {
			text, err := a.json.dumps(pv)
			if err != nil {
				return nil, &BadRequest{fmt.Errorf("%s: %w", tl.field, err)}
			}
			tl.params = []byte(text)
		}
		out = append(out, tl)
	}
	if len(out) == 0 {
		return nil, &BadRequest{errors.New("tool_choice forces a tool call, but there are no function tools")}
	}
	return out, nil
}

func (r *Request) toolParamsField() string {
	if r.ToolParamsField != "" {
		return r.ToolParamsField
	}
	return "tools[%d].function.parameters"
}

// argsSpec is the grammar of one tool's arguments: its schema when the
// tool is strict or the call is forced, else (or when a forced non-strict
// tool's schema uses what the compiler cannot honour) any JSON object.
func (a *Assets) argsSpec(t tool, forced bool) grammar.Spec {
	anyObject := grammar.Spec{JSON: true, Object: true}
	if t.params == nil || !(t.strict || forced) {
		return anyObject
	}
	s := grammar.Spec{JSONSchema: t.params, Field: t.field}
	if !t.strict {
		// Forced but not strict: the schema where we can honour it, as
		// OpenAI treats non-strict schemas as guidance; the strict ones
		// must compile or the request is refused.
		if _, err := grammar.CompileSpec(&s); err != nil {
			return anyObject
		}
	}
	return s
}

// toolCalls is the grammar of a reply that is tool calls only: one or more
// to any tool, or one to r.ToolName.
func (a *Assets) toolCalls(r *Request, syn toolSyntax, named bool) (*grammar.Spec, error) {
	if syn == llama3Calls {
		calls, err := a.callObjects(r, "parameters", true)
		if err != nil {
			return nil, err
		}
		return calls, nil
	}
	body, err := a.hermesBody(r, true)
	if err != nil {
		return nil, err
	}
	one := grammar.Spec{Seq: []grammar.Spec{{Text: "<tool_call>"}, *body}}
	if named || r.OneToolCall {
		return &one, nil
	}
	return &grammar.Spec{Plus: []grammar.Spec{one, {Text: "\n"}}}, nil
}

// hermesBody is what follows a <tool_call> tag: the call object on its own
// line, then the closing tag.
func (a *Assets) hermesBody(r *Request, forced bool) (*grammar.Spec, error) {
	calls, err := a.callObjects(r, "arguments", forced)
	if err != nil {
		return nil, err
	}
	return &grammar.Spec{Seq: []grammar.Spec{{Text: "\n"}, *calls, {Text: "\n</tool_call>"}}}, nil
}

// callObjects is one call object, {"name": "f", "<argsKey>": {...}}, for
// any of the tools (only r.ToolName when the call is named), written as the
// templates write them.
func (a *Assets) callObjects(r *Request, argsKey string, forced bool) (*grammar.Spec, error) {
	tools, err := a.tools(r)
	if err != nil {
		return nil, err
	}
	var alts []grammar.Spec
	for _, t := range tools {
		if r.ToolChoice == ToolNamed && t.name != r.ToolName {
			continue
		}
		name, _ := json.Marshal(t.name)
		alts = append(alts, grammar.Spec{Seq: []grammar.Spec{
			{Text: `{"name": ` + string(name) + `, "` + argsKey + `": `}, a.argsSpec(t, forced), {Text: "}"}}})
	}
	if len(alts) == 0 {
		return nil, &BadRequest{fmt.Errorf("tool_choice names %q, which is not among the tools", r.ToolName)}
	}
	if len(alts) == 1 {
		return &alts[0], nil
	}
	return &grammar.Spec{Alt: alts}, nil
}

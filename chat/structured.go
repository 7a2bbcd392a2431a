package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
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
	// mistralListCalls: [TOOL_CALLS][{"name": "f", "arguments": {...},
	// "id": "abcdefghi"}, ...] (Mistral Nemo; the id is optional, the
	// model may leave it to the runtime).
	mistralListCalls
	// mistralArgsCalls: [TOOL_CALLS]f[CALL_ID]abcdefghi[ARGS]{...}, one
	// [TOOL_CALLS] per call (Mistral Small 3.2 and the other v11+
	// tokenizers; [CALL_ID] is optional).
	mistralArgsCalls
	// harmonyCalls: gpt-oss. After the generation prompt's
	// <|start|>assistant, an optional analysis message
	// (<|channel|>analysis<|message|>...<|end|><|start|>assistant), then
	// one call: " to=functions.f<|channel|>commentary json<|message|>{...}"
	// as the template renders it, or "<|channel|>commentary to=functions.f
	// <|constrain|>json<|message|>{...}" as harmony's guide writes it; the
	// model ends it with <|call|>, one of its EOS tokens.
	harmonyCalls
)

// syntaxOf reads the tool-call syntax off a template's source: Llama 3's
// templates ask for {"name": ..., "parameters": ...}, Mistral's render
// [TOOL_CALLS] (with [ARGS] from the v11 tokenizers on), gpt-oss's render
// harmony's channels; the others that render calls use the Hermes tags,
// which is also what the output parser reads from any template.
func syntaxOf(src string) toolSyntax {
	switch {
	case strings.Contains(src, "<|channel|>") && strings.Contains(src, "<|call|>"):
		return harmonyCalls
	case strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "[ARGS]"):
		return mistralArgsCalls
	case strings.Contains(src, "[TOOL_CALLS]"):
		return mistralListCalls
	case !strings.Contains(src, "<tool_call>") && strings.Contains(src, `"parameters": dictionary of argument name`):
		return llama3Calls
	}
	return hermesCalls
}

// output is the output parser's syntax for the tool-call syntax.
func (s toolSyntax) output() output.Syntax {
	switch s {
	case mistralListCalls, mistralArgsCalls:
		return output.SyntaxMistral
	case harmonyCalls:
		return output.SyntaxHarmony
	}
	return output.SyntaxDefault
}

// thinkOpen and thinkClose delimit a reasoning block.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Guides returns the structured-output guides of the assets' vocabulary
// (made once; the vocabulary's trie is built on the first constrained
// request). The special tokens that tool-call syntaxes write (see
// markerBytes) are part of it.
func (a *Assets) Guides() *grammar.Guides {
	a.guidesOnce.Do(func() { a.guides = grammar.NewGuides(markerBytes(a.Tokenizer, a.EOS)) })
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

// markerBytes is the vocabulary's token bytes (tokenizer.AllTokenBytes,
// where special tokens have none) with the special tokens that a forced
// tool call writes (grammar.Markers: Mistral's [TOOL_CALLS], [ARGS] and
// [CALL_ID], harmony's <|start|>, <|channel|>, <|constrain|>, <|message|>
// and <|end|>) given their private bytes (grammar.MarkerBytes). A grammar
// then writes each as the one token the model knows, as the output parser
// reads it (output.Syntax.Markers), and only where a plan's literal text
// has it: no JSON string can hold those bytes. The
// tokens that end a generation (<|call|>, <|return|>, any of eos) stay
// out: a grammar could otherwise pick one where its text is allowed,
// inside a JSON string, and end the output there.
func markerBytes(tok *tokenizer.Tokenizer, eos []int32) [][]byte {
	all := tok.AllTokenBytes()
	var out [][]byte
	for _, m := range grammar.Markers() {
		id, ok := tok.TokenID(m)
		if !ok || !tok.IsSpecial(id) || int(id) >= len(all) || all[id] != nil || slices.Contains(eos, id) {
			continue
		}
		if out == nil {
			out = slices.Clone(all)
		}
		out[id], _ = grammar.MarkerBytes(m)
	}
	if out == nil {
		return all
	}
	return out
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
	case r.Format != nil && r.IsChat() && syntaxOf(tmplSrc) == harmonyCalls:
		// gpt-oss: the answer is the final channel's message, after the
		// reasoning the model may write first.
		p.Spec = *harmonyReply(grammar.Spec{Seq: []grammar.Spec{{Text: "<|channel|>final<|message|>"}, *r.Format}})
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
	case r.Tools != nil && (syntaxOf(tmplSrc) == mistralListCalls || syntaxOf(tmplSrc) == mistralArgsCalls):
		// The same after Mistral's [TOOL_CALLS].
		body, err := a.mistralBody(r, syntaxOf(tmplSrc), false, true)
		if err != nil {
			return nil, err
		}
		p.Spec, p.Trigger = *body, "[TOOL_CALLS]"
	case r.Tools != nil && r.IsChat() && syntaxOf(tmplSrc) == harmonyCalls:
		// The same after gpt-oss's recipient.
		body, err := a.harmonyRecipient(r)
		if err != nil {
			return nil, err
		}
		p.Spec, p.Trigger = *body, "to=functions."
	default:
		return nil, nil // strict tools in a syntax with no opening tag (Llama 3): the model decides
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
// to any tool, or one to r.ToolName, in the syntax syn (one call at most
// where the syntax has no more).
func (a *Assets) toolCalls(r *Request, syn toolSyntax, named bool) (*grammar.Spec, error) {
	one := named || r.OneToolCall
	switch syn {
	case llama3Calls:
		return a.callObjects(r, "parameters", true)
	case mistralListCalls, mistralArgsCalls:
		body, err := a.mistralBody(r, syn, true, !one)
		if err != nil {
			return nil, err
		}
		call := grammar.Spec{Seq: []grammar.Spec{{Text: "[TOOL_CALLS]"}, *body}}
		if syn == mistralListCalls || one {
			return &call, nil
		}
		return &grammar.Spec{Plus: []grammar.Spec{call}}, nil
	case harmonyCalls:
		return a.harmonyCall(r)
	}
	body, err := a.hermesBody(r, true)
	if err != nil {
		return nil, err
	}
	call := grammar.Spec{Seq: []grammar.Spec{{Text: "<tool_call>"}, *body}}
	if one {
		return &call, nil
	}
	return &grammar.Spec{Plus: []grammar.Spec{call, {Text: "\n"}}}, nil
}

// mistralCallID is the 9 alphanumerics of a Mistral tool-call id.
const mistralCallID = "[A-Za-z0-9]{9}"

// mistralBody is what follows [TOOL_CALLS] in Mistral's syntax syn, to any
// of the tools (r.ToolName when named): Nemo's list of call objects
// [{"name": "f", "arguments": {...}}] (each with an optional
// ", "id": "abcdefghi"", as its template renders them; several, ", "
// apart, when many), or the v11+ tokenizers' one call
// f[CALL_ID]abcdefghi[ARGS]{...} ([CALL_ID] optional; several calls
// repeat [TOOL_CALLS]).
func (a *Assets) mistralBody(r *Request, syn toolSyntax, forced, many bool) (*grammar.Spec, error) {
	if syn == mistralArgsCalls {
		return a.perTool(r, func(t tool, _ string) grammar.Spec {
			return grammar.Spec{Seq: []grammar.Spec{
				{Text: t.name},
				{Alt: []grammar.Spec{{Text: "[ARGS]"}, {Seq: []grammar.Spec{{Text: "[CALL_ID]"}, {Regex: mistralCallID}, {Text: "[ARGS]"}}}}},
				a.argsSpec(t, forced),
			}}
		})
	}
	call, err := a.perTool(r, func(t tool, name string) grammar.Spec {
		return grammar.Spec{Seq: []grammar.Spec{
			{Text: `{"name": ` + name + `, "arguments": `}, a.argsSpec(t, forced),
			{Alt: []grammar.Spec{{Text: "}"}, {Seq: []grammar.Spec{{Text: `, "id": "`}, {Regex: mistralCallID}, {Text: `"}`}}}}},
		}}
	})
	if err != nil {
		return nil, err
	}
	if many {
		call = &grammar.Spec{Plus: []grammar.Spec{*call, {Text: ", "}}}
	}
	return &grammar.Spec{Seq: []grammar.Spec{{Text: "["}, *call, {Text: "]"}}}, nil
}

// harmonyReasoning is an analysis message's text: anything without "<|"
// (harmony's tokens).
const harmonyReasoning = `([^<]|<[^|])*`

// harmonyCall is gpt-oss's reply that is one call (see harmonyCalls): the
// analysis message the model may write first, then the call's header in
// either order and its arguments; <|call|> (EOS) ends it.
func (a *Assets) harmonyCall(r *Request) (*grammar.Spec, error) {
	call, err := a.perTool(r, func(t tool, _ string) grammar.Spec {
		return grammar.Spec{Seq: []grammar.Spec{
			{Alt: []grammar.Spec{
				{Text: " to=functions." + t.name + "<|channel|>commentary json<|message|>"},
				{Text: "<|channel|>commentary to=functions." + t.name + " <|constrain|>json<|message|>"},
			}},
			a.argsSpec(t, true),
		}}
	})
	if err != nil {
		return nil, err
	}
	return harmonyReply(*call), nil
}

// harmonyRecipient is what follows "to=functions." in a gpt-oss call the
// model opens (tool_choice auto, strict tools): a tool's name, the rest of
// the header in either order (see harmonyCalls) and its arguments.
func (a *Assets) harmonyRecipient(r *Request) (*grammar.Spec, error) {
	return a.perTool(r, func(t tool, _ string) grammar.Spec {
		return grammar.Spec{Seq: []grammar.Spec{
			{Text: t.name},
			{Alt: []grammar.Spec{{Text: "<|channel|>commentary json<|message|>"}, {Text: " <|constrain|>json<|message|>"}}},
			a.argsSpec(t, false),
		}}
	})
}

// harmonyReply is a gpt-oss reply whose last message is msg (its header
// included): the analysis message the model may write first, then msg.
func harmonyReply(msg grammar.Spec) *grammar.Spec {
	analysis := grammar.Spec{Seq: []grammar.Spec{
		{Text: "<|channel|>analysis<|message|>"}, {Regex: harmonyReasoning}, {Text: "<|end|><|start|>assistant"}, msg}}
	return &grammar.Spec{Alt: []grammar.Spec{analysis, msg}}
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
	return a.perTool(r, func(t tool, name string) grammar.Spec {
		return grammar.Spec{Seq: []grammar.Spec{
			{Text: `{"name": ` + name + `, "` + argsKey + `": `}, a.argsSpec(t, forced), {Text: "}"}}}
	})
}

// perTool is the alternatives of one call to each of r's tools (only
// r.ToolName when the call is named), call(t, name) making the call to t
// (name is t's name as a JSON string).
func (a *Assets) perTool(r *Request, call func(t tool, name string) grammar.Spec) (*grammar.Spec, error) {
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
		alts = append(alts, call(t, string(name)))
	}
	if len(alts) == 0 {
		return nil, &BadRequest{fmt.Errorf("tool_choice names %q, which is not among the tools", r.ToolName)}
	}
	if len(alts) == 1 {
		return &alts[0], nil
	}
	return &grammar.Spec{Alt: alts}, nil
}

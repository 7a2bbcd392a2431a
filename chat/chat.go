package chat

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// Request is a chat (or plain completion) request in API-neutral form.
type Request struct {
	// Messages are the conversation as template values (ordered *templates.Dict
	// per message, from templates.DecodeJSON), so key order and the
	// int/float distinction survive into the template.
	Messages  []any
	Tools     any // nil renders as None
	Documents any
	// Kwargs are extra template variables (chat_template_kwargs, e.g.
	// enable_thinking).
	Kwargs *templates.Dict
	// Prompt, when Messages is nil, is a raw completion prompt: text, or
	// token ids in PromptIDs.
	Prompt    string
	PromptIDs []int32

	MaxTokens int
	// FitMaxTokens makes MaxTokens an upper bound, lowered to the positions
	// the model has left after the prompt (for APIs where it is optional).
	FitMaxTokens bool
	Sampling     sample.Params
	Stop         []string
	Logprobs     bool
	TopLogprobs  int
	IgnoreEOS    bool
	// SamplingSet says which of Sampling's parameters the request set
	// itself; the model's recommended defaults (Assets.Sampling) replace
	// the others when the request is prepared. A Go caller that wants
	// Sampling exactly as it is sets sample.AllFields.
	SamplingSet sample.Fields
	// Thinking, when set, switches the template's thinking (see Thinking).
	Thinking *Thinking
	// CacheScope restricts prompt reuse to one conversation (OpenAI's
	// prompt_cache_key); empty means any.
	CacheScope string

	// Format constrains the reply's text (structured output:
	// response_format, text.format, guided_*, grammar); nil leaves it
	// free. Spec.Field names the request field for errors.
	Format *grammar.Spec
	// ToolChoice is ToolAuto, ToolRequired or ToolNamed (ToolName): the
	// last two force the reply to be tool calls in the template's syntax,
	// their arguments following each tool's parameters schema.
	ToolChoice, ToolName string
	// OneToolCall limits a forced reply to one call (parallel_tool_calls
	// false, Anthropic's disable_parallel_tool_use).
	OneToolCall bool
	// StrictTools are the tools declared strict: with ToolAuto, a call the
	// model opens follows their schema.
	StrictTools map[string]bool
	// ToolParamsField is the request field of tool i's parameters schema
	// as a format with one %d ("tools[%d].input_schema"); empty means
	// chat completions' "tools[%d].function.parameters".
	ToolParamsField string
	// Breakpoints are the prefixes the client asked to keep cached
	// (Anthropic's cache_control), at most MaxBreakpoints; Prepare resolves
	// them to token positions (Prepared.Breakpoints).
	Breakpoints []Breakpoint
}

// IsChat reports whether the request renders a chat template.
func (r *Request) IsChat() bool { return r.Messages != nil }

// TextOnly reports whether every message's content is text (a string, or
// parts of type "text"); only text-only requests take part in prompt
// caching by history boundary.
func (r *Request) TextOnly() bool {
	for _, m := range r.Messages {
		d, ok := m.(*templates.Dict)
		if !ok {
			return false
		}
		content, _ := d.Get("content")
		switch c := content.(type) {
		case nil, string:
		case []any:
			for _, p := range c {
				pd, ok := p.(*templates.Dict)
				if !ok {
					return false
				}
				if t, _ := pd.Get("type"); t != "text" {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// Assets are what preparation needs of a model: its tokenizer and chat
// template.
type Assets struct {
	Tokenizer *tokenizer.Tokenizer
	// Template is nil when the model has no chat template: chat requests
	// then fail with ErrNoTemplate rather than guess a format.
	Template *templates.Template
	// ToolTemplate, when the model has one (tokenizer_config.json's
	// "tool_use" template), renders requests that carry tools.
	ToolTemplate *templates.Template
	// SpecialTokens are passed to the template (bos_token, eos_token, ...).
	SpecialTokens *templates.Dict
	// EOS are the ids that end generation (generation_config.json and the
	// tokenizer's eos token).
	EOS []int32
	// Sampling are the model's recommended sampling parameters
	// (generation_config.json); empty when the runtime ignores them.
	Sampling sample.Defaults

	// Memory keeps the reasoning of generated replies for re-attachment
	// (see ReasoningMemory); nil gets the defaults on first use.
	Memory *ReasoningMemory

	shapes   shapes    // each template's tool-call shape, probed on first use
	preserve preserves // each template's PreserveSupport, probed on first use
	json     jsonText  // tojson, for templates that want arguments as text
	memOnce  sync.Once

	guidesOnce sync.Once
	guides     *grammar.Guides
}

// normalize returns r's messages in the shape tmpl renders (see
// normalizeMessages).
func (a *Assets) normalize(tmpl *templates.Template, msgs []any) ([]any, error) {
	var sh toolShape
	if hasToolTurns(msgs) {
		sh = a.shapes.get(tmpl, a.SpecialTokens)
	}
	out, err := normalizeMessages(msgs, sh, a.json.dumps)
	if err != nil {
		return nil, &BadRequest{err}
	}
	return out, nil
}

// ErrNoTemplate is returned for a chat request to a model without a chat
// template.
var ErrNoTemplate = errors.New("the model has no chat template; use the completions API or pass --chat-template")

// BadRequest marks an error caused by the request's content (a template
// raising, an unknown variable type): it maps to an HTTP 4xx.
type BadRequest struct{ Err error }

func (e *BadRequest) Error() string { return e.Err.Error() }
func (e *BadRequest) Unwrap() error { return e.Err }

// Prepared is a rendered and tokenized request.
type Prepared struct {
	Prompt string  // the text the model sees (chat: the template's render)
	IDs    []int32 // its token ids
	// BoundaryRendered says whether the history boundary was rendered;
	// Boundary is its length in tokens when it is a token prefix of IDs (0
	// otherwise), and BoundaryNote says why there is none.
	BoundaryRendered bool
	Boundary         int
	BoundaryNote     string
	// Reasoning is set when the template thinks (<think> blocks), so output
	// separates reasoning from the answer.
	Reasoning bool
	// Syntax is how the template's model writes tool calls (and, for
	// gpt-oss, its channels): the output parser to use
	// (output.Options.Syntax).
	Syntax output.Syntax
	// Plan is the structured-output constraint (grammar.Plan.Marshal),
	// compiled once here; nil when the output is free.
	Plan []byte
	// PreserveThinking says the history was rendered with preserved
	// reasoning (see PrepareWith); Reattached and Unknown count the
	// assistant turns without reasoning that got the reasoning kept for
	// them, and those that had none kept.
	PreserveThinking    bool
	Reattached, Unknown int
	// Breakpoints are the request's cache breakpoints as token positions
	// of IDs, strictly increasing, each below len(IDs), with the TTL each
	// asked for (see Request.Breakpoints); nil when there are none or the
	// prompt cache is off (nothing would keep them).
	Breakpoints []CachePoint
}

// CacheEnd is the highest breakpoint position (0 when there is none): the
// prompt prefix the request asks to be written to the cache.
func (p *Prepared) CacheEnd() int {
	if len(p.Breakpoints) == 0 {
		return 0
	}
	return p.Breakpoints[len(p.Breakpoints)-1].Pos
}

// history is what tmpl renders for r (see rendering): its messages
// normalised, with kept reasoning re-attached when preserve_thinking is on.
func (a *Assets) history(tmpl *templates.Template, r *Request, promptCache bool) (*rendering, error) {
	msgs, err := a.normalize(tmpl, r.Messages)
	if err != nil {
		return nil, err
	}
	h := &rendering{msgs: msgs, kwargs: thinkingKwargs(tmpl.Source(), r.Thinking, r.Kwargs)}
	sup := a.preserveSupport(tmpl)
	if h.preserve = preserveOn(r, sup, promptCache); h.preserve {
		h.msgs, h.reattached, h.unknown = a.reattach(msgs)
		if sup.Variable {
			h.kwargs = preserveKwargs(h.kwargs)
		}
	}
	return h, nil
}

// rendering is what a template renders for a request: its messages
// normalised (reasoning re-attached under preserve_thinking), the template
// variables, and the re-attachment counts.
type rendering struct {
	msgs                []any
	kwargs              *templates.Dict
	preserve            bool
	reattached, unknown int
}

// PrepareOptions say how Prepare renders a request.
type PrepareOptions struct {
	// Boundary also renders the history boundary (the conversation up to
	// its last assistant message) and reports its token length when it is
	// a prefix of the prompt.
	Boundary bool
	// PromptCache says the prompt cache is on: preserve_thinking then
	// defaults on for a template that keeps earlier reasoning.
	PromptCache bool
}

// Prepare renders and tokenizes r with the prompt cache off (see
// PrepareWith). withBoundary also renders the history boundary.
func (a *Assets) Prepare(r *Request, withBoundary bool) (*Prepared, error) {
	return a.PrepareWith(r, PrepareOptions{Boundary: withBoundary})
}

// PrepareWith renders and tokenizes r. With preserve_thinking on (the
// request's chat_template_kwargs, else the default of PrepareOptions),
// assistant turns that come without reasoning get the reasoning kept for
// them (Remember) and a template that reads preserve_thinking gets it set.
func (a *Assets) PrepareWith(r *Request, o PrepareOptions) (*Prepared, error) {
	withBoundary := o.Boundary
	if !r.IsChat() {
		p := &Prepared{Prompt: r.Prompt, IDs: r.PromptIDs, BoundaryNote: "not a chat request"}
		if p.IDs == nil {
			p.IDs = a.Tokenizer.EncodeIDs(r.Prompt, true)
		}
		if len(p.IDs) == 0 {
			return nil, &BadRequest{errors.New("the prompt is empty")}
		}
		plan, err := a.plan(r, "", r.Prompt)
		if err != nil {
			return nil, err
		}
		p.Plan = plan
		return p, nil
	}
	tmpl := a.Template
	if r.Tools != nil && a.ToolTemplate != nil {
		tmpl = a.ToolTemplate
	}
	if tmpl == nil {
		return nil, ErrNoTemplate
	}
	if len(r.Messages) == 0 {
		return nil, &BadRequest{errors.New("messages must not be empty")}
	}
	h, err := a.history(tmpl, r, o.PromptCache)
	if err != nil {
		return nil, err
	}
	in := templates.ChatInput{Messages: h.msgs, Tools: r.Tools, Documents: r.Documents,
		AddGenerationPrompt: true, SpecialTokens: a.SpecialTokens, Kwargs: h.kwargs}
	prompt, err := tmpl.RenderChat(in)
	if err != nil {
		return nil, &BadRequest{fmt.Errorf("chat template: %w", err)}
	}
	p := &Prepared{Prompt: prompt, IDs: a.encode(prompt), Reasoning: strings.Contains(tmpl.Source(), "<think>"),
		Syntax: syntaxOf(tmpl.Source()).output(), PreserveThinking: h.preserve, Reattached: h.reattached, Unknown: h.unknown}
	if p.Plan, err = a.plan(r, tmpl.Source(), prompt); err != nil {
		return nil, err
	}
	if o.PromptCache { // else nothing would keep the prefixes
		p.Breakpoints = a.breakpoints(tmpl, r, p.IDs, true)
	}
	switch {
	case !withBoundary:
		p.BoundaryNote = "not rendered"
	case !r.TextOnly():
		p.BoundaryNote = "not a text-only request"
	default:
		b, ok, err := tmpl.HistoryBoundary(in, prompt, p.IDs, a.encode)
		switch {
		case err != nil:
			p.BoundaryNote = "history render failed: " + err.Error()
		case !ok:
			p.BoundaryNote = "no assistant turn"
		default:
			p.BoundaryRendered = true
			if b.TokenPrefix {
				p.Boundary = len(b.HistoryIDs)
			} else {
				p.BoundaryNote = fmt.Sprintf("history is not a token prefix of the prompt (common prefix %d tokens)", b.CommonTokens)
			}
		}
	}
	return p, nil
}

// encode tokenizes a rendered prompt: the template wrote the special tokens,
// so none are added (as transformers' apply_chat_template(tokenize=True)).
func (a *Assets) encode(text string) []int32 { return a.Tokenizer.EncodeIDs(text, false) }

// WarmUp renders what the next turn of r's conversation will share with
// this one once reply is its answer: the conversation plus the reply as an
// assistant message (its reasoning too when preserve_thinking is on, as
// the next request will have it re-attached), followed by two different
// placeholder messages (tool results for a reply of tool calls, else user
// messages); the common prefix of their token ids is the history the next
// turn will render, whatever the template does to earlier turns (qwen3
// drops the think block, gpt-oss rewrites the end token, Mistral moves the
// tools).
func (a *Assets) WarmUp(r *Request, reply Reply, promptCache bool) ([]int32, error) {
	tmpl := a.Template
	if r.Tools != nil && a.ToolTemplate != nil {
		tmpl = a.ToolTemplate
	}
	if tmpl == nil || !r.IsChat() {
		return nil, ErrNoTemplate
	}
	if !preserveOn(r, a.preserveSupport(tmpl), promptCache) {
		reply.Reasoning = "" // the client drops the reasoning it was shown
	}
	var ids [2][]int32
	for i, placeholder := range []string{"A", "B"} {
		next := *r
		next.Messages = append(append([]any{}, r.Messages...), replyMessage(reply))
		if len(reply.Calls) == 0 {
			next.Messages = append(next.Messages, message("user", placeholder))
		}
		for _, c := range reply.Calls {
			res := message("tool", placeholder)
			res.Set("tool_call_id", c.ID)
			res.Set("name", c.Name)
			next.Messages = append(next.Messages, res)
		}
		h, err := a.history(tmpl, &next, promptCache)
		if err != nil {
			return nil, err
		}
		text, err := tmpl.RenderChat(templates.ChatInput{Messages: h.msgs, Tools: r.Tools, Documents: r.Documents,
			AddGenerationPrompt: true, SpecialTokens: a.SpecialTokens, Kwargs: h.kwargs})
		if err != nil {
			return nil, err
		}
		ids[i] = a.encode(text)
	}
	return ids[0][:commonPrefix(ids[0], ids[1])], nil
}

// replyMessage is reply as the assistant message a client sends back
// (content null for a reply of calls only, as OpenAI's), with its
// reasoning.
func replyMessage(reply Reply) *templates.Dict {
	m := templates.NewDict(4)
	m.Set("role", "assistant")
	var content any = reply.Content
	if reply.Content == "" && len(reply.Calls) > 0 {
		content = nil
	}
	m.Set("content", content)
	if len(reply.Calls) > 0 {
		calls := make([]any, len(reply.Calls))
		for i, c := range reply.Calls {
			fn := templates.NewDict(2)
			fn.Set("name", c.Name)
			fn.Set("arguments", c.Arguments)
			d := templates.NewDict(3)
			d.Set("id", c.ID)
			d.Set("type", "function")
			d.Set("function", fn)
			calls[i] = d
		}
		m.Set("tool_calls", calls)
	}
	if reply.Reasoning != "" {
		m.Set("reasoning_content", reply.Reasoning)
	}
	return m
}

func message(role, content string) *templates.Dict {
	d := templates.NewDict(2)
	d.Set("role", role)
	d.Set("content", content)
	return d
}

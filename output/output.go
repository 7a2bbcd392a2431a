// Package output turns one request's generated token ids into what an API
// returns: text deltas decoded incrementally (never splitting a UTF-8
// character), stop strings matched across token boundaries and never
// emitted, reasoning separated from the answer for templates that think
// (<think>…</think>, including a prompt that already opened the block), and
// tool calls parsed from the Hermes/Qwen <tool_call>{json}</tool_call> format
// and the Llama 3 JSON format, or from Mistral's [TOOL_CALLS] and gpt-oss's
// harmony messages (Options.Syntax, see Syntax), streamed as they are
// generated: a call is announced (ToolDelta with its id and name) once its
// name is known, then its arguments follow piece by piece (see tools.go).
//
// It runs per request, in the request's goroutine, off the scheduler's loop.
package output

import (
	"strings"

	"github.com/troupe-ai/troupe/tokenizer"
)

// Delta is newly final text of a stream. Within one Delta, Reasoning
// comes first, then Content, then Tools.
type Delta struct {
	Content   string
	Reasoning string
	// Tools are tool-call pieces (see ToolDelta), when Options.Tools is set.
	Tools []ToolDelta
}

// Options configure a Processor.
type Options struct {
	Stop []string
	// Prompt is the rendered prompt: if it ends inside an opened <think>
	// block, the output starts as reasoning.
	Prompt string
	// PromptIDs are the prompt's token ids. When they end in visible text,
	// the output is decoded as its continuation (see
	// tokenizer.NewContinuationDecoder); when they are empty or only special
	// tokens, the output starts the text.
	PromptIDs []int32
	// Reasoning enables <think> separation (templates that think).
	Reasoning bool
	// Tools enables tool-call parsing; tool-call text is then held back from
	// the content.
	Tools bool
	// Syntax selects the tool-call parser (and, SyntaxHarmony, the reply's
	// channels); the zero value reads Hermes tags and Llama 3 JSON.
	Syntax Syntax
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	toolOpen   = "<tool_call>"
	toolClose  = "</tool_call>"
)

// Processor is one stream's output state.
type Processor struct {
	tok      *tokenizer.Tokenizer
	dec      *tokenizer.StreamDecoder
	markers  map[int32]bool // special tokens decoded as text (Syntax.Markers)
	opts     Options
	pending  string // decoded text not yet classified (may start a stop string or a tag)
	thinking bool
	started  bool // first visible text seen (a leading <think> opens reasoning)
	stopped  bool
	stopWord string          // the stop string that matched
	full     strings.Builder // all content emitted (for tool-call parsing)
	held     strings.Builder // content held back as a possible tool call
	inTool   bool
	trimLead bool       // drop the newlines that follow </think>
	sent     []streamed // tool calls announced so far
	calls    []ToolCall // the final tool calls (after Finish)
	harmony  harmony    // SyntaxHarmony's state
}

// New returns a processor decoding with tok.
func New(tok *tokenizer.Tokenizer, opts Options) *Processor {
	// Output that continues visible prompt text keeps its first token's
	// leading space on SentencePiece tokenizers, as vLLM and llama.cpp
	// return it (they decode with the prompt's last tokens as prefix).
	p := &Processor{tok: tok, opts: opts}
	var markers []string
	if opts.Tools || opts.Syntax == SyntaxHarmony {
		// Mistral's markers matter only to tool calls; harmony's frame
		// every reply.
		markers = opts.Syntax.Markers()
	}
	for _, m := range markers {
		if id, ok := tok.TokenID(m); ok && tok.IsSpecial(id) {
			if p.markers == nil {
				p.markers = map[int32]bool{}
			}
			p.markers[id] = true
		}
	}
	// With markers the decoder keeps special tokens, and Add skips the
	// others before they reach it.
	skip := p.markers == nil
	p.dec = tok.NewStreamDecoder(skip)
	if tail := opts.PromptIDs[max(0, len(opts.PromptIDs)-8):]; tok.Decode(tail, true) != "" {
		p.dec = tok.NewContinuationDecoder(skip)
	}
	if opts.Reasoning {
		open, cl := strings.LastIndex(opts.Prompt, thinkOpen), strings.LastIndex(opts.Prompt, thinkClose)
		p.thinking = open >= 0 && open > cl
		p.started = p.thinking
	}
	return p
}

// Stopped reports whether a stop string was matched; the caller should end
// the generation.
func (p *Processor) Stopped() bool { return p.stopped }

// StopString is the stop string that ended the output ("" when none did).
func (p *Processor) StopString() string { return p.stopWord }

// Add feeds one token and returns the text that became final.
func (p *Processor) Add(id int32) Delta {
	if p.stopped || p.markers != nil && p.tok.IsSpecial(id) && !p.markers[id] {
		return Delta{}
	}
	p.pending += p.dec.Add(id)
	return p.drain(false)
}

// Finish flushes what is left at the end of the stream.
func (p *Processor) Finish() Delta {
	if !p.stopped {
		p.pending += p.dec.Flush()
	}
	d := p.drain(true)
	if p.opts.Syntax == SyntaxHarmony {
		return p.finishHarmony(d)
	}
	if !p.inTool {
		return d
	}
	calls := p.scan(p.held.String(), true)
	valid := len(calls) > 0
	for _, c := range calls {
		valid = valid && c.valid
	}
	if len(p.sent) == 0 && !valid {
		// A tool call that never began (unparsable) is plain content after all.
		d.Content += p.held.String()
		p.full.WriteString(p.held.String())
		p.held.Reset()
		return d
	}
	// Calls that began stand, complete or cut short; text around them is
	// dropped, as vLLM drops it.
	d.Tools = append(d.Tools, p.toolDeltas(calls)...)
	for i, st := range p.sent {
		p.calls = append(p.calls, ToolCall{ID: st.id, Name: st.name, Arguments: st.args, Complete: i < len(calls) && calls[i].valid})
	}
	return d
}

// drain moves pending text out, holding back a suffix that could still turn
// into a stop string or a tag (unless final).
func (p *Processor) drain(final bool) Delta {
	if p.opts.Syntax == SyntaxHarmony {
		return p.drainHarmony(final)
	}
	var d Delta
	open := p.toolOpen()
	for {
		// Stop strings end everything.
		if i, which := firstStop(p.pending, p.opts.Stop); i >= 0 {
			p.pending = p.pending[:i]
			p.stopped, p.stopWord = true, which
			final = true
		}
		if p.opts.Reasoning {
			if !p.started {
				trimmed := strings.TrimLeft(p.pending, " \n")
				if strings.HasPrefix(trimmed, thinkOpen) {
					p.thinking, p.started = true, true
					p.pending = trimmed[len(thinkOpen):]
					continue
				}
				if !final && strings.HasPrefix(thinkOpen, trimmed) {
					return d // could still become <think>
				}
				if trimmed != "" {
					p.started = true
				}
			}
			if p.thinking {
				if i := strings.Index(p.pending, thinkClose); i >= 0 {
					d.Reasoning += p.pending[:i]
					p.pending = p.pending[i+len(thinkClose):]
					p.thinking, p.trimLead = false, true
					continue
				}
				keep := 0
				if !final {
					keep = holdBack(p.pending, append([]string{thinkClose}, p.opts.Stop...))
				}
				d.Reasoning += p.pending[:len(p.pending)-keep]
				p.pending = p.pending[len(p.pending)-keep:]
				return d
			}
		}
		if p.trimLead {
			p.pending = strings.TrimLeft(p.pending, "\n")
			if p.pending == "" {
				return d
			}
			p.trimLead = false
		}
		keep := 0
		if !final {
			tags := p.opts.Stop
			if p.opts.Tools && !p.inTool {
				tags = append([]string{open}, tags...)
			}
			keep = holdBack(p.pending, tags)
		}
		out := p.pending[:len(p.pending)-keep]
		p.pending = p.pending[len(p.pending)-keep:]
		if p.opts.Tools && !p.inTool {
			if i := strings.Index(out, open); i >= 0 {
				p.inTool = true
				p.held.WriteString(out[i:])
				out = out[:i]
			} else if p.opts.Syntax == SyntaxDefault && strings.HasPrefix(strings.TrimLeft(p.full.String()+out, " \n"), "{") && p.full.Len() == 0 && strings.TrimSpace(out) != "" {
				// Llama 3 style: the whole reply is a JSON object.
				p.inTool = true
				p.held.WriteString(out)
				out = ""
			}
		} else if p.inTool {
			p.held.WriteString(out)
			out = ""
		}
		if p.inTool && !final {
			d.Tools = p.toolDeltas(p.scan(p.held.String(), false))
		}
		d.Content += out
		p.full.WriteString(out)
		return d
	}
}

// toolOpen is the text that opens tool calls in the processor's syntax.
func (p *Processor) toolOpen() string {
	if p.opts.Syntax == SyntaxMistral {
		return mistralCalls
	}
	return toolOpen
}

// scan scans held tool-call text in the processor's syntax.
func (p *Processor) scan(text string, final bool) []callScan {
	if p.opts.Syntax == SyntaxMistral {
		return scanMistral(text, final)
	}
	return scanTools(text, final)
}

// firstStop finds the earliest stop string in s.
func firstStop(s string, stops []string) (int, string) {
	best, which := -1, ""
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best, which = i, st
		}
	}
	return best, which
}

// holdBack is the length of the longest suffix of s that is a proper prefix
// of one of tags (it may still complete into the tag).
func holdBack(s string, tags []string) int {
	keep := 0
	for _, t := range tags {
		for n := min(len(t)-1, len(s)); n > keep; n-- {
			if strings.HasSuffix(s, t[:n]) {
				keep = n
				break
			}
		}
	}
	return keep
}

// ToolCalls returns the tool calls after Finish. ok is false when there
// were none.
func (p *Processor) ToolCalls() ([]ToolCall, bool) {
	return p.calls, len(p.calls) > 0
}

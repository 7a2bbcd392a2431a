// Package output turns one request's generated token ids into what an API
// returns: text deltas decoded incrementally (never splitting a UTF-8
// character), stop strings matched across token boundaries and never
// emitted, reasoning separated from the answer for templates that think
// (<think>…</think>, including a prompt that already opened the block), and
// tool calls parsed from the Hermes/Qwen <tool_call>{json}</tool_call> format
// and the Llama 3 JSON format.
//
// It runs per request, in the request's goroutine, off the scheduler's loop.
package output

import (
	"encoding/json"
	"strings"

	"github.com/troupe-ai/troupe/tokenizer"
)

// Delta is newly final text of a stream.
type Delta struct {
	Content   string
	Reasoning string
}

// Options configure a Processor.
type Options struct {
	Stop []string
	// Prompt is the rendered prompt: if it ends inside an opened <think>
	// block, the output starts as reasoning.
	Prompt string
	// Reasoning enables <think> separation (templates that think).
	Reasoning bool
	// Tools enables tool-call parsing; tool-call text is then held back from
	// the content.
	Tools bool
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	toolOpen   = "<tool_call>"
	toolClose  = "</tool_call>"
)

// Processor is one stream's output state.
type Processor struct {
	dec      *tokenizer.StreamDecoder
	opts     Options
	pending  string // decoded text not yet classified (may start a stop string or a tag)
	thinking bool
	started  bool // first visible text seen (a leading <think> opens reasoning)
	stopped  bool
	stopWord string          // the stop string that matched
	full     strings.Builder // all content emitted (for tool-call parsing)
	held     strings.Builder // content held back as a possible tool call
	inTool   bool
	trimLead bool // drop the newlines that follow </think>
}

// New returns a processor decoding with tok.
func New(tok *tokenizer.Tokenizer, opts Options) *Processor {
	p := &Processor{dec: tok.NewStreamDecoder(true), opts: opts}
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
	if p.stopped {
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
	if p.inTool || p.held.Len() > 0 {
		// An unterminated or unparsable tool call is plain content after all.
		if _, ok := p.parseTools(); !ok {
			d.Content += p.held.String()
			p.full.WriteString(p.held.String())
			p.held.Reset()
		}
	}
	return d
}

// drain moves pending text out, holding back a suffix that could still turn
// into a stop string or a tag (unless final).
func (p *Processor) drain(final bool) Delta {
	var d Delta
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
				tags = append([]string{toolOpen}, tags...)
			}
			keep = holdBack(p.pending, tags)
		}
		out := p.pending[:len(p.pending)-keep]
		p.pending = p.pending[len(p.pending)-keep:]
		if p.opts.Tools && !p.inTool {
			if i := strings.Index(out, toolOpen); i >= 0 {
				p.inTool = true
				p.held.WriteString(out[i:])
				out = out[:i]
			} else if strings.HasPrefix(strings.TrimLeft(p.full.String()+out, " \n"), "{") && p.full.Len() == 0 && strings.TrimSpace(out) != "" {
				// Llama 3 style: the whole reply is a JSON object.
				p.inTool = true
				p.held.WriteString(out)
				out = ""
			}
		} else if p.inTool {
			p.held.WriteString(out)
			out = ""
		}
		d.Content += out
		p.full.WriteString(out)
		return d
	}
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

// ToolCall is one parsed function call.
type ToolCall struct {
	Name      string
	Arguments string // JSON object text
}

// ToolCalls parses the held-back tool-call text after Finish. ok is false
// when there was none.
func (p *Processor) ToolCalls() ([]ToolCall, bool) {
	if p.held.Len() == 0 {
		return nil, false
	}
	return p.parseTools()
}

func (p *Processor) parseTools() ([]ToolCall, bool) {
	text := strings.TrimSpace(p.held.String())
	var calls []ToolCall
	if strings.HasPrefix(text, toolOpen) {
		for text != "" {
			if !strings.HasPrefix(text, toolOpen) {
				return nil, false
			}
			end := strings.Index(text, toolClose)
			if end < 0 {
				return nil, false
			}
			c, ok := parseCall(text[len(toolOpen):end])
			if !ok {
				return nil, false
			}
			calls = append(calls, c)
			text = strings.TrimSpace(text[end+len(toolClose):])
		}
		return calls, len(calls) > 0
	}
	// Llama 3: {"name": ..., "parameters": {...}} (one call, or several
	// separated by ';').
	for _, part := range strings.Split(text, ";") {
		c, ok := parseCall(part)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, len(calls) > 0
}

func parseCall(s string) (ToolCall, bool) {
	var raw struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &raw); err != nil || raw.Name == "" {
		return ToolCall{}, false
	}
	args := raw.Arguments
	if args == nil {
		args = raw.Parameters
	}
	if args == nil {
		args = json.RawMessage("{}")
	}
	// Arguments given as a JSON string hold the object's text already.
	var str string
	if json.Unmarshal(args, &str) == nil {
		return ToolCall{Name: raw.Name, Arguments: str}, true
	}
	return ToolCall{Name: raw.Name, Arguments: string(args)}, true
}

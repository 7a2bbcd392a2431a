package output

import (
	"encoding/json"
	"strings"
)

// Harmony's markers (special tokens of o200k_harmony).
const (
	harmonyStart     = "<|start|>"
	harmonyChannel   = "<|channel|>"
	harmonyConstrain = "<|constrain|>"
	harmonyMessage   = "<|message|>"
	harmonyEnd       = "<|end|>"
	harmonyCall      = "<|call|>"
	harmonyReturn    = "<|return|>"
)

// harmonyHeaderMax bounds a message header: output that writes this much
// without a <|message|> is not harmony, and is content.
const harmonyHeaderMax = 512

// harmony is the state of a harmony reply: the prompt ends with
// <|start|>assistant, so the output starts inside a message header.
type harmony struct {
	inBody bool
	raw    bool   // the output is not harmony: content to the end
	kind   byte   // the current message: 'r' reasoning, 'c' content, 't' tool call
	call   int    // the current call's index in Processor.sent
	done   []bool // per sent call: its message ended with valid JSON
}

// harmonyHeader reads a message header: its channel and its recipient.
func harmonyHeader(h string) (channel, recipient string) {
	word := func(s string) string {
		s = strings.TrimLeft(s, " ")
		if i := strings.IndexAny(s, " <"); i >= 0 {
			return s[:i]
		}
		return s
	}
	if i := strings.Index(h, harmonyChannel); i >= 0 {
		channel = word(h[i+len(harmonyChannel):])
	}
	if i := strings.Index(h, "to="); i >= 0 {
		recipient = word(h[i+len("to="):])
	}
	return channel, recipient
}

// drainHarmony moves pending harmony text out (see drain).
func (p *Processor) drainHarmony(final bool) Delta {
	var d Delta
	h := &p.harmony
	// What ends a message's text (<|start|> too: a message cut short), and
	// what may still become one of those or a stop string.
	ends := [...]string{harmonyEnd, harmonyCall, harmonyReturn, harmonyStart}
	held := append(ends[:], p.opts.Stop...)
	if i, which := firstStop(p.pending, p.opts.Stop); i >= 0 {
		p.pending = p.pending[:i]
		p.stopped, p.stopWord = true, which
		final = true
	}
	for {
		if h.raw {
			d.Content += p.pending
			p.full.WriteString(p.pending)
			p.pending = ""
			return d
		}
		if !h.inBody {
			i := strings.Index(p.pending, harmonyMessage)
			if i < 0 {
				if len(p.pending) > harmonyHeaderMax || final && !strings.Contains(p.pending, "<|") {
					h.raw = true
					continue
				}
				if final {
					p.pending = "" // a header cut short
				}
				return d
			}
			channel, recipient := harmonyHeader(p.pending[:i])
			p.pending = p.pending[i+len(harmonyMessage):]
			h.inBody = true
			switch {
			case recipient != "" && p.opts.Tools:
				h.kind, h.call = 't', len(p.sent)
				name := strings.TrimPrefix(recipient, "functions.")
				p.sent = append(p.sent, streamed{id: NewCallID(), name: name})
				h.done = append(h.done, false)
				d.Tools = append(d.Tools, ToolDelta{Index: h.call, ID: p.sent[h.call].id, Name: name})
			case channel == "analysis":
				h.kind = 'r'
			default:
				h.kind = 'c'
			}
			continue
		}
		end, marker := -1, ""
		for _, m := range ends {
			if i := strings.Index(p.pending, m); i >= 0 && (end < 0 || i < end) {
				end, marker = i, m
			}
		}
		text := p.pending
		if end >= 0 {
			text = p.pending[:end]
		} else if !final {
			text = p.pending[:len(p.pending)-holdBack(p.pending, held)]
		}
		p.pending = p.pending[len(text):]
		switch h.kind {
		case 'r':
			d.Reasoning += text
		case 't':
			st := &p.sent[h.call]
			st.args += text
			if text != "" {
				if n := len(d.Tools); n > 0 && d.Tools[n-1].Index == h.call {
					d.Tools[n-1].Arguments += text
				} else {
					d.Tools = append(d.Tools, ToolDelta{Index: h.call, Arguments: text})
				}
			}
			if end >= 0 || final {
				h.done[h.call] = json.Valid([]byte(st.args))
			}
		default:
			d.Content += text
			p.full.WriteString(text)
		}
		if end < 0 {
			return d
		}
		h.inBody = false
		if marker != harmonyStart {
			p.pending = p.pending[len(marker):]
		}
	}
}

// finishHarmony ends a harmony reply: the calls sent are final.
func (p *Processor) finishHarmony(d Delta) Delta {
	for i, st := range p.sent {
		p.calls = append(p.calls, ToolCall{ID: st.id, Name: st.name, Arguments: st.args, Complete: p.harmony.done[i]})
	}
	return d
}

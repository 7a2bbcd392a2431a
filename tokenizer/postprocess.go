package tokenizer

import (
	"encoding/json"
	"fmt"
)

// encBuf is an encoding under construction. Tokens, offsets and the mask
// are only filled when details is set (Encode); EncodeIDs leaves them nil.
type encBuf struct {
	ids     []int32
	toks    []string
	offs    [][2]int
	mask    []bool
	details bool
}

func (e *encBuf) add(id int32, tok string, s, en int, special bool) {
	e.ids = append(e.ids, id)
	if e.details {
		e.toks = append(e.toks, tok)
		e.offs = append(e.offs, [2]int{s, en})
		e.mask = append(e.mask, special)
	}
}

// postProcessor adds special tokens (and fixes offsets) after the model.
type postProcessor interface {
	process(e *encBuf, addSpecial bool)
}

func parsePostProcessor(raw json.RawMessage, vocabID func(string) (int32, bool)) (postProcessor, error) {
	if isNull(raw) {
		return nil, nil
	}
	var h struct {
		Type          string            `json:"type"`
		Processors    []json.RawMessage `json:"processors"`
		Single        []json.RawMessage `json:"single"`
		SpecialTokens map[string]struct {
			ID     string   `json:"id"`
			IDs    []int32  `json:"ids"`
			Tokens []string `json:"tokens"`
		} `json:"special_tokens"`
		TrimOffsets    *bool `json:"trim_offsets"`
		AddPrefixSpace *bool `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	switch h.Type {
	case "Sequence":
		var q seqPost
		for i, r := range h.Processors {
			p, err := parsePostProcessor(r, vocabID)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if p != nil {
				q = append(q, p)
			}
		}
		return q, nil
	case "ByteLevel":
		p := byteLevelPost{trim: true, addPrefixSpace: true}
		if h.TrimOffsets != nil {
			p.trim = *h.TrimOffsets
		}
		if h.AddPrefixSpace != nil {
			p.addPrefixSpace = *h.AddPrefixSpace
		}
		return p, nil
	case "TemplateProcessing":
		var t templatePost
		for _, r := range h.Single {
			var piece struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
				Sequence *struct {
					ID string `json:"id"`
				} `json:"Sequence"`
			}
			if err := json.Unmarshal(r, &piece); err != nil {
				return nil, fmt.Errorf("TemplateProcessing: %w", err)
			}
			switch {
			case piece.Sequence != nil:
				if piece.Sequence.ID != "A" {
					return nil, fmt.Errorf("TemplateProcessing: single template uses sequence %q", piece.Sequence.ID)
				}
				t.items = append(t.items, templateItem{seq: true})
			case piece.SpecialToken != nil:
				st, ok := h.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("TemplateProcessing: special token %q missing from special_tokens", piece.SpecialToken.ID)
				}
				if len(st.IDs) != len(st.Tokens) {
					return nil, fmt.Errorf("TemplateProcessing: special token %q has %d ids and %d tokens", piece.SpecialToken.ID, len(st.IDs), len(st.Tokens))
				}
				t.items = append(t.items, templateItem{ids: st.IDs, toks: st.Tokens})
			default:
				return nil, fmt.Errorf("TemplateProcessing: template piece %s", r)
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("unsupported post_processor %q", h.Type)
}

type seqPost []postProcessor

func (q seqPost) process(e *encBuf, addSpecial bool) {
	for _, p := range q {
		p.process(e, addSpecial)
	}
}

type templateItem struct {
	seq  bool
	ids  []int32
	toks []string
}

// templatePost is TemplateProcessing for single sequences: special tokens
// get offsets (0, 0) and a set special mask.
type templatePost struct{ items []templateItem }

func (t templatePost) process(e *encBuf, addSpecial bool) {
	if !addSpecial {
		return
	}
	out := encBuf{details: e.details, ids: make([]int32, 0, len(e.ids)+4)}
	for _, it := range t.items {
		if it.seq {
			out.ids = append(out.ids, e.ids...)
			if e.details {
				out.toks = append(out.toks, e.toks...)
				out.offs = append(out.offs, e.offs...)
				out.mask = append(out.mask, e.mask...)
			}
			continue
		}
		for k, id := range it.ids {
			out.add(id, it.toks[k], 0, 0, true)
		}
	}
	*e = out
}

// prefixSuffix returns the ids the template adds before and after the
// sequence when it is of the simple form [specials] $A [specials].
func (t templatePost) prefixSuffix() (pre, suf []int32, ok bool) {
	seen := false
	for _, it := range t.items {
		switch {
		case it.seq && seen:
			return nil, nil, false
		case it.seq:
			seen = true
		case seen:
			suf = append(suf, it.ids...)
		default:
			pre = append(pre, it.ids...)
		}
	}
	return pre, suf, seen
}

// byteLevelPost trims leading/trailing spaces off offsets (ByteLevel
// process_offsets) when trim_offsets is set.
type byteLevelPost struct{ trim, addPrefixSpace bool }

func (b byteLevelPost) process(e *encBuf, _ bool) {
	if !b.trim || !e.details {
		return
	}
	isSp := func(r rune) bool { return r == byteToRune[' '] || isWhiteSpace(r) }
	for i, tok := range e.toks {
		rs := []rune(tok)
		lead := 0
		for lead < len(rs) && isSp(rs[lead]) {
			lead++
		}
		trail := 0
		for trail < len(rs) && isSp(rs[len(rs)-1-trail]) {
			trail++
		}
		o := e.offs[i]
		if lead > 0 {
			if (i == 0 || o[0] == 0) && b.addPrefixSpace && lead == 1 {
				lead = 0
			}
			o[0] = min(o[0]+lead, o[1])
		}
		if trail > 0 && o[1] >= trail {
			o[1] = max(o[1]-trail, o[0])
		}
		e.offs[i] = o
	}
}

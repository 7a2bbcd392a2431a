package grammar

import (
	"slices"
	"strings"
)

// Markers are the special tokens a tool-call syntax writes as one token
// (Mistral's [TOOL_CALLS], [ARGS] and [CALL_ID]; harmony's <|start|>,
// <|channel|>, <|constrain|>, <|message|> and <|end|>). A vocabulary gives
// them private bytes (MarkerBytes) instead of their text, and a Guides
// rewrites the same texts in a plan's literals and triggers to those
// bytes: the grammar then writes a marker only as its special token and
// only where a literal has it, never inside a JSON string whose characters
// happen to spell it (which the output parser would read as the marker).
func Markers() []string {
	return []string{"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|end|>"}
}

// markerLead starts a marker's private bytes: 0xF8 never occurs in UTF-8.
const markerLead = 0xF8

// MarkerBytes returns the private bytes of marker text m, false when m is
// not one of Markers.
func MarkerBytes(m string) ([]byte, bool) {
	i := slices.Index(Markers(), m)
	if i < 0 {
		return nil, false
	}
	return []byte{markerLead, byte(i)}, true
}

// markerRewrite returns the function that rewrites a plan's texts to the
// private bytes of the markers the vocabulary has (nil when it has none).
func markerRewrite(tokens [][]byte) func(*Plan) {
	var pairs []string // text, private bytes, ...
	for i, m := range Markers() {
		priv := string([]byte{markerLead, byte(i)})
		if slices.ContainsFunc(tokens, func(bs []byte) bool { return string(bs) == priv }) {
			pairs = append(pairs, m, priv)
		}
	}
	if pairs == nil {
		return nil
	}
	r := strings.NewReplacer(pairs...)
	var spec func(s *Spec)
	spec = func(s *Spec) {
		s.Text = r.Replace(s.Text)
		for _, list := range [][]Spec{s.Seq, s.Alt, s.Plus} {
			for i := range list {
				spec(&list[i])
			}
		}
	}
	return func(p *Plan) {
		spec(&p.Spec)
		p.After, p.Trigger, p.Open = r.Replace(p.After), r.Replace(p.Trigger), r.Replace(p.Open)
	}
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// span is the byte range [s, e) of the original input that one byte of a
// normalized string comes from. Like the Rust NormalizedString, every byte
// of a character carries the span of the whole character it came from.
type span struct{ s, e int32 }

// normalizer rewrites text. When al is non-nil it holds one span per byte
// of s and the normalizer returns the spans of its output (the Rust
// "alignments"); when al is nil no alignment is tracked and nil is
// returned. Both modes produce the same text.
type normalizer interface {
	normalize(s string, al []span) (string, []span)
}

// charSpans returns the initial alignment of text that starts at byte off
// of the input: each byte maps to its character's span.
func charSpans(s string, off int) []span {
	al := make([]span, len(s))
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		sp := span{int32(off + i), int32(off + i + w)}
		for k := range w {
			al[i+k] = sp
		}
		i += w
	}
	return al
}

// builder accumulates a normalized string and, when tracking, its spans.
type builder struct {
	b     []byte
	al    []span
	track bool
}

func newBuilder(n int, track bool) *builder {
	bl := &builder{b: make([]byte, 0, n), track: track}
	if track {
		bl.al = make([]span, 0, n)
	}
	return bl
}

func (bl *builder) add(s string, sp span) {
	bl.b = append(bl.b, s...)
	if bl.track {
		for range len(s) {
			bl.al = append(bl.al, sp)
		}
	}
}

func (bl *builder) addRune(r rune, sp span) {
	n := len(bl.b)
	bl.b = utf8.AppendRune(bl.b, r)
	if bl.track {
		for range len(bl.b) - n {
			bl.al = append(bl.al, sp)
		}
	}
}

// copyFrom copies s[i:j] with its own spans.
func (bl *builder) copyFrom(s string, al []span, i, j int) {
	bl.b = append(bl.b, s[i:j]...)
	if bl.track {
		bl.al = append(bl.al, al[i:j]...)
	}
}

func (bl *builder) result() (string, []span) {
	if !bl.track {
		return string(bl.b), nil
	}
	return string(bl.b), bl.al
}

func spanAt(al []span, i int) span {
	if al == nil {
		return span{}
	}
	return al[i]
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var h struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
		Pattern     patternJSON       `json:"pattern"`
		Content     string            `json:"content"`
		Prepend     string            `json:"prepend"`
		Left        *bool             `json:"strip_left"`
		Right       *bool             `json:"strip_right"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	switch h.Type {
	case "Sequence":
		var seq seqNormalizer
		for i, r := range h.Normalizers {
			n, err := parseNormalizer(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		if len(seq) == 0 {
			return nil, nil
		}
		return seq, nil
	case "NFC":
		return unicodeNormalizer{form: norm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{form: norm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{form: norm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{form: norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "Strip":
		n := stripNormalizer{left: true, right: true}
		if h.Left != nil {
			n.left = *h.Left
		}
		if h.Right != nil {
			n.right = *h.Right
		}
		return n, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "Prepend":
		return prependNormalizer{prefix: h.Prepend}, nil
	case "Replace":
		m, err := h.Pattern.matcher()
		if err != nil {
			return nil, fmt.Errorf("Replace normalizer: %w", err)
		}
		return replaceNormalizer{m: m, content: h.Content}, nil
	}
	return nil, fmt.Errorf("unsupported normalizer %q", h.Type)
}

type seqNormalizer []normalizer

func (q seqNormalizer) normalize(s string, al []span) (string, []span) {
	for _, n := range q {
		s, al = n.normalize(s, al)
	}
	return s, al
}

// prependNormalizer adds a prefix to non-empty text; the prefix takes the
// span of the first character.
type prependNormalizer struct{ prefix string }

func (n prependNormalizer) normalize(s string, al []span) (string, []span) {
	if s == "" || n.prefix == "" {
		return s, al
	}
	if al == nil {
		return n.prefix + s, nil
	}
	out := make([]span, 0, len(n.prefix)+len(al))
	for range len(n.prefix) {
		out = append(out, al[0])
	}
	return n.prefix + s, append(out, al...)
}

// replaceNormalizer replaces every match of a pattern with content. As in
// the Rust NormalizedString::replace, the inserted characters all take the
// span of the last byte of the match.
type replaceNormalizer struct {
	m       matcher
	content string
}

func (n replaceNormalizer) normalize(s string, al []span) (string, []span) {
	var bl *builder
	prev := 0
	n.m.each(s, func(i, j int) {
		if bl == nil {
			bl = newBuilder(len(s)+len(n.content), al != nil)
		}
		bl.copyFrom(s, al, prev, i)
		bl.add(n.content, spanAt(al, j-1))
		prev = j
	})
	if bl == nil {
		return s, al
	}
	bl.copyFrom(s, al, prev, len(s))
	return bl.result()
}

// lowercaseNormalizer lowercases per character like Rust's
// char::to_lowercase (U+0130 becomes "i̇", two characters).
type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string, al []span) (string, []span) {
	bl := newBuilder(len(s), al != nil)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		sp := spanAt(al, i)
		if r == 0x130 {
			bl.add("i\u0307", sp)
		} else {
			bl.addRune(unicode.ToLower(r), sp)
		}
		i += w
	}
	return bl.result()
}

type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string, al []span) (string, []span) {
	i, j := 0, len(s)
	if n.left {
		i = len(s) - len(strings.TrimLeftFunc(s, isWhiteSpace))
	}
	if n.right {
		j = i + len(strings.TrimRightFunc(s[i:], isWhiteSpace))
	}
	if al == nil {
		return s[i:j], nil
	}
	return s[i:j], al[i:j]
}

// stripAccents removes combining marks (category Mn).
type stripAccents struct{}

func (stripAccents) normalize(s string, al []span) (string, []span) {
	bl := newBuilder(len(s), al != nil)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.Is(unicode.Mn, r) {
			bl.copyFrom(s, al, i, i+w)
		}
		i += w
	}
	return bl.result()
}

// unicodeNormalizer applies NFC, NFD, NFKC or NFKD. Text already in the
// form passes through untouched (the common case). Otherwise each
// normalization segment that changes is rebuilt with the alignment the Rust
// crate unicode-normalization-alignments produces: a decomposed character's
// parts all take its span, and a composed character takes the span of the
// starter it was composed onto (the absorbed marks' spans are dropped).
type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string, al []span) (string, []span) {
	if n.form.IsNormalString(s) {
		return s, al
	}
	if al == nil {
		return n.form.String(s), nil
	}
	bl := newBuilder(len(s)+8, true)
	for i := 0; i < len(s); {
		j := i + n.form.NextBoundaryInString(s[i:], true)
		if j <= i {
			j = len(s)
		}
		seg := s[i:j]
		out := n.form.String(seg)
		if out == seg {
			bl.copyFrom(s, al, i, j)
		} else {
			n.alignSegment(bl, seg, out, al[i:j])
		}
		i = j
	}
	return bl.result()
}

type srcRune struct {
	r   rune
	src int // byte offset of the source character in the segment
}

func (n unicodeNormalizer) alignSegment(bl *builder, seg, out string, al []span) {
	compat := n.form == norm.NFKC || n.form == norm.NFKD
	compose := n.form == norm.NFC || n.form == norm.NFKC
	dform := norm.NFD
	if compat {
		dform = norm.NFKD
	}
	var d []srcRune
	for i := 0; i < len(seg); {
		_, w := utf8.DecodeRuneInString(seg[i:])
		for _, r := range dform.String(seg[i : i+w]) {
			d = append(d, srcRune{r, i})
		}
		i += w
	}
	// Canonical ordering: stable sort of each run of non-starters by CCC.
	ccc := func(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }
	for a := 0; a < len(d); {
		if ccc(d[a].r) == 0 {
			a++
			continue
		}
		b := a
		for b < len(d) && ccc(d[b].r) != 0 {
			b++
		}
		for x := a + 1; x < b; x++ {
			for y := x; y > a && ccc(d[y-1].r) > ccc(d[y].r); y-- {
				d[y-1], d[y] = d[y], d[y-1]
			}
		}
		a = b
	}
	res := d
	if compose {
		res = nil
		starter := -1
		last := -1 // CCC of the last character after the starter, -1 if none
		for _, c := range d {
			cc := int(ccc(c.r))
			if starter >= 0 && (last == -1 || (last != 0 && last < cc)) {
				pair := string(res[starter].r) + string(c.r)
				if p := norm.NFC.String(pair); utf8.RuneCountInString(p) == 1 {
					res[starter].r, _ = utf8.DecodeRuneInString(p)
					continue
				}
			}
			if cc == 0 {
				starter = len(res)
				last = -1
			} else {
				last = cc
			}
			res = append(res, c)
		}
	}
	var got strings.Builder
	for _, c := range res {
		got.WriteRune(c.r)
	}
	if got.String() != out {
		// Not reproduced (should not happen): align by position.
		k := 0
		srcs := make([]int, 0, len(seg))
		for i := range seg {
			if utf8.RuneStart(seg[i]) {
				srcs = append(srcs, i)
			}
		}
		for _, r := range out {
			bl.addRune(r, al[srcs[min(k, len(srcs)-1)]])
			k++
		}
		return
	}
	for _, c := range res {
		bl.addRune(c.r, al[c.src])
	}
}

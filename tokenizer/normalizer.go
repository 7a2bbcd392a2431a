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
		// BertNormalizer
		CleanText     *bool `json:"clean_text"`
		ChineseChars  *bool `json:"handle_chinese_chars"`
		StripAccents  *bool `json:"strip_accents"`
		LowercaseBert *bool `json:"lowercase"`
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
	case "BertNormalizer":
		on := func(b *bool) bool { return b == nil || *b } // the Rust defaults are all true
		n := bertNormalizer{clean: on(h.CleanText), chinese: on(h.ChineseChars), lower: on(h.LowercaseBert)}
		n.strip = n.lower // strip_accents null follows lowercase
		if h.StripAccents != nil {
			n.strip = *h.StripAccents
		}
		return n, nil
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

// bertNormalizer is the BertNormalizer: clean_text drops NUL, U+FFFD and
// control characters (categories C*, except tab, LF and CR, which count as
// whitespace) and turns whitespace into spaces; handle_chinese_chars puts a
// space on each side of a CJK ideograph (both spaces take the ideograph's
// span); strip_accents is NFD followed by dropping nonspacing marks;
// lowercase lowercases. Each step aligns as the Rust one does.
type bertNormalizer struct{ clean, chinese, strip, lower bool }

func (n bertNormalizer) normalize(s string, al []span) (string, []span) {
	if n.clean {
		bl := newBuilder(len(s), al != nil)
		for i := 0; i < len(s); {
			r, w := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == 0 || r == utf8.RuneError || isBertControl(r):
			case r == '\t' || r == '\n' || r == '\r' || isWhiteSpace(r):
				bl.add(" ", spanAt(al, i))
			default:
				bl.copyFrom(s, al, i, i+w)
			}
			i += w
		}
		s, al = bl.result()
	}
	if n.chinese {
		bl := newBuilder(len(s)+8, al != nil)
		for i := 0; i < len(s); {
			r, w := utf8.DecodeRuneInString(s[i:])
			if isChineseChar(r) {
				sp := spanAt(al, i)
				bl.add(" ", sp)
				bl.copyFrom(s, al, i, i+w)
				bl.add(" ", sp)
			} else {
				bl.copyFrom(s, al, i, i+w)
			}
			i += w
		}
		s, al = bl.result()
	}
	if n.strip {
		s, al = unicodeNormalizer{form: norm.NFD}.normalize(s, al)
		s, al = stripAccents{}.normalize(s, al)
	}
	if n.lower {
		s, al = lowercaseNormalizer{}.normalize(s, al)
	}
	return s, al
}

// isBertControl is the Rust tokenizers' is_control: any "other" character
// (Cc, Cf, Co, Cs or unassigned) except tab, LF and CR.
func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
		return true
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

// isChineseChar reports whether r is in a CJK Unified Ideographs block (the
// ranges BERT's tokenizer pads).
func isChineseChar(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// unicodeNormalizer applies NFC, NFD, NFKC or NFKD as the Rust tokenizers
// do, through the crate unicode-normalization-alignments. Text already in
// the form passes through untouched (the common case). Otherwise the text is
// cut before every character that starts a normalization segment and cannot
// combine with what precedes it; each chunk that is not yet normalized is
// rebuilt by the crate's algorithm (see rebuild), which yields the text and,
// when tracked, the alignment the Rust NormalizedString gives it.
//
// Unlike Form.String this never inserts U+034F after 30 combining marks
// (the Stream-Safe Text Format): the Rust normalizer does not, and text with
// long runs of marks ("Zalgo") must tokenize as it does there.
type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string, al []span) (string, []span) {
	if n.form.IsNormalString(s) {
		return s, al
	}
	bl := newBuilder(len(s)+8, al != nil)
	start := 0
	flush := func(end int) {
		if end > start {
			chunk := s[start:end]
			if n.form.IsNormalString(chunk) {
				bl.copyFrom(s, al, start, end)
			} else {
				n.rebuild(bl, s, al, start, end)
			}
		}
		start = end
	}
	for i := 0; i < len(s); {
		w := 1
		if s[i] >= utf8.RuneSelf {
			_, w = utf8.DecodeRuneInString(s[i:])
			if i > start && n.form.PropertiesString(s[i:i+w]).BoundaryBefore() {
				flush(i)
			}
		} else if i > start {
			// ASCII starts a segment and combines with nothing before it.
			flush(i)
		}
		i += w
	}
	flush(len(s))
	return bl.result()
}

// normRune is one character of the decomposed or recomposed text with its
// "change" as the Rust crate reports it: 0 for a character that replaces the
// next source character, 1 for an inserted one, -k for one that also absorbs
// the k source characters after it.
type normRune struct {
	r      rune
	ccc    uint8
	change int
}

func cccOf(r rune) uint8 {
	var buf [utf8.UTFMax]byte
	return norm.NFD.Properties(utf8.AppendRune(buf[:0], r)).CCC()
}

// composePair returns the primary composite of a and b (Unicode canonical
// composition of the pair), as the Rust crate's compose(a, b) does.
func composePair(a, b rune) (rune, bool) {
	pair := string(a) + string(b)
	c := norm.NFC.String(pair)
	r, w := utf8.DecodeRuneInString(c)
	if w != len(c) || norm.NFD.String(c) != norm.NFD.String(string(a))+string(b) {
		return 0, false
	}
	return r, true
}

// rebuild normalizes s[i:j], a run of whole normalization segments, the way
// unicode-normalization-alignments does and, when al is non-nil, aligns the
// result the way the Rust NormalizedString::transform does:
//
//   - decomposition: each character is fully decomposed; its first part has
//     change 0, the others change 1; each run of non-starters is then stably
//     sorted by canonical combining class, the changes moving with the
//     characters;
//   - composition (NFC, NFKC): a composite takes the starter's change plus
//     the mark's, minus one;
//   - alignment is positional: a character with change <= 0 takes the span
//     of the next unconsumed source character and consumes it and -change
//     more; one with change 1 takes the span of the byte before the next
//     unconsumed source character (an empty span at the very start).
//
// So a decomposed character's parts all keep its span, a composite keeps
// only its starter's span (the absorbed marks' spans are dropped), and when
// marks are reordered their spans stay in source order.
func (n unicodeNormalizer) rebuild(bl *builder, s string, al []span, i, j int) {
	compat := n.form == norm.NFKC || n.form == norm.NFKD
	dform := norm.NFD
	if compat {
		dform = norm.NFKD
	}
	seg := s[i:j]
	var d []normRune
	sortFrom := 0 // start of the pending run of non-starters
	sortPending := func() {
		run := d[sortFrom:]
		for x := 1; x < len(run); x++ {
			for y := x; y > 0 && run[y-1].ccc > run[y].ccc; y-- {
				run[y-1], run[y] = run[y], run[y-1]
			}
		}
	}
	for k := 0; k < len(seg); {
		_, w := utf8.DecodeRuneInString(seg[k:])
		change := 0
		for _, r := range dform.String(seg[k : k+w]) {
			c := cccOf(r)
			if c == 0 {
				sortPending()
				sortFrom = len(d) + 1
			}
			d = append(d, normRune{r, c, change})
			change = 1
		}
		k += w
	}
	sortPending()
	out := d
	if n.form == norm.NFC || n.form == norm.NFKC {
		out = recompose(d)
	}
	if al == nil {
		for _, c := range out {
			bl.addRune(c.r, span{})
		}
		return
	}
	// Positional alignment over the source characters of the segment.
	pos := i // byte offset in s of the next unconsumed source character
	next := func() {
		if pos < j {
			_, w := utf8.DecodeRuneInString(s[pos:])
			pos += w
		}
	}
	for _, c := range out {
		var sp span
		if c.change > 0 {
			if pos > 0 {
				sp = al[pos-1]
			}
		} else {
			sp = al[min(pos, j-1)]
			next()
			for range -c.change {
				next()
			}
		}
		bl.addRune(c.r, sp)
	}
}

// recompose is the canonical composition of the crate's Recompositions
// iterator over decomposed, canonically ordered characters.
func recompose(d []normRune) []normRune {
	out := make([]normRune, 0, len(d))
	var buf []normRune
	var comp normRune
	hasComp := false
	lastCCC := -1 // CCC of the last character left uncomposed after comp; -1 if none
	for _, c := range d {
		if !hasComp {
			if c.ccc != 0 {
				out = append(out, c)
				continue
			}
			comp, hasComp = c, true
			continue
		}
		if lastCCC >= 0 && lastCCC >= int(c.ccc) {
			// c is blocked from comp.
			if c.ccc == 0 {
				out = append(out, comp)
				out = append(out, buf...)
				buf = buf[:0]
				comp, lastCCC = c, -1
				continue
			}
			buf = append(buf, c)
			lastCCC = int(c.ccc)
			continue
		}
		if r, ok := composePair(comp.r, c.r); ok {
			comp = normRune{r: r, ccc: 0, change: comp.change + c.change - 1}
			continue
		}
		if lastCCC < 0 && c.ccc == 0 {
			out = append(out, comp)
			comp = c
			continue
		}
		buf = append(buf, c)
		lastCCC = int(c.ccc)
	}
	if hasComp {
		out = append(out, comp)
	}
	return append(out, buf...)
}

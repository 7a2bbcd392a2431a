package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// piece is one split of the input on its way to the model: normalized text
// and, when offsets are tracked, one original span per byte. A byteLevel
// piece holds raw bytes whose logical text is their ByteLevel mapping (the
// mapping is applied lazily: the BPE model reads the bytes directly).
type piece struct {
	text      string
	al        []span
	byteLevel bool
}

func (p piece) sub(i, j int) piece {
	q := piece{text: p.text[i:j], byteLevel: p.byteLevel}
	if p.al != nil {
		q.al = p.al[i:j]
	}
	return q
}

// origStart is the original offset where the piece starts (Rust's
// normalized.original_offsets().0); -1 when not tracked.
func (p piece) origStart() int {
	if p.al == nil || len(p.al) == 0 {
		return -1
	}
	return int(p.al[0].s)
}

// preTokenizer splits a piece into smaller pieces, calling emit for each
// non-empty one in order.
type preTokenizer interface {
	split(p piece, emit func(piece))
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// patternJSON is the {"String": ...} / {"Regex": ...} pattern of Split and
// Replace.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func (p patternJSON) matcher() (matcher, error) {
	switch {
	case p.String != nil:
		return literalMatcher{lit: *p.String}, nil
	case p.Regex != nil:
		return compilePattern(*p.Regex)
	}
	return nil, fmt.Errorf("pattern has neither String nor Regex")
}

type splitBehavior int

const (
	behRemoved splitBehavior = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return behRemoved, nil
	case "Isolated", "":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// parsePreTokenizer builds the pre-tokenizer; nested Sequences are
// flattened so that a ByteLevel step knows whether it is the last one.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	steps, err := parsePreSteps(raw)
	if err != nil {
		return nil, err
	}
	for i, st := range steps {
		if bl, ok := st.(*byteLevelPre); ok && i != len(steps)-1 {
			bl.materialize = true
		}
	}
	switch len(steps) {
	case 0:
		return nil, nil
	case 1:
		return steps[0], nil
	}
	return seqPre(steps), nil
}

func parsePreSteps(raw json.RawMessage) ([]preTokenizer, error) {
	var h struct {
		Type           string            `json:"type"`
		Pretokenizers  []json.RawMessage `json:"pretokenizers"`
		Pattern        patternJSON       `json:"pattern"`
		Behavior       string            `json:"behavior"`
		Invert         bool              `json:"invert"`
		AddPrefixSpace *bool             `json:"add_prefix_space"`
		UseRegex       *bool             `json:"use_regex"`
		Replacement    string            `json:"replacement"`
		PrependScheme  string            `json:"prepend_scheme"`
		Split          *bool             `json:"split"`
		Individual     bool              `json:"individual_digits"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch h.Type {
	case "Sequence":
		var out []preTokenizer
		for i, r := range h.Pretokenizers {
			s, err := parsePreSteps(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			out = append(out, s...)
		}
		return out, nil
	case "Split":
		m, err := h.Pattern.matcher()
		if err != nil {
			return nil, fmt.Errorf("Split pre-tokenizer: %w", err)
		}
		b, err := parseBehavior(h.Behavior)
		if err != nil {
			return nil, fmt.Errorf("Split pre-tokenizer: %w", err)
		}
		sp := &splitPre{m: m, beh: b, invert: h.Invert}
		if h.Pattern.Regex != nil {
			sp.regex = *h.Pattern.Regex
		}
		return []preTokenizer{sp}, nil
	case "ByteLevel":
		p := &byteLevelPre{addPrefixSpace: true, useRegex: true}
		if h.AddPrefixSpace != nil {
			p.addPrefixSpace = *h.AddPrefixSpace
		}
		if h.UseRegex != nil {
			p.useRegex = *h.UseRegex
		}
		if p.useRegex {
			m, _ := compilePattern(patGPT2)
			p.re = m
		}
		return []preTokenizer{p}, nil
	case "Metaspace":
		p := &metaspacePre{replacement: '▁', scheme: "always", splitOn: true}
		if h.Replacement != "" {
			p.replacement, _ = utf8.DecodeRuneInString(h.Replacement)
		}
		switch {
		case h.PrependScheme != "":
			p.scheme = strings.ToLower(h.PrependScheme)
		case h.AddPrefixSpace != nil && !*h.AddPrefixSpace:
			p.scheme = "never"
		}
		if p.scheme != "always" && p.scheme != "first" && p.scheme != "never" {
			return nil, fmt.Errorf("Metaspace: unknown prepend_scheme %q", h.PrependScheme)
		}
		if h.Split != nil {
			p.splitOn = *h.Split
		}
		return []preTokenizer{p}, nil
	case "Digits":
		if h.Individual {
			return []preTokenizer{&splitPre{m: runeMatcher{pred: unicode.IsNumber}, beh: behIsolated, regex: patNumber}}, nil
		}
		return []preTokenizer{&splitPre{m: runeMatcher{pred: unicode.IsNumber}, beh: behContiguous}}, nil
	case "Punctuation":
		b, err := parseBehavior(h.Behavior)
		if err != nil {
			return nil, fmt.Errorf("Punctuation pre-tokenizer: %w", err)
		}
		return []preTokenizer{&splitPre{m: runeMatcher{pred: isPunc}, beh: b}}, nil
	case "Whitespace":
		return []preTokenizer{&splitPre{m: wordMatcher{cl: newClassifier()}, beh: behRemoved, invert: true}}, nil
	case "WhitespaceSplit":
		return []preTokenizer{&splitPre{m: runeMatcher{pred: isWhiteSpace}, beh: behRemoved}}, nil
	}
	return nil, fmt.Errorf("unsupported pre_tokenizer %q", h.Type)
}

func isPunc(r rune) bool {
	if r < 0x80 {
		return isASCIIPunct(byte(r))
	}
	return unicode.IsPunct(r)
}

// runeMatcher matches every character satisfying pred, one match per
// character (a Rust `Fn(char) -> bool` pattern).
type runeMatcher struct{ pred func(rune) bool }

func (m runeMatcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if m.pred(r) {
			fn(i, i+w)
		}
		i += w
	}
}

// wordMatcher is \w+|[^\w\s]+ (the Whitespace pre-tokenizer's regex).
type wordMatcher struct{ cl classifier }

func (m wordMatcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		_, c, w := m.cl.next(s, i)
		if c&clsS != 0 && c&clsW == 0 {
			i += w
			continue
		}
		word := c&clsW != 0
		j := i + w
		for j < len(s) {
			_, c2, w2 := m.cl.next(s, j)
			if word && c2&clsW == 0 || !word && (c2&clsW != 0 || c2&clsS != 0) {
				break
			}
			j += w2
		}
		fn(i, j)
		i = j
	}
}

type seqPre []preTokenizer

func (q seqPre) split(p piece, emit func(piece)) {
	q.chain(emit)(p)
}

// chain links the steps once, so that running a piece through the
// sequence allocates no closures per piece.
func (q seqPre) chain(emit func(piece)) func(piece) {
	f := emit
	for k := len(q) - 1; k >= 0; k-- {
		step, next := q[k], f
		f = func(p piece) { step.split(p, next) }
	}
	return f
}

// splitPre is the Split pre-tokenizer (also Digits, Punctuation,
// Whitespace and WhitespaceSplit, which are Splits with fixed patterns).
type splitPre struct {
	m      matcher
	beh    splitBehavior
	invert bool
	// regex is the pattern as a regular expression where the step has one
	// (a Split's Regex; `\p{N}` for Digits one by one), for GGUFPre.
	regex string
}

type seg struct {
	s, e  int
	match bool
}

func (sp *splitPre) split(p piece, emit func(piece)) {
	s := p.text
	if s == "" {
		return
	}
	if st, ok := sp.m.(stepMatcher); ok && (sp.beh == behIsolated || sp.beh == behRemoved) {
		keepGap, keepMatch := true, true
		if sp.beh == behRemoved {
			keepGap, keepMatch = !sp.invert, sp.invert
		}
		prev := 0
		for {
			i, j := st.next(s, prev)
			if i < 0 {
				break
			}
			if keepGap && i > prev {
				emit(p.sub(prev, i))
			}
			if keepMatch {
				emit(p.sub(i, j))
			}
			prev = j
		}
		if keepGap && prev < len(s) {
			emit(p.sub(prev, len(s)))
		}
		return
	}
	if sp.beh == behIsolated || sp.beh == behRemoved {
		// Streaming: no look-ahead needed.
		prev := 0
		keep := func(i, j int, match bool) {
			if i == j {
				return
			}
			if sp.beh == behRemoved && match != sp.invert {
				return
			}
			emit(p.sub(i, j))
		}
		sp.m.each(s, func(i, j int) {
			keep(prev, i, false)
			keep(i, j, true)
			prev = j
		})
		keep(prev, len(s), false)
		return
	}
	var segs []seg
	prev := 0
	sp.m.each(s, func(i, j int) {
		if i > prev {
			segs = append(segs, seg{prev, i, sp.invert})
		}
		segs = append(segs, seg{i, j, !sp.invert})
		prev = j
	})
	if prev < len(s) {
		segs = append(segs, seg{prev, len(s), sp.invert})
	}
	var out []seg
	switch sp.beh {
	case behContiguous:
		prevMatch := false
		for _, g := range segs {
			if g.match == prevMatch && len(out) > 0 {
				out[len(out)-1].e = g.e
			} else {
				out = append(out, g)
			}
			prevMatch = g.match
		}
	case behMergedWithPrevious:
		prevMatch := false
		for _, g := range segs {
			if g.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].e = g.e
			} else {
				out = append(out, g)
			}
			prevMatch = g.match
		}
	case behMergedWithNext:
		prevMatch := false
		for k := len(segs) - 1; k >= 0; k-- {
			g := segs[k]
			if g.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].s = g.s
			} else {
				out = append(out, g)
			}
			prevMatch = g.match
		}
		for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
			out[a], out[b] = out[b], out[a]
		}
	}
	for _, g := range out {
		if g.e > g.s {
			emit(p.sub(g.s, g.e))
		}
	}
}

// byteLevelPre is the ByteLevel pre-tokenizer: an optional prefix space,
// the optional GPT-2 regex split, then every byte mapped to its printable
// ByteLevel character. The mapping is deferred (byteLevel pieces) unless
// another pre-tokenizer follows, in which case it is materialized.
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
	re             matcher
	materialize    bool
}

func (b *byteLevelPre) split(p piece, emit func(piece)) {
	if p.byteLevel {
		p = materializeByteLevel(p)
	}
	if b.addPrefixSpace && !strings.HasPrefix(p.text, " ") {
		p = prependPiece(p, " ")
	}
	if !b.useRegex {
		b.out(p, emit)
		return
	}
	st := b.re.(stepMatcher)
	prev := 0
	for {
		i, j := st.next(p.text, prev)
		if i < 0 {
			break
		}
		if i > prev {
			b.out(p.sub(prev, i), emit)
		}
		b.out(p.sub(i, j), emit)
		prev = j
	}
	if prev < len(p.text) {
		b.out(p.sub(prev, len(p.text)), emit)
	}
}

func (b *byteLevelPre) out(q piece, emit func(piece)) {
	q.byteLevel = true
	if b.materialize {
		q = materializeByteLevel(q)
	}
	emit(q)
}

// prependPiece prepends s; the new bytes take the span of the first
// character (Rust NormalizedString::prepend).
func prependPiece(p piece, s string) piece {
	if p.text == "" {
		return p
	}
	q := piece{text: s + p.text, byteLevel: p.byteLevel}
	if p.al != nil {
		al := make([]span, 0, len(s)+len(p.al))
		for range len(s) {
			al = append(al, p.al[0])
		}
		q.al = append(al, p.al...)
	}
	return q
}

// materializeByteLevel turns a byteLevel piece into its mapped text.
func materializeByteLevel(p piece) piece {
	if !p.byteLevel {
		return p
	}
	var sb strings.Builder
	var al []span
	for i := 0; i < len(p.text); i++ {
		n := sb.Len()
		sb.WriteRune(byteToRune[p.text[i]])
		if p.al != nil {
			for range sb.Len() - n {
				al = append(al, p.al[i])
			}
		}
	}
	return piece{text: sb.String(), al: al}
}

// metaspacePre replaces spaces with the replacement character, prepends
// one per prepend_scheme and splits before each replacement character.
type metaspacePre struct {
	replacement rune
	scheme      string // always, first, never
	splitOn     bool
}

func (m *metaspacePre) split(p piece, emit func(piece)) {
	if p.byteLevel {
		p = materializeByteLevel(p)
	}
	rep := string(m.replacement)
	if strings.IndexByte(p.text, ' ') >= 0 {
		bl := newBuilder(len(p.text)+2*strings.Count(p.text, " "), p.al != nil)
		for i := 0; i < len(p.text); i++ {
			if p.text[i] == ' ' {
				bl.add(rep, spanAt(p.al, i))
			} else {
				bl.copyFrom(p.text, p.al, i, i+1)
			}
		}
		p.text, p.al = bl.result()
	}
	if !strings.HasPrefix(p.text, rep) {
		switch m.scheme {
		case "always":
			p = prependPiece(p, rep)
		case "first":
			if p.origStart() == 0 {
				p = prependPiece(p, rep)
			}
		}
	}
	if !m.splitOn {
		if p.text != "" {
			emit(p)
		}
		return
	}
	(&splitPre{m: literalMatcher{lit: rep}, beh: behMergedWithNext}).split(p, emit)
}

package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decoders are implemented once, as streaming stages: the full Decode pushes
// every token through the chain and flushes, and the StreamDecoder pushes
// one token at a time. Each stage reproduces its Rust decode_chain on the
// token list exactly, holding back only what a later token can still change
// (an unfinished byte-fallback run, an incomplete UTF-8 sequence, trailing
// characters a Strip may remove). So the streamed text always concatenates
// to the full decode, by construction.

// emitFn receives one output string; start marks the beginning of a new
// token (false: continuation of the current one, after Fuse or ByteLevel,
// which join everything into a single token).
type emitFn func(s string, start bool)

type stage interface {
	push(s string, start bool, emit emitFn)
	flush(emit emitFn)
}

// decoderSpec builds fresh stage chains (stages hold per-decode state).
type decoderSpec interface {
	newStages() []stage
}

type seqDecoder []decoderSpec

func (q seqDecoder) newStages() []stage {
	var out []stage
	for _, d := range q {
		out = append(out, d.newStages()...)
	}
	return out
}

type stageFactory func() stage

func (f stageFactory) newStages() []stage { return []stage{f()} }

func parseDecoder(raw json.RawMessage) (decoderSpec, error) {
	if isNull(raw) {
		return nil, nil
	}
	var h struct {
		Type           string            `json:"type"`
		Decoders       []json.RawMessage `json:"decoders"`
		Pattern        patternJSON       `json:"pattern"`
		Content        string            `json:"content"`
		Start          int               `json:"start"`
		Stop           int               `json:"stop"`
		Replacement    string            `json:"replacement"`
		PrependScheme  string            `json:"prepend_scheme"`
		AddPrefixSpace *bool             `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	switch h.Type {
	case "Sequence":
		var q seqDecoder
		for i, r := range h.Decoders {
			d, err := parseDecoder(r)
			if err != nil {
				return nil, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			if d != nil {
				q = append(q, d)
			}
		}
		return q, nil
	case "ByteLevel":
		return stageFactory(func() stage { return &byteLevelStage{} }), nil
	case "ByteFallback":
		return stageFactory(func() stage { return &byteFallbackStage{} }), nil
	case "Fuse":
		return stageFactory(func() stage { return &fuseStage{} }), nil
	case "Strip":
		c, _ := utf8.DecodeRuneInString(h.Content)
		return stageFactory(func() stage { return &stripStage{content: c, start: h.Start, stop: h.Stop} }), nil
	case "Replace":
		if h.Pattern.String == nil {
			return nil, fmt.Errorf("unsupported decoder Replace with a Regex pattern")
		}
		pat, content := *h.Pattern.String, h.Content
		return stageFactory(func() stage { return &replaceStage{pat: pat, content: content} }), nil
	case "Metaspace":
		rep := '▁'
		if h.Replacement != "" {
			rep, _ = utf8.DecodeRuneInString(h.Replacement)
		}
		stripFirst := true
		switch {
		case h.PrependScheme != "":
			stripFirst = strings.ToLower(h.PrependScheme) != "never"
		case h.AddPrefixSpace != nil:
			stripFirst = *h.AddPrefixSpace
		}
		return stageFactory(func() stage { return &metaspaceStage{rep: rep, stripFirst: stripFirst} }), nil
	}
	return nil, fmt.Errorf("unsupported decoder %q", h.Type)
}

// replaceStage: every occurrence of pat in each token becomes content.
// Within a token split over several pushes (after Fuse), the tail that
// could start an occurrence is held until the token continues or ends.
type replaceStage struct {
	pat, content string
	pending      string
}

func (r *replaceStage) push(s string, start bool, emit emitFn) {
	if start {
		r.flush(emit)
	}
	switch {
	case r.pat == "": // an empty pattern matches nothing, as in Rust
		emit(s, start)
		return
	case utf8.RuneCountInString(r.pat) == 1:
		// A one-character pattern cannot straddle two pushes.
		emit(strings.ReplaceAll(s, r.pat, r.content), start)
		return
	}
	text := r.pending + s
	first := start && r.pending == ""
	r.pending = ""
	var sb strings.Builder
	i := 0
	for {
		k := strings.Index(text[i:], r.pat)
		if k < 0 {
			break
		}
		sb.WriteString(text[i : i+k])
		sb.WriteString(r.content)
		i += k + len(r.pat)
	}
	// Hold the longest suffix that is a proper prefix of pat.
	hold := 0
	for n := min(len(r.pat)-1, len(text)-i); n > 0; n-- {
		if strings.HasSuffix(text, r.pat[:n]) {
			hold = n
			break
		}
	}
	sb.WriteString(text[i : len(text)-hold])
	r.pending = text[len(text)-hold:]
	emit(sb.String(), first)
}

func (r *replaceStage) flush(emit emitFn) {
	if r.pending != "" {
		emit(r.pending, false)
		r.pending = ""
	}
}

// byteFallbackStage turns runs of <0xNN> tokens into text: the run's bytes
// if they are valid UTF-8, else one U+FFFD per byte.
type byteFallbackStage struct{ run []byte }

func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || !strings.HasPrefix(s, "<0x") || s[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(s[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}

func (b *byteFallbackStage) push(s string, start bool, emit emitFn) {
	if by, ok := parseByteToken(s); ok && start {
		b.run = append(b.run, by)
		return
	}
	b.flush(emit)
	emit(s, start)
}

func (b *byteFallbackStage) flush(emit emitFn) {
	if len(b.run) == 0 {
		return
	}
	if utf8.Valid(b.run) {
		emit(string(b.run), true)
	} else {
		for range b.run {
			emit("\uFFFD", true)
		}
	}
	b.run = b.run[:0]
}

// fuseStage joins all tokens into one.
type fuseStage struct{ seen bool }

func (f *fuseStage) push(s string, _ bool, emit emitFn) {
	emit(s, !f.seen)
	f.seen = true
}

func (f *fuseStage) flush(emitFn) {}

// continuer is a stage whose output differs at the start of the text (the
// first token's leading space dropped): continueText makes it treat what
// follows as the middle of a text.
type continuer interface{ continueText() }

func (f *fuseStage) continueText()      { f.seen = true }
func (m *metaspaceStage) continueText() { m.tokens = 1 }
func (b *byteLevelStage) continueText() { b.seen = true }

// stripStage removes up to start leading and stop trailing content
// characters from each token.
type stripStage struct {
	content     rune
	start, stop int
	left        int    // leading characters still strippable in this token
	tail        string // trailing content characters held back (stop > 0)
}

func (st *stripStage) push(s string, start bool, emit emitFn) {
	if start {
		st.endToken(emit)
		st.left = st.start
	}
	for st.left > 0 && s != "" {
		r, w := utf8.DecodeRuneInString(s)
		if r != st.content {
			st.left = 0
			break
		}
		s = s[w:]
		st.left--
	}
	if s != "" {
		st.left = 0
	}
	if st.stop == 0 {
		if s != "" || start {
			emit(s, start)
		}
		return
	}
	// Hold back the trailing run of content characters.
	body := strings.TrimRightFunc(s, func(r rune) bool { return r == st.content })
	if body != "" {
		emit(st.tail+body, start)
		st.tail = ""
		start = false
	} else if start {
		emit("", true)
	}
	st.tail += s[len(body):]
}

func (st *stripStage) endToken(emit emitFn) {
	if st.tail == "" {
		return
	}
	n := utf8.RuneCountInString(st.tail)
	drop := min(n, st.stop)
	keep := st.tail
	for range drop {
		_, w := utf8.DecodeLastRuneInString(keep)
		keep = keep[:len(keep)-w]
	}
	if keep != "" {
		emit(keep, false)
	}
	st.tail = ""
}

func (st *stripStage) flush(emit emitFn) { st.endToken(emit) }

// metaspaceStage turns the replacement character back into spaces; in the
// first token it is dropped instead (unless prepend_scheme is never).
type metaspaceStage struct {
	rep        rune
	stripFirst bool
	tokens     int
}

func (m *metaspaceStage) push(s string, start bool, emit emitFn) {
	if start {
		m.tokens++
	}
	with := " "
	if m.tokens <= 1 && m.stripFirst {
		with = ""
	}
	emit(strings.ReplaceAll(s, string(m.rep), with), start)
}

func (m *metaspaceStage) flush(emitFn) {}

// byteLevelStage maps ByteLevel characters back to bytes and decodes the
// concatenation as Rust's String::from_utf8_lossy does (one U+FFFD per
// maximal invalid subsequence), holding back an incomplete trailing
// sequence until the next token or the end.
type byteLevelStage struct {
	buf  []byte
	seen bool
}

func (b *byteLevelStage) push(s string, _ bool, emit emitFn) {
	b.buf = byteLevelDecode(b.buf, s)
	out, n := lossyPrefix(b.buf, false)
	b.buf = b.buf[:copy(b.buf, b.buf[n:])]
	if out != "" {
		emit(out, !b.seen)
		b.seen = true
	}
}

func (b *byteLevelStage) flush(emit emitFn) {
	if len(b.buf) == 0 {
		return
	}
	out, _ := lossyPrefix(b.buf, true)
	b.buf = b.buf[:0]
	emit(out, !b.seen)
	b.seen = true
}

// lossyPrefix decodes buf like from_utf8_lossy and returns the text and the
// number of bytes consumed. Unless final, an incomplete sequence at the end
// is left unconsumed.
func lossyPrefix(buf []byte, final bool) (string, int) {
	if utf8.Valid(buf) {
		return string(buf), len(buf)
	}
	var sb strings.Builder
	i := 0
	for i < len(buf) {
		c := buf[i]
		if c < 0x80 {
			sb.WriteByte(c)
			i++
			continue
		}
		w, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			w = 2
		case c == 0xE0:
			w, lo = 3, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			w = 3
		case c == 0xED:
			w, hi = 3, 0x9F
		case c == 0xF0:
			w, lo = 4, 0x90
		case c >= 0xF1 && c <= 0xF3:
			w = 4
		case c == 0xF4:
			w, hi = 4, 0x8F
		default:
			sb.WriteString("\uFFFD")
			i++
			continue
		}
		k := 1
		for k < w && i+k < len(buf) {
			x := buf[i+k]
			if k == 1 && (x < lo || x > hi) || k > 1 && (x < 0x80 || x > 0xBF) {
				break
			}
			k++
		}
		if k == w {
			sb.Write(buf[i : i+w])
			i += w
			continue
		}
		if i+k == len(buf) && !final {
			break // incomplete: wait for more bytes
		}
		sb.WriteString("\uFFFD")
		i += k
	}
	return sb.String(), i
}

// joinStage is the decoding without a decoder: tokens joined by spaces.
type joinStage struct{ n int }

func (j *joinStage) push(s string, start bool, emit emitFn) {
	if start && j.n > 0 {
		emit(" ", false)
	}
	if start {
		j.n++
	}
	emit(s, start)
}

func (j *joinStage) flush(emitFn) {}

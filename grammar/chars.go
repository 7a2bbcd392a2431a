package grammar

import (
	"slices"
	"strconv"
	"strings"
)

// RuneRange is the code points Lo..Hi (inclusive).
type RuneRange struct{ Lo, Hi rune }

// CharSet is a set of Unicode characters as sorted, disjoint, non-adjacent
// ranges within U+0000..U+10FFFF, never holding a surrogate (U+D800..U+DFFF
// are not characters of UTF-8 output). NewCharSet makes one from any
// ranges; the methods keep it in that form.
type CharSet []RuneRange

const (
	maxRune  = 0x10FFFF
	surrLo   = 0xD800
	surrHi   = 0xDFFF
	maxASCII = 0x7F
)

// NewCharSet returns the normalized set of the given ranges: sorted and
// merged, clipped to U+0000..U+10FFFF, surrogates removed. A range with
// Lo > Hi is empty.
func NewCharSet(rs ...RuneRange) CharSet {
	var out CharSet
	for _, r := range rs {
		lo, hi := max(r.Lo, 0), min(r.Hi, maxRune)
		if lo > hi {
			continue
		}
		// Cut the surrogates out.
		if lo <= surrHi && hi >= surrLo {
			if lo < surrLo {
				out = append(out, RuneRange{lo, surrLo - 1})
			}
			if hi > surrHi {
				out = append(out, RuneRange{surrHi + 1, hi})
			}
			continue
		}
		out = append(out, RuneRange{lo, hi})
	}
	return sortRanges(out)
}

// Chars returns the set of the given characters.
func Chars(rs ...rune) CharSet {
	out := make([]RuneRange, len(rs))
	for i, r := range rs {
		out[i] = RuneRange{r, r}
	}
	return NewCharSet(out...)
}

// AnyChar returns the set of every character (every code point but the
// surrogates).
func AnyChar() CharSet { return NewCharSet(RuneRange{0, maxRune}) }

// Contains reports whether r is in s.
func (s CharSet) Contains(r rune) bool {
	_, found := slices.BinarySearchFunc(s, r, func(rr RuneRange, r rune) int {
		switch {
		case rr.Hi < r:
			return -1
		case rr.Lo > r:
			return 1
		}
		return 0
	})
	return found
}

// Empty reports whether s has no character.
func (s CharSet) Empty() bool { return len(s) == 0 }

// Negate returns every character not in s.
func (s CharSet) Negate() CharSet {
	var out []RuneRange
	next := rune(0)
	for _, r := range s {
		if r.Lo > next {
			out = append(out, RuneRange{next, r.Lo - 1})
		}
		next = r.Hi + 1
	}
	if next <= maxRune {
		out = append(out, RuneRange{next, maxRune})
	}
	return NewCharSet(out...)
}

// Union returns the characters of s or o.
func (s CharSet) Union(o CharSet) CharSet {
	return NewCharSet(append(slices.Clone([]RuneRange(s)), o...)...)
}

// Intersect returns the characters of both s and o.
func (s CharSet) Intersect(o CharSet) CharSet {
	return s.Negate().Union(o.Negate()).Negate()
}

// Minus returns the characters of s that are not in o.
func (s CharSet) Minus(o CharSet) CharSet { return s.Intersect(o.Negate()) }

// key is a string identifying s, for caches.
func (s CharSet) key() string {
	var sb strings.Builder
	for _, r := range s {
		sb.WriteString(strconv.FormatInt(int64(r.Lo), 16))
		sb.WriteByte('-')
		sb.WriteString(strconv.FormatInt(int64(r.Hi), 16))
		sb.WriteByte(',')
	}
	return sb.String()
}

// splitDigits splits lo..hi, numbers of n digits of `shift` bits each, into
// ranges that are products of one range per digit: in each range emitted,
// once a digit differs between lo and hi every lower digit runs over all
// its values. This is the classic split of a code point range into UTF-8
// byte-range sequences (6-bit continuation digits), and of a hex range into
// per-digit classes (4-bit digits).
func splitDigits(lo, hi uint32, shift uint, n int, emit func(lo, hi uint32)) {
	for i := 1; i < n; i++ {
		m := uint32(1)<<(shift*uint(i)) - 1
		if lo&^m == hi&^m {
			continue
		}
		if lo&m != 0 {
			splitDigits(lo, lo|m, shift, n, emit)
			splitDigits((lo|m)+1, hi, shift, n, emit)
			return
		}
		if hi&m != m {
			splitDigits(lo, (hi&^m)-1, shift, n, emit)
			splitDigits(hi&^m, hi, shift, n, emit)
			return
		}
	}
	emit(lo, hi)
}

// encodeUTF8 is r's shortest UTF-8 encoding in n bytes (n from utf8Len).
func encodeUTF8(r uint32, n int) []byte {
	switch n {
	case 1:
		return []byte{byte(r)}
	case 2:
		return []byte{0xC0 | byte(r>>6), 0x80 | byte(r&0x3F)}
	case 3:
		return []byte{0xE0 | byte(r>>12), 0x80 | byte(r>>6&0x3F), 0x80 | byte(r&0x3F)}
	}
	return []byte{0xF0 | byte(r>>18), 0x80 | byte(r>>12&0x3F), 0x80 | byte(r>>6&0x3F), 0x80 | byte(r&0x3F)}
}

// utf8Seqs returns the byte-class sequences whose union is exactly the
// valid UTF-8 encodings of the characters of set. Sequences that differ in
// their first class only are merged (so all of ASCII is one class).
func utf8Seqs(set CharSet) [][]ByteSet {
	var seqs [][]ByteSet
	bounds := [...]struct {
		lo, hi uint32
		n      int
	}{{0, 0x7F, 1}, {0x80, 0x7FF, 2}, {0x800, 0xFFFF, 3}, {0x10000, maxRune, 4}}
	for _, r := range set {
		for _, bd := range bounds {
			lo, hi := max(uint32(r.Lo), bd.lo), min(uint32(r.Hi), bd.hi)
			if lo > hi {
				continue
			}
			n := bd.n
			splitDigits(lo, hi, 6, n, func(lo, hi uint32) {
				a, b := encodeUTF8(lo, n), encodeUTF8(hi, n)
				seq := make([]ByteSet, n)
				for i := range seq {
					seq[i] = Range(a[i], b[i])
				}
				seqs = append(seqs, seq)
			})
		}
	}
	return mergeHeads(seqs)
}

// mergeHeads merges sequences equal but for their first class.
func mergeHeads(seqs [][]ByteSet) [][]ByteSet {
	var out [][]ByteSet
	index := map[string]int{}
	for _, s := range seqs {
		var kb strings.Builder
		kb.WriteByte(byte(len(s)))
		for _, bs := range s[1:] {
			for _, w := range bs {
				kb.WriteString(strconv.FormatUint(w, 16))
				kb.WriteByte(',')
			}
		}
		k := kb.String()
		if i, ok := index[k]; ok {
			out[i][0].Union(s[0])
			continue
		}
		index[k] = len(out)
		out = append(out, slices.Clone(s))
	}
	return out
}

// seqSyms turns byte-class sequences into the terminals of each.
func seqSyms(seq []ByteSet) []Sym {
	out := make([]Sym, len(seq))
	for i, bs := range seq {
		out[i] = T(bs)
	}
	return out
}

// never is a symbol that matches nothing: a terminal with no byte.
func never() Sym { return T(ByteSet{}) }

// choiceOf returns one symbol for the union of the byte-class sequences:
// the terminal itself when there is a single one-byte sequence, a symbol
// that matches nothing when there is none.
func (b *Builder) choiceOf(name string, seqs [][]ByteSet) Sym {
	switch {
	case len(seqs) == 0:
		return never()
	case len(seqs) == 1 && len(seqs[0]) == 1:
		return T(seqs[0][0])
	}
	nt := b.Rule(name)
	for _, s := range seqs {
		b.Alt(nt, seqSyms(s)...)
	}
	return N(nt)
}

// UTF8 returns a symbol for one character of set in UTF-8: the valid,
// shortest-form encodings only, never a surrogate. It costs a few
// alternatives per range of set (all characters: nine), not one per
// character. An empty set gives a symbol that matches nothing.
func (b *Builder) UTF8(set CharSet) Sym {
	return b.choiceOf("utf8", utf8Seqs(NewCharSet(set...)))
}

// hexDigit is the bytes that spell hex digit values lo..hi, either case.
func hexDigits(lo, hi uint32) ByteSet {
	var s ByteSet
	for v := lo; v <= hi; v++ {
		if v < 10 {
			s.Add('0' + byte(v))
		} else {
			s.Add('a' + byte(v-10))
			s.Add('A' + byte(v-10))
		}
	}
	return s
}

// hexSeqs returns the byte-class sequences spelling lo..hi (at most
// 0xFFFF) as four hex digits of either case.
func hexSeqs(lo, hi uint32) [][]ByteSet {
	var seqs [][]ByteSet
	splitDigits(lo, hi, 4, 4, func(lo, hi uint32) {
		seq := make([]ByteSet, 4)
		for i := range seq {
			sh := uint(12 - 4*i)
			seq[i] = hexDigits(lo>>sh&0xF, hi>>sh&0xF)
		}
		seqs = append(seqs, seq)
	})
	return seqs
}

// hexSetSeqs is hexSeqs over every range of a set of 16-bit values.
func hexSetSeqs(rs []RuneRange) [][]ByteSet {
	var seqs [][]ByteSet
	for _, r := range rs {
		seqs = append(seqs, hexSeqs(uint32(r.Lo), uint32(r.Hi))...)
	}
	return mergeHeads(seqs)
}

// jsonShort are JSON's two-character escapes: the letter after the
// backslash and the character it stands for.
var jsonShort = [...]struct {
	letter byte
	r      rune
}{{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'}, {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}}

// jsonRawExcluded are the characters JSON never allows raw in a string.
var jsonRawExcluded = NewCharSet(RuneRange{0, 0x1F}, RuneRange{'"', '"'}, RuneRange{'\\', '\\'})

// JSONChar returns a symbol for one character of set as it may appear
// between the quotes of a JSON string literal: raw UTF-8 where JSON allows
// it raw (not '"', '\\' or U+0000..U+001F), and every escape that decodes
// to it: the two-character escapes (\" \\ \/ \b \f \n \r \t), \uXXXX with
// hex digits of either case, and, beyond the BMP, exactly the surrogate
// pairs \uD8xx\uDCxx that decode into set. Hex ranges are split per digit,
// so a large set costs a few alternatives per range. An empty set gives a
// symbol that matches nothing.
func (b *Builder) JSONChar(set CharSet) Sym {
	set = NewCharSet(set...)
	if set.Empty() {
		return never()
	}
	// The same set is the same rule: a key trie asks for "any character
	// but this one" at every node of a name, and each costs hundreds of
	// alternatives.
	key := set.key()
	if sym, ok := b.jsonChars[key]; ok {
		return sym
	}
	if b.jsonChars == nil {
		b.jsonChars = map[string]Sym{}
	}
	nt := b.Rule("jsonchar")
	b.jsonChars[key] = N(nt)
	for _, s := range utf8Seqs(set.Minus(jsonRawExcluded)) {
		b.Alt(nt, seqSyms(s)...)
	}
	var letters ByteSet
	for _, e := range jsonShort {
		if set.Contains(e.r) {
			letters.Add(e.letter)
		}
	}
	if letters != (ByteSet{}) {
		b.Alt(nt, B('\\'), T(letters))
	}
	if bmp := set.Intersect(NewCharSet(RuneRange{0, 0xFFFF})); !bmp.Empty() {
		b.Alt(nt, B('\\'), B('u'), b.choiceOf("hex4", hexSetSeqs(bmp)))
	}
	// Beyond the BMP: c-0x10000 is 20 bits, the high surrogate carries the
	// top ten, the low one the bottom ten. Each range of set is a product
	// of high and low ranges in at most three pieces; pieces with the same
	// low range share one alternative.
	type piece struct{ highs, low []RuneRange }
	var pieces []piece
	add := func(h0, h1, l0, l1 uint32) {
		low := []RuneRange{{rune(surrLo + 0x400 + l0), rune(surrLo + 0x400 + l1)}}
		for i := range pieces {
			if slices.Equal(pieces[i].low, low) {
				pieces[i].highs = append(pieces[i].highs, RuneRange{rune(surrLo + h0), rune(surrLo + h1)})
				return
			}
		}
		pieces = append(pieces, piece{[]RuneRange{{rune(surrLo + h0), rune(surrLo + h1)}}, low})
	}
	for _, r := range set.Intersect(NewCharSet(RuneRange{0x10000, maxRune})) {
		lo, hi := uint32(r.Lo-0x10000), uint32(r.Hi-0x10000)
		hl, hh := lo>>10, hi>>10
		if hl == hh {
			add(hl, hl, lo&0x3FF, hi&0x3FF)
			continue
		}
		if lo&0x3FF != 0 {
			add(hl, hl, lo&0x3FF, 0x3FF)
			hl++
		}
		if hi&0x3FF != 0x3FF {
			add(hh, hh, 0, hi&0x3FF)
			hh--
		}
		if hl <= hh {
			add(hl, hh, 0, 0x3FF)
		}
	}
	for _, p := range pieces {
		highs := b.choiceOf("hexhigh", hexSetSeqs(sortRanges(p.highs)))
		low := b.choiceOf("hexlow", hexSetSeqs(p.low))
		b.Alt(nt, B('\\'), B('u'), highs, B('\\'), B('u'), low)
	}
	return N(nt)
}

// sortRanges sorts and merges ranges (of surrogate values, which CharSet
// would drop).
func sortRanges(rs []RuneRange) []RuneRange {
	slices.SortFunc(rs, func(a, b RuneRange) int { return int(a.Lo - b.Lo) })
	n := 0
	for _, r := range rs {
		if n > 0 && r.Lo <= rs[n-1].Hi+1 {
			rs[n-1].Hi = max(rs[n-1].Hi, r.Hi)
			continue
		}
		rs[n] = r
		n++
	}
	return rs[:n]
}

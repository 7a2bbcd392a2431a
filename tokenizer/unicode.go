package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes used by the pre-tokenizer matchers, the added-token
// word-boundary checks and the ByteLevel offset trimming. They follow
// Oniguruma (the regex engine of the Rust tokenizers) for \s, \p{L}, \p{N}
// and friends: general categories from the Unicode tables of the Go
// standard library and \s as the White_Space property.
const (
	clsL   uint16 = 1 << iota // \p{L}
	clsN                      // \p{N}
	clsS                      // \s (White_Space)
	clsLu                     // \p{Lu}
	clsLl                     // \p{Ll}
	clsLt                     // \p{Lt}
	clsLm                     // \p{Lm}
	clsLo                     // \p{Lo}
	clsM                      // \p{M}
	clsP                      // \p{P}
	clsSym                    // \p{S}
	clsNd                     // \p{Nd}
	clsW                      // \w as in the Rust regex crate (Unicode word character)
)

// classTable maps every BMP code point to its class bits. It is built once,
// on first use, and never written afterwards.
var classTable = sync.OnceValue(func() []uint16 {
	t := make([]uint16, 0x10000)
	for r := range rune(0x10000) {
		t[r] = computeClass(r)
	}
	return t
})

func computeClass(r rune) uint16 {
	var c uint16
	if r < 0x80 {
		switch {
		case r >= 'a' && r <= 'z':
			c = clsL | clsLl | clsW
		case r >= 'A' && r <= 'Z':
			c = clsL | clsLu | clsW
		case r >= '0' && r <= '9':
			c = clsN | clsNd | clsW
		case r == ' ' || (r >= '\t' && r <= '\r'):
			c = clsS
		case r == '_':
			c = clsP | clsW
		case r < 0x20 || r == 0x7f:
			c = 0
		default:
			if unicode.IsPunct(r) {
				c = clsP
			} else if unicode.IsSymbol(r) {
				c = clsSym
			}
		}
		return c
	}
	if unicode.IsLetter(r) {
		c |= clsL | clsW
		switch {
		case unicode.Is(unicode.Lu, r):
			c |= clsLu
		case unicode.Is(unicode.Ll, r):
			c |= clsLl
		case unicode.Is(unicode.Lt, r):
			c |= clsLt
		case unicode.Is(unicode.Lm, r):
			c |= clsLm
		case unicode.Is(unicode.Lo, r):
			c |= clsLo
		}
	}
	if unicode.IsNumber(r) {
		c |= clsN
		if unicode.Is(unicode.Nd, r) {
			c |= clsNd | clsW
		}
		if unicode.Is(unicode.Nl, r) {
			c |= clsW
		}
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= clsS
	}
	if unicode.IsMark(r) {
		c |= clsM | clsW
	}
	if unicode.IsPunct(r) {
		c |= clsP
		if unicode.Is(unicode.Pc, r) {
			c |= clsW
		}
	}
	if unicode.IsSymbol(r) {
		c |= clsSym
	}
	if unicode.Is(unicode.Other_Alphabetic, r) || unicode.Is(unicode.Join_Control, r) {
		c |= clsW
	}
	return c
}

// classifier is a handle on the class table, held by the values that need
// it so the hot loops index a local slice.
type classifier struct{ t []uint16 }

func newClassifier() classifier { return classifier{t: classTable()} }

func (c classifier) of(r rune) uint16 {
	if uint32(r) < 0x10000 {
		return c.t[r]
	}
	if r > unicode.MaxRune {
		return 0
	}
	return computeClass(r)
}

// next decodes the rune at s[i:] and returns it with its class and width.
// Invalid UTF-8 decodes as U+FFFD with width 1 (inputs are valid strings in
// practice; Go strings may still carry invalid bytes).
func (c classifier) next(s string, i int) (rune, uint16, int) {
	b := s[i]
	if b < 0x80 {
		return rune(b), c.t[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, c.of(r), w
}

func isWhiteSpace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

package tokenizer

import "unicode/utf8"

// Hand-written equivalents of the pre-tokenizer regexes in pattern.go. Each
// function returns the end of the match starting exactly at byte i, or -1,
// following Oniguruma's leftmost-first alternation and greedy backtracking
// step by step (the comments name the alternative being tried). The
// differential fuzz test in pattern_test.go checks them against regexp2.

// runMask returns the end of the run of characters from i whose class has
// any bit of mask.
func (m *scanMatcher) runMask(s string, i int, mask uint16) int {
	for i < len(s) {
		b := s[i]
		if b < 0x80 {
			if m.cl.t[b]&mask == 0 {
				return i
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if m.cl.of(r)&mask == 0 {
			return i
		}
		i += w
	}
	return i
}

// runNotMask returns the end of the run of characters from i whose class
// has no bit of mask.
func (m *scanMatcher) runNotMask(s string, i int, mask uint16) int {
	for i < len(s) {
		b := s[i]
		if b < 0x80 {
			if m.cl.t[b]&mask != 0 {
				return i
			}
			i++
			continue
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		if m.cl.of(r)&mask != 0 {
			return i
		}
		i += w
	}
	return i
}

// classAt returns the class of the character at i (0 past the end).
func (m *scanMatcher) classAt(s string, i int) (uint16, int) {
	if i >= len(s) {
		return 0, 0
	}
	_, c, w := m.cl.next(s, i)
	return c, w
}

// crlfRun extends i over [\r\n]* (and '/' when slash is set).
func crlfRun(s string, i int, slash bool) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || (slash && s[i] == '/')) {
		i++
	}
	return i
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d after the apostrophe at j-1,
// case-insensitively when ci is set (Oniguruma folds U+017F LONG S to s).
// It returns the end or -1.
func contraction(s string, j int, ci bool) int {
	if j >= len(s) {
		return -1
	}
	r, w := utf8.DecodeRuneInString(s[j:])
	r = foldASCII(r, ci)
	switch r {
	case 's', 't', 'm', 'd':
		return j + w
	case 'r', 'v', 'l':
		want := 'e'
		if r == 'l' {
			want = 'l'
		}
		k := j + w
		if k >= len(s) {
			return -1
		}
		r2, w2 := utf8.DecodeRuneInString(s[k:])
		if foldASCII(r2, ci) == want {
			return k + w2
		}
	}
	return -1
}

func foldASCII(r rune, ci bool) rune {
	if !ci {
		return r
	}
	if r >= 'A' && r <= 'Z' {
		return r + ('a' - 'A')
	}
	if r == 0x17F { // LONG S folds to s
		return 's'
	}
	return r
}

// wsTail matches, at a whitespace character i, the alternatives
// \s*[\r\n]+ | \s+(?!\S) | \s+ (crlf selects whether the first one is
// part of the pattern).
func (m *scanMatcher) wsTail(s string, i int, crlf bool) int {
	j := m.runMask(s, i, clsS)
	if crlf {
		// \s* is greedy and gives back characters until [\r\n]+ matches:
		// the match ends just after the last \r or \n in the run. Multi-byte
		// whitespace never contains the bytes 0x0A or 0x0D.
		for k := j - 1; k >= i; k-- {
			if s[k] == '\n' || s[k] == '\r' {
				return k + 1
			}
		}
	}
	// \s+(?!\S): at the end of the input the whole run; otherwise the run
	// less its last character, which then satisfies the look-ahead.
	if j == len(s) {
		return j
	}
	_, lw := utf8.DecodeLastRuneInString(s[i:j])
	if j-lw > i {
		return j - lw
	}
	return j // \s+
}

// gpt2At: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2At(m *scanMatcher, s string, i int) int {
	r, c, w := m.cl.next(s, i)
	if r == '\'' {
		if e := contraction(s, i+w, false); e > 0 {
			return e
		}
	}
	c2, _ := m.classAt(s, i+w)
	sp := r == ' '
	if sp && c2&clsL != 0 {
		return m.runMask(s, i+w, clsL)
	}
	if c&clsL != 0 {
		return m.runMask(s, i, clsL)
	}
	if sp && c2&clsN != 0 {
		return m.runMask(s, i+w, clsN)
	}
	if c&clsN != 0 {
		return m.runMask(s, i, clsN)
	}
	const other = clsS | clsL | clsN
	if sp && i+w < len(s) && c2&other == 0 {
		return m.runNotMask(s, i+w, other)
	}
	if c&other == 0 {
		return m.runNotMask(s, i, other)
	}
	return m.wsTail(s, i, false)
}

// cl100kAt: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+  (D = m.digits)
func cl100kAt(m *scanMatcher, s string, i int) int {
	r, c, w := m.cl.next(s, i)
	if r == '\'' {
		if e := contraction(s, i+w, true); e > 0 {
			return e
		}
	}
	if c&clsL != 0 {
		return m.runMask(s, i, clsL)
	}
	c2, _ := m.classAt(s, i+w)
	if r != '\r' && r != '\n' && c&clsN == 0 && c2&clsL != 0 {
		return m.runMask(s, i+w, clsL)
	}
	if c&clsN != 0 {
		return m.digitRun(s, i)
	}
	const other = clsS | clsL | clsN
	if r == ' ' && i+w < len(s) && c2&other == 0 {
		return crlfRun(s, m.runNotMask(s, i+w, other), false)
	}
	if c&other == 0 {
		return crlfRun(s, m.runNotMask(s, i, other), false)
	}
	return m.wsTail(s, i, true)
}

// digitRun matches \p{N}{1,D} at i (D = m.digits).
func (m *scanMatcher) digitRun(s string, i int) int {
	for n := 0; n < m.digits && i < len(s); n++ {
		_, c, w := m.cl.next(s, i)
		if c&clsN == 0 {
			break
		}
		i += w
	}
	return i
}

// digitsAt: \p{N}{1,D}
func digitsAt(m *scanMatcher, s string, i int) int {
	if _, c, _ := m.cl.next(s, i); c&clsN == 0 {
		return -1
	}
	return m.digitRun(s, i)
}

const (
	o200kUpper = clsLu | clsLt | clsLm | clsLo | clsM
	o200kLower = clsLl | clsLm | clsLo | clsM
)

// o200kAt: [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]*[Ll Lm Lo M]+(?i:contractions)?|
// [^\r\n\p{L}\p{N}]?[Lu Lt Lm Lo M]+[Ll Lm Lo M]*(?i:contractions)?|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
func o200kAt(m *scanMatcher, s string, i int) int {
	r, c, w := m.cl.next(s, i)
	prefix := r != '\r' && r != '\n' && c&(clsL|clsN) == 0
	if prefix {
		if e := m.o200kFirst(s, i+w); e > 0 {
			return e
		}
	}
	if e := m.o200kFirst(s, i); e > 0 {
		return e
	}
	if prefix {
		if e := m.o200kSecond(s, i+w); e > 0 {
			return e
		}
	}
	if e := m.o200kSecond(s, i); e > 0 {
		return e
	}
	if c&clsN != 0 {
		return m.digitRun(s, i)
	}
	const other = clsS | clsL | clsN
	c2, _ := m.classAt(s, i+w)
	if r == ' ' && i+w < len(s) && c2&other == 0 {
		return crlfRun(s, m.runNotMask(s, i+w, other), true)
	}
	if c&other == 0 {
		return crlfRun(s, m.runNotMask(s, i, other), true)
	}
	return m.wsTail(s, i, true)
}

// o200kFirst matches [Lu Lt Lm Lo M]*[Ll Lm Lo M]+ then the optional
// contraction at j.
func (m *scanMatcher) o200kFirst(s string, j int) int {
	k := m.runMask(s, j, o200kUpper)
	if c, _ := m.classAt(s, k); c&o200kLower != 0 {
		return m.optContraction(s, m.runMask(s, k, o200kLower))
	}
	// The greedy upper run gives characters back: the lower run then starts
	// at the last character of [j, k) that is also "lower" and, since no
	// later character is, ends right after it.
	last := -1
	for p := j; p < k; {
		_, c, w := m.cl.next(s, p)
		if c&o200kLower != 0 {
			last = p + w
		}
		p += w
	}
	if last < 0 {
		return -1
	}
	return m.optContraction(s, last)
}

// o200kSecond matches [Lu Lt Lm Lo M]+[Ll Lm Lo M]* then the optional
// contraction at j.
func (m *scanMatcher) o200kSecond(s string, j int) int {
	k := m.runMask(s, j, o200kUpper)
	if k == j {
		return -1
	}
	return m.optContraction(s, m.runMask(s, k, o200kLower))
}

func (m *scanMatcher) optContraction(s string, e int) int {
	if e < len(s) && s[e] == '\'' {
		if x := contraction(s, e+1, true); x > 0 {
			return x
		}
	}
	return e
}

// deepseekCJKAt: [一-龥぀-ゟ゠-ヿ]+
func deepseekCJKAt(m *scanMatcher, s string, i int) int {
	j := i
	for j < len(s) {
		r, w := utf8.DecodeRuneInString(s[j:])
		if !(r >= 0x4E00 && r <= 0x9FA5) && !(r >= 0x3040 && r <= 0x30FF) {
			break
		}
		j += w
	}
	if j == i {
		return -1
	}
	return j
}

func isASCIIPunct(b byte) bool {
	return (b >= '!' && b <= '/') || (b >= ':' && b <= '@') || (b >= '[' && b <= '`') || (b >= '{' && b <= '~')
}

func isASCIILetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

// deepseekAt: [ASCII punctuation][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
// ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func deepseekAt(m *scanMatcher, s string, i int) int {
	if isASCIIPunct(s[i]) && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 1
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	r, c, w := m.cl.next(s, i)
	if r != '\r' && r != '\n' && c&(clsL|clsP|clsSym) == 0 {
		if e := m.runMask(s, i+w, clsL|clsM); e > i+w {
			return e
		}
	}
	if c&(clsL|clsM) != 0 {
		return m.runMask(s, i, clsL|clsM)
	}
	const ps = clsP | clsSym
	c2, _ := m.classAt(s, i+w)
	if r == ' ' && c2&ps != 0 {
		return crlfRun(s, m.runMask(s, i+w, ps), false)
	}
	if c&ps != 0 {
		return crlfRun(s, m.runMask(s, i, ps), false)
	}
	if c&clsS != 0 {
		return m.wsTail(s, i, true)
	}
	return -1
}

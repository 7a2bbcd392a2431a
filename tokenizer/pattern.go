package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// matcher finds the non-overlapping matches of a Split pattern, left to
// right, the way Oniguruma's find_iter does in the Rust tokenizers. each
// calls fn for every match in order; matches are never empty.
type matcher interface {
	each(s string, fn func(start, end int))
}

// stepMatcher is implemented by the matchers that can find the next match
// without a callback, which keeps the pre-tokenizer loops allocation-free.
type stepMatcher interface {
	// next returns the first match at or after from, or (-1, -1).
	next(s string, from int) (int, int)
}

// The pre-tokenizer regexes of the families troupe serves. They are matched
// by hand-written matchers (matchers_known.go): Go's regexp has no
// look-ahead, and a general backtracking engine is several times slower than
// a matcher that knows the pattern. Every other pattern goes to regexp2.
const (
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// Llama 3 (cl100k_base).
	patCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen2 / Qwen2.5 / Qwen3: cl100k with single digits.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt-oss, GPT-4o (o200k_base).
	patO200K = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// DeepSeek-V3 / R1: three Split pre-tokenizers in sequence.
	patDigits3   = `\p{N}{1,3}`
	patDeepSeekC = `[一-龥぀-ゟ゠-ヿ]+`
	patDeepSeek  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// compilePattern returns the matcher for a Split/Replace regex.
func compilePattern(pat string) (matcher, error) {
	cl := newClassifier()
	switch pat {
	case patGPT2:
		return &scanMatcher{cl: cl, at: gpt2At}, nil
	case patCL100K:
		return &scanMatcher{cl: cl, at: cl100kAt, digits: 3}, nil
	case patQwen2:
		return &scanMatcher{cl: cl, at: cl100kAt, digits: 1}, nil
	case patO200K:
		return &scanMatcher{cl: cl, at: o200kAt, digits: 3}, nil
	case patDigits3:
		return &scanMatcher{cl: cl, at: digitsAt, digits: 3}, nil
	case patDeepSeekC:
		return &scanMatcher{cl: cl, at: deepseekCJKAt}, nil
	case patDeepSeek:
		return &scanMatcher{cl: cl, at: deepseekAt}, nil
	}
	re, err := regexp2.Compile(pat, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pat, err)
	}
	return regexMatcher{re: re}, nil
}

// literalMatcher matches every occurrence of a fixed string (Split and
// Replace with a {"String": ...} pattern).
type literalMatcher struct{ lit string }

func (m literalMatcher) next(s string, from int) (int, int) {
	if m.lit == "" || from > len(s) {
		return -1, -1
	}
	i := strings.Index(s[from:], m.lit)
	if i < 0 {
		return -1, -1
	}
	return from + i, from + i + len(m.lit)
}

func (m literalMatcher) each(s string, fn func(start, end int)) {
	if m.lit == "" {
		return
	}
	off := 0
	for {
		i := strings.Index(s[off:], m.lit)
		if i < 0 {
			return
		}
		fn(off+i, off+i+len(m.lit))
		off += i + len(m.lit)
	}
}

// regexMatcher runs a pattern no hand-written matcher knows on regexp2,
// a backtracking engine with look-around, converting its rune indexes to
// byte offsets.
type regexMatcher struct{ re *regexp2.Regexp }

func (m regexMatcher) each(s string, fn func(start, end int)) {
	if s == "" {
		return
	}
	// byteAt[k] is the byte offset of rune k, as regexp2 counts runes
	// (an invalid byte is one rune).
	byteAt := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		byteAt = append(byteAt, i)
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	byteAt = append(byteAt, len(s))
	mt, err := m.re.FindStringMatch(s)
	for err == nil && mt != nil {
		if mt.Length > 0 {
			fn(byteAt[mt.Index], byteAt[mt.Index+mt.Length])
		}
		mt, err = m.re.FindNextMatch(mt)
	}
}

// scanMatcher drives a hand-written "match at position i" function over the
// string: at each position it either matches (and the scan resumes at the
// end of the match) or moves on by one character, as find_iter does.
type scanMatcher struct {
	cl     classifier
	at     func(m *scanMatcher, s string, i int) int
	digits int
}

func (m *scanMatcher) next(s string, from int) (int, int) {
	for i := from; i < len(s); {
		if e := m.at(m, s, i); e > i {
			return i, e
		}
		_, _, w := m.cl.next(s, i)
		i += w
	}
	return -1, -1
}

func (m *scanMatcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		if e := m.at(m, s, i); e > i {
			fn(i, e)
			i = e
			continue
		}
		_, _, w := m.cl.next(s, i)
		i += w
	}
}

// regexMatcherCompiler compiles any pattern on regexp2, bypassing the
// hand-written matchers (tests compare the two).
type regexMatcherCompiler struct{}

func (regexMatcherCompiler) compile(pat string) (matcher, error) {
	re, err := regexp2.Compile(pat, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pat, err)
	}
	return regexMatcher{re: re}, nil
}

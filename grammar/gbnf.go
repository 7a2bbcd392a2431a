package grammar

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ParseGBNF builds a grammar from llama.cpp's GBNF text; its start symbol
// is the rule named root.
func ParseGBNF(src string) (*Grammar, error) {
	var b Builder
	root, err := b.GBNF(src)
	if err != nil {
		return nil, err
	}
	return b.Build(int(root.NT))
}

// GBNF compiles llama.cpp's GBNF grammar text into b and returns the
// nonterminal of its rule root. The syntax is llama.cpp's:
//
//	name ::= alternatives          (one rule; names are letters, digits, '-')
//	a b | c                        (sequence, alternation)
//	( ... )                        (grouping; newlines are allowed inside)
//	x*  x+  x?  x{m}  x{m,}  x{m,n} (repetition)
//	"literal"                      (escapes \n \t \r \\ \" \[ \] \xXX \uXXXX \UXXXXXXXX)
//	[a-z0-9_]  [^"\\]              (character classes, negated with ^)
//	.                              (any character)
//	# comment                      (to the end of the line)
//
// A rule ends at the end of its line unless the line ends inside
// parentheses or right after "::=" or '|'. Characters are Unicode code
// points (surrogates excluded) and match their UTF-8 encoding; a negated
// class or '.' matches any valid UTF-8 encoding of a code point outside
// the class. Left recursion and rules that produce no finite string are
// fine. Errors name the line and column (counted in characters, from 1) of
// syntax errors, references to undefined rules, a rule defined twice, and a
// grammar without rules or without root. llama.cpp's token syntax (<[id]>,
// <token>) is not supported.
func (b *Builder) GBNF(src string) (Sym, error) {
	p := &gbnfParser{b: b, src: src, rules: map[string]*gbnfRule{}}
	if err := p.parse(); err != nil {
		return Sym{}, err
	}
	if b.err != nil {
		return Sym{}, b.err
	}
	return N(p.rules["root"].nt), nil
}

type gbnfRule struct {
	nt      int
	defined bool
	ref     int // offset of the first reference, for errors
}

type gbnfParser struct {
	b     *Builder
	src   string
	pos   int
	rules map[string]*gbnfRule
	order []string
	any   *Sym
}

type gbnfError struct {
	line, col int
	msg       string
}

func (e *gbnfError) Error() string {
	return fmt.Sprintf("gbnf:%d:%d: %s", e.line, e.col, e.msg)
}

// errAt is a syntax error at byte offset off.
func (p *gbnfParser) errAt(off int, format string, args ...any) error {
	if off > len(p.src) {
		off = len(p.src)
	}
	line := 1 + strings.Count(p.src[:off], "\n")
	start := strings.LastIndexByte(p.src[:off], '\n') + 1
	return &gbnfError{line: line, col: 1 + utf8.RuneCountInString(p.src[start:off]), msg: fmt.Sprintf(format, args...)}
}

func (p *gbnfParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

func (p *gbnfParser) eof() bool { return p.pos >= len(p.src) }

// space skips blanks and comments, and newlines when newlines.
func (p *gbnfParser) space(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && newlines:
			p.pos++
		default:
			return
		}
	}
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func (p *gbnfParser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func (p *gbnfParser) rule(name string, off int) *gbnfRule {
	r, ok := p.rules[name]
	if !ok {
		r = &gbnfRule{nt: p.b.Rule(name), ref: -1}
		p.rules[name] = r
		p.order = append(p.order, name)
	}
	if r.ref < 0 && off >= 0 {
		r.ref = off
	}
	return r
}

func (p *gbnfParser) parse() error {
	p.space(true)
	if p.eof() {
		return p.errAt(0, "empty grammar")
	}
	for !p.eof() {
		if err := p.parseRule(); err != nil {
			return err
		}
	}
	for _, name := range p.order {
		if r := p.rules[name]; !r.defined {
			return p.errAt(r.ref, "undefined rule %q", name)
		}
	}
	if _, ok := p.rules["root"]; !ok {
		return p.errAt(len(p.src), "no rule named root")
	}
	return nil
}

func (p *gbnfParser) parseRule() error {
	start := p.pos
	name := p.name()
	if name == "" {
		return p.errAt(p.pos, "expecting a rule name")
	}
	p.space(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		return p.errAt(p.pos, "expecting ::=")
	}
	p.pos += 3
	p.space(true)
	r := p.rule(name, -1)
	if r.defined {
		return p.errAt(start, "rule %q defined twice", name)
	}
	r.defined = true
	if err := p.alternates(r.nt, false); err != nil {
		return err
	}
	switch {
	case p.eof():
	case p.peek() == '\r' || p.peek() == '\n':
		p.pos++
	default:
		return p.errAt(p.pos, "expecting newline or end")
	}
	p.space(true)
	return nil
}

// alternates parses alternatives into rule nt.
func (p *gbnfParser) alternates(nt int, nested bool) error {
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return err
		}
		p.b.Alt(nt, seq...)
		if p.peek() != '|' {
			return nil
		}
		p.pos++
		p.space(true)
	}
}

func (p *gbnfParser) sequence(nested bool) ([]Sym, error) {
	var seq []Sym
	for !p.eof() {
		c := p.peek()
		start := p.pos
		switch {
		case c == '"':
			p.pos++
			var lit []Sym
			for p.peek() != '"' {
				if p.eof() {
					return nil, p.errAt(p.pos, "unterminated string literal")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit = append(lit, Lit(string(r))...)
			}
			p.pos++
			if len(lit) == 0 {
				seq = append(seq, p.b.Repeat(Sym{}, 0, 0))
			} else {
				seq = append(seq, p.b.Seq("literal", lit...))
			}
		case c == '[':
			s, err := p.class()
			if err != nil {
				return nil, err
			}
			seq = append(seq, s)
		case isWordChar(c):
			name := p.name()
			seq = append(seq, N(p.rule(name, start).nt))
		case c == '(':
			p.pos++
			p.space(true)
			nt := p.b.Rule("group")
			if err := p.alternates(nt, true); err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errAt(p.pos, "expecting ')'")
			}
			p.pos++
			seq = append(seq, N(nt))
		case c == '.':
			p.pos++
			seq = append(seq, p.anyChar())
		case c == '*' || c == '+' || c == '?' || c == '{':
			if len(seq) == 0 {
				return nil, p.errAt(p.pos, "expecting an item before %q", c)
			}
			last := seq[len(seq)-1]
			p.pos++
			switch c {
			case '*':
				last = p.b.Star(last)
			case '+':
				last = p.b.Plus(last)
			case '?':
				last = p.b.Opt(last)
			default:
				min, max, err := p.braces(nested)
				if err != nil {
					return nil, err
				}
				last = p.b.Repeat(last, min, max)
			}
			seq[len(seq)-1] = last
		default:
			return seq, nil
		}
		p.space(nested)
	}
	return seq, nil
}

// maxGBNFRepeat bounds the counts of {m,n}.
const maxGBNFRepeat = 1 << 20

func (p *gbnfParser) int() (int, bool) {
	start := p.pos
	n := 0
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		if n = n*10 + int(p.src[p.pos]-'0'); n > maxGBNFRepeat {
			n = maxGBNFRepeat + 1
		}
		p.pos++
	}
	return n, p.pos > start
}

// braces parses the rest of {m}, {m,}, {m,n} after '{'.
func (p *gbnfParser) braces(nested bool) (int, int, error) {
	p.space(nested)
	at := p.pos
	min, ok := p.int()
	if !ok {
		return 0, 0, p.errAt(p.pos, "expecting an integer")
	}
	p.space(nested)
	max := min
	switch p.peek() {
	case '}':
	case ',':
		p.pos++
		p.space(nested)
		max = -1
		if n, ok := p.int(); ok {
			max = n
			p.space(nested)
		}
		if p.peek() != '}' {
			return 0, 0, p.errAt(p.pos, "expecting '}'")
		}
	default:
		return 0, 0, p.errAt(p.pos, "expecting ',' or '}'")
	}
	p.pos++
	if min > maxGBNFRepeat || max > maxGBNFRepeat {
		return 0, 0, p.errAt(at, "repetition count over %d", maxGBNFRepeat)
	}
	if max >= 0 && max < min {
		return 0, 0, p.errAt(at, "repetition {%d,%d}: maximum below minimum", min, max)
	}
	return min, max, nil
}

// char reads one character of a literal or class: a UTF-8 encoded code
// point or an escape.
func (p *gbnfParser) char() (rune, error) {
	start := p.pos
	c := p.peek()
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errAt(p.pos, "invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.eof() {
		return 0, p.errAt(start, "unterminated escape")
	}
	e := p.src[p.pos]
	p.pos++
	digits := 0
	switch e {
	case 'n':
		return '\n', nil
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '[', ']', '-', '^', '\'', '/':
		return rune(e), nil
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	default:
		return 0, p.errAt(start, "unknown escape \\%c", e)
	}
	var v uint64
	for i := 0; i < digits; i++ {
		if p.eof() {
			return 0, p.errAt(p.pos, "expecting %d hex digits", digits)
		}
		h := p.src[p.pos]
		switch {
		case h >= '0' && h <= '9':
			v = v*16 + uint64(h-'0')
		case h >= 'a' && h <= 'f':
			v = v*16 + uint64(h-'a'+10)
		case h >= 'A' && h <= 'F':
			v = v*16 + uint64(h-'A'+10)
		default:
			return 0, p.errAt(p.pos, "expecting %d hex digits", digits)
		}
		p.pos++
	}
	if v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
		return 0, p.errAt(start, "escape %s is not a Unicode scalar value", p.src[start:p.pos])
	}
	return rune(v), nil
}

// class parses a character class [...] or [^...].
func (p *gbnfParser) class() (Sym, error) {
	start := p.pos
	p.pos++
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var rs []RuneRange
	for p.peek() != ']' {
		if p.eof() {
			return Sym{}, p.errAt(start, "unterminated character class")
		}
		lo, err := p.char()
		if err != nil {
			return Sym{}, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			at := p.pos
			p.pos++
			if hi, err = p.char(); err != nil {
				return Sym{}, err
			}
			if hi < lo {
				return Sym{}, p.errAt(at, "range %c-%c out of order", lo, hi)
			}
		}
		rs = append(rs, RuneRange{lo, hi})
	}
	p.pos++
	set := NewCharSet(rs...)
	if neg {
		set = set.Negate()
	}
	return p.b.UTF8(set), nil
}

func (p *gbnfParser) anyChar() Sym {
	if p.any == nil {
		s := p.b.UTF8(AnyChar())
		p.any = &s
	}
	return *p.any
}

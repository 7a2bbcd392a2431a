package grammar

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
)

// RegexOptions says how Builder.Regex reads and applies a pattern.
type RegexOptions struct {
	// JSON emits every character as JSONChar (raw or escaped, as between
	// the quotes of a JSON string), so the pattern applies to the decoded
	// string; otherwise characters are raw UTF-8.
	JSON bool
	// Anchored matches exactly the strings the pattern matches in full.
	// Otherwise the semantics are JSON Schema's search: a string matches
	// when it contains a match, so unanchored ends take any characters
	// (newlines included).
	Anchored bool
}

// ECMA-262 WhiteSpace and LineTerminator: what \s matches there (Go's \s
// is ASCII only).
var ecmaSpace = NewCharSet(
	RuneRange{'\t', '\r'}, RuneRange{' ', ' '}, RuneRange{0xA0, 0xA0},
	RuneRange{0x1680, 0x1680}, RuneRange{0x2000, 0x200A},
	RuneRange{0x2028, 0x2029}, RuneRange{0x202F, 0x202F},
	RuneRange{0x205F, 0x205F}, RuneRange{0x3000, 0x3000},
	RuneRange{0xFEFF, 0xFEFF},
)

// classItems spells set as the inside of a Go character class.
func classItems(set CharSet) string {
	var sb strings.Builder
	for _, r := range set {
		fmt.Fprintf(&sb, `\x{%X}`, r.Lo)
		if r.Hi != r.Lo {
			fmt.Fprintf(&sb, `-\x{%X}`, r.Hi)
		}
	}
	return sb.String()
}

// ecmaDot is what '.' matches in ECMA-262: anything but a line terminator.
const ecmaDot = `[^\n\r\x{2028}\x{2029}]`

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// ecmaToGo rewrites an ECMA-262 pattern into Go's regexp/syntax where the
// two differ: \uXXXX and \u{X…} become \x{…}; '.' and \s, \S take ECMA's
// meaning; [\b] is a backspace; \cX a control character; [] and [^] match
// nothing and anything; '[' inside a class is literal. It refuses, naming
// them, what cannot be expressed: lookaround, backreferences, the s flag.
func ecmaToGo(p string) (string, error) {
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			if i+1 >= len(p) {
				sb.WriteByte(c)
				continue
			}
			d := p[i+1]
			i++
			switch {
			case d == 'u' && i+4 < len(p) && isHex(p[i+1]) && isHex(p[i+2]) && isHex(p[i+3]) && isHex(p[i+4]):
				// A surrogate pair \uD83D\uDE00 is one character.
				hi := hexVal(p[i+1 : i+5])
				if hi >= 0xD800 && hi <= 0xDBFF && i+10 < len(p) && p[i+5] == '\\' && p[i+6] == 'u' &&
					isHex(p[i+7]) && isHex(p[i+8]) && isHex(p[i+9]) && isHex(p[i+10]) {
					if lo := hexVal(p[i+7 : i+11]); lo >= 0xDC00 && lo <= 0xDFFF {
						fmt.Fprintf(&sb, `\x{%X}`, 0x10000+(hi-0xD800)<<10+(lo-0xDC00))
						i += 10
						continue
					}
				}
				if hi >= 0xD800 && hi <= 0xDFFF {
					return "", fmt.Errorf("lone surrogate \\u%s is unsupported", p[i+1:i+5])
				}
				fmt.Fprintf(&sb, `\x{%s}`, p[i+1:i+5])
				i += 4
			case d == 'u' && i+1 < len(p) && p[i+1] == '{':
				sb.WriteString(`\x`)
			case d >= '1' && d <= '9':
				return "", fmt.Errorf("backreference \\%c is unsupported", d)
			case d == 'k' && !inClass:
				return "", errors.New("named backreference \\k is unsupported")
			case d == 's':
				if inClass {
					sb.WriteString(classItems(ecmaSpace))
				} else {
					sb.WriteString("[" + classItems(ecmaSpace) + "]")
				}
			case d == 'S':
				if inClass {
					sb.WriteString(classItems(ecmaSpace.Negate()))
				} else {
					sb.WriteString("[^" + classItems(ecmaSpace) + "]")
				}
			case d == 'b' && inClass:
				sb.WriteString(`\x08`)
			case d == 'c' && i+1 < len(p) && ('a' <= p[i+1] && p[i+1] <= 'z' || 'A' <= p[i+1] && p[i+1] <= 'Z'):
				fmt.Fprintf(&sb, `\x{%X}`, p[i+1]%32)
				i++
			default:
				sb.WriteByte('\\')
				sb.WriteByte(d)
			}
		case inClass:
			switch c {
			case ']':
				inClass = false
			case '[':
				sb.WriteByte('\\')
			}
			sb.WriteByte(c)
		case c == '[':
			switch {
			case strings.HasPrefix(p[i:], "[]"):
				sb.WriteString(`[^\x00-\x{10FFFF}]`)
				i++
			case strings.HasPrefix(p[i:], "[^]"):
				sb.WriteString(`[\x00-\x{10FFFF}]`)
				i += 2
			default:
				inClass = true
				sb.WriteByte('[')
				if strings.HasPrefix(p[i:], "[^") {
					sb.WriteByte('^')
					i++
				}
			}
		case c == '.':
			sb.WriteString(ecmaDot)
		case c == '(' && strings.HasPrefix(p[i:], "(?"):
			rest := p[i+2:]
			switch {
			case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "!"):
				return "", errors.New("lookahead (?= or (?! is unsupported")
			case strings.HasPrefix(rest, "<="), strings.HasPrefix(rest, "<!"):
				return "", errors.New("lookbehind (?<= or (?<! is unsupported")
			}
			flags := rest[:len(rest)-len(strings.TrimLeft(rest, "imsU-"))]
			if strings.Contains(flags, "s") {
				return "", errors.New("flag s is unsupported")
			}
			sb.WriteByte(c)
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String(), nil
}

func hexVal(s string) rune {
	var v rune
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a':
			v = v<<4 | rune(c-'a'+10)
		default:
			v = v<<4 | rune(c-'A'+10)
		}
	}
	return v
}

// Regex returns a symbol for the strings a regular expression matches. The
// syntax is ECMA-262's, as JSON Schema's "pattern" uses it, in the part that
// Go's regexp/syntax parses (Perl flags): literals, '.', classes (negated,
// \d \w \s \D \W \S, Unicode \p{…}), \uXXXX, groups, alternation, the
// quantifiers * + ? {m} {m,} {m,n} and their lazy forms, (?i), and ^ $ at
// the pattern's ends. It fails, naming the feature, on lookaround,
// backreferences, anchors elsewhere, word boundaries, multi-line mode and
// what regexp/syntax rejects (counts over 1000 among them); a repetition
// past the Builder's size limit fails with its ErrTooLarge.
func (b *Builder) Regex(pattern string, opts RegexOptions) (Sym, error) {
	fail := func(err error) (Sym, error) {
		return Sym{}, fmt.Errorf("grammar: regex %q: %w", pattern, err)
	}
	goPat, err := ecmaToGo(pattern)
	if err != nil {
		return fail(err)
	}
	re, err := syntax.Parse(goPat, syntax.Perl)
	if err != nil {
		return fail(err)
	}
	c := &regexCompiler{b: b, json: opts.JSON, cache: map[string]Sym{}}
	search := !opts.Anchored
	s, err := c.compile(re, pos{start: true, end: true, pre: search, post: search})
	if err != nil {
		return fail(err)
	}
	if err := b.Err(); err != nil {
		return fail(err)
	}
	return s, nil
}

type regexCompiler struct {
	b     *Builder
	json  bool
	cache map[string]Sym
	any   *Sym
}

// pos is where a node stands in the pattern: start and end say whether an
// anchor ^ or $ may stand there; pre and post whether the node must take
// any characters before or after it (search semantics, not anchored).
type pos struct{ start, end, pre, post bool }

// char is one character of set, cached per set.
func (c *regexCompiler) char(set CharSet) Sym {
	k := set.key()
	if s, ok := c.cache[k]; ok {
		return s
	}
	var s Sym
	if c.json {
		s = c.b.JSONChar(set)
	} else {
		s = c.b.UTF8(set)
	}
	c.cache[k] = s
	return s
}

// anyStar is any characters, newlines included: the search semantics'
// surroundings. In JSON it is the Builder's JSONText (the same rule, which
// the masks' fast path in free text knows).
func (c *regexCompiler) anyStar() Sym {
	if c.any == nil {
		var s Sym
		if c.json {
			s = c.b.JSONText()
		} else {
			s = c.b.Star(c.char(AnyChar()))
		}
		c.any = &s
	}
	return *c.any
}

func (c *regexCompiler) empty() Sym {
	nt := c.b.Rule("empty")
	c.b.Alt(nt)
	return N(nt)
}

// wrap surrounds s with any characters where p asks for them.
func (c *regexCompiler) wrap(s Sym, p pos) Sym {
	var seq []Sym
	if p.pre {
		seq = append(seq, c.anyStar())
	}
	seq = append(seq, s)
	if p.post {
		seq = append(seq, c.anyStar())
	}
	return c.b.Seq("search", seq...)
}

// fold is the set of r and the characters it case-folds to.
func fold(r rune) CharSet {
	rs := []rune{r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		rs = append(rs, f)
	}
	return Chars(rs...)
}

var inner = pos{}

func (c *regexCompiler) compile(re *syntax.Regexp, p pos) (Sym, error) {
	b := c.b
	if err := b.Err(); err != nil {
		return Sym{}, err
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return never(), nil
	case syntax.OpEmptyMatch:
		if p.pre || p.post {
			return c.anyStar(), nil
		}
		return c.empty(), nil
	case syntax.OpLiteral:
		seq := make([]Sym, len(re.Rune))
		for i, r := range re.Rune {
			set := Chars(r)
			if re.Flags&syntax.FoldCase != 0 {
				set = fold(r)
			}
			seq[i] = c.char(set)
		}
		return c.wrap(b.Seq("literal", seq...), p), nil
	case syntax.OpCharClass:
		var rs []RuneRange
		for i := 0; i+1 < len(re.Rune); i += 2 {
			rs = append(rs, RuneRange{re.Rune[i], re.Rune[i+1]})
		}
		return c.wrap(c.char(NewCharSet(rs...)), p), nil
	case syntax.OpAnyCharNotNL:
		return c.wrap(c.char(AnyChar().Minus(Chars('\n'))), p), nil
	case syntax.OpAnyChar:
		return c.wrap(c.char(AnyChar()), p), nil
	case syntax.OpBeginText:
		if !p.start {
			return Sym{}, errors.New("anchor ^ is unsupported except at the start of the pattern")
		}
		if p.post {
			return c.anyStar(), nil
		}
		return c.empty(), nil
	case syntax.OpEndText:
		if !p.end {
			return Sym{}, errors.New("anchor $ is unsupported except at the end of the pattern")
		}
		if p.pre {
			return c.anyStar(), nil
		}
		return c.empty(), nil
	case syntax.OpBeginLine, syntax.OpEndLine:
		return Sym{}, errors.New("multi-line anchors ((?m) ^ $) are unsupported")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return Sym{}, errors.New(`word boundaries \b \B are unsupported`)
	case syntax.OpCapture:
		return c.compile(re.Sub[0], p)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		s, err := c.compile(re.Sub[0], inner)
		if err != nil {
			return Sym{}, err
		}
		var r Sym
		switch re.Op {
		case syntax.OpStar:
			r = b.Star(s)
		case syntax.OpPlus:
			r = b.Plus(s)
		case syntax.OpQuest:
			r = b.Opt(s)
		default:
			r = b.Repeat(s, re.Min, re.Max)
		}
		if err := b.Err(); err != nil {
			return Sym{}, err
		}
		return c.wrap(r, p), nil
	case syntax.OpAlternate:
		nt := b.Rule("alt")
		for _, sub := range re.Sub {
			s, err := c.compile(sub, p)
			if err != nil {
				return Sym{}, err
			}
			b.Alt(nt, s)
		}
		return N(nt), nil
	case syntax.OpConcat:
		subs := re.Sub
		pre, post := p.pre, p.post
		// Leading ^ and trailing $ anchor the concatenation's ends.
		for p.start && len(subs) > 0 && subs[0].Op == syntax.OpBeginText {
			subs, pre = subs[1:], false
		}
		for p.end && len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
			subs, post = subs[:len(subs)-1], false
		}
		if len(subs) == 0 {
			if pre || post {
				return c.anyStar(), nil
			}
			return c.empty(), nil
		}
		seq := make([]Sym, len(subs))
		for i, sub := range subs {
			q := inner
			if i == 0 {
				q.start, q.pre = p.start, pre
			}
			if i == len(subs)-1 {
				q.end, q.post = p.end, post
			}
			s, err := c.compile(sub, q)
			if err != nil {
				return Sym{}, err
			}
			seq[i] = s
		}
		return b.Seq("concat", seq...), nil
	}
	return Sym{}, fmt.Errorf("regexp operator %v is unsupported", re.Op)
}

package templates

import (
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokType uint8

const (
	tokEOF tokType = iota
	tokData
	tokVarBegin
	tokVarEnd
	tokBlockBegin
	tokBlockEnd
	tokName
	tokString
	tokInt
	tokFloat
	tokOp
)

type token struct {
	typ  tokType
	val  string // data text, name, string value, operator
	num  any    // int64, *big.Int or float64 for number tokens
	line int
}

func (t token) describe() string {
	switch t.typ {
	case tokEOF:
		return "end of template"
	case tokVarEnd:
		return "end of print statement"
	case tokBlockEnd:
		return "end of statement block"
	case tokVarBegin:
		return "begin of print statement"
	case tokBlockBegin:
		return "begin of statement block"
	case tokData:
		return "template data / text"
	case tokString:
		return "string"
	case tokInt:
		return "integer"
	case tokFloat:
		return "float"
	}
	return t.val
}

// lexer turns template source into tokens the way jinja2's lexer does with
// transformers' settings: trim_blocks and lstrip_blocks on, "-" and "+"
// whitespace control, {% raw %}, comments, and newlines normalised to "\n"
// with one trailing newline dropped (keep_trailing_newline=False).
type lexer struct {
	src    string
	pos    int
	line   int
	toks   []token
	name   string
	trim   bool // trim_blocks
	lstrip bool // lstrip_blocks
}

func syntaxError(name string, line int, format string, args ...any) *Error {
	e := &Error{Type: excSyntax, Message: format, Name: name, Line: line}
	if len(args) > 0 {
		e.Message = sprintf(format, args...)
	}
	return e
}

// normalizeSource applies jinja2's newline handling to a template source.
func normalizeSource(src string, keepTrailingNewline bool) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	if !keepTrailingNewline && strings.HasSuffix(src, "\n") {
		src = src[:len(src)-1]
	}
	return src
}

func lex(name, src string, trim, lstrip bool) ([]token, error) {
	lx := &lexer{src: src, line: 1, name: name, trim: trim, lstrip: lstrip}
	if err := lx.run(); err != nil {
		return nil, err
	}
	return lx.toks, nil
}

func (lx *lexer) emit(typ tokType, val string) {
	lx.toks = append(lx.toks, token{typ: typ, val: val, line: lx.line})
}

// advance moves to p, counting lines.
func (lx *lexer) advance(p int) {
	lx.line += strings.Count(lx.src[lx.pos:p], "\n")
	lx.pos = p
}

// stripBefore applies whitespace control to the data text in front of a
// tag: "-" strips all whitespace, otherwise lstrip_blocks removes the
// indentation of a block or comment tag that starts its line.
func (lx *lexer) stripBefore(text string, textStart int, sign byte, isVar bool) string {
	if sign == '-' {
		return rstripSpace(text)
	}
	if sign == '+' || !lx.lstrip || isVar {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	lineStarting := textStart == 0 || lx.src[textStart-1] == '\n'
	if (lpos > 0 || lineStarting) && lpos < len(text) && allSpace(text[lpos:]) {
		return text[:lpos]
	}
	return text
}

func (lx *lexer) run() error {
	src := lx.src
	for lx.pos < len(src) {
		start := lx.pos
		i := indexTagStart(src, start)
		if i < 0 {
			lx.emit(tokData, src[start:])
			lx.advance(len(src))
			break
		}
		kind := src[i+1]
		sign := byte(0)
		if i+2 < len(src) && (src[i+2] == '-' || src[i+2] == '+') {
			sign = src[i+2]
		}
		// {% raw %} is a tag of its own.
		if kind == '%' {
			if end, ok := matchRawBegin(src, i+2); ok {
				text := lx.stripBefore(src[start:i], start, sign, false)
				if text != "" {
					lx.emit(tokData, text)
				}
				lx.advance(end)
				if err := lx.lexRaw(); err != nil {
					return err
				}
				continue
			}
		}
		text := lx.stripBefore(src[start:i], start, sign, kind == '{')
		if text != "" {
			lx.emit(tokData, text)
		}
		lx.advance(i)
		tagLen := 2
		if sign != 0 {
			tagLen = 3
		}
		switch kind {
		case '#':
			if err := lx.lexComment(i + tagLen); err != nil {
				return err
			}
		case '%':
			lx.emit(tokBlockBegin, "{%")
			lx.advance(i + tagLen)
			if err := lx.lexTag(true); err != nil {
				return err
			}
		case '{':
			lx.emit(tokVarBegin, "{{")
			lx.advance(i + tagLen)
			if err := lx.lexTag(false); err != nil {
				return err
			}
		}
	}
	lx.toks = append(lx.toks, token{typ: tokEOF, line: lx.line})
	return nil
}

// indexTagStart finds the next "{{", "{%" or "{#" at or after from.
func indexTagStart(src string, from int) int {
	for {
		j := strings.IndexByte(src[from:], '{')
		if j < 0 || from+j+1 >= len(src) {
			return -1
		}
		p := from + j
		switch src[p+1] {
		case '{', '%', '#':
			return p
		}
		from = p + 1
	}
}

// matchRawBegin matches `\s*raw\s*(-%}\s*|%})` at p (just after "{%" and
// its sign) and returns the end of the match.
func matchRawBegin(src string, p int) (int, bool) {
	if p < len(src) && (src[p] == '-' || src[p] == '+') {
		p++
	}
	p = skipSpace(src, p)
	if !strings.HasPrefix(src[p:], "raw") {
		return 0, false
	}
	p = skipSpace(src, p+3)
	switch {
	case strings.HasPrefix(src[p:], "-%}"):
		return skipSpace(src, p+3), true
	case strings.HasPrefix(src[p:], "%}"):
		return p + 2, true
	}
	return 0, false
}

func (lx *lexer) lexRaw() error {
	src := lx.src
	from := lx.pos
	for {
		j := strings.Index(src[from:], "{%")
		if j < 0 {
			return syntaxError(lx.name, lx.line, "Missing end of raw directive")
		}
		p := from + j
		q := p + 2
		sign := byte(0)
		if q < len(src) && (src[q] == '-' || src[q] == '+') {
			sign = src[q]
			q++
		}
		q = skipSpace(src, q)
		if strings.HasPrefix(src[q:], "endraw") {
			r := skipSpace(src, q+6)
			end := -1
			switch {
			case strings.HasPrefix(src[r:], "+%}"):
				end = r + 3
			case strings.HasPrefix(src[r:], "-%}"):
				end = skipSpace(src, r+3)
			case strings.HasPrefix(src[r:], "%}"):
				end = r + 2
				if lx.trim && end < len(src) && src[end] == '\n' {
					end++
				}
			}
			if end >= 0 {
				text := lx.stripBefore(src[lx.pos:p], lx.pos, sign, false)
				if text != "" {
					lx.emit(tokData, text)
				}
				lx.advance(end)
				return nil
			}
		}
		from = p + 2
	}
}

func (lx *lexer) lexComment(contentStart int) error {
	src := lx.src
	from := contentStart
	for {
		j := strings.Index(src[from:], "#}")
		if j < 0 {
			return syntaxError(lx.name, lx.line, "Missing end of comment tag")
		}
		p := from + j
		end := p + 2
		if p-1 >= contentStart && src[p-1] == '-' {
			end = skipSpace(src, end)
		} else if p-1 >= contentStart && src[p-1] == '+' {
			// keep what follows
		} else if lx.trim && end < len(src) && src[end] == '\n' {
			end++
		}
		lx.advance(end)
		return nil
	}
}

// lexTag lexes the inside of a {% %} (block) or {{ }} tag, up to and
// including its end delimiter.
func (lx *lexer) lexTag(block bool) error {
	src := lx.src
	var balance []byte
	for {
		// whitespace
		p := skipSpace(src, lx.pos)
		lx.advance(p)
		if p >= len(src) {
			what := "print statement"
			if block {
				what = "block"
			}
			return syntaxError(lx.name, lx.line, "unexpected end of template, expected end of %s", what)
		}
		if len(balance) == 0 {
			if block {
				switch {
				case strings.HasPrefix(src[p:], "+%}"):
					lx.emit(tokBlockEnd, "%}")
					lx.advance(p + 3)
					return nil
				case strings.HasPrefix(src[p:], "-%}"):
					lx.emit(tokBlockEnd, "%}")
					lx.advance(skipSpace(src, p+3))
					return nil
				case strings.HasPrefix(src[p:], "%}"):
					lx.emit(tokBlockEnd, "%}")
					end := p + 2
					if lx.trim && end < len(src) && src[end] == '\n' {
						end++
					}
					lx.advance(end)
					return nil
				}
			} else {
				switch {
				case strings.HasPrefix(src[p:], "-}}"):
					lx.emit(tokVarEnd, "}}")
					lx.advance(skipSpace(src, p+3))
					return nil
				case strings.HasPrefix(src[p:], "}}"):
					lx.emit(tokVarEnd, "}}")
					lx.advance(p + 2)
					return nil
				}
			}
		}
		c := src[p]
		switch {
		case c >= '0' && c <= '9':
			if err := lx.lexNumber(); err != nil {
				return err
			}
		case c == '\'' || c == '"':
			if err := lx.lexString(); err != nil {
				return err
			}
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)) || c >= utf8.RuneSelf && isIdentStart(src[p:]):
			q := p
			for q < len(src) {
				r, size := utf8.DecodeRuneInString(src[q:])
				if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Nl, r) {
					q += size
					continue
				}
				break
			}
			lx.emit(tokName, src[p:q])
			lx.advance(q)
		default:
			op := matchOperator(src[p:])
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[p:])
				return syntaxError(lx.name, lx.line, "unexpected char %s at %d", repr(string(r)), p)
			}
			switch op {
			case "(":
				balance = append(balance, ')')
			case "[":
				balance = append(balance, ']')
			case "{":
				balance = append(balance, '}')
			case ")", "]", "}":
				if len(balance) == 0 {
					return syntaxError(lx.name, lx.line, "unexpected '%s'", op)
				}
				want := balance[len(balance)-1]
				if want != op[0] {
					return syntaxError(lx.name, lx.line, "unexpected '%s', expected '%c'", op, want)
				}
				balance = balance[:len(balance)-1]
			}
			lx.emit(tokOp, op)
			lx.advance(p + len(op))
		}
	}
}

func isIdentStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r)
}

func matchOperator(s string) string {
	if len(s) >= 2 {
		switch s[:2] {
		case "//", "**", "==", "!=", ">=", "<=":
			return s[:2]
		}
	}
	switch s[0] {
	case '+', '-', '/', '*', '%', '~', '[', ']', '(', ')', '{', '}', '>', '<', '=', '.', ':', '|', ',', ';':
		return s[:1]
	}
	return ""
}

// lexNumber lexes jinja2's integer and float literals (underscores,
// 0b/0o/0x prefixes, exponents).
func (lx *lexer) lexNumber() error {
	src := lx.src
	p := lx.pos
	digits := func(q int, ok func(byte) bool) int {
		// (d+_)*d+
		start := q
		for q < len(src) {
			if ok(src[q]) {
				q++
				continue
			}
			if src[q] == '_' && q > start && q+1 < len(src) && ok(src[q+1]) {
				q++
				continue
			}
			break
		}
		return q
	}
	isDec := func(b byte) bool { return b >= '0' && b <= '9' }
	// prefixed integers
	if src[p] == '0' && p+1 < len(src) {
		var ok func(byte) bool
		base := 0
		switch src[p+1] | 0x20 {
		case 'b':
			ok, base = func(b byte) bool { return b == '0' || b == '1' }, 2
		case 'o':
			ok, base = func(b byte) bool { return b >= '0' && b <= '7' }, 8
		case 'x':
			ok, base = func(b byte) bool {
				return isDec(b) || (b|0x20) >= 'a' && (b|0x20) <= 'f'
			}, 16
		}
		if base != 0 {
			q := p + 2
			if q < len(src) && src[q] == '_' {
				q++
			}
			e := digits(q, ok)
			if e > q {
				text := strings.ReplaceAll(src[p+2:e], "_", "")
				n, _ := new(big.Int).SetString(text, base)
				lx.toks = append(lx.toks, token{typ: tokInt, val: src[p:e], num: normInt(n), line: lx.line})
				lx.advance(e)
				return nil
			}
		}
	}
	q := digits(p, isDec)
	isFloat := false
	if q+1 < len(src) && src[q] == '.' && isDec(src[q+1]) {
		q = digits(q+1, isDec)
		isFloat = true
	}
	if q < len(src) && (src[q]|0x20) == 'e' {
		r := q + 1
		if r < len(src) && (src[r] == '+' || src[r] == '-') {
			r++
		}
		if r < len(src) && isDec(src[r]) {
			q = digits(r, isDec)
			isFloat = true
		}
	}
	text := strings.ReplaceAll(src[p:q], "_", "")
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return syntaxError(lx.name, lx.line, "invalid float literal %s", text)
		}
		lx.toks = append(lx.toks, token{typ: tokFloat, val: src[p:q], num: f, line: lx.line})
	} else {
		n, ok := new(big.Int).SetString(text, 10)
		if !ok {
			return syntaxError(lx.name, lx.line, "invalid integer literal %s", text)
		}
		lx.toks = append(lx.toks, token{typ: tokInt, val: src[p:q], num: normInt(n), line: lx.line})
	}
	lx.advance(q)
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// lexString lexes a quoted string literal and decodes its escapes as
// Python's unicode-escape codec does (jinja2's behaviour).
func (lx *lexer) lexString() error {
	src := lx.src
	p := lx.pos
	quote := src[p]
	q := p + 1
	for q < len(src) && src[q] != quote {
		if src[q] == '\\' {
			q++
		}
		q++
	}
	if q >= len(src) {
		return syntaxError(lx.name, lx.line, "unexpected char %s at %d", repr(string(quote)), p)
	}
	val := unescapePy(src[p+1 : q])
	lx.toks = append(lx.toks, token{typ: tokString, val: val, line: lx.line})
	lx.advance(q + 1)
	return nil
}

func unescapePy(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		n := s[i+1]
		if n >= utf8.RuneSelf {
			// Python first turns the character into its \x/\u/\U escape,
			// whose backslash then pairs with this one.
			r, size := utf8.DecodeRuneInString(s[i+1:])
			b.WriteByte('\\')
			switch {
			case r <= 0xff:
				b.WriteString(sprintf("x%02x", r))
			case r <= 0xffff:
				b.WriteString(sprintf("u%04x", r))
			default:
				b.WriteString(sprintf("U%08x", r))
			}
			i += 1 + size
			continue
		}
		i += 2
		switch n {
		case '\n':
		case '\\':
			b.WriteByte('\\')
		case '\'':
			b.WriteByte('\'')
		case '"':
			b.WriteByte('"')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(n - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + int(s[i]-'0')
				i++
			}
			b.WriteRune(rune(v))
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[n]
			if i+width <= len(s) {
				if v, err := strconv.ParseUint(s[i:i+width], 16, 32); err == nil && v <= unicode.MaxRune {
					b.WriteRune(rune(v))
					i += width
					continue
				}
			}
			// Python raises here; keep the text as written.
			b.WriteByte('\\')
			b.WriteByte(n)
		default:
			b.WriteByte('\\')
			b.WriteByte(n)
		}
	}
	return b.String()
}

// pyIsSpace is Python's str.isspace for one character.
func pyIsSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0,
		0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

func pyIsPrintable(r rune) bool { return unicode.IsPrint(r) }

func skipSpace(s string, p int) int {
	for p < len(s) {
		c := s[p]
		if c < utf8.RuneSelf {
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c >= 0x1c && c <= 0x1f {
				p++
				continue
			}
			return p
		}
		r, size := utf8.DecodeRuneInString(s[p:])
		if !pyIsSpace(r) {
			return p
		}
		p += size
	}
	return p
}

func allSpace(s string) bool { return skipSpace(s, 0) == len(s) }

// rstripSpace is Python's str.rstrip() with no argument.
func rstripSpace(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !pyIsSpace(r) {
			break
		}
		s = s[:len(s)-size]
	}
	return s
}

// lstripSpace is Python's str.lstrip() with no argument.
func lstripSpace(s string) string { return s[skipSpace(s, 0):] }

func normInt(n *big.Int) any {
	if n.IsInt64() {
		return n.Int64()
	}
	return n
}

package templates

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// percentFormat is Python's printf-style str % args.
func percentFormat(format string, args any) string {
	var pos []any
	var mapping *Dict
	switch a := args.(type) {
	case tuple:
		pos = a
	case *Dict:
		mapping = a
		pos = []any{a}
	default:
		pos = []any{a}
	}
	next := 0
	take := func() any {
		if next >= len(pos) {
			typeError("not enough arguments for format string")
		}
		v := pos[next]
		next++
		return v
	}
	var b strings.Builder
	usedMapping := false
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			throw(excValue, "incomplete format")
		}
		var arg any
		hasArg := false
		if format[i] == '(' {
			depth, j := 1, i+1
			for j < len(format) && depth > 0 {
				if format[j] == '(' {
					depth++
				} else if format[j] == ')' {
					depth--
				}
				j++
			}
			if depth > 0 {
				throw(excValue, "incomplete format key")
			}
			if mapping == nil {
				typeError("format requires a mapping")
			}
			key := format[i+1 : j-1]
			v, ok := mapping.getAny(key)
			if !ok {
				throw(excKey, "%s", repr(key))
			}
			arg, hasArg, usedMapping = v, true, true
			i = j
		}
		var flags string
		for i < len(format) && strings.IndexByte("#0- +", format[i]) >= 0 {
			flags += string(format[i])
			i++
		}
		width, prec := -1, -1
		if i < len(format) && format[i] == '*' {
			width = wantInt("format", take())
			i++
		} else {
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				width = max(width, 0)*10 + int(format[i]-'0')
				i++
			}
		}
		if i < len(format) && format[i] == '.' {
			i++
			prec = 0
			if i < len(format) && format[i] == '*' {
				prec = wantInt("format", take())
				i++
			} else {
				for i < len(format) && format[i] >= '0' && format[i] <= '9' {
					prec = prec*10 + int(format[i]-'0')
					i++
				}
			}
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			throw(excValue, "incomplete format")
		}
		conv := format[i]
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if !hasArg {
			arg = take()
		}
		spec := fmtSpec{fill: " ", align: '>', width: width, prec: prec}
		if strings.Contains(flags, "-") {
			spec.align = '<'
		} else if strings.Contains(flags, "0") && conv != 's' && conv != 'r' && conv != 'a' && conv != 'c' {
			spec.fill, spec.align = "0", '='
		}
		if strings.Contains(flags, "+") {
			spec.sign = '+'
		} else if strings.Contains(flags, " ") {
			spec.sign = ' '
		}
		spec.alt = strings.Contains(flags, "#")
		switch conv {
		case 's':
			s := toStr(arg)
			if prec >= 0 {
				s = truncRunes(s, prec)
			}
			spec.prec = -1
			b.WriteString(spec.padStr(s))
		case 'r', 'a':
			s := repr(arg)
			if prec >= 0 {
				s = truncRunes(s, prec)
			}
			spec.prec = -1
			b.WriteString(spec.padStr(s))
		case 'c':
			var s string
			switch x := arg.(type) {
			case string:
				if runeLen(x) != 1 {
					typeError("%%c requires int or char")
				}
				s = x
			default:
				n, ok := asInt64(x)
				if !ok {
					typeError("%%c requires int or char")
				}
				s = string(rune(n))
			}
			b.WriteString(spec.padStr(s))
		case 'd', 'i', 'u', 'o', 'x', 'X', 'e', 'E', 'f', 'F', 'g', 'G':
			if u, ok := arg.(*undefined); ok {
				u.fail()
			}
			if !isNumber(arg) {
				kind := "a real number"
				if conv == 'o' || conv == 'x' || conv == 'X' {
					kind = "an integer"
				}
				typeError("%%%c format: %s is required, not %s", conv, kind, typeName(arg))
			}
			t := conv
			if t == 'i' || t == 'u' {
				t = 'd'
			}
			if t == 'd' || t == 'o' || t == 'x' || t == 'X' {
				if f, ok := arg.(float64); ok {
					if t != 'd' {
						typeError("%%%c format: an integer is required, not float", conv)
					}
					arg = pyInt(f, 10)
				}
				if spec.prec >= 0 {
					// precision pads digits with zeros in printf style
					spec.minDigits, spec.prec = spec.prec, -1
				}
			}
			if t == 'o' && spec.alt {
				spec.altO = true
			}
			b.WriteString(formatNumber(arg, t, spec))
		default:
			throw(excValue, "unsupported format character '%c' (0x%x) at index %d", conv, conv, i)
		}
	}
	if next < len(pos) && !usedMapping && mapping == nil {
		typeError("not all arguments converted during string formatting")
	}
	return b.String()
}

func truncRunes(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// fmtSpec is a parsed format specification (str.format's mini-language or
// a printf conversion).
type fmtSpec struct {
	fill      string
	align     byte // '<', '>', '^', '='
	sign      byte // '+', '-', ' ' or 0
	alt       bool
	altO      bool
	width     int
	grouping  byte // ',' or '_' or 0
	prec      int
	minDigits int
	typ       byte
}

func (s fmtSpec) padStr(str string) string {
	n := runeLen(str)
	if s.width <= n {
		return str
	}
	fill := repeatStr(s.fill, s.width-n)
	switch s.align {
	case '<':
		return str + fill
	case '^':
		left := (s.width - n) / 2
		return repeatStr(s.fill, left) + str + repeatStr(s.fill, s.width-n-left)
	}
	return fill + str
}

func checkPrec(p int) {
	if p > 1<<16 {
		throw(excLimit, "format precision %d too large", p)
	}
}

// formatNumber formats a number with conversion t ('d', 'x', 'o', 'X',
// 'e', 'f', 'g', '%', ... or 0 for str()).
func formatNumber(v any, t byte, s fmtSpec) string {
	var digits string
	neg := false
	switch t {
	case 'd', 'n', 'x', 'X', 'o', 'b':
		n := toBig(toIntValue(v))
		if n == nil {
			typeError("Unknown format code '%c' for object of type 'float'", t)
		}
		neg = n.Sign() < 0
		abs := new(big.Int).Abs(n)
		base := map[byte]int{'d': 10, 'n': 10, 'x': 16, 'X': 16, 'o': 8, 'b': 2}[t]
		digits = abs.Text(base)
		if t == 'X' {
			digits = strings.ToUpper(digits)
		}
		if len(digits) < s.minDigits {
			digits = repeatStr("0", s.minDigits-len(digits)) + digits
		}
		if s.grouping != 0 && t != 'x' && t != 'X' && t != 'o' && t != 'b' {
			digits = group(digits, s.grouping, 3)
		}
		if s.alt || s.altO {
			switch t {
			case 'x':
				digits = "0x" + digits
			case 'X':
				digits = "0X" + digits
			case 'o':
				digits = "0o" + digits
			case 'b':
				digits = "0b" + digits
			}
		}
	default:
		f := toFloat(v)
		checkPrec(s.prec)
		neg = math.Signbit(f) && !math.IsNaN(f)
		f = math.Abs(f)
		prec := s.prec
		switch {
		case math.IsInf(f, 0):
			digits = "inf"
		case math.IsNaN(f):
			digits = "nan"
		default:
			switch t {
			case 'e', 'E':
				if prec < 0 {
					prec = 6
				}
				digits = strconv.FormatFloat(f, 'e', prec, 64)
			case 'f', 'F':
				if prec < 0 {
					prec = 6
				}
				digits = strconv.FormatFloat(f, 'f', prec, 64)
			case '%':
				if prec < 0 {
					prec = 6
				}
				digits = strconv.FormatFloat(f*100, 'f', prec, 64) + "%"
			case 'g', 'G':
				if prec < 0 {
					prec = 6
				}
				digits = pyGeneral(f, max(prec, 1), s.alt)
			default: // no type: repr, or general with precision
				if prec < 0 {
					digits = formatFloat(f)
				} else {
					digits = pyGeneral(f, max(prec, 1), s.alt)
					if !strings.ContainsAny(digits, ".e") {
						digits += ".0"
					}
				}
			}
		}
		if t == 'E' || t == 'G' || t == 'F' {
			digits = strings.ToUpper(digits)
		}
		if s.grouping != 0 {
			intPart, rest := digits, ""
			if i := strings.IndexAny(digits, ".e%"); i >= 0 {
				intPart, rest = digits[:i], digits[i:]
			}
			digits = group(intPart, s.grouping, 3) + rest
		}
	}
	sign := ""
	switch {
	case neg:
		sign = "-"
	case s.sign == '+':
		sign = "+"
	case s.sign == ' ':
		sign = " "
	}
	total := utf8.RuneCountInString(sign + digits)
	if s.width > total {
		fill := repeatStr(s.fill, s.width-total)
		switch s.align {
		case '<':
			return sign + digits + fill
		case '^':
			left := (s.width - total) / 2
			return repeatStr(s.fill, left) + sign + digits + repeatStr(s.fill, s.width-total-left)
		case '=':
			return sign + fill + digits
		}
		return fill + sign + digits
	}
	return sign + digits
}

// pyGeneral is Python's 'g' format of a non-negative finite float.
func pyGeneral(f float64, prec int, alt bool) string {
	if f == 0 {
		if alt {
			return "0." + repeatStr("0", prec-1)
		}
		return "0"
	}
	e := strconv.FormatFloat(f, 'e', prec-1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	var out string
	if exp >= -4 && exp < prec {
		out = strconv.FormatFloat(f, 'f', prec-1-exp, 64)
		if !alt && strings.Contains(out, ".") {
			out = strings.TrimRight(strings.TrimRight(out, "0"), ".")
		}
		return out
	}
	mant := e[:strings.IndexByte(e, 'e')]
	if !alt && strings.Contains(mant, ".") {
		mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
	}
	es := strconv.Itoa(abs(exp))
	if len(es) < 2 {
		es = "0" + es
	}
	if exp < 0 {
		return mant + "e-" + es
	}
	return mant + "e+" + es
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func group(digits string, sep byte, n int) string {
	if len(digits) <= n {
		return digits
	}
	var b strings.Builder
	first := len(digits) % n
	if first > 0 {
		b.WriteString(digits[:first])
	}
	for i := first; i < len(digits); i += n {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+n])
	}
	return b.String()
}

// parseFormatSpec parses str.format's mini-language.
func parseFormatSpec(spec string) fmtSpec {
	s := fmtSpec{fill: " ", align: 0, width: -1, prec: -1}
	rs := []rune(spec)
	i := 0
	isAlign := func(r rune) bool { return r == '<' || r == '>' || r == '^' || r == '=' }
	if len(rs) >= 2 && isAlign(rs[1]) {
		s.fill, s.align = string(rs[0]), byte(rs[1])
		i = 2
	} else if len(rs) >= 1 && isAlign(rs[0]) {
		s.align = byte(rs[0])
		i = 1
	}
	if i < len(rs) && (rs[i] == '+' || rs[i] == '-' || rs[i] == ' ') {
		s.sign = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == 'z' {
		i++
	}
	if i < len(rs) && rs[i] == '#' {
		s.alt = true
		i++
	}
	if i < len(rs) && rs[i] == '0' {
		if s.align == 0 {
			s.fill, s.align = "0", '='
		}
		i++
	}
	for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
		s.width = max(s.width, 0)*10 + int(rs[i]-'0')
		i++
	}
	if i < len(rs) && (rs[i] == ',' || rs[i] == '_') {
		s.grouping = byte(rs[i])
		i++
	}
	if i < len(rs) && rs[i] == '.' {
		i++
		s.prec = 0
		for i < len(rs) && rs[i] >= '0' && rs[i] <= '9' {
			s.prec = s.prec*10 + int(rs[i]-'0')
			i++
		}
	}
	if i < len(rs) {
		s.typ = byte(rs[i])
		i++
	}
	if i < len(rs) {
		throw(excValue, "Invalid format specifier '%s'", spec)
	}
	return s
}

// formatValue is format(v, spec) for the builtin types.
func formatValue(v any, spec string) string {
	if spec == "" {
		return toStr(v)
	}
	s := parseFormatSpec(spec)
	switch x := v.(type) {
	case string:
		if s.typ != 0 && s.typ != 's' {
			throw(excValue, "Unknown format code '%c' for object of type 'str'", s.typ)
		}
		if s.align == '=' {
			throw(excValue, "'=' alignment not allowed in string format specifier")
		}
		if s.prec >= 0 {
			x = truncRunes(x, s.prec)
		}
		if s.align == 0 {
			s.align = '<'
		}
		return s.padStr(x)
	case bool, int64, *big.Int, float64:
		if s.align == 0 {
			s.align = '>'
		}
		t := s.typ
		if _, isF := x.(float64); isF && (t == 'd' || t == 'x' || t == 'X' || t == 'o' || t == 'b' || t == 'c') {
			throw(excValue, "Unknown format code '%c' for object of type 'float'", t)
		}
		if t == 0 && isInt(x) {
			t = 'd'
		}
		if t == 'c' {
			n, _ := asInt64(toIntValue(x))
			return s.padStr(string(rune(n)))
		}
		return formatNumber(x, t, s)
	}
	if s.align == 0 {
		s.align = '<'
	}
	return s.padStr(toStr(v))
}

// strFormat is str.format(*args, **kwargs) through jinja2's sandboxed
// formatter: fields may look up attributes and items, with the sandbox's
// getattr/getitem.
func (r *renderer) strFormat(format string, args []any, kw []kwarg) string {
	var b strings.Builder
	auto := 0
	manual := false
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c == '}' {
			if i+1 < len(format) && format[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			throw(excValue, "Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '{' {
			b.WriteByte('{')
			i++
			continue
		}
		depth, j := 1, i+1
		for j < len(format) && depth > 0 {
			switch format[j] {
			case '{':
				depth++
			case '}':
				depth--
			}
			j++
		}
		if depth > 0 {
			throw(excValue, "expected '}' before end of string")
		}
		field := format[i+1 : j-1]
		i = j - 1
		spec := ""
		if k := strings.IndexByte(field, ':'); k >= 0 {
			field, spec = field[:k], field[k+1:]
		}
		conv := byte(0)
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				throw(excValue, "expected ':' after conversion specifier")
			}
			conv = field[k+1]
			field = field[:k]
		}
		// first name, then .attr / [key] parts
		end := strings.IndexAny(field, ".[")
		if end < 0 {
			end = len(field)
		}
		first := field[:end]
		var v any
		switch {
		case first == "":
			if manual {
				throw(excValue, "cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				throw(excIndex, "Replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case first[0] >= '0' && first[0] <= '9':
			n, err := strconv.Atoi(first)
			if err != nil {
				throw(excValue, "bad field name %s", repr(first))
			}
			manual = true
			if n >= len(args) {
				throw(excIndex, "Replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		default:
			found := false
			for _, k := range kw {
				if k.name == first {
					v, found = k.val, true
				}
			}
			if !found {
				throw(excKey, "%s", repr(first))
			}
		}
		rest := field[end:]
		for rest != "" {
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				v = r.getattr(v, rest[1:1+k])
				rest = rest[1+k:]
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				throw(excValue, "Missing ']' in format string")
			}
			key := rest[1:k]
			var kv any = key
			if n, err := strconv.Atoi(key); err == nil {
				kv = int64(n)
			}
			v = r.getitem(v, kv)
			rest = rest[k+1:]
		}
		switch conv {
		case 0, 's':
			if conv == 's' {
				v = toStr(v)
			}
		case 'r', 'a':
			v = repr(v)
		default:
			throw(excValue, "Unknown conversion specifier %c", conv)
		}
		if strings.Contains(spec, "{") {
			spec = r.strFormat(spec, args, kw)
		}
		if u, ok := v.(*undefined); ok && spec == "" {
			_ = u
			b.WriteString("")
			continue
		}
		b.WriteString(formatValue(v, spec))
	}
	return b.String()
}

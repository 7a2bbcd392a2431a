package templates

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting in DecodeJSON (Python's json.loads fails with
// RecursionError near 1000 levels).
const maxJSONDepth = 1000

// DecodeJSON decodes one JSON document into template values the way
// Python's json.loads does: object key order is kept (*Dict), a number with
// a fraction or exponent is a float64 (so 1.0 stays 1.0 through tojson)
// and any other number an int64 (a *big.Int when it does not fit), and the
// tokens NaN, Infinity and -Infinity are accepted. Duplicate keys keep
// their first position and their last value, as in Python.
func DecodeJSON(data []byte) (any, error) {
	d := &jsonDecoder{data: data}
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.skipWS()
	if d.pos < len(d.data) {
		return nil, d.errorf("extra data")
	}
	return v, nil
}

type jsonDecoder struct {
	data []byte
	pos  int
}

func (d *jsonDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("templates: json: %s at offset %d", fmt.Sprintf(format, args...), d.pos)
}

func (d *jsonDecoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, d.errorf("nesting deeper than %d", maxJSONDepth)
	}
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of input")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		d.pos++
		obj := NewDict(4)
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == '}' {
			d.pos++
			return obj, nil
		}
		for {
			d.skipWS()
			if d.pos >= len(d.data) || d.data[d.pos] != '"' {
				return nil, d.errorf("expecting property name enclosed in double quotes")
			}
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			d.skipWS()
			if d.pos >= len(d.data) || d.data[d.pos] != ':' {
				return nil, d.errorf("expecting ':' delimiter")
			}
			d.pos++
			d.skipWS()
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			obj.setAny(k, v)
			d.skipWS()
			if d.pos >= len(d.data) {
				return nil, d.errorf("unexpected end of input in object")
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == '}' {
				d.pos++
				return obj, nil
			}
			return nil, d.errorf("expecting ',' delimiter")
		}
	case c == '[':
		d.pos++
		arr := make([]any, 0, 4)
		d.skipWS()
		if d.pos < len(d.data) && d.data[d.pos] == ']' {
			d.pos++
			return arr, nil
		}
		for {
			d.skipWS()
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
			d.skipWS()
			if d.pos >= len(d.data) {
				return nil, d.errorf("unexpected end of input in array")
			}
			if d.data[d.pos] == ',' {
				d.pos++
				continue
			}
			if d.data[d.pos] == ']' {
				d.pos++
				return arr, nil
			}
			return nil, d.errorf("expecting ',' delimiter")
		}
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		if d.hasPrefix("-Infinity") {
			d.pos += 9
			return math.Inf(-1), nil
		}
		return d.number()
	}
	for _, lit := range [...]struct {
		s string
		v any
	}{{"true", true}, {"false", false}, {"null", nil}, {"NaN", math.NaN()}, {"Infinity", math.Inf(1)}} {
		if d.hasPrefix(lit.s) {
			d.pos += len(lit.s)
			return lit.v, nil
		}
	}
	return nil, d.errorf("expecting value")
}

func (d *jsonDecoder) hasPrefix(s string) bool {
	return len(d.data)-d.pos >= len(s) && string(d.data[d.pos:d.pos+len(s)]) == s
}

func (d *jsonDecoder) number() (any, error) {
	start := d.pos
	p := d.pos
	if d.data[p] == '-' {
		p++
	}
	digits := func() int {
		q := p
		for p < len(d.data) && d.data[p] >= '0' && d.data[p] <= '9' {
			p++
		}
		return p - q
	}
	if p < len(d.data) && d.data[p] == '0' {
		p++
	} else if digits() == 0 {
		d.pos = p
		return nil, d.errorf("expecting value")
	}
	isFloat := false
	if p < len(d.data) && d.data[p] == '.' {
		save := p
		p++
		if digits() == 0 {
			p = save
		} else {
			isFloat = true
		}
	}
	if p < len(d.data) && (d.data[p] == 'e' || d.data[p] == 'E') {
		save := p
		p++
		if p < len(d.data) && (d.data[p] == '+' || d.data[p] == '-') {
			p++
		}
		if digits() == 0 {
			p = save
		} else {
			isFloat = true
		}
	}
	d.pos = p
	text := string(d.data[start:p])
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !isRangeErr(err) {
			return nil, d.errorf("bad number %q", text)
		}
		return f, nil
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	n, ok := new(big.Int).SetString(text, 10)
	if !ok {
		return nil, d.errorf("bad number %q", text)
	}
	return normInt(n), nil
}

func (d *jsonDecoder) str() (string, error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes, valid UTF-8.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := d.data[start:d.pos]
			d.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return strings.ToValidUTF8(string(s), "\uFFFD"), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", d.errorf("invalid control character")
		}
		d.pos++
	}
	var b strings.Builder
	b.Write(d.data[start:d.pos])
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "\uFFFD")
			}
			return s, nil
		case c < 0x20:
			return "", d.errorf("invalid control character")
		case c != '\\':
			b.WriteByte(c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.data) {
			break
		}
		e := d.data[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
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
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.errorf("invalid \\uXXXX escape")
			}
			if utf16.IsSurrogate(r) {
				if r < 0xdc00 && d.hasPrefix(`\u`) {
					save := d.pos
					d.pos += 2
					if r2, ok := d.hex4(); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
						b.WriteRune(utf16.DecodeRune(r, r2))
						continue
					}
					d.pos = save
				}
				r = utf8.RuneError
			}
			b.WriteRune(r)
		default:
			return "", d.errorf("invalid \\escape")
		}
	}
	return "", d.errorf("unterminated string")
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if d.pos+4 > len(d.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.data[d.pos:d.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.pos += 4
	return rune(v), true
}

// FromGo converts a Go value into a template value: nil, bools, integers,
// floats, strings, json.Number, json.RawMessage (decoded with DecodeJSON),
// slices and arrays (lists), *Dict, and maps with string keys (dicts, keys
// sorted, since a Go map has no order: build a *Dict or use DecodeJSON to
// keep an order). Values already in template form are returned as they are.
func FromGo(v any) (any, error) {
	out, _, err := fromGo(v, 0)
	return out, err
}

var errDepth = errors.New("templates: value nested too deeply")

// fromGo returns the converted value and whether it differs from v.
func fromGo(v any, depth int) (any, bool, error) {
	if depth > maxJSONDepth {
		return nil, false, errDepth
	}
	switch x := v.(type) {
	case nil, bool, int64, float64, string, *big.Int:
		return v, false, nil
	case int:
		return int64(x), true, nil
	case int32:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	case uint8:
		return int64(x), true, nil
	case uint16:
		return int64(x), true, nil
	case uint32:
		return int64(x), true, nil
	case uint:
		return normInt(new(big.Int).SetUint64(uint64(x))), true, nil
	case uint64:
		return normInt(new(big.Int).SetUint64(x)), true, nil
	case float32:
		return float64(x), true, nil
	case json.Number:
		w, err := DecodeJSON([]byte(x))
		if err != nil {
			return nil, false, fmt.Errorf("templates: bad json.Number %q: %w", string(x), err)
		}
		return w, true, nil
	case json.RawMessage:
		w, err := DecodeJSON(x)
		return w, true, err
	case []any:
		var out []any
		for i, e := range x {
			w, changed, err := fromGo(e, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = slices.Clone(x)
			}
			if out != nil {
				out[i] = w
			}
		}
		if out != nil {
			return out, true, nil
		}
		return v, false, nil
	case tuple:
		return v, false, nil
	case *Dict:
		if x == nil {
			return nil, true, nil
		}
		var out *Dict
		for i, e := range x.vals {
			w, changed, err := fromGo(e, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = x.copyDict()
			}
			if out != nil {
				out.vals[i] = w
			}
		}
		if out != nil {
			return out, true, nil
		}
		return v, false, nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := NewDict(len(keys))
		for _, k := range keys {
			w, _, err := fromGo(x[k], depth+1)
			if err != nil {
				return nil, false, err
			}
			d.setAny(k, w)
		}
		return d, true, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, true, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			w, _, err := fromGo(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, false, err
			}
			out[i] = w
		}
		return out, true, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, false, fmt.Errorf("templates: map key type %s is not string", rv.Type().Key())
		}
		if rv.IsNil() {
			return nil, true, nil
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		d := NewDict(len(keys))
		for _, k := range keys {
			w, _, err := fromGo(rv.MapIndex(reflect.ValueOf(k).Convert(rv.Type().Key())).Interface(), depth+1)
			if err != nil {
				return nil, false, err
			}
			d.setAny(k, w)
		}
		return d, true, nil
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, true, nil
		}
		return fromGo(rv.Elem().Interface(), depth+1)
	case reflect.String:
		return rv.String(), true, nil
	case reflect.Bool:
		return rv.Bool(), true, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true, nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true, nil
	}
	return nil, false, fmt.Errorf("templates: cannot use a %T as a template value", v)
}

// jsonOpts are json.dumps' arguments as transformers' tojson passes them.
type jsonOpts struct {
	ensureASCII bool
	indent      string
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// dumpsJSON is Python's json.dumps(v, ...) with opts.
func dumpsJSON(v any, o jsonOpts) string {
	var b strings.Builder
	b.Grow(256)
	writeJSON(&b, v, o, 0, 0)
	return b.String()
}

func writeJSON(b *strings.Builder, v any, o jsonOpts, level, depth int) {
	if depth > maxJSONDepth {
		throw(excRecursion, "maximum recursion depth exceeded while encoding a JSON object")
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case *big.Int:
		b.WriteString(x.String())
	case float64:
		b.WriteString(jsonFloat(x))
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case []any:
		writeJSONList(b, x, o, level, depth)
	case tuple:
		writeJSONList(b, x, o, level, depth)
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return
		}
		keys, vals := x.keys, x.vals
		if o.sortKeys {
			order := make([]int, len(keys))
			for i := range order {
				order[i] = i
			}
			slices.SortStableFunc(order, func(i, j int) int {
				c := pyCompare("<", keys[i], keys[j])
				if c == 2 {
					return 0
				}
				return c
			})
			ks, vs := make([]any, len(keys)), make([]any, len(keys))
			for i, j := range order {
				ks[i], vs[i] = keys[j], vals[j]
			}
			keys, vals = ks, vs
		}
		b.WriteByte('{')
		nl := ""
		if o.hasIndent {
			level++
			nl = "\n" + repeatStr(o.indent, level)
			b.WriteString(nl)
		}
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
				b.WriteString(nl)
			}
			var ks string
			switch kk := k.(type) {
			case string:
				ks = kk
			case float64:
				ks = jsonFloat(kk)
			case bool:
				ks = "false"
				if kk {
					ks = "true"
				}
			case nil:
				ks = "null"
			case int64:
				ks = strconv.FormatInt(kk, 10)
			case *big.Int:
				ks = kk.String()
			default:
				typeError("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
			writeJSONString(b, ks, o.ensureASCII)
			b.WriteString(o.keySep)
			writeJSON(b, vals[i], o, level, depth+1)
		}
		if o.hasIndent {
			b.WriteString("\n" + repeatStr(o.indent, level-1))
		}
		b.WriteByte('}')
	default:
		typeError("Object of type %s is not JSON serializable", typeName(v))
	}
}

func writeJSONList(b *strings.Builder, x []any, o jsonOpts, level, depth int) {
	if len(x) == 0 {
		b.WriteString("[]")
		return
	}
	b.WriteByte('[')
	nl := ""
	if o.hasIndent {
		level++
		nl = "\n" + repeatStr(o.indent, level)
		b.WriteString(nl)
	}
	for i, e := range x {
		if i > 0 {
			b.WriteString(o.itemSep)
			b.WriteString(nl)
		}
		writeJSON(b, e, o, level, depth+1)
	}
	if o.hasIndent {
		b.WriteString("\n" + repeatStr(o.indent, level-1))
	}
	b.WriteByte(']')
}

func jsonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return formatFloat(f)
}

const hexDigits = "0123456789abcdef"

// writeJSONString writes s as json.dumps does: with ensure_ascii=False
// only '"', '\\' and control characters are escaped.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && (c < utf8.RuneSelf || !ensureASCII) {
			i++
			continue
		}
		b.WriteString(s[start:i])
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= 0x10000 {
			r1, r2 := utf16.EncodeRune(r)
			writeU4(b, r1)
			writeU4(b, r2)
		} else {
			writeU4(b, r)
		}
		i += size
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

func writeU4(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}

package pyjson

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// The bare tokens Python's json module writes for non-finite floats, and the
// values they stand for.
var (
	tokens = [3]string{"Infinity", "-Infinity", "NaN"}
	values = [3]float64{math.Inf(1), math.Inf(-1), math.NaN()}
)

// Unmarshal is encoding/json.Unmarshal that also accepts the bare tokens
// Infinity, -Infinity and NaN wherever a JSON number may appear. They decode
// to ±Inf and NaN in float32 and float64 destinations and in interface values
// (as float64), and to the token text in a json.Number or json.RawMessage.
// A token whose destination cannot hold a float (an int, a string) fails with
// an *json.UnmarshalTypeError, as an out-of-range number would. Everything
// else, including errors, is exactly what encoding/json does; error offsets
// refer to the original input.
func Unmarshal(data []byte, v any) error {
	r := rewrite(data)
	if r == nil {
		return json.Unmarshal(data, v)
	}
	err := json.Unmarshal(r.data, v)
	if rv := reflect.ValueOf(v); err == nil || !errors.As(err, new(*json.SyntaxError)) {
		// encoding/json keeps decoding after a type error, so the
		// destination may hold markers even when err != nil.
		if rv.Kind() == reflect.Pointer && !rv.IsNil() {
			w := walker{r: r, seen: map[visit]bool{}}
			w.walk(rv)
		}
	}
	return r.fixError(err)
}

// Valid reports whether data is valid JSON once the tokens Infinity,
// -Infinity and NaN are allowed as numbers.
func Valid(data []byte) bool {
	if r := rewrite(data); r != nil {
		return json.Valid(r.data)
	}
	return json.Valid(data)
}

// rewritten is the input with every bare token replaced by a marker: a
// number literal that occurs nowhere else in the document, so encoding/json
// decodes it like any number and the walk afterwards can recognise it.
type rewritten struct {
	data    []byte
	lexemes [3]string  // marker literal per token
	m64     [3]float64 // marker value parsed as float64
	m32     [3]float32 // marker value parsed as float32
	edits   []edit
}

// edit records one replacement, for mapping error offsets back.
type edit struct {
	newEnd int // offset just after the marker in the rewritten data
	delta  int // len(marker) - len(token)
	newLen int // len(marker)
}

// isDelimBefore and isDelimAfter decide whether a token stands alone: Python
// writes it only where a value starts, and in valid JSON a value is always
// preceded and followed by one of these (or the ends of the input).
func isDelimBefore(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '[', ',', ':':
		return true
	}
	return false
}

func isDelimAfter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ']', '}', ',':
		return true
	}
	return false
}

// tokenAt reports which token, if any, stands alone at data[i:].
func tokenAt(data []byte, i int) (int, bool) {
	if i > 0 && !isDelimBefore(data[i-1]) {
		return 0, false
	}
	for k, tok := range tokens {
		if len(data)-i < len(tok) || string(data[i:i+len(tok)]) != tok {
			continue
		}
		end := i + len(tok)
		if end < len(data) && !isDelimAfter(data[end]) {
			return 0, false
		}
		// A token followed by ':' would be an object key; leave it for
		// encoding/json to reject.
		j := end
		for j < len(data) && (data[j] == ' ' || data[j] == '\t' || data[j] == '\n' || data[j] == '\r') {
			j++
		}
		if j < len(data) && data[j] == ':' {
			return 0, false
		}
		return k, true
	}
	return 0, false
}

// scan calls onToken for each stand-alone token and onNumber for each number
// literal outside strings. Both receive the literal's span.
func scan(data []byte, onToken func(k, start, end int), onNumber func(start, end int)) {
	for i := 0; i < len(data); {
		switch c := data[i]; {
		case c == '"':
			for i++; i < len(data); i++ {
				if data[i] == '\\' {
					i++
				} else if data[i] == '"' {
					i++
					break
				}
			}
		case c == 'I' || c == 'N' || c == '-' && i+1 < len(data) && data[i+1] == 'I':
			if k, ok := tokenAt(data, i); ok {
				onToken(k, i, i+len(tokens[k]))
				i += len(tokens[k])
			} else {
				i++
			}
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(data) && strings.IndexByte("0123456789+-.eE", data[j]) >= 0 {
				j++
			}
			onNumber(i, j)
			i = j
		default:
			i++
		}
	}
}

// rewrite returns nil when data holds no bare token.
func rewrite(data []byte) *rewritten {
	type span struct{ k, start, end int }
	var spans []span
	var nums64 []float64
	var nums32 []float32
	scan(data, func(k, start, end int) {
		spans = append(spans, span{k, start, end})
	}, func(start, end int) {
		lit := data[start:end]
		f64, _ := strconv.ParseFloat(string(lit), 64)
		f32, _ := strconv.ParseFloat(string(lit), 32)
		nums64 = append(nums64, f64)
		nums32 = append(nums32, float32(f32))
	})
	if len(spans) == 0 {
		return nil
	}
	r := &rewritten{}
	r.chooseMarkers(nums64, nums32)
	out := make([]byte, 0, len(data)+len(spans)*16)
	prev := 0
	for _, s := range spans {
		out = append(out, data[prev:s.start]...)
		out = append(out, r.lexemes[s.k]...)
		r.edits = append(r.edits, edit{newEnd: len(out), delta: len(r.lexemes[s.k]) - (s.end - s.start), newLen: len(r.lexemes[s.k])})
		prev = s.end
	}
	r.data = append(out, data[prev:]...)
	return r
}

// chooseMarkers picks three tiny, oddly spelled numbers that differ from each
// other and from every number in the document, in both float32 and float64.
func (r *rewritten) chooseMarkers(nums64 []float64, nums32 []float32) {
	bits := uint32(0x0f5a3c71) // about 1.1e-29
	for k := range r.lexemes {
	next:
		for ; ; bits += 0x9e37 {
			lex := strconv.FormatFloat(float64(math.Float32frombits(bits)), 'g', -1, 32)
			f64, _ := strconv.ParseFloat(lex, 64)
			f32, _ := strconv.ParseFloat(lex, 32)
			for i := range nums64 {
				if nums64[i] == f64 || nums32[i] == float32(f32) {
					continue next
				}
			}
			for j := range k {
				if r.m64[j] == f64 || r.m32[j] == float32(f32) {
					continue next
				}
			}
			r.lexemes[k], r.m64[k], r.m32[k] = lex, f64, float32(f32)
			bits += 0x9e37
			break
		}
	}
}

// origOffset maps an offset in the rewritten data back to the input.
func (r *rewritten) origOffset(n int64) int64 {
	shift := 0
	for _, e := range r.edits {
		if int64(e.newEnd) <= n {
			shift += e.delta
		} else if int64(e.newEnd-e.newLen) < n {
			// Inside a marker: point at the token's start.
			return int64(e.newEnd-e.newLen-shift) + 1
		}
	}
	return n - int64(shift)
}

// fixError makes an encoding/json error describe the original input.
func (r *rewritten) fixError(err error) error {
	if err == nil {
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		se.Offset = r.origOffset(se.Offset)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		te.Offset = r.origOffset(te.Offset)
		for k, lex := range r.lexemes {
			if te.Value == "number "+lex {
				te.Value = "number " + tokens[k]
			}
		}
	}
	return err
}

// restoreRaw puts the tokens back into a json.RawMessage.
func (r *rewritten) restoreRaw(b []byte) ([]byte, bool) {
	var out []byte
	prev := 0
	scan(b, func(int, int, int) {}, func(start, end int) {
		for k, lex := range r.lexemes {
			if string(b[start:end]) == lex {
				out = append(out, b[prev:start]...)
				out = append(out, tokens[k]...)
				prev = end
			}
		}
	})
	if out == nil {
		return b, false
	}
	return append(out, b[prev:]...), true
}

var (
	numberType = reflect.TypeFor[json.Number]()
	rawType    = reflect.TypeFor[json.RawMessage]()
)

// visit identifies a pointer, map or slice already walked, so cyclic values
// terminate.
type visit struct {
	ptr uintptr
	n   int
	t   reflect.Type
}

type walker struct {
	r    *rewritten
	seen map[visit]bool
}

// walk replaces markers reachable from v by the values they stand for and
// reports whether it changed anything.
func (w *walker) walk(v reflect.Value) bool {
	if !mayHold(v.Type()) {
		return false
	}
	switch v.Kind() {
	case reflect.Float64:
		for k, m := range w.r.m64 {
			if v.Float() == m && v.CanSet() {
				v.SetFloat(values[k])
				return true
			}
		}
	case reflect.Float32:
		for k, m := range w.r.m32 {
			if float32(v.Float()) == m && v.CanSet() {
				v.SetFloat(values[k])
				return true
			}
		}
	case reflect.String: // json.Number
		for k, lex := range w.r.lexemes {
			if v.String() == lex && v.CanSet() {
				v.SetString(tokens[k])
				return true
			}
		}
	case reflect.Pointer:
		if v.IsNil() || w.once(visit{v.Pointer(), 0, v.Type()}) {
			return false
		}
		return w.walk(v.Elem())
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer {
			return w.walk(e)
		}
		c := reflect.New(e.Type()).Elem()
		c.Set(e)
		if w.walk(c) && v.CanSet() {
			v.Set(c)
			return true
		}
	case reflect.Slice:
		if v.Type() == rawType {
			if b, ok := w.r.restoreRaw(v.Bytes()); ok && v.CanSet() {
				v.SetBytes(b)
				return true
			}
			return false
		}
		if v.IsNil() || w.once(visit{v.Pointer(), v.Len(), v.Type()}) {
			return false
		}
		changed := false
		for i := range v.Len() {
			changed = w.walk(v.Index(i)) || changed
		}
		return changed
	case reflect.Array:
		changed := false
		for i := range v.Len() {
			changed = w.walk(v.Index(i)) || changed
		}
		return changed
	case reflect.Map:
		if v.IsNil() || w.once(visit{v.Pointer(), 0, v.Type()}) {
			return false
		}
		type update struct{ k, v reflect.Value }
		var updates []update
		for it := v.MapRange(); it.Next(); {
			c := reflect.New(v.Type().Elem()).Elem()
			c.Set(it.Value())
			if w.walk(c) {
				updates = append(updates, update{it.Key(), c})
			}
		}
		for _, u := range updates {
			v.SetMapIndex(u.k, u.v)
		}
		return len(updates) > 0
	case reflect.Struct:
		changed := false
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() || f.Anonymous {
				changed = w.walk(v.Field(i)) || changed
			}
		}
		return changed
	}
	return false
}

func (w *walker) once(k visit) bool {
	if w.seen[k] {
		return true
	}
	w.seen[k] = true
	return false
}

var holdCache sync.Map // reflect.Type -> bool

// mayHold reports whether a value of type t can contain a float, an
// interface, a json.Number or a json.RawMessage: anything a marker can reach.
func mayHold(t reflect.Type) bool {
	if b, ok := holdCache.Load(t); ok {
		return b.(bool)
	}
	b := computeHold(t, map[reflect.Type]bool{})
	holdCache.Store(t, b)
	return b
}

func computeHold(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if t == numberType || t == rawType {
		return true
	}
	if visiting[t] {
		return false // a cycle adds nothing the first visit does not find
	}
	visiting[t] = true
	switch t.Kind() {
	case reflect.Float32, reflect.Float64, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return computeHold(t.Elem(), visiting)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); (f.IsExported() || f.Anonymous) && computeHold(f.Type, visiting) {
				return true
			}
		}
	}
	return false
}

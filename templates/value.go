package templates

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Template values are Go values of these types, each standing for the
// Python type jinja2 would see:
//
//	nil          None
//	bool         bool
//	int64        int (*big.Int when it does not fit in 64 bits)
//	float64      float
//	string       str
//	[]any        list
//	*Dict        dict (insertion-ordered)
//
// and, created only by templates: tuple, *undefined, *namespace, *macro,
// *loopCtx, *callable (functions and bound methods), *cycler, *joiner.
// Values are never mutated once built, except namespaces, which exist only
// inside one render; so one input may be rendered by many goroutines at once.

// tuple is a Python tuple.
type tuple []any

// Dict is an insertion-ordered mapping, a Python dict: keys keep the order
// in which they were first set, as tojson and dict.items() require. The zero
// value is an empty dict ready to use. A Dict must not be modified while a
// render that reads it is running.
type Dict struct {
	keys  []any
	vals  []any
	index map[hashKey]int // built once the dict outgrows a linear scan
}

const dictIndexMin = 12

// NewDict returns an empty Dict with room for n entries.
func NewDict(n int) *Dict {
	return &Dict{keys: make([]any, 0, n), vals: make([]any, 0, n)}
}

// Len returns the number of entries.
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.keys)
}

// Set sets key to value, keeping the key's first position when it is
// already present (as a Python dict does).
func (d *Dict) Set(key string, value any) { d.setAny(key, value) }

// Get returns the value stored under key.
func (d *Dict) Get(key string) (any, bool) {
	if d == nil {
		return nil, false
	}
	if d.index == nil {
		for i, k := range d.keys {
			if s, ok := k.(string); ok && s == key {
				return d.vals[i], true
			}
		}
		return nil, false
	}
	i, ok := d.index[hashKey{k: 's', s: key}]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

// Range calls fn for each entry in insertion order until fn returns false.
// Keys are strings for dicts decoded from JSON; templates may build dicts
// with other keys (int, float, bool, None, tuples).
func (d *Dict) Range(fn func(key, value any) bool) {
	if d == nil {
		return
	}
	for i, k := range d.keys {
		if !fn(k, d.vals[i]) {
			return
		}
	}
}

func (d *Dict) find(key any) int {
	if s, ok := key.(string); ok && d.index == nil {
		for i, k := range d.keys {
			if ks, ok := k.(string); ok && ks == s {
				return i
			}
		}
		return -1
	}
	h := mustHash(key)
	if d.index != nil {
		if i, ok := d.index[h]; ok {
			return i
		}
		return -1
	}
	for i, k := range d.keys {
		if kh, ok := hashOf(k); ok && kh == h {
			return i
		}
	}
	return -1
}

func (d *Dict) getAny(key any) (any, bool) {
	if d == nil {
		return nil, false
	}
	if i := d.find(key); i >= 0 {
		return d.vals[i], true
	}
	return nil, false
}

func (d *Dict) setAny(key, value any) {
	if i := d.find(key); i >= 0 {
		d.vals[i] = value
		return
	}
	d.keys = append(d.keys, key)
	d.vals = append(d.vals, value)
	if d.index != nil {
		d.index[mustHash(key)] = len(d.keys) - 1
	} else if len(d.keys) > dictIndexMin {
		d.index = make(map[hashKey]int, len(d.keys)*2)
		for i, k := range d.keys {
			d.index[mustHash(k)] = i
		}
	}
}

// copyDict returns a shallow copy.
func (d *Dict) copyDict() *Dict {
	c := NewDict(d.Len())
	if d != nil {
		for i, k := range d.keys {
			c.setAny(k, d.vals[i])
		}
	}
	return c
}

// hashKey identifies a hashable value the way Python's hash + == do:
// 1, 1.0 and True are the same key.
type hashKey struct {
	k byte // 's' str, 'i' int, 'b' big int, 'f' float, 'n' None, 't' tuple, 'p' identity
	s string
	i int64
}

func hashOf(v any) (hashKey, bool) { return hashOfDepth(v, 0) }

func hashOfDepth(v any, depth int) (hashKey, bool) {
	if depth > maxNesting {
		throw(excRecursion, "maximum recursion depth exceeded while calling a Python object")
	}
	switch x := v.(type) {
	case string:
		return hashKey{k: 's', s: x}, true
	case nil:
		return hashKey{k: 'n'}, true
	case bool:
		if x {
			return hashKey{k: 'i', i: 1}, true
		}
		return hashKey{k: 'i'}, true
	case int64:
		return hashKey{k: 'i', i: x}, true
	case *big.Int:
		return hashKey{k: 'b', s: x.String()}, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return hashKey{k: 'i', i: int64(x)}, true
		}
		return hashKey{k: 'f', i: int64(math.Float64bits(x))}, true
	case tuple:
		var b strings.Builder
		for _, e := range x {
			h, ok := hashOfDepth(e, depth+1)
			if !ok {
				return hashKey{}, false
			}
			b.WriteByte(h.k)
			b.WriteString(strconv.Itoa(len(h.s)))
			b.WriteByte(':')
			b.WriteString(h.s)
			b.WriteString(strconv.FormatInt(h.i, 36))
			b.WriteByte(';')
		}
		return hashKey{k: 't', s: b.String()}, true
	case []any, *Dict:
		return hashKey{}, false
	case *undefined:
		return hashKey{k: 'u'}, true
	}
	return hashKey{k: 'p', s: fmt.Sprintf("%p", v)}, true
}

func mustHash(v any) hashKey {
	h, ok := hashOf(v)
	if !ok {
		typeError("unhashable type: '%s'", typeName(v))
	}
	return h
}

// dictView is a dict's keys(), values() or items() view, or the generator
// jinja2's |items filter returns (iter).
type dictView struct {
	d    *Dict
	kind byte // 'k', 'v', 'i'
	iter bool
}

func (v *dictView) items() []any {
	if v.d == nil {
		return []any{}
	}
	switch v.kind {
	case 'k':
		return append([]any(nil), v.d.keys...)
	case 'v':
		return append([]any(nil), v.d.vals...)
	}
	return dictItems(v.d)
}

func (v *dictView) typeName() string {
	if v.iter {
		return "generator"
	}
	switch v.kind {
	case 'k':
		return "dict_keys"
	case 'v':
		return "dict_values"
	}
	return "dict_items"
}

// undefined is jinja2's Undefined: what a missing variable, attribute or
// item evaluates to. It prints as "", is false, iterates as empty, and
// raises (UndefinedError, or SecurityError for a blocked attribute) when
// used in any other way.
type undefined struct {
	hint   string
	obj    any
	hasObj bool
	name   string // variable or attribute name
	key    any    // item key that is not a string, when isKey
	isKey  bool
	exc    string
}

func undefinedName(name string) *undefined { return &undefined{name: name} }

func undefinedAttr(obj any, name string) *undefined {
	return &undefined{obj: obj, hasObj: true, name: name}
}

// undefinedItem is the undefined for a missing obj[key].
func undefinedItem(obj, key any) *undefined {
	if s, ok := key.(string); ok {
		return undefinedAttr(obj, s)
	}
	return &undefined{obj: obj, hasObj: true, key: key, isKey: true}
}

func undefinedHint(hint string) *undefined { return &undefined{hint: hint} }

func (u *undefined) message() string {
	if u.hint != "" {
		return u.hint
	}
	if !u.hasObj {
		return repr(u.name) + " is undefined"
	}
	if u.isKey {
		return objectTypeRepr(u.obj) + " has no element " + repr(u.key)
	}
	return repr(objectTypeRepr(u.obj)) + " has no attribute " + repr(u.name)
}

// fail raises the error using u stands for.
func (u *undefined) fail() {
	exc := u.exc
	if exc == "" {
		exc = excUndefined
	}
	throw(exc, "%s", u.message())
}

func objectTypeRepr(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case *Dict:
		return "dict object"
	case string:
		return "str object"
	case []any:
		return "list object"
	case tuple:
		return "tuple object"
	case int64, *big.Int:
		return "int object"
	case float64:
		return "float object"
	case bool:
		return "bool object"
	case *namespace:
		return "jinja2.utils.Namespace object"
	case *undefined:
		return "jinja2.runtime.Undefined object"
	case *macro:
		return "jinja2.runtime.Macro object"
	case *loopCtx:
		return "jinja2.runtime.LoopContext object"
	case *cycler:
		return "jinja2.utils.Cycler object"
	case *joiner:
		return "jinja2.utils.Joiner object"
	case *templateRef:
		return "jinja2.runtime.TemplateReference object"
	}
	return typeName(v) + " object"
}

// typeName is Python's type(v).__name__.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *Dict:
		return "dict"
	case *undefined:
		return "Undefined"
	case *namespace:
		return "Namespace"
	case *macro:
		return "Macro"
	case *loopCtx:
		return "LoopContext"
	case *callable:
		switch {
		case x.class:
			return "type"
		case x.recv != nil:
			return "builtin_function_or_method"
		}
		return "function"
	case *templateRef:
		return "TemplateReference"
	case *cycler:
		return "Cycler"
	case *dictView:
		return x.typeName()
	case *joiner:
		return "Joiner"
	}
	return fmt.Sprintf("%T", v)
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case *big.Int:
		return x.Sign() != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	case *undefined:
		return false
	case *dictView:
		return x.iter || x.d.Len() > 0
	}
	return true
}

// toStr is Python's str(v) (jinja2's output conversion).
func toStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *undefined:
		return ""
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// repr is Python's repr(v).
func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// maxNesting bounds recursion over nested values (repr, ==), as Python's
// recursion limit does; values nested deeper raise RecursionError instead
// of exhausting the goroutine stack.
const maxNesting = 1000

func writeRepr(b *strings.Builder, v any) { writeReprDepth(b, v, 0) }

func writeReprDepth(b *strings.Builder, v any, depth int) {
	if depth > maxNesting {
		throw(excRecursion, "maximum recursion depth exceeded while getting the repr of an object")
	}
	switch x := v.(type) {
	case string:
		writeStrRepr(b, x)
	case nil, bool, int64, float64:
		b.WriteString(toStr(x))
	case *big.Int:
		b.WriteString(x.String())
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprDepth(b, e, depth+1)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprDepth(b, e, depth+1)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprDepth(b, k, depth+1)
			b.WriteString(": ")
			writeReprDepth(b, x.vals[i], depth+1)
		}
		b.WriteByte('}')
	case *undefined:
		b.WriteString("Undefined")
	case *dictView:
		if x.iter {
			b.WriteString("<generator object do_items>")
			return
		}
		b.WriteString(x.typeName())
		b.WriteByte('(')
		writeReprDepth(b, x.items(), depth+1)
		b.WriteByte(')')
	case *namespace:
		b.WriteString("<Namespace ")
		writeReprDepth(b, x.attrs, depth+1)
		b.WriteByte('>')
	case *macro:
		b.WriteString("<Macro ")
		writeStrRepr(b, x.def.name)
		b.WriteByte('>')
	case *loopCtx:
		fmt.Fprintf(b, "<LoopContext %d/%d>", x.index+1, x.length())
	case *callable:
		switch {
		case x.class:
			fmt.Fprintf(b, "<class '%s'>", x.name)
		case x.recv != nil:
			fmt.Fprintf(b, "<built-in method %s of %s object>", x.name, typeName(x.recv))
		default:
			fmt.Fprintf(b, "<function %s>", x.name)
		}
	case *templateRef:
		b.WriteString("<TemplateReference None>")
	default:
		fmt.Fprintf(b, "<%s object>", typeName(v))
	}
}

// writeStrRepr writes Python's repr of a str.
func writeStrRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x80:
			b.WriteRune(r)
		case !pyIsPrintable(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
}

// formatFloat is Python's repr(float): the shortest string that round-trips,
// in fixed notation for exponents -4 < e <= 16, else in exponent notation.
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	e := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[e+1:])
	digits := strings.Replace(s[:e], ".", "", 1)
	decpt := exp + 1
	var out strings.Builder
	if neg {
		out.WriteByte('-')
	}
	if decpt > 16 || decpt < -3 {
		out.WriteByte(digits[0])
		if len(digits) > 1 {
			out.WriteByte('.')
			out.WriteString(digits[1:])
		}
		out.WriteByte('e')
		if exp < 0 {
			out.WriteByte('-')
			exp = -exp
		} else {
			out.WriteByte('+')
		}
		if exp < 10 {
			out.WriteByte('0')
		}
		out.WriteString(strconv.Itoa(exp))
		return out.String()
	}
	switch {
	case decpt <= 0:
		out.WriteString("0.")
		out.WriteString(strings.Repeat("0", -decpt))
		out.WriteString(digits)
	case decpt >= len(digits):
		out.WriteString(digits)
		out.WriteString(strings.Repeat("0", decpt-len(digits)))
		out.WriteString(".0")
	default:
		out.WriteString(digits[:decpt])
		out.WriteByte('.')
		out.WriteString(digits[decpt:])
	}
	return out.String()
}

// pyEqual is Python's ==.
func pyEqual(a, b any) bool { return pyEqualDepth(a, b, 0) }

func pyEqualDepth(a, b any, depth int) bool {
	if depth > maxNesting {
		throw(excRecursion, "maximum recursion depth exceeded in comparison")
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case nil:
		return b == nil
	case bool, int64, float64, *big.Int:
		if !isNumber(b) {
			return false
		}
		c, ok := numCompare(a, b)
		return ok && c == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqualDepth(x[i], y[i], depth+1) {
				return false
			}
		}
		return true
	case tuple:
		y, ok := b.(tuple)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqualDepth(x[i], y[i], depth+1) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		if x == y {
			return true
		}
		for i, k := range x.keys {
			if _, ok := hashOf(k); !ok {
				return false
			}
			v, ok := y.getAny(k)
			if !ok || !pyEqualDepth(x.vals[i], v, depth+1) {
				return false
			}
		}
		return true
	case *undefined:
		_, ok := b.(*undefined)
		return ok
	}
	return a == b
}

func isNumber(v any) bool {
	switch v.(type) {
	case bool, int64, float64, *big.Int:
		return true
	}
	return false
}

func isInt(v any) bool {
	switch v.(type) {
	case bool, int64, *big.Int:
		return true
	}
	return false
}

// numCompare compares two numbers exactly; ok is false when either is NaN.
func numCompare(a, b any) (int, bool) {
	ai, aInt := asInt64(a)
	bi, bInt := asInt64(b)
	if aInt && bInt {
		switch {
		case ai < bi:
			return -1, true
		case ai > bi:
			return 1, true
		}
		return 0, true
	}
	af, aF := a.(float64)
	bf, bF := b.(float64)
	if aF && bF {
		if math.IsNaN(af) || math.IsNaN(bf) {
			return 0, false
		}
		switch {
		case af < bf:
			return -1, true
		case af > bf:
			return 1, true
		}
		return 0, true
	}
	// Mixed int/float or big ints: compare exactly through big.Float.
	if (aF && math.IsNaN(af)) || (bF && math.IsNaN(bf)) {
		return 0, false
	}
	if aF && math.IsInf(af, 0) {
		return int(math.Copysign(1, af)), true
	}
	if bF && math.IsInf(bf, 0) {
		return -int(math.Copysign(1, bf)), true
	}
	return toBigFloat(a).Cmp(toBigFloat(b)), true
}

func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func toBigFloat(v any) *big.Float {
	f := new(big.Float).SetPrec(2048)
	switch x := v.(type) {
	case int64:
		f.SetInt64(x)
	case bool:
		if x {
			f.SetInt64(1)
		}
	case *big.Int:
		f.SetInt(x)
	case float64:
		f.SetFloat64(x)
	}
	return f
}

// pyCompare is Python's a < b (and friends) as a three-way result; it
// raises TypeError for unorderable operands.
func pyCompare(op string, a, b any) int { return pyCompareDepth(op, a, b, 0) }

func pyCompareDepth(op string, a, b any, depth int) int {
	if depth > maxNesting {
		throw(excRecursion, "maximum recursion depth exceeded in comparison")
	}
	if ua, ok := a.(*undefined); ok {
		ua.fail()
	}
	if ub, ok := b.(*undefined); ok {
		ub.fail()
	}
	if isNumber(a) && isNumber(b) {
		c, ok := numCompare(a, b)
		if !ok {
			return 2 // NaN: every ordering comparison is false
		}
		return c
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case []any:
		if y, ok := b.([]any); ok {
			return seqCompare(op, x, y, depth)
		}
	case tuple:
		if y, ok := b.(tuple); ok {
			return seqCompare(op, x, y, depth)
		}
	}
	typeError("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
	return 0
}

func seqCompare(op string, x, y []any, depth int) int {
	for i := 0; i < len(x) && i < len(y); i++ {
		if !pyEqual(x[i], y[i]) {
			return pyCompareDepth(op, x[i], y[i], depth+1)
		}
	}
	switch {
	case len(x) < len(y):
		return -1
	case len(x) > len(y):
		return 1
	}
	return 0
}

// runeLen is len(s) for a Python str.
func runeLen(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return utf8.RuneCountInString(s)
		}
	}
	return len(s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

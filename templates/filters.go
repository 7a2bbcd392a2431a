package templates

import (
	"html"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// filterFn implements a jinja2 filter: v|name(args, kw).
type filterFn func(r *renderer, v any, args []any, kw []kwarg) any

// lookupFilter returns the filter jinja2 3.1 defines under name (with
// transformers' tojson), or nil.
func lookupFilter(name string) filterFn {
	switch name {
	case "abs":
		return filterAbs
	case "attr":
		return filterAttr
	case "batch":
		return filterBatch
	case "capitalize":
		return strFilter("capitalize", pyCapitalize)
	case "center":
		return filterCenter
	case "count", "length":
		return filterLength
	case "default", "d":
		return filterDefault
	case "dictsort":
		return filterDictsort
	case "escape", "e", "forceescape":
		return filterEscape
	case "filesizeformat":
		return filterFilesizeformat
	case "first":
		return filterFirst
	case "float":
		return filterFloat
	case "format":
		return filterFormat
	case "indent":
		return filterIndent
	case "int":
		return filterInt
	case "items":
		return filterItems
	case "join":
		return filterJoin
	case "last":
		return filterLast
	case "list":
		return filterList
	case "lower":
		return strFilter("lower", strings.ToLower)
	case "upper":
		return strFilter("upper", strings.ToUpper)
	case "map":
		return filterMap
	case "max":
		return minMaxFilter(true)
	case "min":
		return minMaxFilter(false)
	case "pprint":
		return func(r *renderer, v any, args []any, kw []kwarg) any { return repr(v) }
	case "reject":
		return selectFilter(false, false)
	case "rejectattr":
		return selectFilter(false, true)
	case "select":
		return selectFilter(true, false)
	case "selectattr":
		return selectFilter(true, true)
	case "replace":
		return filterReplace
	case "reverse":
		return filterReverse
	case "round":
		return filterRound
	case "safe":
		return func(r *renderer, v any, args []any, kw []kwarg) any { return toStr(v) }
	case "slice":
		return filterSlice
	case "sort":
		return filterSort
	case "string":
		return func(r *renderer, v any, args []any, kw []kwarg) any { return toStr(v) }
	case "striptags":
		return filterStriptags
	case "sum":
		return filterSum
	case "title":
		return strFilter("title", jinjaTitle)
	case "tojson":
		return filterToJSON
	case "trim":
		return filterTrim
	case "truncate":
		return filterTruncate
	case "unique":
		return filterUnique
	case "urlencode":
		return filterURLEncode
	case "wordcount":
		return filterWordcount
	case "groupby", "random", "urlize", "wordwrap", "xmlattr":
		return func(r *renderer, v any, args []any, kw []kwarg) any {
			throw(excNotImplemented, "the %s filter is not supported by this renderer", name)
			return nil
		}
	}
	return nil
}

func strFilter(name string, fn func(string) string) filterFn {
	return func(r *renderer, v any, args []any, kw []kwarg) any {
		bindArgs(name, args, kw, nil, 0)
		return fn(toStr(v))
	}
}

func filterAbs(r *renderer, v any, args []any, kw []kwarg) any {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return unary('-', x)
		}
		return x
	case bool:
		return toIntValue(x)
	case float64:
		return math.Abs(x)
	case *big.Int:
		return normInt(new(big.Int).Abs(x))
	}
	typeError("bad operand type for abs(): '%s'", typeName(v))
	return nil
}

func filterAttr(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("attr", args, kw, []string{"name"}, 1)
	if u, ok := v.(*undefined); ok {
		u.fail()
	}
	name := toStr(a[0])
	if val, ok := r.pyAttr(v, name); ok {
		return val
	}
	return undefinedAttr(v, name)
}

func filterBatch(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("batch", args, kw, []string{"linecount", "fill_with"}, 1)
	n := wantInt("batch", a[0])
	fill := argOr(a[1], nil)
	var out []any
	var tmp []any
	for _, it := range r.iterate(v) {
		if len(tmp) == n {
			out = append(out, tmp)
			tmp = nil
		}
		tmp = append(tmp, it)
	}
	if len(tmp) > 0 {
		if fill != nil {
			for len(tmp) < n {
				tmp = append(tmp, fill)
			}
		}
		out = append(out, tmp)
	}
	return orEmpty(out)
}

func orEmpty(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func filterCenter(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("center", args, kw, []string{"width"}, 0)
	w := 80
	if !isMissing(a[0]) {
		w = wantInt("center", a[0])
	}
	return pad(toStr(v), w, " ", "center")
}

// pyLen is Python's len().
func pyLen(v any) int {
	switch x := v.(type) {
	case string:
		return runeLen(x)
	case []any:
		return len(x)
	case tuple:
		return len(x)
	case *Dict:
		return x.Len()
	case *undefined:
		return 0
	case *namespace:
		return x.attrs.Len()
	case *loopCtx:
		return len(x.items)
	case *dictView:
		if !x.iter {
			return x.d.Len()
		}
	}
	typeError("object of type '%s' has no len()", typeName(v))
	return 0
}

func filterLength(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("length", args, kw, nil, 0)
	return int64(pyLen(v))
}

func filterDefault(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("default", args, kw, []string{"default_value", "boolean"}, 0)
	def := argOr(a[0], "")
	if _, ok := v.(*undefined); ok || truthy(argOr(a[1], false)) && !truthy(v) {
		return def
	}
	return v
}

func ignoreCase(v any) any {
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return v
}

// pySortKeys stable-sorts items by keys (Python's sorted with key= and
// reverse=, raising TypeError for unorderable keys).
func pySort(items, keys []any, reverse bool) []any {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := keys[i], keys[j]
		if reverse {
			a, b = b, a
		}
		if c := pyCompare("<", a, b); c < 0 {
			return -1
		}
		if c := pyCompare("<", b, a); c < 0 {
			return 1
		}
		return 0
	})
	out := make([]any, len(items))
	for k, i := range idx {
		out[k] = items[i]
	}
	return out
}

func filterDictsort(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("dictsort", args, kw, []string{"case_sensitive", "by", "reverse"}, 0)
	d, ok := v.(*Dict)
	if !ok {
		if u, ok := v.(*undefined); ok {
			u.fail()
		}
		throw(excAttribute, "'%s' object has no attribute 'items'", typeName(v))
	}
	pos := 0
	switch argOr(a[1], "key") {
	case "key":
	case "value":
		pos = 1
	default:
		throw("FilterArgumentError", `You can only sort by either "key" or "value"`)
	}
	items := dictItems(d)
	keys := make([]any, len(items))
	for i, it := range items {
		k := it.(tuple)[pos]
		if !truthy(argOr(a[0], false)) {
			k = ignoreCase(k)
		}
		keys[i] = k
	}
	return pySort(items, keys, truthy(argOr(a[2], false)))
}

func filterEscape(r *renderer, v any, args []any, kw []kwarg) any {
	s := toStr(v)
	if strings.ContainsAny(s, `&<>"'`) {
		s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
	}
	return s
}

func filterFilesizeformat(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("filesizeformat", args, kw, []string{"binary"}, 0)
	n := pyFloat(v)
	binary := truthy(argOr(a[0], false))
	base := 1000.0
	prefixes := []string{"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"}
	if binary {
		base = 1024
		prefixes = []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
	}
	switch {
	case n == 1:
		return "1 Byte"
	case n < base:
		return strconv.FormatInt(int64(n), 10) + " Bytes"
	}
	var unit float64
	var prefix string
	for i, p := range prefixes {
		unit, prefix = math.Pow(base, float64(i+2)), p
		if n < unit {
			break
		}
	}
	return strconv.FormatFloat(base*n/unit, 'f', 1, 64) + " " + prefix
}

func filterFirst(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("first", args, kw, nil, 0)
	items := r.iterate(v)
	if len(items) == 0 {
		return undefinedHint("No first item, sequence was empty.")
	}
	return items[0]
}

func filterLast(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("last", args, kw, nil, 0)
	switch x := v.(type) {
	case string, []any, tuple, *Dict, *undefined:
	case *dictView:
		if x.iter {
			typeError("'%s' object is not reversible", typeName(v))
		}
	default:
		typeError("'%s' object is not reversible", typeName(v))
	}
	items := r.iterate(v)
	if len(items) == 0 {
		return undefinedHint("No last item, sequence was empty.")
	}
	return items[len(items)-1]
}

// parsePyFloat is Python's float(str); ok is false for a ValueError.
func parsePyFloat(s string) (float64, bool) {
	t := strings.TrimFunc(s, pyIsSpace)
	low := strings.ToLower(strings.TrimLeft(t, "+-"))
	switch low {
	case "inf", "infinity":
		if strings.HasPrefix(t, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if strings.Contains(t, "_") {
		if strings.Contains(t, "__") || strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") {
			return 0, false
		}
		t = strings.ReplaceAll(t, "_", "")
	}
	if t == "" || strings.ContainsAny(t, "xXpP") || strings.HasPrefix(low, "in") || strings.HasPrefix(low, "na") {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && !isRangeErr(err) {
		return 0, false
	}
	return f, true
}

// pyFloat is Python's float(v), raising as Python does.
func pyFloat(v any) float64 {
	switch x := v.(type) {
	case float64, int64, bool, *big.Int:
		return toFloat(x)
	case string:
		f, ok := parsePyFloat(x)
		if !ok {
			throw(excValue, "could not convert string to float: %s", repr(x))
		}
		return f
	}
	typeError("float() argument must be a string or a real number, not '%s'", typeName(v))
	return 0
}

// tryPy runs fn and reports whether it raised one of the given Python
// exception types (recovering only those).
func tryPy(fn func(), types ...string) (raised bool) {
	defer func() {
		if rec := recover(); rec != nil {
			e, ok := rec.(*Error)
			if ok && slices.Contains(types, e.Type) {
				raised = true
				return
			}
			panic(rec)
		}
	}()
	fn()
	return false
}

func filterFloat(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("float", args, kw, []string{"default"}, 0)
	var f float64
	if tryPy(func() { f = pyFloat(v) }, excType, excValue) {
		return argOr(a[0], 0.0)
	}
	return f
}

// pyInt is Python's int(v) / int(s, base).
func pyInt(v any, base int) any {
	switch x := v.(type) {
	case int64, *big.Int:
		return x
	case bool:
		return toIntValue(x)
	case float64:
		if math.IsInf(x, 0) {
			throw(excOverflow, "cannot convert float infinity to integer")
		}
		if math.IsNaN(x) {
			throw(excValue, "cannot convert float NaN to integer")
		}
		bf := new(big.Float).SetFloat64(math.Trunc(x))
		n, _ := bf.Int(nil)
		return normInt(n)
	case string:
		t := strings.TrimFunc(x, pyIsSpace)
		neg := false
		if strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+") {
			neg = t[0] == '-'
			t = t[1:]
		}
		b := base
		if base == 0 || base == 16 || base == 8 || base == 2 {
			low := strings.ToLower(t)
			switch {
			case strings.HasPrefix(low, "0x") && (base == 0 || base == 16):
				t, b = t[2:], 16
			case strings.HasPrefix(low, "0o") && (base == 0 || base == 8):
				t, b = t[2:], 8
			case strings.HasPrefix(low, "0b") && (base == 0 || base == 2):
				t, b = t[2:], 2
			case base == 0:
				b = 10
			}
		}
		if strings.HasPrefix(t, "_") || strings.HasSuffix(t, "_") || strings.Contains(t, "__") {
			t = "!"
		}
		t = strings.ReplaceAll(t, "_", "")
		n, ok := new(big.Int).SetString(t, b)
		if !ok || t == "" || strings.HasPrefix(t, "+") || strings.HasPrefix(t, "-") {
			throw(excValue, "invalid literal for int() with base %d: %s", base, repr(x))
		}
		if neg {
			n.Neg(n)
		}
		return normInt(n)
	}
	typeError("int() argument must be a string, a bytes-like object or a real number, not '%s'", typeName(v))
	return nil
}

func filterInt(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("int", args, kw, []string{"default", "base"}, 0)
	base := 10
	if !isMissing(a[1]) {
		base = wantInt("int", a[1])
	}
	var out any
	if !tryPy(func() {
		if s, ok := v.(string); ok {
			out = pyInt(s, base)
		} else {
			out = pyInt(v, 10)
		}
	}, excType, excValue) {
		return out
	}
	// "42.23"|int is 42.
	if !tryPy(func() { out = pyInt(pyFloat(v), 10) }, excType, excValue, excOverflow) {
		return out
	}
	return argOr(a[0], int64(0))
}

func filterIndent(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("indent", args, kw, []string{"width", "first", "blank"}, 0)
	ind := "    "
	if w := argOr(a[0], int64(4)); true {
		if s, ok := w.(string); ok {
			ind = s
		} else {
			n := wantInt("indent", w)
			ind = repeatStr(" ", max(n, 0))
		}
	}
	s := toStr(v) + "\n"
	var out string
	lines := splitLines(s, false)
	if truthy(argOr(a[2], false)) {
		out = strings.Join(lines, "\n"+ind)
	} else {
		out = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = ind + l
				}
				rest[i] = l
			}
			out += "\n" + strings.Join(rest, "\n")
		}
	}
	if truthy(argOr(a[1], false)) {
		out = ind + out
	}
	return out
}

func filterItems(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("items", args, kw, nil, 0)
	switch x := v.(type) {
	case *undefined:
		return &dictView{d: nil, kind: 'i', iter: true}
	case *Dict:
		return &dictView{d: x, kind: 'i', iter: true}
	}
	typeError("Can only get item pairs from a mapping.")
	return nil
}

// attrGetter is jinja2's make_attrgetter: "a.b.0" looked up item by item.
func (r *renderer) attrGetter(attribute, def any) func(any) any {
	var parts []any
	switch a := attribute.(type) {
	case nil:
	case string:
		for _, p := range strings.Split(a, ".") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				n, _ := strconv.ParseInt(p, 10, 64)
				parts = append(parts, n)
			} else {
				parts = append(parts, p)
			}
		}
	default:
		parts = []any{a}
	}
	return func(item any) any {
		for _, p := range parts {
			item = r.getitem(item, p)
			if _, ok := item.(*undefined); ok && def != nil {
				item = def
			}
		}
		return item
	}
}

func filterJoin(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("join", args, kw, []string{"d", "attribute"}, 0)
	sep := toStr(argOr(a[0], ""))
	items := r.iterate(v)
	get := func(x any) any { return x }
	if attr := argOr(a[1], nil); attr != nil {
		get = r.attrGetter(attr, nil)
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = toStr(get(it))
	}
	return strings.Join(parts, sep)
}

func filterList(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("list", args, kw, nil, 0)
	return append([]any{}, r.iterate(v)...)
}

func filterMap(r *renderer, v any, args []any, kw []kwarg) any {
	if !truthy(v) {
		return []any{}
	}
	var fn func(any) any
	if len(args) == 0 && len(kw) > 0 && kw[0].name == "attribute" || len(args) == 0 && hasKw(kw, "attribute") {
		var attr, def any
		for _, k := range kw {
			switch k.name {
			case "attribute":
				attr = k.val
			case "default":
				def = k.val
			default:
				throw("FilterArgumentError", "Unexpected keyword argument %s", repr(k.name))
			}
		}
		fn = r.attrGetter(attr, def)
	} else {
		if len(args) == 0 {
			throw("FilterArgumentError", "map requires a filter argument")
		}
		name := toStr(args[0])
		f := lookupFilter(name)
		if f == nil {
			throw(excRuntime, "No filter named %s.", repr(name))
		}
		rest := args[1:]
		fn = func(x any) any { return f(r, x, rest, kw) }
	}
	items := r.iterate(v)
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = fn(it)
	}
	return out
}

func hasKw(kw []kwarg, name string) bool {
	for _, k := range kw {
		if k.name == name {
			return true
		}
	}
	return false
}

func minMaxFilter(isMax bool) filterFn {
	name := "min"
	if isMax {
		name = "max"
	}
	return func(r *renderer, v any, args []any, kw []kwarg) any {
		a := bindArgs(name, args, kw, []string{"case_sensitive", "attribute"}, 0)
		items := r.iterate(v)
		if len(items) == 0 {
			return undefinedHint("No aggregated item, sequence was empty.")
		}
		get := r.attrGetter(argOr(a[1], nil), nil)
		cs := truthy(argOr(a[0], false))
		key := func(x any) any {
			k := get(x)
			if !cs {
				k = ignoreCase(k)
			}
			return k
		}
		best, bestKey := items[0], key(items[0])
		for _, it := range items[1:] {
			k := key(it)
			if c := pyCompare("<", k, bestKey); isMax && c == 1 || !isMax && c == -1 {
				best, bestKey = it, k
			}
		}
		return best
	}
}

func selectFilter(keep, byAttr bool) filterFn {
	return func(r *renderer, v any, args []any, kw []kwarg) any {
		if !truthy(v) {
			return []any{}
		}
		trans := func(x any) any { return x }
		off := 0
		if byAttr {
			if len(args) == 0 {
				throw("FilterArgumentError", "Missing parameter for attribute name")
			}
			trans = r.attrGetter(args[0], nil)
			off = 1
		}
		test := func(x any) bool { return truthy(x) }
		if len(args) > off {
			name := toStr(args[off])
			t := lookupTest(name)
			if t == nil {
				throw(excRuntime, "No test named %s.", repr(name))
			}
			rest := args[off+1:]
			test = func(x any) bool { return truthy(t(r, x, rest, kw)) }
		}
		var out []any
		for _, it := range r.iterate(v) {
			if test(trans(it)) == keep {
				out = append(out, it)
			}
		}
		return orEmpty(out)
	}
}

func filterReplace(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("replace", args, kw, []string{"old", "new", "count"}, 2)
	n := -1
	if c := argOr(a[2], nil); c != nil {
		n = wantInt("replace", c)
	}
	return strings.Replace(toStr(v), toStr(a[0]), toStr(a[1]), n)
}

func filterReverse(r *renderer, v any, args []any, kw []kwarg) any {
	bindArgs("reverse", args, kw, nil, 0)
	if s, ok := v.(string); ok {
		rs := []rune(s)
		slices.Reverse(rs)
		return string(rs)
	}
	items := slices.Clone(r.iterate(v))
	slices.Reverse(items)
	return orEmpty(items)
}

func filterRound(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("round", args, kw, []string{"precision", "method"}, 0)
	prec := 0
	if !isMissing(a[0]) {
		prec = wantInt("round", a[0])
	}
	method := toStr(argOr(a[1], "common"))
	switch method {
	case "common":
		if isInt(v) {
			if prec >= 0 {
				return toIntValue(v)
			}
			return roundIntHalfEven(toBig(toIntValue(v)), -prec)
		}
		f := pyFloat(v)
		return pyRound(f, prec)
	case "ceil", "floor":
		f := pyFloat(v)
		p := math.Pow(10, float64(prec))
		if method == "ceil" {
			return math.Ceil(f*p) / p
		}
		return math.Floor(f*p) / p
	}
	throw("FilterArgumentError", "method must be common, ceil or floor")
	return nil
}

// roundIntHalfEven is Python's round(int, -digits).
func roundIntHalfEven(n *big.Int, digits int) any {
	if digits > 400 {
		return int64(0)
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)
	q, m := new(big.Int).DivMod(n, p, new(big.Int)) // m >= 0
	twice := new(big.Int).Lsh(m, 1)
	if c := twice.Cmp(p); c > 0 || c == 0 && q.Bit(0) == 1 {
		q.Add(q, big.NewInt(1))
	}
	return normInt(q.Mul(q, p))
}

// pyRound is Python's round(float, ndigits): correctly rounded, ties to even.
func pyRound(f float64, prec int) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	s := strconv.FormatFloat(f, 'f', max(prec, 0), 64) // round-half-even on the exact value
	if prec < 0 {
		p := math.Pow(10, float64(-prec))
		return math.RoundToEven(f/p) * p
	}
	out, _ := strconv.ParseFloat(s, 64)
	return out
}

func filterSlice(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("slice", args, kw, []string{"slices", "fill_with"}, 1)
	seq := r.iterate(v)
	n := wantInt("slice", a[0])
	if n <= 0 {
		throw(excZeroDivision, "integer division or modulo by zero")
	}
	fill := argOr(a[1], nil)
	per, extra := len(seq)/n, len(seq)%n
	offset := 0
	out := make([]any, 0, n)
	for i := 0; i < n; i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		tmp := slices.Clone(seq[start:end])
		if fill != nil && i >= extra {
			tmp = append(tmp, fill)
		}
		out = append(out, orEmpty(tmp))
	}
	return out
}

func filterSort(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("sort", args, kw, []string{"reverse", "case_sensitive", "attribute"}, 0)
	items := r.iterate(v)
	cs := truthy(argOr(a[1], false))
	var getters []func(any) any
	switch attr := argOr(a[2], nil).(type) {
	case string:
		for _, p := range strings.Split(attr, ",") {
			getters = append(getters, r.attrGetter(p, nil))
		}
	default:
		getters = []func(any) any{r.attrGetter(attr, nil)}
	}
	keys := make([]any, len(items))
	for i, it := range items {
		k := make([]any, len(getters))
		for j, g := range getters {
			k[j] = g(it)
			if !cs {
				k[j] = ignoreCase(k[j])
			}
		}
		keys[i] = k
	}
	return pySort(items, keys, truthy(argOr(a[0], false)))
}

func filterStriptags(r *renderer, v any, args []any, kw []kwarg) any {
	s := toStr(v)
	for {
		i := strings.Index(s, "<!--")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "-->")
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+3:]
	}
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+1:]
	}
	return html.UnescapeString(strings.Join(splitWhitespace(s, -1, false), " "))
}

func filterSum(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("sum", args, kw, []string{"attribute", "start"}, 0)
	var acc any = argOr(a[1], int64(0))
	if _, ok := acc.(string); ok {
		typeError("sum() can't sum strings [use ''.join(seq) instead]")
	}
	get := func(x any) any { return x }
	if attr := argOr(a[0], nil); attr != nil {
		get = r.attrGetter(attr, nil)
	}
	for _, it := range r.iterate(v) {
		acc = arith("+", acc, get(it))
	}
	return acc
}

// jinjaTitle is jinja2's do_title: words start after "-", whitespace or an
// opening bracket.
func jinjaTitle(s string) string {
	isSep := func(r rune) bool {
		return r == '-' || r == '(' || r == '{' || r == '[' || r == '<' || pyIsSpace(r)
	}
	var b strings.Builder
	first := true
	prevSep := false
	for i, c := range s {
		sep := isSep(c)
		if i == 0 || sep != prevSep {
			first = true
		}
		prevSep = sep
		if first {
			b.WriteString(strings.ToUpper(string(c)))
			first = false
		} else {
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return b.String()
}

func filterToJSON(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("tojson", args, kw, []string{"ensure_ascii", "indent", "separators", "sort_keys"}, 0)
	o := jsonOpts{ensureASCII: truthy(argOr(a[0], false)), sortKeys: truthy(argOr(a[3], false))}
	if ind := argOr(a[1], nil); ind != nil {
		o.hasIndent = true
		switch x := ind.(type) {
		case string:
			o.indent = x
		case int64, bool:
			n, _ := asInt64(x)
			o.indent = repeatStr(" ", int(max(n, 0)))
		default:
			typeError("can't multiply sequence by non-int of type '%s'", typeName(ind))
		}
	}
	switch sep := argOr(a[2], nil).(type) {
	case nil:
		o.itemSep, o.keySep = ", ", ": "
		if o.hasIndent {
			o.itemSep = ","
		}
	case tuple, []any:
		items := r.iterate(sep)
		if len(items) != 2 {
			throw(excValue, "too many values to unpack (expected 2)")
		}
		is, ok1 := items[0].(string)
		ks, ok2 := items[1].(string)
		if !ok1 || !ok2 {
			typeError("separators must be strings")
		}
		o.itemSep, o.keySep = is, ks
	default:
		typeError("cannot unpack non-iterable %s object", typeName(sep))
	}
	return dumpsJSON(v, o)
}

func filterTrim(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("trim", args, kw, []string{"chars"}, 0)
	s := toStr(v)
	chars := argOr(a[0], nil)
	if chars == nil {
		return rstripSpace(lstripSpace(s))
	}
	cs, ok := chars.(string)
	if !ok {
		typeError("strip arg must be None or str")
	}
	return strings.Trim(s, cs)
}

func filterTruncate(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("truncate", args, kw, []string{"length", "killwords", "end", "leeway"}, 0)
	length := 255
	if !isMissing(a[0]) {
		length = wantInt("truncate", a[0])
	}
	end := toStr(argOr(a[2], "..."))
	leeway := 5
	if l := argOr(a[3], nil); l != nil {
		leeway = wantInt("truncate", l)
	}
	if length < runeLen(end) {
		throw("AssertionError", "expected length >= %d, got %d", runeLen(end), length)
	}
	if leeway < 0 {
		throw("AssertionError", "expected leeway >= 0, got %d", leeway)
	}
	if pyLen(v) <= length+leeway {
		return v
	}
	s, ok := v.(string)
	if !ok {
		s = toStr(v)
	}
	rs := []rune(s)
	head := string(rs[:length-runeLen(end)])
	if truthy(argOr(a[1], false)) {
		return head + end
	}
	if i := strings.LastIndex(head, " "); i >= 0 {
		head = head[:i]
	}
	return head + end
}

func filterUnique(r *renderer, v any, args []any, kw []kwarg) any {
	a := bindArgs("unique", args, kw, []string{"case_sensitive", "attribute"}, 0)
	get := r.attrGetter(argOr(a[1], nil), nil)
	cs := truthy(argOr(a[0], false))
	var out, seen []any
	for _, it := range r.iterate(v) {
		k := get(it)
		if !cs {
			k = ignoreCase(k)
		}
		mustHash(k)
		if !slices.ContainsFunc(seen, func(s any) bool { return pyEqual(s, k) }) {
			seen = append(seen, k)
			out = append(out, it)
		}
	}
	return orEmpty(out)
}

func urlQuote(v any, forQS bool) string {
	s := toStr(v)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-', c == '~', c == '/' && !forQS:
			b.WriteByte(c)
		case c == ' ' && forQS:
			b.WriteByte('+')
		default:
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&0xf])
		}
	}
	return b.String()
}

func filterURLEncode(r *renderer, v any, args []any, kw []kwarg) any {
	var pairs []any
	switch x := v.(type) {
	case *Dict:
		pairs = dictItems(x)
	case []any, tuple:
		pairs = r.iterate(x)
	default:
		return urlQuote(v, false)
	}
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		kv := r.iterate(p)
		if len(kv) != 2 {
			throw(excValue, "too many values to unpack (expected 2)")
		}
		parts[i] = urlQuote(kv[0], true) + "=" + urlQuote(kv[1], true)
	}
	return strings.Join(parts, "&")
}

func filterWordcount(r *renderer, v any, args []any, kw []kwarg) any {
	n, in := 0, false
	for _, c := range toStr(v) {
		w := c == '_' || unicode.IsLetter(c) || unicode.IsNumber(c)
		if w && !in {
			n++
		}
		in = w
	}
	return int64(n)
}

func filterFormat(r *renderer, v any, args []any, kw []kwarg) any {
	if len(args) > 0 && len(kw) > 0 {
		throw("FilterArgumentError", "can't handle positional and keyword arguments at the same time")
	}
	if len(kw) > 0 {
		d := NewDict(len(kw))
		for _, k := range kw {
			d.setAny(k.name, k.val)
		}
		return percentFormat(toStr(v), d)
	}
	return percentFormat(toStr(v), tuple(args))
}

// testFn implements a jinja2 test: v is name(args).
type testFn func(r *renderer, v any, args []any, kw []kwarg) any

func lookupTest(name string) testFn {
	one := func(fn func(v any) bool) testFn {
		return func(r *renderer, v any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return fn(v)
		}
	}
	two := func(fn func(v, w any) bool) testFn {
		return func(r *renderer, v any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"other"}, 1)
			return fn(v, a[0])
		}
	}
	switch name {
	case "defined":
		return one(func(v any) bool { _, ok := v.(*undefined); return !ok })
	case "undefined":
		return one(func(v any) bool { _, ok := v.(*undefined); return ok })
	case "none":
		return one(func(v any) bool { return v == nil })
	case "boolean":
		return one(func(v any) bool { _, ok := v.(bool); return ok })
	case "false":
		return one(func(v any) bool { b, ok := v.(bool); return ok && !b })
	case "true":
		return one(func(v any) bool { b, ok := v.(bool); return ok && b })
	case "integer":
		return one(func(v any) bool {
			switch v.(type) {
			case int64, *big.Int:
				return true
			}
			return false
		})
	case "float":
		return one(func(v any) bool { _, ok := v.(float64); return ok })
	case "number":
		return one(isNumber)
	case "string":
		return one(func(v any) bool { _, ok := v.(string); return ok })
	case "mapping":
		return one(func(v any) bool { _, ok := v.(*Dict); return ok })
	case "iterable":
		return one(func(v any) bool {
			switch v.(type) {
			case string, []any, tuple, *Dict, *undefined, *loopCtx, *dictView:
				return true
			}
			return false
		})
	case "sequence":
		return one(func(v any) bool {
			switch v.(type) {
			case string, []any, tuple, *Dict, *undefined:
				return true
			}
			return false
		})
	case "callable":
		return one(func(v any) bool {
			switch v.(type) {
			case *macro, *callable, *loopCtx, *undefined, *joiner:
				return true
			}
			return false
		})
	case "escaped":
		return one(func(v any) bool { return false })
	case "lower":
		return one(func(v any) bool { return truthy(strMethod("islower")(nil, toStr(v), nil, nil)) })
	case "upper":
		return one(func(v any) bool { return truthy(strMethod("isupper")(nil, toStr(v), nil, nil)) })
	case "odd", "even":
		return one(func(v any) bool {
			m := arith("%", v, int64(2))
			if name == "odd" {
				return pyEqual(m, int64(1))
			}
			return pyEqual(m, int64(0))
		})
	case "divisibleby":
		return two(func(v, w any) bool { return pyEqual(arith("%", v, w), int64(0)) })
	case "sameas":
		return two(sameAs)
	case "eq", "equalto", "==":
		return two(pyEqual)
	case "ne", "!=":
		return two(func(v, w any) bool { return !pyEqual(v, w) })
	case "lt", "lessthan", "<":
		return two(func(v, w any) bool { return compare("<", v, w) })
	case "le", "<=":
		return two(func(v, w any) bool { return compare("<=", v, w) })
	case "gt", "greaterthan", ">":
		return two(func(v, w any) bool { return compare(">", v, w) })
	case "ge", ">=":
		return two(func(v, w any) bool { return compare(">=", v, w) })
	case "in":
		return two(func(v, w any) bool { return contains(w, v) })
	case "filter":
		return one(func(v any) bool { s, ok := v.(string); return ok && lookupFilter(s) != nil })
	case "test":
		return one(func(v any) bool { s, ok := v.(string); return ok && lookupTest(s) != nil })
	}
	return nil
}

// sameAs approximates Python's "is": identity for containers and objects,
// value identity for None, booleans, small ints and strings.
func sameAs(v, w any) bool {
	switch x := v.(type) {
	case nil:
		return w == nil
	case bool:
		y, ok := w.(bool)
		return ok && x == y
	case int64:
		y, ok := w.(int64)
		return ok && x == y && x >= -5 && x <= 256
	case string:
		y, ok := w.(string)
		return ok && x == y
	case []any:
		y, ok := w.([]any)
		return ok && len(x) == len(y) && len(x) > 0 && &x[0] == &y[0]
	case tuple:
		y, ok := w.(tuple)
		return ok && len(x) == len(y) && len(x) > 0 && &x[0] == &y[0]
	case float64, *big.Int:
		return false
	}
	return v == w
}

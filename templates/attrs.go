package templates

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode/utf8"
)

// methodFn implements a Python method of a builtin type.
type methodFn func(r *renderer, recv any, args []any, kw []kwarg) any

// builtinMethod returns the safe method name of obj's type (str, list,
// tuple, dict), or nil when there is none or it is blocked by the sandbox.
func builtinMethod(obj any, name string) methodFn {
	switch obj.(type) {
	case string:
		return strMethod(name)
	case []any:
		return listMethod(name)
	case tuple:
		return tupleMethod(name)
	case *Dict:
		return dictMethod(name)
	}
	return nil
}

// unsafeMethod reports the methods jinja2's ImmutableSandboxedEnvironment
// refuses because they modify a list or dict.
func unsafeMethod(obj any, name string) bool {
	switch obj.(type) {
	case []any:
		switch name {
		case "append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove":
			return true
		}
	case *Dict:
		switch name {
		case "clear", "pop", "popitem", "setdefault", "update":
			return true
		}
	}
	return false
}

func isDunder(name string) bool {
	return len(name) > 4 && strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__")
}

func unsafeUndefined(obj any, name string) *undefined {
	return &undefined{
		hint:   fmt.Sprintf("access to attribute %s of %s object is unsafe.", repr(name), repr(typeName(obj))),
		obj:    obj,
		hasObj: true,
		name:   name,
		exc:    excSecurity,
	}
}

// pyAttr looks up a Python attribute of obj (no item fallback). ok is false
// when obj has no such attribute.
func (r *renderer) pyAttr(obj any, name string) (any, bool) {
	if isDunder(name) {
		return unsafeUndefined(obj, name), true
	}
	if m := builtinMethod(obj, name); m != nil {
		return &callable{name: name, recv: obj, fn: m}, true
	}
	if unsafeMethod(obj, name) {
		return unsafeUndefined(obj, name), true
	}
	switch x := obj.(type) {
	case *namespace:
		return x.attrs.Get(name)
	case *loopCtx:
		v := r.loopAttr(x, name)
		if u, ok := v.(*undefined); ok && u.hasObj {
			return nil, false
		}
		return v, true
	case *macro:
		switch name {
		case "name":
			return x.def.name, true
		case "arguments":
			t := make(tuple, len(x.def.params))
			for i, p := range x.def.params {
				t[i] = p
			}
			return t, true
		case "catch_kwargs":
			return x.def.catchKwargs, true
		case "catch_varargs":
			return x.def.catchVarargs, true
		case "caller":
			return x.def.usesCaller, true
		}
	case *cycler:
		return x.attr(name)
	case bool, int64, *big.Int:
		switch name {
		case "real", "numerator":
			return toIntValue(x), true
		case "imag":
			return int64(0), true
		case "denominator":
			return int64(1), true
		}
	case float64:
		switch name {
		case "real":
			return x, true
		case "imag":
			return 0.0, true
		case "is_integer":
			return &callable{name: name, recv: x, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
				f := recv.(float64)
				return !math.IsInf(f, 0) && f == math.Trunc(f)
			}}, true
		}
	}
	return nil, false
}

func toIntValue(v any) any {
	if b, ok := v.(bool); ok {
		if b {
			return int64(1)
		}
		return int64(0)
	}
	return v
}

// getattr is jinja2's SandboxedEnvironment.getattr: obj.name is a Python
// attribute when obj has one (dict.items is the method, not the key
// "items"), else the item obj[name], else undefined.
func (r *renderer) getattr(obj any, name string) any {
	switch x := obj.(type) {
	case *undefined:
		x.fail()
	case *Dict:
		if !isDunder(name) {
			if m := dictMethod(name); m != nil {
				return &callable{name: name, recv: obj, fn: m}
			}
			if unsafeMethod(obj, name) {
				return unsafeUndefined(obj, name)
			}
			if v, ok := x.Get(name); ok {
				return v
			}
			return undefinedAttr(obj, name)
		}
	}
	if v, ok := r.pyAttr(obj, name); ok {
		return v
	}
	return undefinedAttr(obj, name)
}

// getitem is jinja2's SandboxedEnvironment.getitem: obj[key], falling back
// to a (safe) attribute for string keys, else undefined.
func (r *renderer) getitem(obj, key any) any {
	switch x := obj.(type) {
	case *undefined:
		x.fail()
	case *Dict:
		if _, ok := hashOf(key); ok {
			if v, ok := x.getAny(key); ok {
				return v
			}
		}
	case []any:
		if v, ok := indexSeq(x, key); ok {
			return v
		}
	case tuple:
		if v, ok := indexSeq(x, key); ok {
			return v
		}
	case string:
		if i, ok := asIndex(key); ok {
			n := runeLen(x)
			if i < 0 {
				i += n
			}
			if i >= 0 && i < n {
				if n == len(x) {
					return x[i : i+1]
				}
				for j, c := range x {
					if i == 0 {
						return x[j : j+utf8.RuneLen(c)]
					}
					i--
				}
			}
		}
	}
	if name, ok := key.(string); ok {
		if v, ok := r.pyAttr(obj, name); ok {
			return v
		}
	}
	return undefinedItem(obj, key)
}

func asIndex(key any) (int, bool) {
	switch k := key.(type) {
	case int64:
		if k > math.MaxInt32 || k < math.MinInt32 {
			return math.MaxInt32, true
		}
		return int(k), true
	case bool:
		if k {
			return 1, true
		}
		return 0, true
	case *big.Int:
		return math.MaxInt32, true
	}
	return 0, false
}

func indexSeq(x []any, key any) (any, bool) {
	i, ok := asIndex(key)
	if !ok {
		return nil, false
	}
	if i < 0 {
		i += len(x)
	}
	if i < 0 || i >= len(x) {
		return nil, false
	}
	return x[i], true
}

// slice is obj[start:stop:step] with Python's slice semantics.
func (r *renderer) slice(obj, start, stop, step any) any {
	// jinja2 compiles slices to plain Python subscripts, bypassing the
	// sandbox's getitem, so errors propagate instead of turning undefined.
	switch x := obj.(type) {
	case *undefined:
		x.fail()
	case []any, tuple, string:
	case *Dict:
		typeError("unhashable type: 'slice'")
	default:
		typeError("'%s' object is not subscriptable", typeName(obj))
	}
	st, ok1 := sliceIndex(step)
	lo, ok2 := sliceIndex(start)
	hi, ok3 := sliceIndex(stop)
	if !ok1 || !ok2 || !ok3 {
		typeError("slice indices must be integers or None or have an __index__ method")
	}
	if step != nil && st == 0 {
		throw(excValue, "slice step cannot be zero")
	}
	if step == nil {
		st = 1
	}
	switch x := obj.(type) {
	case []any:
		if st == 1 {
			// Lists are immutable in the sandbox, so a slice can share
			// the backing array; the capacity cap keeps appends off it.
			a, b := sliceBounds(len(x), lo, hi, start == nil, stop == nil)
			return x[a:b:b]
		}
		idx := sliceIndices(len(x), lo, hi, st, start == nil, stop == nil)
		out := make([]any, len(idx))
		for i, j := range idx {
			out[i] = x[j]
		}
		return out
	case tuple:
		idx := sliceIndices(len(x), lo, hi, st, start == nil, stop == nil)
		out := make(tuple, len(idx))
		for i, j := range idx {
			out[i] = x[j]
		}
		return out
	case string:
		if isASCII(x) {
			if st == 1 {
				a, b := sliceBounds(len(x), lo, hi, start == nil, stop == nil)
				return x[a:b]
			}
			idx := sliceIndices(len(x), lo, hi, st, start == nil, stop == nil)
			buf := make([]byte, len(idx))
			for i, j := range idx {
				buf[i] = x[j]
			}
			return string(buf)
		}
		rs := []rune(x)
		idx := sliceIndices(len(rs), lo, hi, st, start == nil, stop == nil)
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = rs[j]
		}
		return string(out)
	}
	return nil
}

func sliceIndex(v any) (int, bool) {
	if v == nil {
		return 0, true
	}
	switch k := v.(type) {
	case int64:
		if k > math.MaxInt32 {
			return math.MaxInt32, true
		}
		if k < math.MinInt32 {
			return math.MinInt32, true
		}
		return int(k), true
	case bool:
		if k {
			return 1, true
		}
		return 0, true
	case *big.Int:
		if k.Sign() < 0 {
			return math.MinInt32, true
		}
		return math.MaxInt32, true
	}
	return 0, false
}

func sliceBounds(n, lo, hi int, noLo, noHi bool) (int, int) {
	clamp := func(i int, none bool, def int) int {
		if none {
			return def
		}
		if i < 0 {
			i += n
			if i < 0 {
				i = 0
			}
		}
		if i > n {
			i = n
		}
		return i
	}
	a, b := clamp(lo, noLo, 0), clamp(hi, noHi, n)
	if b < a {
		b = a
	}
	return a, b
}

// sliceIndices lists the indices slice(lo, hi, step).indices(n) selects.
func sliceIndices(n, lo, hi, step int, noLo, noHi bool) []int {
	var lower, upper int
	if step > 0 {
		lower, upper = 0, n
	} else {
		lower, upper = -1, n-1
	}
	norm := func(i int, none bool, def int) int {
		if none {
			return def
		}
		if i < 0 {
			i += n
			if i < lower {
				i = lower
			}
		} else if i > upper {
			i = upper
		}
		return i
	}
	var start, stop int
	if step > 0 {
		start, stop = norm(lo, noLo, lower), norm(hi, noHi, upper)
	} else {
		start, stop = norm(lo, noLo, upper), norm(hi, noHi, lower)
	}
	var out []int
	if step > 0 {
		for i := start; i < stop; i += step {
			out = append(out, i)
		}
	} else {
		for i := start; i > stop; i += step {
			out = append(out, i)
		}
	}
	return out
}

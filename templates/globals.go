package templates

import (
	"time"
)

// templateRef is jinja2's "self" (a TemplateReference): templates here
// have no blocks to reach through it.
type templateRef struct{}

// fnRange is range() with jinja2's sandbox limit.
func fnRange(r *renderer, _ any, args []any, kw []kwarg) any {
	if len(kw) > 0 {
		typeError("range() takes no keyword arguments")
	}
	var start, stop, step int64 = 0, 0, 1
	ints := make([]int64, len(args))
	for i, a := range args {
		n, ok := asInt64(a)
		if !ok {
			typeError("'%s' object cannot be interpreted as an integer", typeName(a))
		}
		ints[i] = n
	}
	switch len(ints) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	default:
		typeError("range expected at most 3 arguments, got %d", len(args))
	}
	if step == 0 {
		throw(excValue, "range() arg 3 must not be zero")
	}
	var n int64
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && start > stop {
		n = (start - stop - step - 1) / -step
	}
	if n > int64(r.limits.MaxRange) {
		throw(excOverflow, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", r.limits.MaxRange)
	}
	out := make([]any, n)
	for i := range out {
		out[i] = start + int64(i)*step
	}
	return out
}

// dictFrom is dict(*args, **kwargs).
func dictFrom(r *renderer, fname string, args []any, kw []kwarg) *Dict {
	d := NewDict(len(kw))
	if len(args) > 1 {
		typeError("%s expected at most 1 argument, got %d", fname, len(args))
	}
	if len(args) == 1 {
		switch x := args[0].(type) {
		case *Dict:
			for i, k := range x.keys {
				d.setAny(k, x.vals[i])
			}
		default:
			for i, it := range r.iterate(x) {
				pair := r.iterate(it)
				if len(pair) != 2 {
					throw(excValue, "dictionary update sequence element #%d has length %d; 2 is required", i, len(pair))
				}
				d.setAny(pair[0], pair[1])
			}
		}
	}
	for _, k := range kw {
		d.setAny(k.name, k.val)
	}
	return d
}

func fnDict(r *renderer, _ any, args []any, kw []kwarg) any { return dictFrom(r, "dict", args, kw) }

func fnNamespace(r *renderer, _ any, args []any, kw []kwarg) any {
	return &namespace{attrs: dictFrom(r, "Namespace", args, kw)}
}

// cycler is jinja2's Cycler.
type cycler struct {
	items []any
	pos   int
}

func fnCycler(r *renderer, _ any, args []any, kw []kwarg) any {
	if len(kw) > 0 {
		typeError("Cycler() got an unexpected keyword argument '%s'", kw[0].name)
	}
	if len(args) == 0 {
		throw("RuntimeError", "at least one item has to be provided")
	}
	return &cycler{items: append([]any(nil), args...)}
}

func (c *cycler) attr(name string) (any, bool) {
	switch name {
	case "current":
		return c.items[c.pos], true
	case "items":
		return tuple(c.items), true
	case "next", "__next__":
		return &callable{name: "next", recv: c, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
			c := recv.(*cycler)
			v := c.items[c.pos]
			c.pos = (c.pos + 1) % len(c.items)
			return v
		}}, true
	case "reset":
		return &callable{name: "reset", recv: c, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
			recv.(*cycler).pos = 0
			return nil
		}}, true
	}
	return nil, false
}

// joiner is jinja2's Joiner: "" the first time it is called, sep after.
type joiner struct {
	sep  any
	used bool
}

func fnJoiner(r *renderer, _ any, args []any, kw []kwarg) any {
	a := bindArgs("Joiner", args, kw, []string{"sep"}, 0)
	return &callable{name: "joiner", recv: &joiner{sep: argOr(a[0], ", ")}, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
		j := recv.(*joiner)
		if !j.used {
			j.used = true
			return ""
		}
		return j.sep
	}}
}

func fnLipsum(r *renderer, _ any, args []any, kw []kwarg) any {
	throw(excNotImplemented, "lipsum() is not supported by this renderer (its output is random)")
	return nil
}

// fnRaiseException is transformers' raise_exception(message), which raises
// jinja2.exceptions.TemplateError(message).
func fnRaiseException(r *renderer, _ any, args []any, kw []kwarg) any {
	a := bindArgs("raise_exception", args, kw, []string{"message"}, 1)
	panic(&Error{Type: excTemplateError, Message: toStr(a[0]), Raised: true, Line: r.line})
}

// fnStrftimeNow is transformers' strftime_now(format):
// datetime.now().strftime(format).
func fnStrftimeNow(r *renderer, _ any, args []any, kw []kwarg) any {
	a := bindArgs("strftime_now", args, kw, []string{"format"}, 1)
	f, ok := a[0].(string)
	if !ok {
		typeError("strftime() argument 1 must be str, not %s", typeName(a[0]))
	}
	return strftime(r.nowTime(), f)
}

func (r *renderer) nowTime() time.Time {
	if r.now.IsZero() {
		r.now = r.t.clock()
	}
	return r.now
}

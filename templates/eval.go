package templates

import (
	"fmt"
	"strings"
	"time"
)

// renderer is the state of one render.
type renderer struct {
	t       *Template
	out     *strings.Builder
	now     time.Time
	limits  Limits
	depth   int
	steps   int
	written int
	line    int
}

type ctrl uint8

const (
	ctrlNone ctrl = iota
	ctrlBreak
	ctrlContinue
)

type kwarg struct {
	name string
	val  any
}

func (r *renderer) write(s string) {
	r.written += len(s)
	if r.written > r.limits.MaxOutput {
		throw(excLimit, "render output exceeds %d bytes", r.limits.MaxOutput)
	}
	r.out.WriteString(s)
}

func (r *renderer) step() {
	r.steps++
	if r.steps > r.limits.MaxSteps {
		throw(excLimit, "render exceeds %d loop iterations and calls", r.limits.MaxSteps)
	}
}

// capture runs fn with output going to a fresh buffer and returns it.
func (r *renderer) capture(fn func()) string {
	saved := r.out
	var b strings.Builder
	r.out = &b
	defer func() { r.out = saved }()
	fn()
	return b.String()
}

func (r *renderer) execBody(body []node, s *scope) ctrl {
	for _, n := range body {
		if c := r.exec(n, s); c != ctrlNone {
			return c
		}
	}
	return ctrlNone
}

func (r *renderer) exec(n node, s *scope) ctrl {
	switch n := n.(type) {
	case *textNode:
		r.write(n.s)
	case *outputNode:
		r.line = n.line
		if a, ok := n.e.(*addExpr); ok {
			r.writeAdd(a, s)
			return ctrlNone
		}
		v := r.eval(n.e, s)
		if str, ok := v.(string); ok {
			r.write(str)
		} else {
			r.write(toStr(v))
		}
	case *ifNode:
		r.line = n.line
		for i, c := range n.conds {
			if truthy(r.eval(c, s)) {
				return r.execBody(n.bodies[i], s)
			}
		}
		return r.execBody(n.els, s)
	case *forNode:
		r.line = n.line
		items := r.iterate(r.eval(n.iter, s))
		r.runLoop(n, s, items, 0)
	case *setNode:
		r.line = n.line
		r.assign(n.target, r.eval(n.e, s), s)
	case *setBlockNode:
		r.line = n.line
		inner := newScope(s)
		var v any = r.capture(func() { r.execBody(n.body, inner) })
		for _, f := range n.filters {
			v = r.applyFilter(f, v, inner)
		}
		r.assign(n.target, v, s)
	case *macroNode:
		s.set(n.def.name, &macro{def: n.def, closure: s})
	case *callBlockNode:
		r.line = n.line
		caller := &macro{def: n.caller, closure: s}
		fn := r.eval(n.call.fn, s)
		args, kw := r.evalArgs(n.call.args, n.call.kwNames, n.call.kwValues, n.call.dynArgs, n.call.dynKwargs, s)
		kw = append(kw, kwarg{"caller", caller})
		r.write(toStr(r.call(fn, args, kw)))
	case *filterBlockNode:
		r.line = n.line
		inner := newScope(s)
		var v any = r.capture(func() { r.execBody(n.body, inner) })
		for _, f := range n.filters {
			v = r.applyFilter(f, v, inner)
		}
		r.write(toStr(v))
	case *withNode:
		r.line = n.line
		inner := newScope(s)
		for i, tg := range n.targets {
			r.assign(tg, r.eval(n.values[i], s), inner)
		}
		return r.execBody(n.body, inner)
	case *scopeNode:
		return r.execBody(n.body, newScope(s))
	case *breakNode:
		return ctrlBreak
	case *continueNode:
		return ctrlContinue
	case *unsupportedNode:
		r.line = n.line
		throw(n.typ, "%s", n.msg)
	default:
		throw(excInternal, "unknown node %T", n)
	}
	return ctrlNone
}

// runLoop runs a for loop over items (already materialised) and returns
// nothing: break and continue stop at their loop.
func (r *renderer) runLoop(n *forNode, s *scope, items []any, depth int) {
	if n.cond != nil {
		fs := newScope(s)
		kept := make([]any, 0, len(items))
		for _, it := range items {
			fs.reset()
			r.assign(n.target, it, fs)
			if truthy(r.eval(n.cond, fs)) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if n.els != nil {
			r.execBody(n.els, newScope(s))
		}
		return
	}
	lc := &loopCtx{items: items, depth0: depth, node: n, scope: s}
	bs := newScope(s)
	for i, it := range items {
		r.step()
		lc.index = i
		bs.reset()
		r.assign(n.target, it, bs)
		bs.set("loop", lc)
		if r.execBody(n.body, bs) == ctrlBreak {
			break
		}
	}
}

func (r *renderer) assign(tg target, v any, s *scope) {
	switch {
	case tg.attr != "":
		obj, _ := s.lookup(tg.name)
		ns, ok := obj.(*namespace)
		if !ok {
			throw(excRuntime, "cannot assign attribute on non-namespace object")
		}
		ns.attrs.setAny(tg.attr, v)
	case tg.tuple:
		vals := r.iterate(v)
		if len(vals) < len(tg.items) {
			throw(excValue, "not enough values to unpack (expected %d, got %d)", len(tg.items), len(vals))
		}
		if len(vals) > len(tg.items) {
			throw(excValue, "too many values to unpack (expected %d)", len(tg.items))
		}
		for i, it := range tg.items {
			r.assign(it, vals[i], s)
		}
	default:
		s.set(tg.name, v)
	}
}

// iterate is Python's list(iter(v)) for the values templates loop over.
func (r *renderer) iterate(v any) []any {
	switch x := v.(type) {
	case []any:
		return x
	case tuple:
		return x
	case *Dict:
		return append([]any(nil), x.keys...)
	case string:
		out := make([]any, 0, len(x))
		for _, c := range x {
			out = append(out, string(c))
		}
		return out
	case *undefined:
		return nil
	case *loopCtx:
		return x.items
	case *dictView:
		return x.items()
	}
	typeError("'%s' object is not iterable", typeName(v))
	return nil
}

func (r *renderer) eval(e expr, s *scope) any {
	switch e := e.(type) {
	case *constExpr:
		return e.v
	case *nameExpr:
		if v, ok := s.lookup(e.name); ok {
			return v
		}
		for _, g := range r.t.globals {
			if g.name == e.name {
				return g.v
			}
		}
		return e.missing
	case *getattrExpr:
		obj := r.eval(e.obj, s)
		switch x := obj.(type) {
		case *Dict:
			if e.dictAttr == 0 {
				if v, ok := x.Get(e.name); ok {
					return v
				}
				return e.missing
			}
		case *loopCtx:
			if e.dictAttr != 3 {
				return r.loopAttr(x, e.name)
			}
		case *namespace:
			if e.dictAttr != 3 {
				if v, ok := x.attrs.Get(e.name); ok {
					return v
				}
			}
		}
		return r.getattr(obj, e.name)
	case *getitemExpr:
		obj := r.eval(e.obj, s)
		if d, ok := obj.(*Dict); ok && e.isStr {
			if v, ok := d.Get(e.strKey); ok {
				return v
			}
			if !isDunder(e.strKey) && dictMethod(e.strKey) == nil && !unsafeMethod(d, e.strKey) {
				return e.missing
			}
		}
		if sl, ok := e.key.(*sliceExpr); ok {
			return r.slice(obj, r.evalOpt(sl.start, s), r.evalOpt(sl.stop, s), r.evalOpt(sl.step, s))
		}
		return r.getitem(obj, r.eval(e.key, s))
	case *callExpr:
		return r.evalCall(e, s)
	case *filterExpr:
		return r.applyFilter(e, r.eval(e.input, s), s)
	case *testExpr:
		v := r.eval(e.input, s)
		if e.fn == nil {
			throw(excRuntime, "No test named %s found.", repr(e.name))
		}
		args, kw := r.evalArgs(e.args, e.kwNames, e.kwValues, e.dynArgs, e.dynKwargs, s)
		return e.fn(r, v, args, kw)
	case *addExpr:
		return r.evalAdd(e, s)
	case *binExpr:
		l := r.eval(e.l, s)
		rv := r.eval(e.r, s)
		return arith(e.op, l, rv)
	case *concatExpr:
		var b strings.Builder
		for _, p := range e.parts {
			b.WriteString(toStr(r.eval(p, s)))
			if b.Len() > maxStrLen {
				throw(excLimit, "string longer than %d bytes", maxStrLen)
			}
		}
		return b.String()
	case *compareExpr:
		l := r.eval(e.first, s)
		for i, op := range e.ops {
			rv := r.eval(e.operands[i], s)
			if !compare(op, l, rv) {
				return false
			}
			l = rv
		}
		return true
	case *andExpr:
		l := r.eval(e.l, s)
		if !truthy(l) {
			return l
		}
		return r.eval(e.r, s)
	case *orExpr:
		l := r.eval(e.l, s)
		if truthy(l) {
			return l
		}
		return r.eval(e.r, s)
	case *notExpr:
		return !truthy(r.eval(e.e, s))
	case *unaryExpr:
		return unary(e.op, r.eval(e.e, s))
	case *condExpr:
		if truthy(r.eval(e.test, s)) {
			return r.eval(e.a, s)
		}
		if e.b != nil {
			return r.eval(e.b, s)
		}
		return undefinedHint(fmt.Sprintf("the inline if-expression on line %d evaluated to false and no else section was defined.", e.line))
	case *listExpr:
		out := make([]any, len(e.items))
		for i, it := range e.items {
			out[i] = r.eval(it, s)
		}
		return out
	case *tupleExpr:
		out := make(tuple, len(e.items))
		for i, it := range e.items {
			out[i] = r.eval(it, s)
		}
		return out
	case *dictExpr:
		d := NewDict(len(e.keys))
		for i, k := range e.keys {
			kv := r.eval(k, s)
			d.setAny(kv, r.eval(e.values[i], s))
		}
		return d
	case *sliceExpr:
		throw(excSyntax, "slice outside of a subscript")
	}
	throw(excInternal, "unknown expression %T", e)
	return nil
}

func (r *renderer) evalOpt(e expr, s *scope) any {
	if e == nil {
		return nil
	}
	return r.eval(e, s)
}

// evalAdd evaluates a + b + c ... left to right with Python semantics,
// joining runs of strings in one allocation.
func (r *renderer) evalAdd(e *addExpr, s *scope) any {
	acc := r.eval(e.operands[0], s)
	as, ok := acc.(string)
	if !ok {
		for _, o := range e.operands[1:] {
			acc = arith("+", acc, r.eval(o, s))
		}
		return acc
	}
	var parts [8]string
	strs := append(parts[:0], as)
	n := len(as)
	for i, o := range e.operands[1:] {
		v := r.eval(o, s)
		if vs, ok := v.(string); ok {
			strs = append(strs, vs)
			n += len(vs)
			continue
		}
		if n > maxStrLen {
			throw(excLimit, "string longer than %d bytes", maxStrLen)
		}
		acc = joinStrings(strs, n)
		acc = arith("+", acc, v)
		for _, o2 := range e.operands[i+2:] {
			acc = arith("+", acc, r.eval(o2, s))
		}
		return acc
	}
	if n > maxStrLen {
		throw(excLimit, "string longer than %d bytes", maxStrLen)
	}
	return joinStrings(strs, n)
}

// writeAdd outputs a + b + c ...: when every operand is a str, the parts
// are written one after the other instead of being joined first.
func (r *renderer) writeAdd(e *addExpr, s *scope) {
	var parts [12]string
	strs := parts[:0]
	for i, o := range e.operands {
		v := r.eval(o, s)
		vs, ok := v.(string)
		if !ok || len(strs) == cap(parts) {
			var acc any = joinStrings(strs, 0)
			if len(strs) == 0 {
				acc = v
			} else {
				acc = arith("+", acc, v)
			}
			for _, o2 := range e.operands[i+1:] {
				acc = arith("+", acc, r.eval(o2, s))
			}
			r.write(toStr(acc))
			return
		}
		strs = append(strs, vs)
	}
	for _, p := range strs {
		r.write(p)
	}
}

func joinStrings(parts []string, n int) string {
	if len(parts) == 1 {
		return parts[0]
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
}

func (r *renderer) evalArgs(args []expr, kwNames []string, kwValues []expr, dynArgs, dynKwargs expr, s *scope) ([]any, []kwarg) {
	var pos []any
	if len(args) > 0 {
		pos = make([]any, len(args))
		for i, a := range args {
			pos[i] = r.eval(a, s)
		}
	}
	var kw []kwarg
	if len(kwNames) > 0 {
		kw = make([]kwarg, len(kwNames))
		for i, n := range kwNames {
			kw[i] = kwarg{n, r.eval(kwValues[i], s)}
		}
	}
	if dynArgs != nil {
		pos = append(pos, r.iterate(r.eval(dynArgs, s))...)
	}
	if dynKwargs != nil {
		d, ok := r.eval(dynKwargs, s).(*Dict)
		if !ok {
			typeError("argument after ** must be a mapping")
		}
		for i, k := range d.keys {
			ks, ok := k.(string)
			if !ok {
				typeError("keywords must be strings")
			}
			kw = append(kw, kwarg{ks, d.vals[i]})
		}
	}
	return pos, kw
}

func (r *renderer) evalCall(e *callExpr, s *scope) any {
	r.line = e.line
	if ga, ok := e.fn.(*getattrExpr); ok {
		// obj.method(...) without allocating a bound method.
		obj := r.eval(ga.obj, s)
		var m methodFn
		switch obj.(type) {
		case string:
			m = e.methods.str
		case []any:
			m = e.methods.list
		case tuple:
			m = e.methods.tuple
		case *Dict:
			m = e.methods.dict
		}
		if m != nil {
			args, kw := r.evalArgs(e.args, e.kwNames, e.kwValues, e.dynArgs, e.dynKwargs, s)
			return m(r, obj, args, kw)
		}
		fn := r.getattr(obj, ga.name)
		args, kw := r.evalArgs(e.args, e.kwNames, e.kwValues, e.dynArgs, e.dynKwargs, s)
		return r.call(fn, args, kw)
	}
	fn := r.eval(e.fn, s)
	args, kw := r.evalArgs(e.args, e.kwNames, e.kwValues, e.dynArgs, e.dynKwargs, s)
	return r.call(fn, args, kw)
}

func (r *renderer) call(fn any, args []any, kw []kwarg) any {
	switch f := fn.(type) {
	case *macro:
		return r.callMacro(f, args, kw)
	case *callable:
		return f.fn(r, f.recv, args, kw)
	case *loopCtx:
		if !f.node.recursive {
			typeError("The loop must have the 'recursive' marker to be called recursively.")
		}
		if len(args) != 1 || len(kw) != 0 {
			typeError("loop() takes exactly one argument")
		}
		return r.recurseLoop(f, args[0])
	case *undefined:
		f.fail()
	}
	typeError("'%s' object is not callable", typeName(fn))
	return nil
}

func (r *renderer) enter() {
	r.step()
	r.depth++
	if r.depth > r.limits.MaxDepth {
		throw(excRecursion, "maximum recursion depth exceeded")
	}
}

func (r *renderer) recurseLoop(lc *loopCtx, iter any) any {
	r.enter()
	defer func() { r.depth-- }()
	items := r.iterate(iter)
	return r.capture(func() { r.runLoop(lc.node, lc.scope, items, lc.depth0+1) })
}

// macro is a macro (or a call block's caller) bound to the scope it was
// defined in.
type macro struct {
	def     *macroDef
	closure *scope
}

func (r *renderer) callMacro(m *macro, args []any, kw []kwarg) any {
	d := m.def
	r.enter()
	defer func() { r.depth-- }()
	s := newScope(m.closure)
	n := len(d.params)
	used := make([]bool, len(kw))
	var pending []int // params to fill from their defaults
	foundCaller := false
	for i, p := range d.params {
		if i < len(args) {
			s.set(p, args[i])
			if p == "caller" {
				foundCaller = true
			}
			continue
		}
		if p == "caller" {
			foundCaller = true
		}
		found := false
		for j, k := range kw {
			if !used[j] && k.name == p {
				used[j] = true
				s.set(p, k.val)
				found = true
				break
			}
		}
		if !found {
			if d.defaults[i] != nil {
				pending = append(pending, i)
				s.set(p, nil)
			} else {
				s.set(p, &undefined{hint: fmt.Sprintf("parameter %s was not provided", repr(p)), name: p})
			}
		}
	}
	if d.usesCaller && !foundCaller {
		var caller any = &undefined{hint: "No caller defined", name: "caller"}
		for j, k := range kw {
			if !used[j] && k.name == "caller" {
				used[j] = true
				caller = k.val
				break
			}
		}
		s.set("caller", caller)
	}
	if d.catchKwargs {
		extra := NewDict(0)
		for j, k := range kw {
			if !used[j] {
				extra.setAny(k.name, k.val)
			}
		}
		s.set("kwargs", extra)
	} else {
		for j, k := range kw {
			if !used[j] {
				if k.name == "caller" {
					typeError("macro %s was invoked with two values for the special caller argument. This is most likely a bug.", repr(d.name))
				}
				typeError("macro %s takes no keyword argument %s", repr(d.name), repr(k.name))
			}
		}
	}
	if d.catchVarargs {
		var extra tuple
		if len(args) > n {
			extra = append(tuple{}, args[n:]...)
		} else {
			extra = tuple{}
		}
		s.set("varargs", extra)
	} else if len(args) > n {
		typeError("macro %s takes not more than %d argument(s)", repr(d.name), n)
	}
	for _, i := range pending {
		s.set(d.params[i], r.eval(d.defaults[i], s))
	}
	return r.capture(func() { r.execBody(d.body, s) })
}

func (r *renderer) applyFilter(f *filterExpr, v any, s *scope) any {
	if f.fn == nil {
		throw(excRuntime, "No filter named %s found.", repr(f.name))
	}
	args, kw := r.evalArgs(f.args, f.kwNames, f.kwValues, f.dynArgs, f.dynKwargs, s)
	r.line = f.line
	return f.fn(r, v, args, kw)
}

// loopCtx is jinja2's LoopContext, the "loop" variable.
type loopCtx struct {
	items   []any
	index   int
	depth0  int
	node    *forNode
	scope   *scope
	changed any
	hasLast bool
}

func (l *loopCtx) length() int { return len(l.items) }

func (r *renderer) loopAttr(l *loopCtx, name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index + 1)
	case "index0":
		return int64(l.index)
	case "revindex":
		return int64(n - l.index)
	case "revindex0":
		return int64(n - l.index - 1)
	case "first":
		return l.index == 0
	case "last":
		return l.index == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(l.depth0 + 1)
	case "depth0":
		return int64(l.depth0)
	case "previtem":
		if l.index == 0 {
			return undefinedHint("there is no previous item")
		}
		return l.items[l.index-1]
	case "nextitem":
		if l.index+1 >= n {
			return undefinedHint("there is no next item")
		}
		return l.items[l.index+1]
	case "cycle":
		return &callable{name: "cycle", recv: l, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
			if len(args) == 0 {
				typeError("no items for cycling given")
			}
			return args[recv.(*loopCtx).index%len(args)]
		}}
	case "changed":
		return &callable{name: "changed", recv: l, fn: func(r *renderer, recv any, args []any, kw []kwarg) any {
			lc := recv.(*loopCtx)
			var t any = tuple(args)
			if lc.hasLast && pyEqual(lc.changed, t) {
				return false
			}
			lc.changed, lc.hasLast = t, true
			return true
		}}
	}
	return undefinedAttr(l, name)
}

// namespace is jinja2's Namespace: the one mutable object templates have.
type namespace struct {
	attrs *Dict
}

// callable is a builtin function, or a method bound to recv.
type callable struct {
	name string
	recv any
	fn   func(r *renderer, recv any, args []any, kw []kwarg) any
	// class marks the globals that are classes in Python (range, dict,
	// namespace, cycler, joiner): their type is "type".
	class bool
}

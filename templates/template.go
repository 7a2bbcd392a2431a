package templates

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"
)

// Template is a compiled chat template. It is immutable after Compile and
// safe for concurrent use: every Render builds its own state.
type Template struct {
	// sizeHint is the largest output rendered so far, to size the output
	// buffer of the next render in one allocation.
	sizeHint atomic.Int64

	name    string
	source  string
	body    []node
	clock   func() time.Time
	limits  Limits
	globals []global
}

type global struct {
	name string
	v    any
}

// Limits bound what one render may do. jinja2's sandbox bounds only
// range(); these extra limits keep a hostile template or request from
// exhausting the server, and are far above anything a chat template needs.
type Limits struct {
	// MaxOutput is the most bytes a render may produce, counting the
	// output of macros and {% set %} blocks (default 64 MiB).
	MaxOutput int
	// MaxDepth is the deepest macro/recursive-loop nesting (default 200).
	MaxDepth int
	// MaxRange is the largest range() jinja2's sandbox allows (100000).
	MaxRange int
	// MaxSteps bounds loop iterations and macro calls together (default 10 million).
	MaxSteps int
}

func (l Limits) withDefaults() Limits {
	if l.MaxOutput <= 0 {
		l.MaxOutput = 64 << 20
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = 200
	}
	if l.MaxRange <= 0 {
		l.MaxRange = 100000
	}
	if l.MaxSteps <= 0 {
		l.MaxSteps = 10_000_000
	}
	return l
}

// Option configures Compile.
type Option func(*Template)

// WithName names the template in error messages.
func WithName(name string) Option { return func(t *Template) { t.name = name } }

// WithClock sets the clock behind strftime_now (default time.Now). The
// time is used as a naive local time, as transformers' datetime.now() is.
func WithClock(now func() time.Time) Option { return func(t *Template) { t.clock = now } }

// WithLimits replaces the default resource limits; zero fields keep their
// defaults.
func WithLimits(l Limits) Option { return func(t *Template) { t.limits = l } }

// Compile parses a template source with transformers' jinja2 settings:
// trim_blocks, lstrip_blocks, loop controls, and one trailing newline of the
// source dropped. Syntax errors are *Error with Type "TemplateSyntaxError"
// (or "TemplateAssertionError" for an unknown filter or test).
func Compile(source string, opts ...Option) (*Template, error) {
	t := &Template{source: source, clock: time.Now}
	for _, o := range opts {
		o(t)
	}
	t.limits = t.limits.withDefaults()
	src := normalizeSource(source, false)
	toks, err := lex(t.name, src, true, true)
	if err != nil {
		return nil, err
	}
	body, err := parse(t.name, toks)
	if err != nil {
		return nil, err
	}
	t.body = body
	t.globals = builtinGlobals()
	return t, nil
}

// Source returns the template source as given to Compile.
func (t *Template) Source() string { return t.source }

// Name returns the name given with WithName.
func (t *Template) Name() string { return t.name }

// Render renders the template with vars as its context (on top of the
// globals range, dict, namespace, cycler, joiner, raise_exception and
// strftime_now). Values must be template values: nil, bool, int, int64,
// float64, string, []any, *Dict (see DecodeJSON and FromGo); other Go values
// are opaque to the template. Vars are only read, never modified.
func (t *Template) Render(vars map[string]any) (string, error) {
	root := &scope{names: make([]string, 0, len(vars)), vals: make([]any, 0, len(vars))}
	for k, v := range vars {
		w, err := FromGo(v)
		if err != nil {
			return "", fmt.Errorf("templates: variable %q: %w", k, err)
		}
		root.names = append(root.names, k)
		root.vals = append(root.vals, w)
	}
	return t.render(root, time.Time{})
}

func (t *Template) render(root *scope, now time.Time) (out string, err error) {
	r := &renderer{t: t, now: now, limits: t.limits}
	var b strings.Builder
	b.Grow(max(int(t.sizeHint.Load())+256, 1024))
	r.out = &b
	defer func() {
		if rec := recover(); rec != nil {
			e, ok := rec.(*Error)
			if !ok {
				// A bug in this package, not in the template: report it
				// rather than take the server down.
				e = &Error{Type: excInternal, Message: fmt.Sprintf("%v\n%s", rec, debug.Stack())}
			}
			if e.Name == "" {
				e.Name = t.name
			}
			if e.Line == 0 {
				e.Line = r.line
			}
			out, err = "", e
		}
	}()
	r.execBody(t.body, root)
	if n := int64(b.Len()); n > t.sizeHint.Load() {
		t.sizeHint.Store(n)
	}
	return b.String(), nil
}

func builtinGlobals() []global {
	return []global{
		{"range", &callable{name: "range", fn: fnRange, class: true}},
		{"dict", &callable{name: "dict", fn: fnDict, class: true}},
		{"namespace", &callable{name: "namespace", fn: fnNamespace, class: true}},
		{"cycler", &callable{name: "cycler", fn: fnCycler, class: true}},
		{"joiner", &callable{name: "joiner", fn: fnJoiner, class: true}},
		{"lipsum", &callable{name: "lipsum", fn: fnLipsum}},
		{"raise_exception", &callable{name: "raise_exception", fn: fnRaiseException}},
		{"strftime_now", &callable{name: "strftime_now", fn: fnStrftimeNow}},
		{"self", &templateRef{}},
	}
}

// scope is one level of variables: the render context, a loop iteration,
// a macro call, a with block. Lookups walk outwards, assignments stay in
// the innermost scope, as jinja2's scoping rules have it.
type scope struct {
	parent *scope
	names  []string
	vals   []any
	// room for the few variables most scopes hold, without a second
	// allocation
	inlineNames [3]string
	inlineVals  [3]any
}

func newScope(parent *scope) *scope {
	s := &scope{parent: parent}
	s.names, s.vals = s.inlineNames[:0], s.inlineVals[:0]
	return s
}

func (s *scope) lookup(name string) (any, bool) {
	for sc := s; sc != nil; sc = sc.parent {
		for i := len(sc.names) - 1; i >= 0; i-- {
			if sc.names[i] == name {
				return sc.vals[i], true
			}
		}
	}
	return nil, false
}

func (s *scope) set(name string, v any) {
	for i, n := range s.names {
		if n == name {
			s.vals[i] = v
			return
		}
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
}

func (s *scope) reset() {
	clear(s.vals)
	s.names = s.names[:0]
	s.vals = s.vals[:0]
}

package grammar

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// Spec is a constraint as data: what an API request asks the output to
// match, in a form that travels (JSON) from the preparer that validates it
// to the scheduler that enforces it, possibly on another cluster member.
// Exactly one of its fields is set; Seq and Alt compose specs (a tool call
// is literal text around its arguments' schema).
type Spec struct {
	// JSONSchema: a JSON value valid against this schema (compact JSON).
	JSONSchema json.RawMessage `json:"json_schema,omitempty"`
	// JSON: any JSON value (OpenAI's json_object asks for an object: set
	// Object too).
	JSON bool `json:"json,omitempty"`
	// Object restricts JSON to objects.
	Object bool `json:"object,omitempty"`
	// Regex: text the regular expression matches in full (ECMA-262 syntax,
	// as JSON Schema's pattern; anchors are implied).
	Regex string `json:"regex,omitempty"`
	// Choice: exactly one of these texts.
	Choice []string `json:"choice,omitempty"`
	// GBNF: llama.cpp's grammar text; the output is its root rule.
	GBNF string `json:"gbnf,omitempty"`
	// Text: exactly this text.
	Text string `json:"text,omitempty"`
	// Seq: each spec in turn; Alt: one of them.
	Seq []Spec `json:"seq,omitempty"`
	Alt []Spec `json:"alt,omitempty"`
	// Plus: Plus[0] once, then any number of Plus[1] Plus[0] (Plus[1],
	// the separator, may be absent): parallel tool calls.
	Plus []Spec `json:"plus,omitempty"`
	// Field names the request field the spec came from, for errors
	// ("response_format.json_schema.schema"); it does not change the
	// grammar.
	Field string `json:"field,omitempty"`
}

// Kind names the spec's kind: "json_schema", "json", "regex", "choice",
// "grammar", "text", or "composite" for Seq, Alt and Plus.
func (s *Spec) Kind() string {
	switch {
	case len(s.JSONSchema) > 0:
		return "json_schema"
	case s.JSON:
		return "json"
	case s.Regex != "":
		return "regex"
	case s.Choice != nil:
		return "choice"
	case s.GBNF != "":
		return "grammar"
	case s.Text != "":
		return "text"
	}
	return "composite"
}

// Plan is a Spec and where in the output it applies.
type Plan struct {
	Spec Spec `json:"spec"`
	// After, when set, leaves the output free until it contains this text
	// (a reasoning block's end, "</think>"); then the Spec follows, after
	// optional whitespace, and the output ends with it. EOS is refused
	// before.
	After string `json:"after,omitempty"`
	// Trigger, when set, makes the plan lazy: the output is free, and every
	// time it contains Trigger (a tool call's opening tag) the Spec follows
	// at once; when the Spec can take no more the output is free again.
	// Incompatible with After.
	Trigger string `json:"trigger,omitempty"`
	// Open, with After, makes the wait optional: the output either starts
	// with Open (a reasoning block the model opens itself) and is free
	// until After, or follows the Spec from its first token. The first
	// token decides: one that begins with Open opens the block (models
	// that reason write their opening tag as one token).
	Open string `json:"open,omitempty"`
}

// Marshal encodes p for a job message.
func (p *Plan) Marshal() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("grammar: encoding a plan: %v", err)) // plain data, never fails
	}
	return b
}

// UnmarshalPlan decodes what Plan.Marshal made.
func UnmarshalPlan(b []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("grammar: decoding a plan: %w", err)
	}
	return &p, nil
}

// SpecError is a Spec that does not compile: Field names the request
// field it came from.
type SpecError struct {
	Field string
	Err   error
}

func (e *SpecError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *SpecError) Unwrap() error { return e.Err }

// CompileSpec compiles s into a grammar.
func CompileSpec(s *Spec) (*Grammar, error) {
	var b Builder
	sym, err := b.spec(s, "")
	if err != nil {
		return nil, err
	}
	start := b.Rule("root")
	b.Alt(start, sym)
	g, err := b.Build(start)
	if err == nil && g.Empty() {
		err = ErrNoText
	}
	if err != nil {
		return nil, &SpecError{Field: s.Field, Err: err}
	}
	return g, nil
}

// CompilePlan compiles a plan's grammar: its Spec, after optional
// whitespace when the plan waits for After (a model writes "\n\n" after
// its reasoning), at most MaxLeadingSpace bytes of it: unbounded, a model
// that favours whitespace tokens could spend its whole budget on it.
// MaxLeadingSpace bounds the whitespace CompilePlan allows before a
// plan's Spec when the plan waits for After.
const MaxLeadingSpace = 8

func CompilePlan(p *Plan) (*Grammar, error) {
	if p.After != "" && p.Trigger != "" {
		return nil, errors.New("grammar: a plan has After or Trigger, not both")
	}
	if p.After == "" {
		return CompileSpec(&p.Spec)
	}
	var b Builder
	sym, err := b.spec(&p.Spec, "")
	if err != nil {
		return nil, err
	}
	start := b.Rule("root")
	b.Alt(start, b.Repeat(T(Bytes(' ', '\t', '\n', '\r')), 0, MaxLeadingSpace), sym)
	g, err := b.Build(start)
	if err == nil && g.Empty() {
		err = ErrNoText
	}
	if err != nil {
		return nil, &SpecError{Field: p.Spec.Field, Err: err}
	}
	return g, nil
}

// MaxSpecBytes bounds the source text of one constraint (a schema,
// regex, grammar or choice list): the largest real-world schemas are
// under 1 MB, and a bigger one would hold a compiler for seconds before
// it hit the grammar's size limit.
const MaxSpecBytes = 1 << 20

func (b *Builder) spec(s *Spec, field string) (Sym, error) {
	if s.Field != "" {
		field = s.Field
	}
	fail := func(err error) (Sym, error) {
		var se *SpecError
		if errors.As(err, &se) {
			return Sym{}, err
		}
		return Sym{}, &SpecError{Field: field, Err: err}
	}
	size := len(s.JSONSchema) + len(s.Regex) + len(s.GBNF) + len(s.Text)
	for _, c := range s.Choice {
		size += len(c)
	}
	if size > MaxSpecBytes {
		return fail(fmt.Errorf("too large: %d bytes, the limit is %d (1 MiB)", size, MaxSpecBytes))
	}
	set := 0
	for _, on := range []bool{len(s.JSONSchema) > 0, s.JSON, s.Regex != "", s.Choice != nil, s.GBNF != "",
		s.Text != "", s.Seq != nil, s.Alt != nil, s.Plus != nil} {
		if on {
			set++
		}
	}
	if set != 1 {
		if set == 0 && s.Object {
			return fail(errors.New("object needs json"))
		}
		return fail(fmt.Errorf("a constraint needs exactly one kind, got %d", set))
	}
	switch {
	case len(s.JSONSchema) > 0:
		sym, err := b.Schema(s.JSONSchema)
		if err != nil {
			return fail(err)
		}
		return sym, nil
	case s.JSON:
		c := &schemaCompiler{b: b}
		if s.Object {
			sym, err := b.Schema([]byte(`{"type":"object"}`))
			if err != nil {
				return fail(err)
			}
			return sym, nil
		}
		return c.anyValue(), nil
	case s.Regex != "":
		sym, err := b.Regex(s.Regex, RegexOptions{Anchored: true})
		if err != nil {
			return fail(err)
		}
		return sym, nil
	case s.Choice != nil:
		if len(s.Choice) == 0 {
			return fail(errors.New("a choice needs at least one text"))
		}
		alts := make([][]Sym, len(s.Choice))
		for i, c := range s.Choice {
			alts[i] = Lit(c)
		}
		return b.Choice("choice", alts...), nil
	case s.GBNF != "":
		sym, err := b.GBNF(s.GBNF)
		if err != nil {
			return fail(err)
		}
		return sym, nil
	case s.Text != "":
		return b.Seq("text", Lit(s.Text)...), nil
	case s.Seq != nil:
		syms := make([]Sym, 0, len(s.Seq))
		for i := range s.Seq {
			sym, err := b.spec(&s.Seq[i], field)
			if err != nil {
				return Sym{}, err
			}
			syms = append(syms, sym)
		}
		if len(syms) == 0 {
			return b.Seq("empty"), nil
		}
		return b.Seq("seq", syms...), nil
	case s.Alt != nil:
		if len(s.Alt) == 0 {
			return fail(errors.New("alternatives need at least one"))
		}
		alts := make([][]Sym, 0, len(s.Alt))
		for i := range s.Alt {
			sym, err := b.spec(&s.Alt[i], field)
			if err != nil {
				return Sym{}, err
			}
			alts = append(alts, []Sym{sym})
		}
		return b.Choice("alt", alts...), nil
	default: // Plus
		if len(s.Plus) < 1 || len(s.Plus) > 2 {
			return fail(errors.New("plus takes an item and an optional separator"))
		}
		item, err := b.spec(&s.Plus[0], field)
		if err != nil {
			return Sym{}, err
		}
		more := item
		if len(s.Plus) == 2 {
			sep, err := b.spec(&s.Plus[1], field)
			if err != nil {
				return Sym{}, err
			}
			more = b.Seq("more", sep, item)
		}
		return b.Seq("plus", item, b.Star(more)), nil
	}
}

// Cache compiles plans once: a bounded map from a plan's encoding to its
// grammar, safe for concurrent use. The zero Cache holds up to 64 grammars.
type Cache struct {
	// Size bounds the grammars kept (0: 64); the least recently used go.
	Size int
	// rewrite, when set, rewrites a decoded plan before it compiles (a
	// Guides' markers).
	rewrite func(*Plan)

	mu   sync.Mutex
	m    map[[32]byte]*cacheEntry
	tick uint64
}

type cacheEntry struct {
	g    *Grammar
	err  error
	used uint64
	once sync.Once
}

// Plan decodes and compiles an encoded plan (Plan.Marshal), or returns the
// grammar compiled for the same bytes before. Compile errors are cached
// too.
func (c *Cache) Plan(enc []byte) (*Plan, *Grammar, error) {
	p, err := UnmarshalPlan(enc)
	if err != nil {
		return nil, nil, err
	}
	if c.rewrite != nil {
		c.rewrite(p)
	}
	key := sha256.Sum256(enc)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[[32]byte]*cacheEntry{}
	}
	c.tick++
	e, ok := c.m[key]
	if !ok {
		size := c.Size
		if size <= 0 {
			size = 64
		}
		if len(c.m) >= size {
			var oldest [32]byte
			first := true
			for k, v := range c.m {
				if first || v.used < c.m[oldest].used {
					oldest, first = k, false
				}
			}
			delete(c.m, oldest)
		}
		e = &cacheEntry{}
		c.m[key] = e
	}
	e.used = c.tick
	c.mu.Unlock()
	e.once.Do(func() { e.g, e.err = CompilePlan(p) })
	return p, e.g, e.err
}

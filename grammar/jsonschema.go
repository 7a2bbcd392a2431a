package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"math/bits"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SchemaError is a JSON Schema the compiler cannot honour exactly (or that
// is invalid): Pointer is the JSON pointer of the schema object at fault,
// Keyword the keyword (or "" for the object as a whole).
type SchemaError struct {
	Pointer string
	Keyword string
	Msg     string
}

func (e *SchemaError) Error() string {
	at := e.Pointer
	if at == "" {
		at = "#"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("json schema at %s: %s: %s", at, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("json schema at %s: %s", at, e.Msg)
}

// Schema limits.
const (
	// MaxSchemaDepth bounds a schema's nesting, and the depth of $ref
	// expansion.
	MaxSchemaDepth = 64
	// maxCompileSteps bounds the compiler's work (subschemas compiled).
	maxCompileSteps = 200_000
)

// CompileSchema compiles a JSON Schema into the grammar of its instances,
// as compact JSON (no whitespace between tokens; object keys in the order
// of the schema's "properties", then any additional properties). It
// returns a *SchemaError for a schema it cannot honour exactly.
func CompileSchema(schema []byte) (*Grammar, error) {
	var b Builder
	top, err := b.Schema(schema)
	if err != nil {
		return nil, err
	}
	start := b.Rule("root")
	b.Alt(start, top)
	g, err := b.Build(start)
	if err == nil && g.Empty() {
		return nil, &SchemaError{Pointer: "#", Msg: "the schema allows no value"}
	}
	return g, err
}

// JSONValue compiles the grammar of any JSON value (compact): OpenAI's
// json_object response format.
func JSONValue() *Grammar {
	var b Builder
	c := &schemaCompiler{b: &b}
	start := b.Rule("root")
	b.Alt(start, c.anyValue())
	g, err := b.Build(start)
	if err != nil {
		panic(err) // a fixed grammar
	}
	return g
}

// Schema compiles schema into a symbol of b (for grammars that embed JSON
// values, such as a tool call's arguments).
func (b *Builder) Schema(schema []byte) (Sym, error) {
	root, err := decodeOrdered(schema, MaxSchemaDepth*4)
	if err != nil {
		return Sym{}, &SchemaError{Msg: "not valid JSON: " + err.Error()}
	}
	c := &schemaCompiler{b: b, root: root, refs: map[string]int{}, expanding: map[string]bool{}}
	if o, ok := root.(*object); ok {
		// Drafts 3 to 7: a $ref replaces its siblings (later drafts apply
		// both).
		if v, ok := o.get("$schema"); ok {
			if s, ok := v.(string); ok {
				for _, d := range []string{"draft-03", "draft-04", "draft-06", "draft-07"} {
					c.refAlone = c.refAlone || strings.Contains(s, d)
				}
			}
		}
	}
	return c.compile(root, "", 0)
}

type schemaCompiler struct {
	b    *Builder
	root any
	// refs are the rules of the $ref targets compiled so far (by pointer),
	// so recursive schemas are recursive rules.
	refs map[string]int
	// expanding are the $ref targets being compiled and not yet inside a
	// structure (object or array): reaching one again is a cycle that
	// makes no progress.
	expanding map[string]bool
	steps     int
	// refAlone: the schema's draft (3 to 7) ignores the siblings of $ref.
	refAlone bool
	// orderBudget is what is left of anyOrderBudget for objects larger
	// than maxAnyOrder.
	orderBudget int
	// Shared symbols, made on first use.
	value, str, char, num sym0
}

// sym0 is a symbol made once.
type sym0 struct {
	ok  bool
	sym Sym
}

func (c *schemaCompiler) fail(ptr, kw, format string, args ...any) error {
	return &SchemaError{Pointer: ptr, Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

// errFalse marks a schema that no value satisfies.
var errFalse = errors.New("no value is valid")

// Keywords that only annotate: they never change which instances are valid.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "example": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$anchor": true, "$defs": true, "definitions": true, "contentMediaType": true, "contentEncoding": true,
	"contentSchema": true, "discriminator": true, "xml": true, "externalDocs": true, "$vocabulary": true,
	"markdownDescription": true, "errorMessage": true, "strict": true, "additionalItems": true,
}

// Keywords this compiler understands (beside annotations).
var understood = map[string]bool{
	"type": true, "enum": true, "const": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true,
	"properties": true, "required": true, "additionalProperties": true, "items": true, "prefixItems": true,
	"minItems": true, "maxItems": true, "minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "nullable": true,
	"minProperties": true, "maxProperties": true, "multipleOf": true, "uniqueItems": true, "patternProperties": true,
	"dependentRequired": true, "dependencies": true,
}

// Keywords that constrain instances and are not supported: a schema using
// one fails to compile rather than get a looser grammar.
var unsupported = map[string]string{
	"if": "conditionals", "then": "conditionals", "else": "conditionals",
	"dependentSchemas": "dependencies",
	"contains":         "contains", "minContains": "contains", "maxContains": "contains", "propertyNames": "property name schemas",
	"unevaluatedProperties": "unevaluated properties", "unevaluatedItems": "unevaluated items",
	"$dynamicRef": "dynamic references", "$recursiveRef": "recursive references",
}

var allTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

func (c *schemaCompiler) compile(s any, ptr string, depth int) (Sym, error) {
	if c.steps++; c.steps > maxCompileSteps {
		return Sym{}, c.fail(ptr, "", "the schema is too large to compile (more than %d subschemas)", maxCompileSteps)
	}
	if depth > MaxSchemaDepth {
		return Sym{}, c.fail(ptr, "", "nested more than %d levels deep", MaxSchemaDepth)
	}
	if err := c.b.Err(); err != nil {
		return Sym{}, c.fail(ptr, "", "%v", err)
	}
	switch s := s.(type) {
	case bool:
		if s {
			return c.anyValue(), nil
		}
		return Sym{}, c.fail(ptr, "", "the schema false allows no value")
	case *object:
		return c.compileObject(s, ptr, depth)
	}
	return Sym{}, c.fail(ptr, "", "a schema must be an object or a boolean, got %s", kindOf(s))
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case *object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (c *schemaCompiler) compileObject(s *object, ptr string, depth int) (Sym, error) {
	if n, ok := s.get("not"); ok {
		positive, err := c.negate(n, ptr+"/not", depth)
		if err != nil {
			return Sym{}, err
		}
		merged, err := c.merge(without(s, "not"), positive, ptr, depth)
		if err != nil {
			return Sym{}, err
		}
		return c.compileObject(merged, ptr, depth+1)
	}
	for _, k := range s.keys {
		if why, ok := unsupported[k]; ok {
			return Sym{}, c.fail(ptr, k, "not supported (%s)", why)
		}
	}
	if ref, ok := s.get("$ref"); ok {
		return c.compileRef(s, ref, ptr, depth)
	}
	if all, ok := s.get("allOf"); ok {
		merged, err := c.mergeAllOf(s, all, ptr, depth)
		if err != nil {
			return Sym{}, err
		}
		return c.compileObject(merged, ptr, depth+1)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		alts, ok := s.get(kw)
		if !ok {
			continue
		}
		// oneOf compiles as anyOf over branches no value can share
		// (oneof.go).
		list, ok := alts.([]any)
		if !ok || len(list) == 0 {
			return Sym{}, c.fail(ptr, kw, "must be a non-empty array of schemas")
		}
		if sets, ok := requiredOnly(list); ok {
			return c.compileRequiredOf(s, kw, sets, ptr, depth)
		}
		rest := without(s, kw)
		branches := make([]any, len(list))
		for i, a := range list {
			branches[i] = a
			if hasConstraints(rest) || kw == "oneOf" {
				m, err := c.merge(rest, a, ptr+"/"+kw+"/"+strconv.Itoa(i), depth)
				if err != nil {
					return Sym{}, err
				}
				branches[i] = m
			}
		}
		if kw == "oneOf" {
			objs := make([]*object, len(branches))
			for i, b := range branches {
				objs[i] = b.(*object)
			}
			objs, err := c.oneOfBranches(objs, ptr)
			if err != nil {
				return Sym{}, err
			}
			for i, o := range objs {
				branches[i] = o
			}
		}
		var syms [][]Sym
		for i, branch := range branches {
			sym, err := c.compile(branch, ptr+"/"+kw+"/"+strconv.Itoa(i), depth+1)
			var se *SchemaError
			if errors.As(err, &se) && strings.Contains(se.Msg, "allows no value") {
				continue // an impossible branch
			}
			if err != nil {
				return Sym{}, err
			}
			syms = append(syms, []Sym{sym})
		}
		if len(syms) == 0 {
			return Sym{}, c.fail(ptr, kw, "no branch allows any value")
		}
		return c.b.Choice(kw, syms...), nil
	}
	// Keywords neither understood nor known to be unsupported are
	// annotations: JSON Schema ignores unknown keywords.
	types, err := c.types(s, ptr)
	if err != nil {
		return Sym{}, err
	}
	if e, ok := s.get("enum"); ok {
		if v, both := s.get("const"); both {
			// Both apply (an allOf merged them): the enum's values equal
			// to the const.
			list, ok := e.([]any)
			if !ok {
				return Sym{}, c.fail(ptr, "enum", "must be an array")
			}
			var keep []any
			for _, x := range list {
				if sameJSON(x, v) {
					keep = append(keep, x)
				}
			}
			if len(keep) == 0 {
				return Sym{}, c.fail(ptr, "const", "the schema allows no value")
			}
			e = keep
		}
		return c.compileEnum(s, e, types, ptr, "enum")
	}
	if v, ok := s.get("const"); ok {
		return c.compileEnum(s, []any{v}, types, ptr, "const")
	}
	var alts [][]Sym
	for _, t := range types {
		sym, err := c.compileType(s, t, ptr, depth)
		if errors.Is(err, errFalse) {
			continue
		}
		if err != nil {
			return Sym{}, err
		}
		alts = append(alts, []Sym{sym})
	}
	if len(alts) == 0 {
		return Sym{}, c.fail(ptr, "type", "the schema allows no value")
	}
	if len(alts) == 1 {
		return alts[0][0], nil
	}
	return c.b.Choice("types", alts...), nil
}

// types are the JSON types s allows: its "type" (a name or a list, plus
// null when "nullable" is true), or every type.
func (c *schemaCompiler) types(s *object, ptr string) ([]string, error) {
	t, ok := s.get("type")
	var out []string
	switch t := t.(type) {
	case nil:
		if ok {
			return nil, c.fail(ptr, "type", "must be a string or an array of strings")
		}
		out = slices.Clone(allTypes)
	case string:
		out = []string{t}
	case []any:
		for _, e := range t {
			name, ok := e.(string)
			if !ok {
				return nil, c.fail(ptr, "type", "must be a string or an array of strings")
			}
			out = append(out, name)
		}
	default:
		return nil, c.fail(ptr, "type", "must be a string or an array of strings")
	}
	for _, name := range out {
		if !slices.Contains(allTypes, name) {
			return nil, c.fail(ptr, "type", "unknown type %q", name)
		}
	}
	if n, _ := s.get("nullable"); n == true && !slices.Contains(out, "null") {
		out = append(out, "null")
	}
	// "integer" is within "number": drop it where both are named.
	if slices.Contains(out, "number") {
		out = slices.DeleteFunc(out, func(t string) bool { return t == "integer" })
	}
	return out, nil
}

func (c *schemaCompiler) compileType(s *object, t, ptr string, depth int) (Sym, error) {
	switch t {
	case "null":
		return c.b.Seq("null", Lit("null")...), nil
	case "boolean":
		return c.b.Choice("boolean", Lit("true"), Lit("false")), nil
	case "string":
		return c.compileString(s, ptr)
	case "integer", "number":
		return c.compileNumber(s, t, ptr)
	case "array", "object":
		// Inside a structure a reference to a schema being expanded is
		// recursion that makes progress.
		saved := c.expanding
		c.expanding = map[string]bool{}
		defer func() { c.expanding = saved }()
		if t == "array" {
			return c.compileArray(s, ptr, depth)
		}
		return c.compileProperties(s, ptr, depth)
	}
	return Sym{}, c.fail(ptr, "type", "unknown type %q", t)
}

// compileEnum compiles a list of allowed values (those of the allowed
// types) as literals.
func (c *schemaCompiler) compileEnum(s *object, values any, types []string, ptr, kw string) (Sym, error) {
	list, ok := values.([]any)
	if !ok {
		return Sym{}, c.fail(ptr, kw, "must be an array")
	}
	var alts [][]Sym
	for _, v := range list {
		if !slices.Contains(types, typeOf(v)) && !(typeOf(v) == "integer" && slices.Contains(types, "number")) &&
			!(typeOf(v) == "number" && slices.Contains(types, "integer") && isIntegral(v)) {
			continue
		}
		alts = append(alts, []Sym{c.literal(v)})
	}
	if len(alts) == 0 {
		return Sym{}, c.fail(ptr, kw, "the schema allows no value")
	}
	return c.b.Choice(kw, alts...), nil
}

func typeOf(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isIntegral(v) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case *object:
		return "object"
	}
	return ""
}

func isIntegral(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt()
}

// literal is the grammar of exactly v, as compact JSON: strings accept any
// encoding of each of their characters (raw or escaped), numbers their
// literal text.
func (c *schemaCompiler) literal(v any) Sym {
	switch v := v.(type) {
	case string:
		return c.stringLiteral(v)
	case *object:
		var seq []Sym
		seq = append(seq, B('{'))
		for i, k := range v.keys {
			if i > 0 {
				seq = append(seq, B(','))
			}
			seq = append(seq, c.stringLiteral(k), B(':'), c.literal(v.vals[k]))
		}
		seq = append(seq, B('}'))
		return c.b.Seq("object literal", seq...)
	case []any:
		var seq []Sym
		seq = append(seq, B('['))
		for i, e := range v {
			if i > 0 {
				seq = append(seq, B(','))
			}
			seq = append(seq, c.literal(e))
		}
		seq = append(seq, B(']'))
		return c.b.Seq("array literal", seq...)
	case json.Number:
		return c.b.Seq("number literal", Lit(string(v))...)
	case bool:
		return c.b.Seq("boolean literal", Lit(strconv.FormatBool(v))...)
	}
	return c.b.Seq("null", Lit("null")...)
}

// stringLiteral is the grammar of the JSON string s, quotes included.
func (c *schemaCompiler) stringLiteral(s string) Sym {
	seq := []Sym{B('"')}
	for _, r := range s {
		if r == utf8.RuneError {
			r = 0xFFFD
		}
		seq = append(seq, c.b.JSONChar(Chars(r)))
	}
	seq = append(seq, B('"'))
	return c.b.Seq("string literal", seq...)
}

// anyChar is one character of a JSON string, in any encoding.
func (c *schemaCompiler) anyChar() Sym {
	if !c.char.ok {
		c.char = sym0{true, c.b.JSONChar(AnyChar())}
	}
	return c.char.sym
}

// anyString is any JSON string, quotes included.
func (c *schemaCompiler) anyString() Sym {
	if !c.str.ok {
		c.str = sym0{true, c.b.Seq("string", B('"'), c.b.JSONText(), B('"'))}
	}
	return c.str.sym
}

// anyValue is any JSON value (compact).
func (c *schemaCompiler) anyValue() Sym {
	if c.value.ok {
		return c.value.sym
	}
	value := c.b.Rule("value")
	c.value = sym0{true, N(value)}
	member := c.b.Seq("member", c.anyString(), B(':'), N(value))
	members := c.b.Seq("members", member, c.b.Star(c.b.Seq("more members", B(','), member)))
	obj := c.b.Seq("object", B('{'), c.b.Opt(members), B('}'))
	elems := c.b.Seq("elements", N(value), c.b.Star(c.b.Seq("more elements", B(','), N(value))))
	arr := c.b.Seq("array", B('['), c.b.Opt(elems), B(']'))
	for _, s := range []Sym{obj, arr, c.anyString(), c.anyNumber(), c.b.Seq("true", Lit("true")...),
		c.b.Seq("false", Lit("false")...), c.b.Seq("null", Lit("null")...)} {
		c.b.Alt(value, s)
	}
	return c.value.sym
}

func (c *schemaCompiler) anyNumber() Sym {
	if !c.num.ok {
		sym, err := c.b.Number(nil, nil)
		if err != nil {
			panic(err) // unbounded numbers always compile
		}
		c.num = sym0{true, sym}
	}
	return c.num.sym
}

func (c *schemaCompiler) compileString(s *object, ptr string) (Sym, error) {
	minLen, hasMin, err := c.count(s, "minLength", ptr)
	if err != nil {
		return Sym{}, err
	}
	maxLen, hasMax, err := c.count(s, "maxLength", ptr)
	if err != nil {
		return Sym{}, err
	}
	if hasMin && hasMax && minLen > maxLen {
		return Sym{}, errFalse
	}
	pattern, hasPattern := s.get("pattern")
	format, hasFormat := s.get("format")
	if hasFormat {
		name, ok := format.(string)
		if !ok {
			return Sym{}, c.fail(ptr, "format", "must be a string")
		}
		switch {
		case knownFormat(name):
		case standardFormat(name):
			// Validators that assert formats check this one; a grammar
			// that ignored it would be looser.
			return Sym{}, c.fail(ptr, "format", "format %q is not supported", name)
		default:
			// A format no specification defines ("int32", "url",
			// "topic") is an annotation: validators ignore it, and so does
			// the grammar.
			hasFormat = false
		}
	}
	limited := (hasMin && minLen > 0) || hasMax
	switch {
	case (hasPattern && (hasFormat || limited)) || (hasFormat && limited):
		// Several regular constraints at once: their automata in product.
		var pats []string
		kw := "format"
		if hasPattern {
			p, ok := pattern.(string)
			if !ok {
				return Sym{}, c.fail(ptr, "pattern", "must be a string")
			}
			pats, kw = append(pats, p), "pattern"
		}
		if hasFormat {
			fp, err := formatPattern(format.(string))
			if err != nil {
				return Sym{}, c.fail(ptr, "format", "%v", err)
			}
			pats = append(pats, "^(?:"+fp+")$")
		}
		max := -1
		if hasMax {
			max = maxLen
		}
		body, err := c.boundedPattern(pats, minLen, max)
		if err != nil {
			return Sym{}, c.fail(ptr, kw, "%v", err)
		}
		return c.b.Seq("pattern string", B('"'), body), nil
	case hasPattern:
		p, ok := pattern.(string)
		if !ok {
			return Sym{}, c.fail(ptr, "pattern", "must be a string")
		}
		// The pattern's automaton, where it has one of reasonable size
		// (its grammar is unambiguous and its states repeat); else the
		// pattern's own grammar.
		if body, err := c.boundedPattern([]string{p}, 0, -1); err == nil {
			return c.b.Seq("pattern string", B('"'), body), nil
		}
		body, err := c.b.Regex(p, RegexOptions{JSON: true})
		if err != nil {
			return Sym{}, c.fail(ptr, "pattern", "%v", err)
		}
		return c.b.Seq("pattern string", B('"'), body, B('"')), nil
	case hasFormat:
		if fp, err := formatPattern(format.(string)); err == nil {
			if body, err := c.boundedPattern([]string{"^(?:" + fp + ")$"}, 0, -1); err == nil {
				return c.b.Seq("format string", B('"'), body), nil
			}
		}
		body, err := c.b.Format(format.(string))
		if err != nil {
			return Sym{}, c.fail(ptr, "format", "%v", err)
		}
		return c.b.Seq("format string", B('"'), body, B('"')), nil
	case limited:
		max := -1
		if hasMax {
			max = maxLen
		}
		return c.b.Seq("bounded string", B('"'), c.b.JSONTextRange(minLen, max), B('"')), nil
	}
	return c.anyString(), nil
}

var formats = []string{"date", "time", "date-time", "uuid", "email", "ipv4", "ipv6", "hostname", "uri", "uri-reference"}

func knownFormat(name string) bool { return slices.Contains(formats, name) }

// standardFormats are the formats JSON Schema's specifications define
// (drafts 4 to 2020-12), which validators that assert formats check.
var standardFormats = []string{"date", "time", "date-time", "duration", "email", "idn-email", "hostname",
	"idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference", "uuid", "uri-template",
	"json-pointer", "relative-json-pointer", "regex", "host-name", "ip-address", "color", "style", "phone", "utc-millisec"}

// standardFormat reports whether a specification defines the format (so
// it may not be ignored).
func standardFormat(name string) bool { return slices.Contains(standardFormats, name) }

// count reads a non-negative integer keyword.
func (c *schemaCompiler) count(s *object, kw, ptr string) (int, bool, error) {
	v, ok := s.get(kw)
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false, c.fail(ptr, kw, "must be a non-negative integer")
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, false, c.fail(ptr, kw, "must be a non-negative integer")
	}
	if !r.Num().IsInt64() || r.Num().Int64() > 1<<20 {
		return 0, false, c.fail(ptr, kw, "%s is larger than this compiler supports (%d)", n, 1<<20)
	}
	return int(r.Num().Int64()), true, nil
}

func (c *schemaCompiler) compileNumber(s *object, t, ptr string) (Sym, error) {
	multiple := 0 // an integral multipleOf (multiples of an integer are integers)
	if m, ok := s.get("multipleOf"); ok {
		n, isNum := m.(json.Number)
		k, err := strconv.Atoi(string(n))
		if !isNum || err != nil || k < 1 || k > maxMultipleOf {
			return Sym{}, c.fail(ptr, "multipleOf", "not supported (only integers from 1 to %d)", maxMultipleOf)
		}
		multiple = k
	}
	var lo, hi *Bound
	bound := func(kw string, exclusive bool) (*Bound, error) {
		v, ok := s.get(kw)
		if !ok {
			return nil, nil
		}
		n, isNum := v.(json.Number)
		if !isNum {
			return nil, c.fail(ptr, kw, "must be a number")
		}
		return &Bound{Value: string(n), Exclusive: exclusive}, nil
	}
	var err error
	if lo, err = bound("minimum", false); err != nil {
		return Sym{}, err
	}
	if hi, err = bound("maximum", false); err != nil {
		return Sym{}, err
	}
	for _, x := range []struct {
		kw   string
		dst  **Bound
		base string
	}{{"exclusiveMinimum", &lo, "minimum"}, {"exclusiveMaximum", &hi, "maximum"}} {
		v, ok := s.get(x.kw)
		if !ok {
			continue
		}
		switch v := v.(type) {
		case bool: // draft 4: a flag on minimum/maximum
			if v && *x.dst != nil {
				(*x.dst).Exclusive = true
			}
		case json.Number:
			nb := &Bound{Value: string(v), Exclusive: true}
			if *x.dst == nil || tighter(nb, *x.dst, x.kw == "exclusiveMinimum") {
				*x.dst = nb
			}
		default:
			return Sym{}, c.fail(ptr, x.kw, "must be a number or a boolean")
		}
	}
	var sym Sym
	if multiple > 1 {
		return c.multiples(multiple, lo, hi, ptr)
	}
	if t == "integer" || multiple == 1 {
		sym, err = c.b.Integer(lo, hi)
	} else {
		sym, err = c.b.Number(lo, hi)
	}
	if err != nil {
		if lo != nil || hi != nil {
			return Sym{}, errFalse
		}
		return Sym{}, c.fail(ptr, "type", "%v", err)
	}
	return sym, nil
}

// maxMultipleOf bounds an integral multipleOf (a rule per remainder).
const maxMultipleOf = 1000

// multiples is the integers that are multiples of k (k > 1), written
// without a fraction or exponent (stricter than JSON, which also writes
// 30 as 3e1 or 30.0): the decimal digits read left to right with the
// remainder modulo k as the state. Bounds are supported only as a lower
// bound of 0 or 1 (non-negative, positive).
func (c *schemaCompiler) multiples(k int, lo, hi *Bound, ptr string) (Sym, error) {
	negative, zero := true, true
	if lo != nil {
		switch {
		case (lo.Value == "0" && !lo.Exclusive) || lo.Value == "0.0" && !lo.Exclusive:
			negative = false
		case (lo.Value == "0" && lo.Exclusive) || (lo.Value == "1" && !lo.Exclusive):
			negative, zero = false, false
		default:
			return Sym{}, c.fail(ptr, "multipleOf", "not supported together with minimum %s", lo.Value)
		}
	}
	if hi != nil {
		return Sym{}, c.fail(ptr, "multipleOf", "not supported together with maximum")
	}
	rem := make([]int, k) // rule of the digits after a prefix of remainder r
	for r := range rem {
		rem[r] = c.b.Rule("multiple")
	}
	for r := range rem {
		if r == 0 {
			c.b.Alt(rem[r])
		}
		var to []int
		sets := map[int]*ByteSet{}
		for d := range 10 {
			t := (10*r + d) % k
			if sets[t] == nil {
				sets[t] = &ByteSet{}
				to = append(to, t)
			}
			sets[t].Add(byte('0' + d))
		}
		for _, t := range to {
			c.b.Alt(rem[r], T(*sets[t]), N(rem[t]))
		}
	}
	// The first digit is not 0 (JSON has no leading zeros).
	first := c.b.Rule("nonzero multiple")
	for d := 1; d <= 9; d++ {
		c.b.Alt(first, B(byte('0'+d)), N(rem[d%k]))
	}
	alts := [][]Sym{{N(first)}}
	if zero {
		alts = append(alts, []Sym{B('0')})
	}
	if negative {
		alts = append(alts, []Sym{B('-'), N(first)})
	}
	return c.b.Choice("multiples", alts...), nil
}

// tighter reports whether bound a excludes at least what b does (lower
// bounds when lower is set).
func tighter(a, b *Bound, lower bool) bool {
	ra, _ := new(big.Rat).SetString(a.Value)
	rb, _ := new(big.Rat).SetString(b.Value)
	if ra == nil || rb == nil {
		return false
	}
	cmp := ra.Cmp(rb)
	if lower {
		return cmp > 0 || (cmp == 0 && a.Exclusive)
	}
	return cmp < 0 || (cmp == 0 && a.Exclusive)
}

func (c *schemaCompiler) compileArray(s *object, ptr string, depth int) (Sym, error) {
	if u, ok := s.get("uniqueItems"); ok && u == true {
		return Sym{}, c.fail(ptr, "uniqueItems", "not supported")
	}
	minItems, _, err := c.count(s, "minItems", ptr)
	if err != nil {
		return Sym{}, err
	}
	maxItems, hasMax, err := c.count(s, "maxItems", ptr)
	if err != nil {
		return Sym{}, err
	}
	if !hasMax {
		maxItems = -1
	}
	if hasMax && maxItems < minItems {
		return Sym{}, errFalse
	}
	// The prefix (prefixItems; the draft-4 array form of items) and the
	// schema of the items after it (items; draft 4's additionalItems).
	var prefix []any
	var rest any = true
	prefixKw := "prefixItems"
	if p, ok := s.get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return Sym{}, c.fail(ptr, "prefixItems", "must be an array of schemas")
		}
		prefix = list
		if it, ok := s.get("items"); ok {
			rest = it
		}
	} else if it, ok := s.get("items"); ok {
		if list, isList := it.([]any); isList {
			prefix, prefixKw = list, "items"
			if ai, ok := s.get("additionalItems"); ok {
				rest = ai
			}
		} else {
			rest = it
		}
	}
	var prefixSyms []Sym
	for i, p := range prefix {
		sym, err := c.compile(p, ptr+"/"+prefixKw+"/"+strconv.Itoa(i), depth+1)
		if err != nil {
			var se *SchemaError
			if errors.As(err, &se) && strings.Contains(se.Msg, "allows no value") {
				// Items from here on cannot exist.
				if minItems > i {
					return Sym{}, errFalse
				}
				maxItems, hasMax = i, true
				break
			}
			return Sym{}, err
		}
		prefixSyms = append(prefixSyms, sym)
	}
	var restSym Sym
	restOK := true
	if len(prefixSyms) < len(prefix) {
		restOK = false
	} else if rb, ok := rest.(bool); ok && !rb {
		restOK = false
	} else {
		restPtr := ptr + "/items"
		if prefixKw == "items" {
			restPtr = ptr + "/additionalItems"
		}
		restSym, err = c.compile(rest, restPtr, depth+1)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) || !strings.Contains(se.Msg, "allows no value") {
				return Sym{}, err
			}
			restOK = false
		}
	}
	if !restOK {
		if !hasMax || maxItems > len(prefixSyms) {
			maxItems, hasMax = len(prefixSyms), true
		}
		if minItems > maxItems {
			return Sym{}, errFalse
		}
	}
	// tail(i): the items from index i on, each after a comma when i > 0.
	var tail func(i int) Sym
	tail = func(i int) Sym {
		sep := func(s Sym) []Sym {
			if i == 0 {
				return []Sym{s}
			}
			return []Sym{B(','), s}
		}
		if i >= len(prefixSyms) {
			if !restOK || (hasMax && maxItems <= i) {
				return c.b.Seq("end", c.empty())
			}
			lo := max(0, minItems-i)
			hi := -1
			if hasMax {
				hi = maxItems - i
			}
			more := c.b.Seq("more items", B(','), restSym)
			if i > 0 {
				return c.b.Repeat(more, lo, hi)
			}
			// The first item has no comma.
			first := c.b.Seq("items", restSym, c.b.Repeat(more, max(0, lo-1), max(-1, hi-1)))
			if lo == 0 {
				return c.b.Opt(first)
			}
			return first
		}
		if hasMax && maxItems <= i {
			return c.b.Seq("end", c.empty())
		}
		next := append(sep(prefixSyms[i]), tail(i+1))
		if i < minItems {
			return c.b.Seq("item", next...)
		}
		return c.b.Opt(c.b.Seq("item", next...))
	}
	return c.b.Seq("array", B('['), tail(0), B(']')), nil
}

// empty is the symbol of the empty string.
func (c *schemaCompiler) empty() Sym {
	nt := c.b.Rule("empty")
	c.b.Alt(nt)
	return N(nt)
}

func (c *schemaCompiler) compileProperties(s *object, ptr string, depth int) (Sym, error) {
	var props *object
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(*object); !ok {
			return Sym{}, c.fail(ptr, "properties", "must be an object")
		}
	} else {
		props = &object{vals: map[string]any{}}
	}
	var required []string
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return Sym{}, c.fail(ptr, "required", "must be an array of strings")
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return Sym{}, c.fail(ptr, "required", "must be an array of strings")
			}
			required = append(required, name)
		}
	}
	extra := any(true)
	if a, ok := s.get("additionalProperties"); ok {
		extra = a
	}
	extraOK := true
	var extraSym Sym
	if ab, ok := extra.(bool); ok && !ab {
		extraOK = false
	} else {
		sym, err := c.compile(extra, ptr+"/additionalProperties", depth+1)
		var se *SchemaError
		if errors.As(err, &se) && strings.Contains(se.Msg, "allows no value") {
			extraOK = false
		} else if err != nil {
			return Sym{}, err
		}
		extraSym = sym
	}
	// A required property that is not declared is an additional one that
	// must appear: it becomes a declared one whose schema is what an
	// additional key of its name follows (the patterns it matches, else
	// additionalProperties).
	var implied map[string]bool
	for _, r := range required {
		if _, ok := props.vals[r]; !ok {
			if implied == nil {
				implied = map[string]bool{}
				props = &object{keys: slices.Clone(props.keys), vals: maps.Clone(props.vals)}
			}
			implied[r] = true
			props.keys = append(props.keys, r)
			props.vals[r] = nil
		}
	}
	type member = orderMember
	// patternProperties: the patterns, in order, and their schemas.
	var patterns []string
	var patternSchemas []any
	if pp, ok := s.get("patternProperties"); ok {
		po, ok := pp.(*object)
		if !ok {
			return Sym{}, c.fail(ptr, "patternProperties", "must be an object")
		}
		for _, k := range po.keys {
			patterns = append(patterns, k)
			patternSchemas = append(patternSchemas, po.vals[k])
		}
	}
	// withPatterns is schema v of a key that matches the patterns in (by
	// index): every schema applies.
	withPatterns := func(v any, in []int, at string) (any, error) {
		for _, i := range in {
			if v == nil {
				v = patternSchemas[i]
				continue
			}
			m, err := c.merge(v, patternSchemas[i], at, depth+1)
			if err != nil {
				return nil, err
			}
			v = m
		}
		return v, nil
	}
	var members []member
	for _, k := range props.keys {
		req := slices.Contains(required, k)
		schema := props.vals[k]
		var in []int
		if len(patterns) > 0 {
			var err error
			if in, err = patternsMatching(patterns, k); err != nil {
				return Sym{}, c.fail(ptr, "patternProperties", "%v", err)
			}
			if schema, err = withPatterns(schema, in, ptr+"/properties/"+escapePointer(k)); err != nil {
				return Sym{}, err
			}
		}
		if implied[k] && len(in) == 0 {
			if !extraOK {
				return Sym{}, errFalse // a required key no schema allows
			}
			schema = extra
		}
		sym, err := c.compile(schema, ptr+"/properties/"+escapePointer(k), depth+1)
		var se *SchemaError
		if errors.As(err, &se) && strings.Contains(se.Msg, "allows no value") {
			if req {
				return Sym{}, errFalse
			}
			continue // it must not appear
		}
		if err != nil {
			return Sym{}, err
		}
		members = append(members, member{c.b.Seq("property", c.stringLiteral(k), B(':'), sym), req, k})
	}
	nRequired := 0
	for _, m := range members {
		if m.required {
			nRequired++
		}
	}
	// Property counts: objects taken in any order count their members
	// (anyOrder); the others support only bounds their grammar meets
	// anyway.
	counts := propertyCounts{min: 0, max: -1}
	countsKeyword := "" // a count only the any-order subsets can follow
	if _, ok := s.get("minProperties"); ok {
		n, _, err := c.count(s, "minProperties", ptr)
		if err != nil {
			return Sym{}, err
		}
		counts.min = n
		if n > nRequired {
			countsKeyword = "minProperties"
		}
	}
	if _, ok := s.get("maxProperties"); ok {
		n, _, err := c.count(s, "maxProperties", ptr)
		if err != nil {
			return Sym{}, err
		}
		counts.max = n
		if extraOK || len(patterns) > 0 || n < len(members) {
			countsKeyword = "maxProperties"
		}
	}
	if counts.min > maxCountedProperties || counts.max > maxCountedProperties {
		counts.min, counts.max = min(counts.min, maxCountedProperties+1), min(counts.max, maxCountedProperties+1)
		if counts.min > maxCountedProperties || (counts.max > maxCountedProperties && (extraOK || len(patterns) > 0)) {
			return Sym{}, c.fail(ptr, "minProperties", "property counts beyond %d are not supported", maxCountedProperties)
		}
		if counts.max > maxCountedProperties {
			counts.max = -1 // the declared members alone cannot exceed it
		}
	}
	// Additional members: keys that are not declared (the declared ones
	// are taken by their own schemas), anywhere among the declared ones.
	var extraMember Sym
	switch {
	case len(patterns) > 0:
		regions, err := c.keyRegions(patterns, props.keys, ptr)
		if err != nil {
			return Sym{}, err
		}
		var alts [][]Sym
		for _, r := range regions {
			val := extraSym
			if len(r.patterns) == 0 {
				if !extraOK {
					continue
				}
			} else {
				schema, err := withPatterns(nil, r.patterns, ptr+"/patternProperties")
				if err != nil {
					return Sym{}, err
				}
				val, err = c.compile(schema, ptr+"/patternProperties/"+escapePointer(patterns[r.patterns[0]]), depth+1)
				var se *SchemaError
				if errors.As(err, &se) && strings.Contains(se.Msg, "allows no value") {
					continue // such keys must not appear
				}
				if err != nil {
					return Sym{}, err
				}
			}
			alts = append(alts, []Sym{r.key, B(':'), val})
		}
		extraOK = len(alts) > 0
		if extraOK {
			extraMember = c.b.Choice("pattern property", alts...)
		}
	case extraOK:
		key, err := c.keyExcept(props.keys)
		if err != nil {
			return Sym{}, err
		}
		extraMember = c.b.Seq("additional property", key, B(':'), extraSym)
	}
	// In the schema's order: after(i) is what may follow a written
	// member when the next declared one is i: nothing (when no required
	// member is left), or a comma and rest(i). rest(i) is one member and
	// what follows it: an additional one (which stays at i), or the
	// declared member j ≥ i, skipping the optional ones before it. So
	// every member has one parse, and the alternatives for the next key
	// are predicted only after its comma (a set inside a value holds O(1)
	// items of the object, not one per member left). The grammar has
	// O(members²) alternatives.
	afterMemo, restMemo := map[int]Sym{}, map[int]Sym{}
	optionalFrom := make([]bool, len(members)+1) // members[i:] all optional
	optionalFrom[len(members)] = true
	for i := len(members) - 1; i >= 0; i-- {
		optionalFrom[i] = optionalFrom[i+1] && !members[i].required
	}
	var after, rest func(i int) Sym
	after = func(i int) Sym {
		if s, ok := afterMemo[i]; ok {
			return s
		}
		nt := c.b.Rule("members")
		afterMemo[i] = N(nt)
		if optionalFrom[i] {
			c.b.Alt(nt)
		}
		if i < len(members) || extraOK {
			c.b.Alt(nt, B(','), rest(i))
		}
		return N(nt)
	}
	rest = func(i int) Sym {
		if s, ok := restMemo[i]; ok {
			return s
		}
		nt := c.b.Rule("member")
		restMemo[i] = N(nt)
		if extraOK {
			c.b.Alt(nt, extraMember, after(i))
		}
		for j := i; j < len(members) && c.b.err == nil; j++ {
			c.b.Alt(nt, members[j].sym, after(j+1))
			if members[j].required {
				break
			}
		}
		return N(nt)
	}
	deps, err := c.dependencies(s, ptr, members, extraOK)
	if err != nil {
		return Sym{}, err
	}
	sets, one, err := c.requiredSets(s, ptr, members)
	if err != nil {
		return Sym{}, err
	}
	if len(members) <= maxAnyOrder {
		return c.b.Seq("object", B('{'), c.anyOrder(members, extraOK, extraMember, deps, counts, sets, one), B('}')), nil
	}
	if cost := len(members) << len(members); len(members) <= maxBudgetedOrder && cost <= anyOrderBudget-c.orderBudget {
		c.orderBudget += cost
		return c.b.Seq("object", B('{'), c.anyOrder(members, extraOK, extraMember, deps, counts, sets, one), B('}')), nil
	}
	// In the schema's order: what only the subsets follow fails.
	why := countsKeyword
	switch {
	case deps != nil:
		why = "dependentRequired"
	case sets != nil:
		why = "oneOf"
	}
	if why != "" {
		return Sym{}, c.fail(ptr, why, "not supported on objects of more than %d properties (or past the schema's budget of %d alternatives for objects in any order)", maxAnyOrder, anyOrderBudget)
	}
	body := c.b.Rule("members")
	if optionalFrom[0] {
		c.b.Alt(body)
	}
	if len(members) > 0 || extraOK {
		c.b.Alt(body, rest(0))
	}
	return c.b.Seq("object", B('{'), N(body), B('}')), nil
}

// dependencies reads dependentRequired (and the array form of draft 4-7's
// dependencies) as, per member, the members it needs; nil when there are
// none. They are enforced by anyOrder's subsets, so only for objects of at
// most maxBudgetedOrder members (within the budget) whose keys involved
// are all declared (an
// undeclared trigger is fine when no additional key may appear).
func (c *schemaCompiler) dependencies(s *object, ptr string, members []orderMember, extraOK bool) ([]uint32, error) {
	var deps []uint32
	for _, kw := range []string{"dependentRequired", "dependencies"} {
		v, ok := s.get(kw)
		if !ok {
			continue
		}
		o, ok := v.(*object)
		if !ok {
			return nil, c.fail(ptr, kw, "must be an object")
		}
		for _, trigger := range o.keys {
			list, ok := o.vals[trigger].([]any)
			if !ok {
				return nil, c.fail(ptr, kw, "schema dependencies are not supported")
			}
			ti := slices.IndexFunc(members, func(m orderMember) bool { return m.name == trigger })
			if ti < 0 {
				if extraOK {
					return nil, c.fail(ptr, kw, "a dependency on %q, which is not a declared property, is not supported", trigger)
				}
				continue // the trigger cannot appear
			}
			if len(members) > maxBudgetedOrder {
				return nil, c.fail(ptr, kw, "not supported on objects of more than %d properties", maxBudgetedOrder)
			}
			if deps == nil {
				deps = make([]uint32, len(members))
			}
			for _, d := range list {
				name, ok := d.(string)
				if !ok {
					return nil, c.fail(ptr, kw, "must list property names")
				}
				di := slices.IndexFunc(members, func(m orderMember) bool { return m.name == name })
				if di < 0 {
					return nil, c.fail(ptr, kw, "%q needs %q, which is not a declared property: not supported", trigger, name)
				}
				deps[ti] |= 1 << di
			}
		}
	}
	return deps, nil
}

// propertyCounts are minProperties and maxProperties (-1: none).
type propertyCounts struct{ min, max int }

// maxCountedProperties bounds the property counts an object grammar
// follows (a rule per count).
const maxCountedProperties = 64

// maxAnyOrder is the most declared properties an object takes in any
// order: its grammar has a rule per subset of them written so far (each at
// most once, the required ones before the end), n·2ⁿ alternatives. Objects
// with more take them in the schema's order.
const maxAnyOrder = 6

// Objects of up to maxBudgetedOrder declared properties take them in any
// order too while the schema's larger objects together cost at most
// anyOrderBudget alternatives (n·2ⁿ each); beyond that, in order (a
// stricter grammar, never a looser one).
const (
	maxBudgetedOrder = 10
	anyOrderBudget   = 1 << 15
)

// orderMember is a declared property's member symbol ("name":value).
type orderMember struct {
	sym      Sym
	required bool
	name     string
}

// anyOrder is an object's members, declared ones in any order and each at
// most once, the required ones all present, additional ones (extra, when
// extraOK) anywhere.
//
// deps[i], when set, are the members that must be present when member i
// is (dependentRequired).
// counts bounds the members, declared and additional together. sets, when
// given, are the member sets of anyOf/oneOf branches that only require
// properties: at least one (exactly one, with one) must be complete.
func (c *schemaCompiler) anyOrder(members []orderMember, extraOK bool, extra Sym, deps []uint32, counts propertyCounts, sets []uint32, one bool) Sym {
	var need uint32
	for i, m := range members {
		if m.required {
			need |= 1 << i
		}
	}
	// extras counts the additional members written, up to the bound that
	// matters (beyond it the count makes no difference).
	cap := counts.min
	if counts.max >= 0 {
		cap = max(cap, counts.max)
	}
	complete := func(used uint32, extras int) bool {
		if used&need != need || bits.OnesCount32(used)+extras < counts.min {
			return false
		}
		for i, d := range deps {
			if used&(1<<i) != 0 && used&d != d {
				return false
			}
		}
		if sets != nil {
			n := 0
			for _, set := range sets {
				if used&set == set {
					n++
				}
			}
			return n == 1 || (n > 1 && !one)
		}
		return true
	}
	type state struct {
		used   uint32
		extras int
		first  bool
	}
	fits := func(used uint32, extras int) bool {
		return counts.max < 0 || bits.OnesCount32(used)+extras <= counts.max
	}
	memo := map[state]Sym{}
	var from func(st state) Sym
	from = func(st state) Sym {
		if s, ok := memo[st]; ok {
			return s
		}
		nt := c.b.Rule("members")
		memo[st] = N(nt)
		alts := 0
		next := func(sym Sym, used uint32, extras int) {
			if !fits(used, extras) {
				return
			}
			alts++
			to := from(state{used, min(extras, cap), false})
			if st.first {
				c.b.Alt(nt, sym, to)
			} else {
				c.b.Alt(nt, B(','), sym, to)
			}
		}
		if extraOK {
			next(extra, st.used, st.extras+1)
		}
		for i, m := range members {
			if st.used&(1<<i) == 0 {
				next(m.sym, st.used|1<<i, st.extras)
			}
		}
		if complete(st.used, st.extras) {
			c.b.Alt(nt)
			alts++
		}
		if alts == 0 {
			c.b.Alt(nt, never()) // no object fits the counts
		}
		return N(nt)
	}
	return from(state{first: true})
}

// keyExcept is a JSON string (quotes included) that is none of names: a
// walk of the names' trie that leaves it for free text on any other
// character, and may close the string anywhere but at the end of a name.
// Each transition is a character in any encoding, so a name spelled with
// escapes is still that name (a decoder reads it so). The trie is
// right-linear (a match predicts one node at a time, and a tree's states
// do not repeat anyway), the free text left-recursive (its states do).
// Every character alternative is a text alternative: a key can always go
// on, so masks take plain tokens at a key without walking them.
func (c *schemaCompiler) keyExcept(names []string) (Sym, error) {
	if len(names) == 0 {
		return c.anyString(), nil
	}
	type node struct {
		next map[rune]*node
		end  bool
	}
	root := &node{next: map[rune]*node{}}
	for _, n := range names {
		cur := root
		for _, r := range n {
			if r == utf8.RuneError {
				r = 0xFFFD
			}
			nx, ok := cur.next[r]
			if !ok {
				nx = &node{next: map[rune]*node{}}
				cur.next[r] = nx
			}
			cur = nx
		}
		cur.end = true
	}
	free := c.b.Seq("free key", c.b.JSONText(), B('"'))
	var build func(n *node) Sym
	build = func(n *node) Sym {
		nt := c.b.Rule("key")
		if !n.end {
			c.b.Alt(nt, B('"'))
		}
		others := AnyChar()
		runes := make([]rune, 0, len(n.next))
		for r := range n.next {
			runes = append(runes, r)
		}
		slices.Sort(runes)
		for _, r := range runes {
			c.b.TextAlt(nt, 0, NoBound, c.b.JSONChar(Chars(r)), build(n.next[r]))
			others = others.Minus(Chars(r))
		}
		c.b.TextAlt(nt, 0, NoBound, c.b.JSONChar(others), free)
		return N(nt)
	}
	return c.b.Seq("key", B('"'), build(root)), nil
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// without is s less keyword kw.
func without(s *object, kw string) *object {
	o := &object{vals: map[string]any{}}
	for _, k := range s.keys {
		if k != kw {
			o.keys = append(o.keys, k)
			o.vals[k] = s.vals[k]
		}
	}
	return o
}

// hasConstraints reports whether s has a keyword other than annotations.
func hasConstraints(s *object) bool {
	for _, k := range s.keys {
		if !annotations[k] && (understood[k] || unsupported[k] != "") {
			return true
		}
	}
	return false
}

func (c *schemaCompiler) compileRef(s *object, ref any, ptr string, depth int) (Sym, error) {
	r, ok := ref.(string)
	if !ok {
		return Sym{}, c.fail(ptr, "$ref", "must be a string")
	}
	if !c.refAlone && hasConstraints(without(s, "$ref")) {
		target, err := c.resolve(r, ptr)
		if err != nil {
			return Sym{}, err
		}
		merged, err := c.merge(without(s, "$ref"), target, ptr, depth)
		if err != nil {
			return Sym{}, err
		}
		return c.compile(merged, ptr, depth+1)
	}
	if nt, ok := c.refs[r]; ok {
		if c.expanding[r] {
			return Sym{}, c.fail(ptr, "$ref", "%q refers to itself without any structure in between", r)
		}
		return N(nt), nil
	}
	target, err := c.resolve(r, ptr)
	if err != nil {
		return Sym{}, err
	}
	nt := c.b.Rule("ref " + r)
	c.refs[r] = nt
	c.expanding[r] = true
	// The cycle guard is lifted inside arrays and objects (compileType),
	// where recursion makes progress.
	sym, err := c.compile(target, strings.TrimPrefix(r, "#"), depth+1)
	delete(c.expanding, r)
	if err != nil {
		return Sym{}, err
	}
	c.b.Alt(nt, sym)
	return N(nt), nil
}

// resolve finds a local $ref ("#", "#/a/b", "#/$defs/x").
func (c *schemaCompiler) resolve(ref, ptr string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, c.fail(ptr, "$ref", "only references within the schema (#/...) are supported, got %q", ref)
	}
	cur := c.root
	path := strings.TrimPrefix(ref, "#")
	if path == "" {
		return cur, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, c.fail(ptr, "$ref", "anchors are not supported: %q", ref)
	}
	for _, part := range strings.Split(path[1:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if u, err := url.PathUnescape(part); err == nil {
			part = u
		}
		switch v := cur.(type) {
		case *object:
			next, ok := v.get(part)
			if !ok {
				return nil, c.fail(ptr, "$ref", "%q does not resolve", ref)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return nil, c.fail(ptr, "$ref", "%q does not resolve", ref)
			}
			cur = v[i]
		default:
			return nil, c.fail(ptr, "$ref", "%q does not resolve", ref)
		}
	}
	return cur, nil
}

// requiredOfKey holds, in an object schema being compiled, the property
// sets of anyOf/oneOf branches that only require properties (a
// requiredOf); it is no JSON Schema keyword (JSON keys cannot hold NUL
// bytes unescaped, and decodeOrdered keeps them escaped apart).
const requiredOfKey = "\x00requiredOf"

// requiredOf is what requiredOfKey holds.
type requiredOf struct {
	sets [][]string
	one  bool // oneOf: exactly one set complete; anyOf: at least one
}

// requiredOnly returns the required lists of anyOf/oneOf branches that say
// nothing else (annotations aside): {"required": ["a"]}, {"required":
// ["b", "c"]}, the "one of these keys" idiom.
func requiredOnly(list []any) ([][]string, bool) {
	var sets [][]string
	for _, b := range list {
		o, ok := b.(*object)
		if !ok {
			return nil, false
		}
		var set []string
		for _, k := range o.keys {
			if annotations[k] {
				continue
			}
			if k != "required" {
				return nil, false
			}
			names, ok := o.vals[k].([]any)
			if !ok {
				return nil, false
			}
			for _, n := range names {
				name, ok := n.(string)
				if !ok {
					return nil, false
				}
				set = append(set, name)
			}
		}
		sets = append(sets, set)
	}
	return sets, true
}

// compileRequiredOf compiles s whose anyOf/oneOf (kw) branches only
// require properties: objects must complete one of the sets (exactly one
// for oneOf), enforced by the any-order object grammar's subsets; other
// values match every branch, so oneOf of two or more refuses them.
func (c *schemaCompiler) compileRequiredOf(s *object, kw string, sets [][]string, ptr string, depth int) (Sym, error) {
	rest := without(s, kw)
	rest.keys = append(rest.keys, requiredOfKey)
	rest.vals[requiredOfKey] = requiredOf{sets: sets, one: kw == "oneOf"}
	if kw == "oneOf" && len(sets) > 1 {
		types, err := c.types(rest, ptr)
		if err != nil {
			return Sym{}, err
		}
		if !slices.Contains(types, "object") {
			return Sym{}, errFalse
		}
		if _, ok := rest.vals["type"]; !ok {
			rest.keys = append(rest.keys, "type")
		}
		rest.vals["type"] = "object"
	}
	return c.compile(rest, ptr, depth)
}

// requiredSets reads requiredOfKey as member sets (nil when absent); every
// name must be a declared member.
func (c *schemaCompiler) requiredSets(s *object, ptr string, members []orderMember) ([]uint32, bool, error) {
	v, ok := s.vals[requiredOfKey]
	if !ok {
		return nil, false, nil
	}
	ro := v.(requiredOf)
	kw := "anyOf"
	if ro.one {
		kw = "oneOf"
	}
	out := make([]uint32, 0, len(ro.sets))
	for _, set := range ro.sets {
		var m uint32
		for _, name := range set {
			i := slices.IndexFunc(members, func(m orderMember) bool { return m.name == name })
			if i < 0 {
				return nil, false, c.fail(ptr, kw, "a branch requires %q, which is not a declared property: not supported", name)
			}
			m |= 1 << i
		}
		out = append(out, m)
	}
	return out, ro.one, nil
}

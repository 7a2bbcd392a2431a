package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
)

// allOf and the constraints beside anyOf/oneOf are compiled by merging
// schemas into one that allows exactly the values both allow. Where the
// merge cannot be exact it fails, naming the keyword.

func (c *schemaCompiler) mergeAllOf(s *object, all any, ptr string, depth int) (*object, error) {
	list, ok := all.([]any)
	if !ok || len(list) == 0 {
		return nil, c.fail(ptr, "allOf", "must be a non-empty array of schemas")
	}
	cur := without(s, "allOf")
	for _, item := range list {
		m, err := c.merge(cur, item, ptr+"/allOf", depth)
		if err != nil {
			return nil, err
		}
		cur = m
	}
	return cur, nil
}

// falseSchema is a schema no value satisfies (merged from contradictions).
func falseSchema() *object {
	return &object{keys: []string{"enum"}, vals: map[string]any{"enum": []any{}}}
}

// concrete resolves a schema for merging: booleans become objects, $ref
// targets are taken in (their siblings merged), allOf is flattened.
func (c *schemaCompiler) concrete(s any, ptr string, depth int) (*object, error) {
	if depth > MaxSchemaDepth {
		return nil, c.fail(ptr, "$ref", "references nested more than %d levels deep while merging", MaxSchemaDepth)
	}
	switch v := s.(type) {
	case bool:
		if v {
			return &object{vals: map[string]any{}}, nil
		}
		return falseSchema(), nil
	case *object:
		if ref, ok := v.get("$ref"); ok {
			r, ok := ref.(string)
			if !ok {
				return nil, c.fail(ptr, "$ref", "must be a string")
			}
			target, err := c.resolve(r, ptr)
			if err != nil {
				return nil, err
			}
			t, err := c.concrete(target, ptr, depth+1)
			if err != nil || c.refAlone {
				return t, err
			}
			return c.merge(without(v, "$ref"), t, ptr, depth+1)
		}
		if all, ok := v.get("allOf"); ok {
			return c.mergeAllOf(v, all, ptr, depth+1)
		}
		return v, nil
	}
	return nil, c.fail(ptr, "", "a schema must be an object or a boolean, got %s", kindOf(s))
}

// merge returns a schema allowing exactly what both a and b allow.
func (c *schemaCompiler) merge(a, b any, ptr string, depth int) (*object, error) {
	if c.steps++; c.steps > maxCompileSteps {
		return nil, c.fail(ptr, "allOf", "the schema is too large to compile")
	}
	x, err := c.concrete(a, ptr, depth+1)
	if err != nil {
		return nil, err
	}
	y, err := c.concrete(b, ptr, depth+1)
	if err != nil {
		return nil, err
	}
	// A key's schema under patternProperties depends on the patterns it
	// matches, which the properties merge below does not follow.
	_, xPat := x.get("patternProperties")
	_, yPat := y.get("patternProperties")
	if (xPat && objectKeywords(y)) || (yPat && objectKeywords(x)) {
		return nil, c.fail(ptr, "patternProperties", "cannot be merged with other object keywords (allOf)")
	}
	out := &object{vals: map[string]any{}}
	set := func(k string, v any) {
		if _, ok := out.vals[k]; !ok {
			out.keys = append(out.keys, k)
		}
		out.vals[k] = v
	}
	keys := slices.Clone(x.keys)
	for _, k := range y.keys {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		xv, inX := x.get(k)
		yv, inY := y.get(k)
		if !inX || !inY {
			v := xv
			if !inX {
				v = yv
			}
			set(k, v)
			continue
		}
		if annotations[k] {
			set(k, xv)
			continue
		}
		switch k {
		case "type":
			t, err := intersectTypes(xv, yv)
			if err != nil {
				return nil, c.fail(ptr, "type", "%v", err)
			}
			if len(t) == 0 {
				return falseSchema(), nil
			}
			set(k, t)
		case "nullable":
			set(k, xv == true && yv == true)
		case "required":
			xl, _ := xv.([]any)
			yl, _ := yv.([]any)
			r := slices.Clone(xl)
			for _, e := range yl {
				if !slices.Contains(r, e) {
					r = append(r, e)
				}
			}
			set(k, r)
		case "enum", "const":
			xs, ys := enumValues(x, k), enumValues(y, k)
			var both []any
			for _, v := range xs {
				if slices.ContainsFunc(ys, func(w any) bool { return sameJSON(v, w) }) {
					both = append(both, v)
				}
			}
			if k == "const" && len(both) == 1 {
				set(k, both[0])
			} else {
				set("enum", both)
			}
		case "minLength", "minItems", "minProperties", "minimum", "exclusiveMinimum":
			v, err := c.extreme(xv, yv, true, ptr, k)
			if err != nil {
				return nil, err
			}
			set(k, v)
		case "maxLength", "maxItems", "maxProperties", "maximum", "exclusiveMaximum":
			v, err := c.extreme(xv, yv, false, ptr, k)
			if err != nil {
				return nil, err
			}
			set(k, v)
		case "items", "additionalProperties":
			if _, list := xv.([]any); list {
				return nil, c.fail(ptr, k, "tuple forms cannot be merged")
			}
			if _, list := yv.([]any); list {
				return nil, c.fail(ptr, k, "tuple forms cannot be merged")
			}
			set(k, &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{xv, yv}}})
		case "properties":
			// Handled below, with additionalProperties.
			set(k, xv)
		default:
			if !sameJSON(xv, yv) {
				return nil, c.fail(ptr, k, "two different values cannot be merged (allOf)")
			}
			set(k, xv)
		}
	}
	// Properties: a property of one side only is also subject to the
	// other side's additionalProperties.
	xp, _ := x.vals["properties"].(*object)
	yp, _ := y.vals["properties"].(*object)
	if xp != nil || yp != nil {
		props := &object{vals: map[string]any{}}
		add := func(k string, v any) {
			if _, ok := props.vals[k]; !ok {
				props.keys = append(props.keys, k)
			}
			props.vals[k] = v
		}
		side := func(p *object, other *object, otherProps *object) {
			if p == nil {
				return
			}
			for _, k := range p.keys {
				if _, done := props.vals[k]; done {
					continue
				}
				var peer any
				if otherProps != nil {
					if v, ok := otherProps.get(k); ok {
						peer = v
					}
				}
				if peer == nil {
					if ap, ok := other.get("additionalProperties"); ok {
						peer = ap
					}
				}
				if peer == nil {
					add(k, p.vals[k])
				} else {
					add(k, &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": []any{p.vals[k], peer}}})
				}
			}
		}
		side(xp, y, yp)
		side(yp, x, xp)
		set("properties", props)
	}
	return out, nil
}

func enumValues(s *object, k string) []any {
	if k == "const" {
		return []any{s.vals[k]}
	}
	l, _ := s.vals[k].([]any)
	return l
}

func sameJSON(a, b any) bool {
	var x, y bytes.Buffer
	compact(&x, a)
	compact(&y, b)
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// extreme picks the tighter of two numeric bounds (the larger lower bound
// when lower is set).
func (c *schemaCompiler) extreme(a, b any, lower bool, ptr, kw string) (any, error) {
	an, ok1 := a.(json.Number)
	bn, ok2 := b.(json.Number)
	if !ok1 || !ok2 {
		if ab, ok := a.(bool); ok {
			if bb, ok := b.(bool); ok {
				return ab || bb, nil // draft 4's exclusive flags
			}
		}
		return nil, c.fail(ptr, kw, "bounds of different kinds cannot be merged")
	}
	ar, ok1 := new(big.Rat).SetString(string(an))
	br, ok2 := new(big.Rat).SetString(string(bn))
	if !ok1 || !ok2 {
		return nil, c.fail(ptr, kw, "must be a number")
	}
	if (ar.Cmp(br) > 0) == lower {
		return an, nil
	}
	return bn, nil
}

func intersectTypes(a, b any) ([]any, error) {
	list := func(v any) ([]string, error) {
		switch v := v.(type) {
		case string:
			return []string{v}, nil
		case []any:
			var out []string
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, errTypeList
				}
				out = append(out, s)
			}
			return out, nil
		}
		return nil, errTypeList
	}
	x, err := list(a)
	if err != nil {
		return nil, err
	}
	y, err := list(b)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, t := range x {
		switch {
		case slices.Contains(y, t):
			out = append(out, t)
		case t == "integer" && slices.Contains(y, "number"), t == "number" && slices.Contains(y, "integer"):
			if !slices.Contains(out, any("integer")) {
				out = append(out, "integer")
			}
		}
	}
	return out, nil
}

var errTypeList = errors.New("must be a string or an array of strings")

// objectKeywords reports whether s says which keys an object may have.
func objectKeywords(s *object) bool {
	for _, k := range []string{"properties", "additionalProperties", "patternProperties"} {
		if _, ok := s.get(k); ok {
			return true
		}
	}
	return false
}

package grammar

import "slices"

// oneOf allows a value that matches exactly one branch. A grammar cannot
// express "not the others", so oneOf compiles only when no value can match
// two branches: when the branches are provably disjoint as written, or once
// each object branch is closed to the properties it declares (which allows
// fewer values, never more). Otherwise it is a compile error.

// oneOfBranches returns the branches of a oneOf to compile as alternatives.
func (c *schemaCompiler) oneOfBranches(branches []*object, ptr string) ([]*object, error) {
	if i, j, ok := c.overlap(branches); !ok {
		return branches, nil
	} else if len(branches) > 64 {
		return nil, c.fail(ptr, "oneOf", "branches %d and %d may both match a value", i, j)
	}
	closed := make([]*object, len(branches))
	for i, b := range branches {
		closed[i] = closeObject(b)
	}
	if i, j, ok := c.overlap(closed); ok {
		return nil, c.fail(ptr, "oneOf", "branches %d and %d may both match a value, which a grammar cannot exclude", i, j)
	}
	return closed, nil
}

// overlap finds two branches that may share a value.
func (c *schemaCompiler) overlap(bs []*object) (int, int, bool) {
	for i := range bs {
		for j := i + 1; j < len(bs); j++ {
			if !c.disjoint(bs[i], bs[j], 0) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

// closeObject is s with additionalProperties false where it allows objects
// and does not say.
func closeObject(s *object) *object {
	if _, ok := s.get("additionalProperties"); ok {
		return s
	}
	if _, ok := s.get("patternProperties"); ok {
		return s
	}
	out := &object{keys: slices.Clone(s.keys), vals: map[string]any{}}
	for k, v := range s.vals {
		out.vals[k] = v
	}
	out.keys = append(out.keys, "additionalProperties")
	out.vals["additionalProperties"] = false
	return out
}

// typeSet is the JSON types s allows, "integer" within "number".
func typeSet(s *object) []string {
	if vals, ok := enumOf(s); ok {
		var ts []string
		for _, v := range vals {
			if t := typeOf(v); !slices.Contains(ts, t) {
				ts = append(ts, t)
			}
		}
		return ts
	}
	var ts []string
	switch t := s.vals["type"].(type) {
	case string:
		ts = []string{t}
	case []any:
		for _, e := range t {
			if name, ok := e.(string); ok {
				ts = append(ts, name)
			}
		}
	default:
		return slices.Clone(allTypes)
	}
	if n, _ := s.get("nullable"); n == true {
		ts = append(ts, "null")
	}
	return ts
}

func enumOf(s *object) ([]any, bool) {
	if v, ok := s.get("const"); ok {
		return []any{v}, true
	}
	if v, ok := s.get("enum"); ok {
		l, _ := v.([]any)
		return l, true
	}
	return nil, false
}

func typesMeet(a, b string) bool {
	return a == b || (a == "integer" && b == "number") || (a == "number" && b == "integer")
}

// disjoint reports whether no value can satisfy both a and b (false when
// it cannot tell). Only what a and b say directly is used: types, enum and
// const, and for objects a property one requires that the other forbids or
// constrains disjointly.
func (c *schemaCompiler) disjoint(a, b *object, depth int) bool {
	if depth > 8 || hasCombinators(a) || hasCombinators(b) {
		return false
	}
	ta, tb := typeSet(a), typeSet(b)
	var common []string
	for _, x := range ta {
		for _, y := range tb {
			if typesMeet(x, y) && !slices.Contains(common, x) {
				common = append(common, x)
			}
		}
	}
	if len(common) == 0 {
		return true
	}
	va, ea := enumOf(a)
	vb, eb := enumOf(b)
	if ea && eb {
		for _, x := range va {
			if slices.ContainsFunc(vb, func(y any) bool { return sameJSON(x, y) }) {
				return false
			}
		}
		return true
	}
	for _, t := range common {
		if t != "object" || !(c.objectsDisjoint(a, b, depth) || c.objectsDisjoint(b, a, depth)) {
			return false
		}
	}
	return true
}

func hasCombinators(s *object) bool {
	for _, k := range []string{"anyOf", "oneOf", "allOf", "$ref", "not", "if"} {
		if _, ok := s.get(k); ok {
			return true
		}
	}
	return false
}

// objectsDisjoint: a requires a property that b forbids, or constrains
// disjointly.
func (c *schemaCompiler) objectsDisjoint(a, b *object, depth int) bool {
	req, _ := a.vals["required"].([]any)
	ap, _ := a.vals["properties"].(*object)
	bp, _ := b.vals["properties"].(*object)
	for _, r := range req {
		name, ok := r.(string)
		if !ok {
			continue
		}
		var bSchema any
		if bp != nil {
			if v, ok := bp.get(name); ok {
				bSchema = v
			}
		}
		if bSchema == nil {
			if extra, ok := b.get("additionalProperties"); ok && extra == false {
				if _, pp := b.get("patternProperties"); !pp {
					return true
				}
			}
			continue
		}
		if bSchema == false {
			return true
		}
		if ap == nil {
			continue
		}
		aSchema, ok := ap.get(name)
		if !ok {
			continue
		}
		x, err1 := c.concrete(aSchema, "#", depth+1)
		y, err2 := c.concrete(bSchema, "#", depth+1)
		if err1 == nil && err2 == nil && c.disjoint(x, y, depth+1) {
			return true
		}
	}
	return false
}

package grammar

import "slices"

// negate returns a schema allowing exactly the values n does not, for the
// forms of "not" a grammar can express: a boolean, {} (nothing allowed),
// a double negation, excluded types, and one property that must be absent.
// Other forms are a compile error naming "not".
func (c *schemaCompiler) negate(n any, ptr string, depth int) (any, error) {
	switch n := n.(type) {
	case bool:
		return !n, nil
	case *object:
		var kws []string
		for _, k := range n.keys {
			if !annotations[k] {
				kws = append(kws, k)
			}
		}
		switch {
		case len(kws) == 0:
			return false, nil
		case len(kws) == 1 && kws[0] == "not":
			return n.vals["not"], nil
		case len(kws) == 1 && kws[0] == "type":
			excluded := typeSet(n)
			if slices.Contains(excluded, "integer") && !slices.Contains(excluded, "number") {
				return nil, c.fail(ptr, "type", "excluding integers but not other numbers is not supported")
			}
			var keep []any
			for _, t := range allTypes {
				if !slices.Contains(excluded, t) && !(t == "integer" && slices.Contains(excluded, "number")) {
					keep = append(keep, t)
				}
			}
			return &object{keys: []string{"type"}, vals: map[string]any{"type": keep}}, nil
		case len(kws) == 1 && kws[0] == "required":
			// {"required": [p]} holds for every non-object and for objects
			// with p: its negation is an object without p.
			names, _ := n.vals["required"].([]any)
			if len(names) != 1 {
				return nil, c.fail(ptr, "required", "the negation of more than one required property is not supported")
			}
			name, ok := names[0].(string)
			if !ok {
				return nil, c.fail(ptr, "required", "must be an array of strings")
			}
			props := &object{keys: []string{name}, vals: map[string]any{name: false}}
			return &object{keys: []string{"type", "properties"}, vals: map[string]any{"type": "object", "properties": props}}, nil
		}
		return nil, c.fail(ptr, "", "not supported: the negation of %v", kws)
	}
	return nil, c.fail(ptr, "", "a schema must be an object or a boolean, got %s", kindOf(n))
}

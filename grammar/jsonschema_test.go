package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestSchema: instances accepted and refused by compiled schemas, one
// feature per case.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		accept       []string
		refuse       []string
	}{
		{"object in any order, each once, extras anywhere", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]}`,
			[]string{`{"a":1}`, `{"a":1,"b":"x"}`, `{"b":"x","a":1}`, `{"z":null,"a":1,"b":"x","y":[]}`, `{"b":"x","z":1,"a":1}`, `{"a":1,"zz":{"q":1}}`},
			[]string{`{}`, `{"b":"x"}`, `{"a":"1"}`, `{"a":1,"a":2}`, `{"a":1,"b":"x","b":"y"}`, `{"b":"x","a":1,"b":"y"}`, `{"a":1}x`}},
		{"seven properties in any order", `{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{}},"required":["a","g"],"additionalProperties":false}`,
			[]string{`{"a":1,"g":2}`, `{"g":2,"c":3,"a":1}`}, []string{`{"a":1}`, `{"a":1,"g":2,"a":3}`}},
		{"more than ten properties in the schema's order", `{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{},"i":{},"j":{},"k":{}},"required":["a","k"],"additionalProperties":false}`,
			[]string{`{"a":1,"k":2}`, `{"a":1,"c":3,"k":2}`}, []string{`{"k":2,"a":1}`, `{"a":1}`, `{"a":1,"k":2,"c":3}`}},
		{"more than ten properties in order, extras anywhere", `{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{},"i":{},"j":{},"k":{"type":"integer"}},"required":["k"],"additionalProperties":{"type":"string"}}`,
			[]string{`{"k":2}`, `{"x":"1","k":2}`, `{"b":1,"x":"1","y":"2","e":3,"z":"","k":4,"w":"5"}`, `{"a":1,"k":2,"x":"y"}`},
			[]string{`{"e":1,"b":2,"k":3}`, `{"b":1,"x":2,"k":3}`, `{"x":"1"}`, `{"k":"2"}`}},
		{"closed object", `{"type":"object","properties":{"a":{"type":"boolean"}},"additionalProperties":false}`,
			[]string{`{}`, `{"a":true}`}, []string{`{"b":1}`, `{"a":true,"b":1}`}},
		{"declared names the keys' trie cannot write escaped", `{"type":"object","properties":{"😀":{"type":"integer"},"q\"":{"type":"integer"}}}`,
			[]string{`{"😀":1}`, `{"q\"":2}`, `{"x":"s"}`}, []string{`{"""":1}`, `{"😀":"s"}`, `{"q\"":"s"}`, `{"null":1,"":2`}},
		{"escaped key is not the declared one", `{"type":"object","properties":{"a":{"type":"integer"}}}`,
			[]string{`{"\u0061x":"s"}`}, []string{`{"a":"s"}`}},
		{"array bounds", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2}`,
			[]string{`[1]`, `[1,2]`}, []string{`[]`, `[1,2,3]`, `["1"]`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`,
			[]string{`[]`, `["a"]`, `["a",1]`}, []string{`["a",1,2]`, `[1]`}},
		{"string length, raw and escaped", `{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"a\u00e9c"`, `"éé"`}, []string{`"a"`, `"abcd"`}},
		{"enum with mixed types", `{"enum":["a",1,null,{"k":[true]}]}`,
			[]string{`"a"`, `1`, `null`, `{"k":[true]}`, `"\u0061"`}, []string{`"b"`, `2`, `{"k":[false]}`}},
		{"integer range", `{"type":"integer","minimum":-5,"exclusiveMaximum":10}`,
			[]string{`-5`, `0`, `9`}, []string{`-6`, `10`, `1.5`}},
		{"anyOf", `{"anyOf":[{"type":"string"},{"type":"integer","minimum":3}]}`,
			[]string{`"x"`, `3`}, []string{`2`, `true`}},
		{"oneOf of types", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`,
			[]string{`"x"`, `3`}, []string{`3.5`, `null`}},
		{"oneOf closed to its properties", `{"type":"object","oneOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			[]string{`{"a":1}`, `{"b":2}`}, []string{`{"a":1,"b":2}`, `{}`}},
		{"allOf merged", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"a":{"minimum":2}}}]}`,
			[]string{`{"a":2}`}, []string{`{"a":1}`, `{}`}},
		{"recursive $ref", `{"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/n"}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/n"}`,
			[]string{`{"v":1}`, `{"v":1,"next":{"v":2,"next":{"v":3}}}`}, []string{`{"v":1,"next":{}}`}},
		{"not type", `{"not":{"type":["string","null"]}}`, []string{`1`, `[]`, `{}`}, []string{`"x"`, `null`}},
		{"not required", `{"type":"object","not":{"required":["x"]}}`, []string{`{}`, `{"y":1}`}, []string{`{"x":1}`, `{"y":1,"x":2}`}},
		{"double negation", `{"not":{"not":{"type":"boolean"}}}`, []string{`true`}, []string{`1`}},
		{"pattern, unanchored", `{"type":"string","pattern":"[0-9]{3}"}`, []string{`"a123b"`, `"123"`}, []string{`"12a3"`}},
		{"date format", `{"type":"string","format":"date"}`, []string{`"2024-02-29"`}, []string{`"2024-13-01"`}},
		{"a declared key spelled with escapes is still the declared key", `{"type":"object","properties":{"ab":{"type":"integer"}}}`,
			[]string{`{"\u0061b":1}`, `{"a\u0062":1}`, `{"b":"x"}`, `{"\u0061":"x"}`, `{"abc":"x"}`}, []string{`{"\u0061b":"x"}`, `{"a\u0062":"x"}`, `{"\u0061\u0062":[]}`}},
		{"pattern properties, closed", `{"type":"object","patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{}`, `{"x_a":1}`, `{"x_a":1,"x_b":2}`, `{"\u0078_a":1}`}, []string{`{"x_a":"s"}`, `{"y":1}`, `{"\u0078_a":"s"}`, `{"x":1}`}},
		{"pattern properties with declared and additional ones", `{"type":"object","properties":{"x_id":{"type":"string"}},"patternProperties":{"^x_":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
			[]string{`{"y":"s","x_n":3}`, `{}`}, []string{`{"y":1}`, `{"x_n":"s"}`, `{"x_id":"s"}`, `{"x_id":1}`}},
		{"keys matching two patterns follow both", `{"type":"object","patternProperties":{"a":{"type":"integer","minimum":0},"b":{"type":"integer","maximum":10}}}`,
			[]string{`{"ab":5}`, `{"a":11}`, `{"b":-1}`, `{"c":"x"}`}, []string{`{"ab":11}`, `{"ba":-1}`, `{"a":-1}`, `{"b":11}`, `{"a":"x"}`}},
		{"a pattern of any characters", `{"type":"object","patternProperties":{"^.+$":{"type":"string"}}}`,
			[]string{`{"B":"x"}`, `{"":1}`}, []string{`{"B":1}`, `{"BUILD_NUMBER":123}`}},
		{"an unanchored pattern", `{"type":"object","patternProperties":{"[0-9]":{"type":"integer"}}}`,
			[]string{`{"k1":1}`, `{"k":"x"}`, `{"1k":2}`}, []string{`{"k1":"x"}`, `{"9":"x"}`}},
		{"a required property that is not declared", `{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":{"type":"integer"}}`,
			[]string{`{"b":1}`, `{"a":"x","b":2}`, `{"b":2,"c":3}`}, []string{`{}`, `{"a":1}`, `{"b":"x"}`, `{"b":1,"b":2}`}},
		{"a required property a pattern takes", `{"type":"object","patternProperties":{"^x":{"type":"string"}},"required":["xa"],"additionalProperties":false}`,
			[]string{`{"xa":"s"}`, `{"xb":"t","xa":"s"}`}, []string{`{}`, `{"xa":1}`, `{"xb":"t"}`}},
		{"dependentRequired", `{"type":"object","properties":{"a":{},"b":{},"c":{}},"dependentRequired":{"a":["b"]}}`,
			[]string{`{}`, `{"b":1}`, `{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"c":1,"z":2}`}, []string{`{"a":1}`, `{"a":1,"c":2}`}},
		{"dependentRequired on eight properties", `{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{},"e":{},"f":{},"g":{},"h":{}},"dependentRequired":{"h":["a"]},"additionalProperties":false}`,
			[]string{`{"b":1}`, `{"h":1,"a":2}`}, []string{`{"h":1}`, `{"h":1,"b":2}`}},
		{"dependencies, array form", `{"type":"object","properties":{"a":{},"b":{}},"dependencies":{"b":["a"]},"additionalProperties":false}`,
			[]string{`{"a":1}`, `{"a":1,"b":2}`}, []string{`{"b":1}`}},
		{"minProperties and maxProperties", `{"type":"object","properties":{"a":{},"b":{}},"minProperties":2,"maxProperties":3}`,
			[]string{`{"a":1,"b":2}`, `{"a":1,"z":2}`, `{"y":1,"z":2,"b":3}`}, []string{`{}`, `{"a":1}`, `{"z":1}`, `{"a":1,"b":2,"y":3,"z":4}`, `{"w":1,"x":2,"y":3,"z":4}`}},
		{"property counts no object meets", `{"type":"object","properties":{"o":{"type":"object","minProperties":3,"maxProperties":2}}}`, []string{`{}`}, []string{`{"o":{}}`, `{"o":{"a":1,"b":2,"c":3}}`}},
		{"pattern with a length", `{"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":4}`,
			[]string{`"ab"`, `"abcd"`, `"\u0061b"`}, []string{`"a"`, `"abcde"`, `"ab1"`, `""`}},
		{"unanchored pattern with a length", `{"type":"string","pattern":"[0-9]","maxLength":3}`,
			[]string{`"a1b"`, `"1"`, `"\u00e91"`}, []string{`"abc"`, `"a1bc"`, `""`}},
		{"pattern with a minimum length only", `{"type":"string","pattern":"^x","minLength":3}`,
			[]string{`"xyz"`, `"xyzzy"`}, []string{`"xy"`, `"yyy"`}},
		{"oneOf of required properties", `{"properties":{"a":{},"b":{},"c":{}},"oneOf":[{"required":["a"]},{"required":["b","c"]}]}`,
			[]string{`{"a":1}`, `{"c":3,"b":2}`, `{"a":1,"b":2}`}, []string{`{}`, `{"b":2}`, `{"a":1,"b":2,"c":3}`, `1`, `"x"`, `null`}},
		{"anyOf of required properties", `{"properties":{"a":{},"b":{}},"anyOf":[{"required":["a"]},{"description":"b","required":["b"]}]}`,
			[]string{`{"a":1}`, `{"b":1}`, `{"a":1,"b":2}`, `1`}, []string{`{}`, `{"c":1}`}},
		{"pattern and format", `{"type":"string","format":"uri","pattern":"^https?://"}`,
			[]string{`"https://a.b"`, `"http://x"`}, []string{`"ftp://x"`, `"https//a"`, `"https://a b"`}},
		{"format with a length", `{"type":"string","format":"email","maxLength":8}`,
			[]string{`"a@b.co"`}, []string{`"abcdef@g.com"`, `"ab"`}},
		{"uri-reference", `{"type":"string","format":"uri-reference"}`,
			[]string{`"/a/b?c"`, `"../x"`, `"http://a"`, `"#frag"`, `""`}, []string{`"a b"`, `"1a:b"`}},
		{"multipleOf on integers", `{"type":"integer","multipleOf":3}`, []string{`0`, `3`, `-6`, `12`, `99`}, []string{`4`, `-5`, `"3"`, `10`}},
		{"multipleOf with a positive lower bound", `{"type":"integer","multipleOf":5,"minimum":1}`, []string{`5`, `100`}, []string{`0`, `-5`, `7`}},
		{"multipleOf 1 on numbers", `{"type":"number","multipleOf":1}`, []string{`5`, `-2`}, []string{`5.5`}},
		{"date-time without leap seconds", `{"type":"string","format":"date-time"}`, []string{`"2024-02-29T12:30:59Z"`}, []string{`"2024-02-29T12:30:60Z"`, `"2016-12-31T23:59:60Z"`}},
		{"email local part of at most 64 characters", `{"type":"string","format":"email"}`,
			[]string{`"a.b@c.de"`, `"` + strings.Repeat("a", 64) + `@c.de"`}, []string{`"` + strings.Repeat("a", 65) + `@c.de"`, `".a@c.de"`, `"a..b@c.de"`}},
		{"enum and const together (allOf)", `{"allOf":[{"enum":["a","b"]},{"const":"a"}]}`, []string{`"a"`}, []string{`"b"`}},
		{"properties beside a oneOf meet the branches' own", `{"type":"object","properties":{"t":{"enum":["a","b"]}},"oneOf":[{"properties":{"t":{"const":"a"},"x":{"type":"number"}},"required":["x"],"additionalProperties":false},{"properties":{"t":{"const":"b"}},"additionalProperties":false}]}`,
			[]string{`{"t":"a","x":1}`, `{"t":"b"}`, `{"x":1}`}, []string{`{"t":"b","x":1}`, `{"t":"c"}`}},
		{"a format no specification defines is an annotation", `{"type":"string","format":"int32","maxLength":3}`, []string{`"abc"`, `""`}, []string{`"abcd"`, `3`}},
		{"nullable", `{"type":"string","nullable":true}`, []string{`"x"`, `null`}, []string{`1`}},
	} {
		g, err := CompileSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		for _, in := range tc.accept {
			if !accepts(g, []byte(in)) {
				t.Errorf("%s: %s refused", tc.name, in)
			}
		}
		for _, in := range tc.refuse {
			if accepts(g, []byte(in)) {
				t.Errorf("%s: %s accepted", tc.name, in)
			}
		}
	}
}

// TestSchemaErrors: what cannot be honoured is refused with the keyword and
// the JSON pointer, never compiled loosely.
func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct{ schema, pointer, keyword string }{
		{`{"type":"object","properties":{"a":{"if":{}}}}`, "/properties/a", "if"},
		{`{"oneOf":[{"type":"object"},{"type":"object","properties":{"a":{}}}]}`, "", "oneOf"},
		{`{"type":"string","format":"iri"}`, "", "format"},
		{`{"type":"array","items":{"uniqueItems":true,"type":"array"}}`, "/items", "uniqueItems"},
		{`{"$ref":"http://example.com/s.json"}`, "", "$ref"},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "", "$ref"},
		{`{"type":"frog"}`, "", "type"},
		{`{"type":"object","patternProperties":{"\\bx":{}}}`, "", "patternProperties"},
		{`{"allOf":[{"patternProperties":{"^x":{}}},{"properties":{"a":{}}}]}`, "", "patternProperties"},
		{`{"type":"object","properties":{"a":{}},"dependencies":{"a":{"required":["b"]}}}`, "", "dependencies"},
		{`{"type":"object","properties":{"a":{}},"dependentRequired":{"a":["b"]}}`, "", "dependentRequired"},
		{`{"not":{"enum":[1]}}`, "/not", ""},
	} {
		_, err := CompileSchema([]byte(tc.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a SchemaError", tc.schema, err)
			continue
		}
		if !strings.HasSuffix(se.Pointer, tc.pointer) || se.Keyword != tc.keyword {
			t.Errorf("%s: error at %q keyword %q (%v), want %q %q", tc.schema, se.Pointer, se.Keyword, err, tc.pointer, tc.keyword)
		}
	}
	if _, err := CompileSchema([]byte(`{"type":`)); err == nil {
		t.Error("invalid JSON compiled")
	}
}

// TestNoDeadEnds: every prefix the matcher takes can be completed, so a
// mask never leads a sequence where nothing may follow: a bounded pattern
// refuses the character after which its match no longer fits, and an
// object no count allows refuses its opening brace.
func TestNoDeadEnds(t *testing.T) {
	for _, tc := range []struct{ schema, prefix string }{
		{`{"type":"string","pattern":"^a+b$","maxLength":3}`, `"aaa`},
		{`{"type":"string","pattern":"[.]___","minLength":2,"maxLength":6}`, `"xxx.`},
		{`{"type":"object","properties":{"o":{"type":"object","minProperties":3,"maxProperties":2}}}`, `{"o":{`},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"^x$","minLength":2}}}`, `{"a":"`},
	} {
		g, err := CompileSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if m := NewMatcher(g); m.AdvanceBytes([]byte(tc.prefix)) {
			t.Errorf("%s: the dead-end prefix %s was taken", tc.schema, tc.prefix)
		}
	}
	// A schema no value meets is refused, not compiled into a grammar no
	// output can follow.
	if _, err := CompileSchema([]byte(`{"type":"object","minProperties":3,"maxProperties":2}`)); err == nil || !strings.Contains(err.Error(), "allows no value") {
		t.Errorf("an unsatisfiable schema: %v", err)
	}
}

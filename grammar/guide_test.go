package grammar_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/grammar"
)

// toyVocab: every byte a token of its own (ids 0..255), then the multi-byte
// tokens given, then one stop token (no bytes).
func toyVocab(extra ...string) (tokens [][]byte, ids map[string]int32, stop int32) {
	ids = map[string]int32{}
	for c := range 256 {
		tokens = append(tokens, []byte{byte(c)})
	}
	for _, e := range extra {
		ids[e] = int32(len(tokens))
		tokens = append(tokens, []byte(e))
	}
	stop = int32(len(tokens))
	tokens = append(tokens, nil)
	return tokens, ids, stop
}

func tokenOf(ids map[string]int32, s string) int32 {
	if id, ok := ids[s]; ok {
		return id
	}
	if len(s) != 1 {
		panic("no token " + s)
	}
	return int32(s[0])
}

// TestGuide follows outputs token by token through plans: at every step
// the chosen token must be in the mask (or, for the cases marked refused,
// out of it), and the stop token is allowed exactly where the plan says.
func TestGuide(t *testing.T) {
	tokens, ids, stop := toyVocab("<think>", "</think>", "</think>{", "</think>x", `{"a":`, "<tool_call>", "<tool_call>{", "<tool_call>x", "}</tool_call>")
	gs := grammar.NewGuides(tokens)
	schema := `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`
	plain := grammar.Plan{Spec: grammar.Spec{JSONSchema: []byte(schema)}}
	after := grammar.Plan{Spec: grammar.Spec{JSONSchema: []byte(schema)}, After: "</think>"}
	call := grammar.Plan{Spec: grammar.Spec{Seq: []grammar.Spec{{JSONSchema: []byte(schema)}, {Text: "</tool_call>"}}}, Trigger: "<tool_call>"}
	optional := grammar.Plan{Spec: grammar.Spec{JSONSchema: []byte(schema)}, After: "</think>", Open: "<think>"}
	type step struct {
		tok      string
		allowed  bool // the token is in the mask
		stopOK   bool // the stop token is in the mask before it
		maskless bool // no mask at all (free output)
	}
	cases := []struct {
		name  string
		plan  grammar.Plan
		steps []step
		end   bool // the stop token is allowed after the last step
	}{
		{"schema", plain, []step{{`{"a":`, true, false, false}, {"1", true, false, false}, {"2", true, false, false}, {"}", true, false, false}}, true},
		{"schema refuses a string", plain, []step{{`{"a":`, true, false, false}, {`"`, false, false, false}}, false},
		{"after reasoning", after, []step{{"h", true, false, false}, {"m", true, false, false}, {"</think>", true, false, false},
			{"\n", true, false, false}, {`{"a":`, true, false, false}, {"7", true, false, false}, {"}", true, false, false}}, true},
		{"a token ending the reasoning and opening the object", after, []step{{"x", true, false, false}, {"</think>{", true, false, false}, {`"`, true, false, false}}, false},
		{"a token ending the reasoning with text the grammar refuses", after, []step{{"x", true, false, false}, {"</think>x", false, false, false}}, false},
		{"reasoning split over tokens", after, []step{{"<", true, false, false}, {"/", true, false, false}, {"think>", false, false, false}}, false},
		{"the model opens its reasoning", optional, []step{{"<think>", true, false, false}, {"h", true, false, false},
			{"</think>", true, false, false}, {`{"a":`, true, false, false}, {"1", true, false, false}, {"}", true, false, false}}, true},
		{"the model answers at once", optional, []step{{`{"a":`, true, false, false}, {"1", true, false, false}, {"}", true, false, false}}, true},
		{"no text before the answer without reasoning", optional, []step{{"h", false, false, false}}, false},
		{"lazy tool call", call, []step{{"h", true, true, false}, {"<tool_call>", true, true, false}, {`{"a":`, true, false, false}, {"1", true, false, false},
			{"}</tool_call>", true, false, false}, {"o", true, true, false}}, true},
		{"lazy: a token opening the call and its object", call, []step{{"<tool_call>{", true, true, false}, {`"`, true, false, false}}, false},
		{"lazy: a token opening the call with text the grammar refuses", call, []step{{"<tool_call>x", false, true, false}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gd, err := gs.Guide(tc.plan.Marshal(), []int32{stop})
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tc.steps {
				if st.tok == "think>" { // not a token: feed the bytes
					for _, c := range []byte(st.tok) {
						if err := gd.Accept(int32(c)); err != nil {
							t.Fatal(err)
						}
					}
					if gd.Free() {
						t.Fatal("free after the trigger's last byte")
					}
					return
				}
				id := tokenOf(ids, st.tok)
				mask, masked := gd.Mask()
				if masked == st.maskless {
					t.Fatalf("step %d (%q): masked %v, want %v", i, st.tok, masked, !st.maskless)
				}
				if masked {
					if got := mask.Has(id); got != st.allowed {
						t.Fatalf("step %d: %q allowed %v, want %v", i, st.tok, got, st.allowed)
					}
					if got := mask.Has(stop); got != st.stopOK {
						t.Fatalf("step %d (%q): stop allowed %v, want %v", i, st.tok, got, st.stopOK)
					}
				}
				if !st.allowed {
					if err := gd.Accept(id); err == nil {
						t.Fatalf("step %d: %q accepted though refused", i, st.tok)
					}
					return
				}
				if err := gd.Accept(id); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
			}
			mask, masked := gd.Mask()
			if got := !masked || mask.Has(stop); got != tc.end {
				t.Fatalf("at the end: stop allowed %v, want %v", got, tc.end)
			}
			if tc.end {
				if err := gd.Accept(stop); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestGuideFree: a lazy plan whose trigger no token runs past leaves the
// free output unmasked (no cost) outside the call.
func TestGuideFree(t *testing.T) {
	tokens, _, stop := toyVocab("ab")
	gs := grammar.NewGuides(tokens)
	gd, err := gs.Guide((&grammar.Plan{Spec: grammar.Spec{Text: "1"}, Trigger: "<t>"}).Marshal(), []int32{stop})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []byte("ab<t>1ab") {
		if _, masked := gd.Mask(); masked != (c == '1') {
			t.Fatalf("before %q: masked %v", c, masked)
		}
		if err := gd.Accept(int32(c)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGuideDone: once the grammar can take nothing more, only the stop
// token is allowed, and without one the mask is empty (the sequence ends).
func TestGuideDone(t *testing.T) {
	tokens, _, stop := toyVocab()
	gs := grammar.NewGuides(tokens)
	enc := (&grammar.Plan{Spec: grammar.Spec{Choice: []string{"yes", "no"}}}).Marshal()
	for _, stops := range [][]int32{{stop}, nil} {
		gd, err := gs.Guide(enc, stops)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []byte("no") {
			if err := gd.Accept(int32(c)); err != nil {
				t.Fatal(err)
			}
		}
		mask, _ := gd.Mask()
		if want := len(stops); mask.Count() != want {
			t.Fatalf("stops %v: %d tokens allowed, want %d", stops, mask.Count(), want)
		}
	}
}

// TestSpecErrors: a spec that does not compile names its request field.
func TestSpecErrors(t *testing.T) {
	gs := grammar.NewGuides([][]byte{{'a'}})
	cases := []struct {
		spec grammar.Spec
		want string
	}{
		{grammar.Spec{Field: "response_format.json_schema.schema", JSONSchema: []byte(`{"type":"object","propertyNames":{"maxLength":3}}`)}, "response_format.json_schema.schema: "},
		{grammar.Spec{Field: "guided_regex", Regex: "a("}, "guided_regex: "},
		{grammar.Spec{Field: "grammar", GBNF: "root ::= foo"}, "grammar: "},
		{grammar.Spec{Field: "guided_choice", Choice: []string{}}, "guided_choice: "},
		{grammar.Spec{Seq: []grammar.Spec{{Text: "a"}, {Field: "tools[0].function.parameters", JSONSchema: []byte(`{"type":"nope"}`)}}}, "tools[0].function.parameters: "},
	}
	for _, tc := range cases {
		err := gs.Check((&grammar.Plan{Spec: tc.spec}).Marshal())
		var se *grammar.SpecError
		if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want a SpecError starting %q", tc.spec, err, tc.want)
		}
	}
}

// TestSpecTooLarge: a schema over MaxSpecBytes is refused at once, before
// any compiling, naming its field.
func TestSpecTooLarge(t *testing.T) {
	big := `{"type":"object","properties":{"a":{"description":"` + strings.Repeat("x", grammar.MaxSpecBytes) + `"}}}`
	_, err := grammar.CompileSpec(&grammar.Spec{Field: "json_schema", JSONSchema: []byte(big)})
	if err == nil || !strings.HasPrefix(err.Error(), "json_schema: too large") {
		t.Fatalf("got %v, want a too-large error on json_schema", err)
	}
}

// TestGuideMarkers: a marker token (private bytes) is written where the
// plan's literal has the marker's text, and never inside a JSON string,
// where the same characters may still be written one by one.
func TestGuideMarkers(t *testing.T) {
	end, _ := grammar.MarkerBytes("<|end|>")
	tokens, _, stop := toyVocab()
	marker := int32(len(tokens))
	tokens = append(tokens, end)
	gs := grammar.NewGuides(tokens)
	plan := grammar.Plan{Spec: grammar.Spec{Seq: []grammar.Spec{{Text: "<|end|>"}, {JSONSchema: []byte(`{"type":"string"}`)}}}}
	gd, err := gs.Guide(plan.Marshal(), []int32{stop})
	if err != nil {
		t.Fatal(err)
	}
	mask, _ := gd.Mask()
	if !mask.Has(marker) || mask.Has('<') {
		t.Fatalf("at the literal: marker allowed %v, '<' allowed %v; want the marker only", mask.Has(marker), mask.Has('<'))
	}
	for _, id := range []int32{marker, '"', '<', '|'} {
		if err := gd.Accept(id); err != nil {
			t.Fatal(err)
		}
	}
	if mask, _ := gd.Mask(); mask.Has(marker) || !mask.Has('e') {
		t.Fatalf("inside the string: marker allowed %v, 'e' allowed %v", mask.Has(marker), mask.Has('e'))
	}
}

// TestTooAmbiguous: a grammar whose every byte costs more than the last
// (root ::= root root | "a": completions grow with the square of the
// length) stops taking bytes once one would pass MaxAdvanceWork, instead
// of slowing every mask after it; the guide then reports why.
func TestTooAmbiguous(t *testing.T) {
	tokens, _, stop := toyVocab()
	gs := grammar.NewGuides(tokens)
	gd, err := gs.Guide((&grammar.Plan{Spec: grammar.Spec{GBNF: `root ::= root root | "a"`}}).Marshal(), []int32{stop})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.ParseGBNF(`root ::= root root | "a"`)
	if err != nil {
		t.Fatal(err)
	}
	m := grammar.NewMatcher(g)
	n := 0
	for m.Advance('a') {
		if n++; n > 5000 {
			t.Fatal("5000 bytes taken: the work bound never applied")
		}
	}
	if !m.TooBig() || n < 100 {
		t.Fatalf("refused after %d bytes, TooBig %v", n, m.TooBig())
	}
	if gd.Err() != nil {
		t.Fatalf("a fresh guide reports %v", gd.Err())
	}
}

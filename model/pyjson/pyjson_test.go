package pyjson

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

var (
	inf  = math.Inf(1)
	ninf = math.Inf(-1)
	nan  = math.NaN()
)

// deepEqual is reflect.DeepEqual with NaN equal to NaN.
func deepEqual(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.Float32, reflect.Float64:
		x, y := a.Float(), b.Float()
		return x == y || math.IsNaN(x) && math.IsNaN(y)
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return deepEqual(a.Elem(), b.Elem())
	case reflect.Slice, reflect.Array:
		if a.Len() != b.Len() || a.Kind() == reflect.Slice && a.IsNil() != b.IsNil() {
			return false
		}
		for i := range a.Len() {
			if !deepEqual(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		if a.Len() != b.Len() || a.IsNil() != b.IsNil() {
			return false
		}
		for _, k := range a.MapKeys() {
			if !deepEqual(a.MapIndex(k), b.MapIndex(k)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		for i := range a.NumField() {
			if !deepEqual(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

type Inner struct {
	Limit []float64 `json:"time_step_limit"`
	Eps   float32   `json:"eps"`
}

type config struct {
	Inner                        // promoted fields
	Name      string             `json:"name"`
	Ptr       *float64           `json:"ptr"`
	Arr       [2]float32         `json:"arr"`
	Scales    map[string]float32 `json:"scales"`
	Any       any                `json:"any"`
	Num       json.Number        `json:"num"`
	Raw       json.RawMessage    `json:"raw"`
	Nested    [][]float64        `json:"nested"`
	CaseMatch float64            // matched case-insensitively
	Skip      float64            `json:"-"`
}

func ptr[T any](v T) *T { return &v }

func TestUnmarshal(t *testing.T) {
	tests := []struct {
		name string
		in   string
		into func() any // a pointer to decode into
		want any        // what it points to afterwards
	}{
		{"mamba2 time_step_limit", `{"time_step_limit": [0.0, Infinity]}`,
			func() any { return new(Inner) }, Inner{Limit: []float64{0, inf}}},
		{"into any", `{"a": [NaN, -Infinity, Infinity, 1e-5], "b": {"c": [[Infinity]]}, "s": "Infinity"}`,
			func() any { return new(any) },
			any(map[string]any{"a": []any{nan, ninf, inf, 1e-5}, "b": map[string]any{"c": []any{[]any{inf}}}, "s": "Infinity"})},
		{"top-level NaN", `NaN`, func() any { return new(float64) }, nan},
		{"top-level -Infinity into float32", " -Infinity\n", func() any { return new(float32) }, float32(ninf)},
		{"top-level Infinity into any", `Infinity`, func() any { return new(any) }, any(inf)},
		{"no spaces", `[Infinity,NaN,-Infinity,1]`, func() any { return new([]float64) }, []float64{inf, nan, ninf, 1}},
		{"newlines and tabs", "[\n\tInfinity\n,\tNaN\r\n]", func() any { return new([]float32) }, []float32{float32(inf), float32(nan)}},
		{"struct fields", `{
			"time_step_limit": [-Infinity, 1e-5, Infinity],
			"eps": NaN,
			"name": "Infinity NaN -Infinity",
			"ptr": -Infinity,
			"arr": [NaN, 2.5],
			"scales": {"x": Infinity, "y": 0.5},
			"any": {"k": [1, NaN]},
			"num": Infinity,
			"raw": {"r": [NaN, "NaN", -Infinity, 3]},
			"nested": [[1, Infinity], [], [NaN]],
			"casematch": -Infinity,
			"Skip": Infinity}`,
			func() any { return new(config) },
			config{
				Inner:     Inner{Limit: []float64{ninf, 1e-5, inf}, Eps: float32(nan)},
				Name:      "Infinity NaN -Infinity",
				Ptr:       ptr(ninf),
				Arr:       [2]float32{float32(nan), 2.5},
				Scales:    map[string]float32{"x": float32(inf), "y": 0.5},
				Any:       map[string]any{"k": []any{1.0, nan}},
				Num:       "Infinity",
				Raw:       json.RawMessage(`{"r": [NaN, "NaN", -Infinity, 3]}`),
				Nested:    [][]float64{{1, inf}, {}, {nan}},
				CaseMatch: ninf,
			}},
		{"strings with escapes untouched", `["Infinity", "\"Infinity\"", "a\\", NaN, "\\\"NaN\\", "\u0049nfinity", "-Infinity"]`,
			func() any { return new([]any) },
			[]any{"Infinity", `"Infinity"`, `a\`, nan, `\"NaN\`, "Infinity", "-Infinity"}},
		{"keys named like tokens", `{"Infinity": NaN, "NaN": [Infinity], "-Infinity": {"x": -Infinity}}`,
			func() any { return new(map[string]any) },
			map[string]any{"Infinity": nan, "NaN": []any{inf}, "-Infinity": map[string]any{"x": ninf}}},
		{"ordinary numbers", `[1e-5, -0.0, 1E+10, -2.5e-3, 123456789, 0]`,
			func() any { return new([]float64) }, []float64{1e-5, 0, 1e10, -2.5e-3, 123456789, 0}},
		{"map of slices", `{"a": [NaN], "b": [1, 2]}`,
			func() any { return new(map[string][]float64) }, map[string][]float64{"a": {nan}, "b": {1, 2}}},
		{"pointer to pointer", `Infinity`, func() any { return new(*float64) }, ptr(inf)},
		{"number into json.Number", `[NaN, 1.5]`, func() any { return new([]json.Number) }, []json.Number{"NaN", "1.5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := tc.into()
			if err := Unmarshal([]byte(tc.in), dst); err != nil {
				t.Fatal(err)
			}
			got := reflect.ValueOf(reflect.ValueOf(dst).Elem().Interface())
			if !deepEqual(got, reflect.ValueOf(tc.want)) {
				t.Errorf("got  %#v\nwant %#v", got.Interface(), tc.want)
			}
			if !Valid([]byte(tc.in)) {
				t.Errorf("Valid = false")
			}
		})
	}
}

func TestUnmarshalKeepsExistingFields(t *testing.T) {
	c := config{Name: "kept", Skip: 7, Inner: Inner{Eps: 1}}
	if err := Unmarshal([]byte(`{"time_step_limit": [Infinity]}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Name != "kept" || c.Skip != 7 || c.Eps != 1 || len(c.Limit) != 1 || !math.IsInf(c.Limit[0], 1) {
		t.Errorf("got %+v", c)
	}
}

// A document may contain the very number chosen as a marker; it must come
// through unchanged.
func TestMarkerCollision(t *testing.T) {
	r := rewrite([]byte(`[NaN]`))
	lex := r.lexemes[0]
	in := `[` + lex + `, Infinity, ` + r.lexemes[1] + `, NaN, ` + r.lexemes[2] + `]`
	var got []float64
	if err := Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	var want []float64
	json.Unmarshal([]byte(`[`+lex+`, 0, `+r.lexemes[1]+`, 0, `+r.lexemes[2]+`]`), &want)
	want[1], want[3] = inf, nan
	if !deepEqual(reflect.ValueOf(got), reflect.ValueOf(want)) {
		t.Errorf("got %v, want %v", got, want)
	}
	var f32 []float32
	if err := Unmarshal([]byte(in), &f32); err != nil {
		t.Fatal(err)
	}
	if !math.IsInf(float64(f32[1]), 1) || !math.IsNaN(float64(f32[3])) || math.IsNaN(float64(f32[0])) || math.IsInf(float64(f32[2]), 0) {
		t.Errorf("float32: got %v", f32)
	}
}

// Without tokens Unmarshal is encoding/json, errors included.
func TestPlainJSONMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{"a": 1, "b": [true, null, "x"], "c": {"d": 1e-5}}`,
		`[1, 2, 3]`,
		`"Infinity"`,
		`{"a": }`,
		`[1, 2`,
		``,
		`{"name": 5}`,
	}
	for _, d := range docs {
		var a, b any
		errA := Unmarshal([]byte(d), &a)
		errB := json.Unmarshal([]byte(d), &b)
		if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() || !reflect.DeepEqual(a, b) {
			t.Errorf("%q: got %v, %v; encoding/json %v, %v", d, a, errA, b, errB)
		}
		var ca, cb config
		errA = Unmarshal([]byte(d), &ca)
		errB = json.Unmarshal([]byte(d), &cb)
		if (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
			t.Errorf("%q into struct: got %v; encoding/json %v", d, errA, errB)
		}
	}
}

func TestMalformed(t *testing.T) {
	tests := []struct {
		in string
		// replaced: the tokens stand alone and get rewritten, so the error
		// is encoding/json's for the document with each token replaced by a
		// number of the same length; otherwise it is encoding/json's for
		// the document as it is.
		replaced bool
	}{
		{`[Infinityx]`, false},
		{`[NaN NaN]`, true},
		{`[1NaN]`, false},
		{`[NaN1]`, false},
		{`[-NaN]`, false},
		{`[+Infinity]`, false},
		{`[Inf]`, false},
		{`[infinity]`, false},
		{`[nan]`, false},
		{`[- Infinity]`, true},
		{`[--Infinity]`, false},
		{`{NaN: 1}`, false},
		{`{"a": NaN`, true},
		{`[Infinity,]`, true},
		{`["Infinity]`, false},
		{`[Infinity] x`, true},
		{`{"a" NaN}`, true},
		{`"\"NaN" NaN`, true},
		{`[NaN, "\"", Infinity, {]`, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			var v any
			err := Unmarshal([]byte(tc.in), &v)
			if err == nil {
				t.Fatalf("no error, decoded %#v", v)
			}
			if Valid([]byte(tc.in)) {
				t.Errorf("Valid = true")
			}
			same := tc.in
			if tc.replaced {
				same = strings.NewReplacer("-Infinity", "-12345678", "Infinity", "12345678", "NaN", "0.0").Replace(tc.in)
			}
			wantErr := json.Unmarshal([]byte(same), &v)
			var se, wse *json.SyntaxError
			if !errors.As(err, &se) || !errors.As(wantErr, &wse) {
				t.Fatalf("error %v, encoding/json on %q: %v; want two syntax errors", err, same, wantErr)
			}
			if se.Offset != wse.Offset {
				t.Errorf("error %v at offset %d, encoding/json on %q says %v at %d", err, se.Offset, same, wantErr, wse.Offset)
			}
			if !tc.replaced && err.Error() != wantErr.Error() {
				t.Errorf("error %q, encoding/json says %q", err, wantErr)
			}
		})
	}
}

func TestTypeErrors(t *testing.T) {
	var s struct {
		N int     `json:"n"`
		S string  `json:"s"`
		F float64 `json:"f"`
	}
	err := Unmarshal([]byte(`{"n": Infinity, "s": NaN, "f": -Infinity}`), &s)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want *json.UnmarshalTypeError", err)
	}
	if te.Field != "n" || te.Value != "number Infinity" || te.Offset != int64(len(`{"n": Infinity`)) {
		t.Errorf("type error %+v (%v)", te, err)
	}
	// encoding/json carries on after a type error; so do the later fields.
	if !math.IsInf(s.F, -1) {
		t.Errorf("F = %v, want -Inf", s.F)
	}
	if err := Unmarshal([]byte(`[NaN]`), nil); err == nil {
		t.Errorf("Unmarshal into nil succeeded")
	}
	var notPtr []float64
	if err := Unmarshal([]byte(`[NaN]`), notPtr); err == nil {
		t.Errorf("Unmarshal into a non-pointer succeeded")
	}
}

func TestCyclicDestination(t *testing.T) {
	type node struct {
		V    float64 `json:"v"`
		Next *node   `json:"next"`
	}
	n := &node{}
	n.Next = n // a cycle json never touches: the walk must still end
	if err := Unmarshal([]byte(`{"v": NaN}`), n); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(n.V) || n.Next != n {
		t.Errorf("got %+v", n)
	}
	self := []any{nil}
	self[0] = self
	holder := struct {
		A any
		B float32
	}{A: self}
	if err := Unmarshal([]byte(`{"B": NaN}`), &holder); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(holder.B)) {
		t.Errorf("B = %v", holder.B)
	}
}

func TestValid(t *testing.T) {
	for in, want := range map[string]bool{
		`[NaN, Infinity, -Infinity]`: true,
		`{"a": [1, {"b": NaN}]}`:     true,
		`"NaN"`:                      true,
		`[NaN`:                       false,
		`[Nan]`:                      false,
		`{Infinity: 1}`:              false,
		``:                           false,
	} {
		if got := Valid([]byte(in)); got != want {
			t.Errorf("Valid(%q) = %v, want %v", in, got, want)
		}
	}
}

func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"a": [NaN, -Infinity, "Infinity"]}`, `[1e-5, Infinity]`, `"\"NaN\\"`, `{NaN: 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		err := Unmarshal(data, &v)
		var se *json.SyntaxError
		if valid := Valid(data); valid == errors.As(err, &se) || !valid && err == nil {
			t.Errorf("Unmarshal err %v but Valid %v", err, valid)
		}
		if json.Valid(data) {
			var w any
			werr := json.Unmarshal(data, &w)
			if !deepEqual(reflect.ValueOf(v), reflect.ValueOf(w)) || (err == nil) != (werr == nil) {
				t.Errorf("plain JSON decoded to %#v, %v; encoding/json gives %#v, %v", v, err, w, werr)
			}
		}
	})
}

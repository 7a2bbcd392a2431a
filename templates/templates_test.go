package templates_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

func mustCompile(t *testing.T, src string, opts ...templates.Option) *templates.Template {
	t.Helper()
	tpl, err := templates.Compile(src, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestRenderGoValues(t *testing.T) {
	tests := []struct {
		name string
		src  string
		vars map[string]any
		want string
	}{
		{"ints and floats", "{{ a }} {{ b }} {{ c }} {{ a is integer }}", map[string]any{"a": 3, "b": 2.0, "c": uint64(math.MaxUint64)}, "3 2.0 18446744073709551615 True"},
		{"map keys sorted", "{{ m|tojson }}", map[string]any{"m": map[string]any{"z": 1, "a": []string{"x"}}}, `{"a": ["x"], "z": 1}`},
		{"ordered dict", "{% for k, v in d.items() %}{{ k }}{{ v }}{% endfor %}", map[string]any{"d": func() *templates.Dict {
			d := templates.NewDict(2)
			d.Set("z", 1)
			d.Set("a", 2)
			return d
		}()}, "z1a2"},
		{"json.Number and RawMessage", "{{ n }} {{ r.k }}", map[string]any{"n": json.Number("1.50"), "r": json.RawMessage(`{"k": [1.0]}`)}, "1.5 [1.0]"},
		{"typed slices and pointers", "{{ s|join(',') }} {{ p }}", map[string]any{"s": []int{1, 2}, "p": ptr("x")}, "1,2 x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustCompile(t, tc.src).Render(tc.vars)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := mustCompile(t, "{{ x }}").Render(map[string]any{"x": struct{}{}}); err == nil {
		t.Fatal("a struct is not a template value")
	}
}

func ptr[T any](v T) *T { return &v }

func TestErrors(t *testing.T) {
	tpl := mustCompile(t, "{% if x %}{{ raise_exception('no ' ~ x) }}{% endif %}{{ y.z }}", templates.WithName("t.jinja"))
	_, err := tpl.Render(map[string]any{"x": "way"})
	var te *templates.Error
	if !errors.As(err, &te) || te.Type != "TemplateError" || te.Message != "no way" || !te.Raised || !errors.Is(err, templates.ErrRaised) {
		t.Fatalf("raise_exception: %#v", err)
	}
	if te.Name != "t.jinja" || te.Line != 1 || !strings.Contains(err.Error(), "t.jinja:1: TemplateError: no way") {
		t.Fatalf("error text %q (name %q line %d)", err.Error(), te.Name, te.Line)
	}
	_, err = tpl.Render(map[string]any{"x": false})
	if !errors.As(err, &te) || te.Type != "UndefinedError" || te.Message != "'y' is undefined" || errors.Is(err, templates.ErrRaised) {
		t.Fatalf("undefined: %v", err)
	}
	_, err = templates.Compile("line one\n{% for x in %}", templates.WithName("bad"))
	if !errors.As(err, &te) || te.Type != "TemplateSyntaxError" || te.Line != 2 {
		t.Fatalf("syntax error: %#v", err)
	}
	_, err = templates.Compile("{{ x|nosuch }}")
	if !errors.As(err, &te) || te.Type != "TemplateAssertionError" {
		t.Fatalf("unknown filter: %v", err)
	}
}

func TestLimits(t *testing.T) {
	tests := []struct {
		src, typ string
		limits   templates.Limits
	}{
		{"{% for i in range(10) %}{{ 'x' * 100 }}{% endfor %}", "LimitError", templates.Limits{MaxOutput: 500}},
		{"{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "LimitError", templates.Limits{MaxSteps: 1000}},
		{"{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "RecursionError", templates.Limits{MaxDepth: 30}},
		{"{{ range(11)|length }}", "OverflowError", templates.Limits{MaxRange: 10}},
		{"{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", "LimitError", templates.Limits{}},
		{"{{ 'x'.center(1000000000) }}", "LimitError", templates.Limits{}},
		{"{{ [1] * 100000000 }}", "LimitError", templates.Limits{}},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			_, err := mustCompile(t, tc.src, templates.WithLimits(tc.limits)).Render(nil)
			var te *templates.Error
			if !errors.As(err, &te) || te.Type != tc.typ {
				t.Fatalf("err = %v, want %s", err, tc.typ)
			}
		})
	}
}

func TestClock(t *testing.T) {
	fixed := time.Date(2024, 2, 29, 23, 5, 9, 0, time.Local)
	tpl := mustCompile(t, "{{ strftime_now('%Y-%m-%d %H:%M:%S %a') }}", templates.WithClock(func() time.Time { return fixed }))
	got, err := tpl.RenderChat(templates.ChatInput{})
	if err != nil || got != "2024-02-29 23:05:09 Thu" {
		t.Fatalf("template clock: %q %v", got, err)
	}
	got, err = tpl.RenderChat(templates.ChatInput{Now: time.Date(2025, 1, 15, 10, 30, 0, 0, time.Local)})
	if err != nil || got != "2025-01-15 10:30:00 Wed" {
		t.Fatalf("request time: %q %v", got, err)
	}
}

func TestChatVariables(t *testing.T) {
	tpl := mustCompile(t, "{{ tools is defined }} {{ tools is none }} {{ documents is none }} {{ add_generation_prompt }} {{ bos_token }} {{ enable_thinking }} {{ messages|length }}")
	st := templates.NewDict(1)
	st.Set("bos_token", "<s>")
	kw := templates.NewDict(1)
	kw.Set("enable_thinking", false)
	got, err := tpl.RenderChat(templates.ChatInput{SpecialTokens: st, Kwargs: kw, AddGenerationPrompt: true})
	if err != nil || got != "True True True True <s> False 0" {
		t.Fatalf("got %q %v", got, err)
	}
	bad := templates.NewDict(1)
	bad.Set("messages", 1)
	_, err = tpl.RenderChat(templates.ChatInput{Kwargs: bad})
	var te *templates.Error
	if !errors.As(err, &te) || te.Type != "TypeError" {
		t.Fatalf("a kwarg named messages: %v", err)
	}
}

// TestConcurrentRender renders one compiled template from many goroutines
// with different inputs (run with -race).
func TestConcurrentRender(t *testing.T) {
	tpl := mustCompile(t, `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}<{{ m.role }}:{{ m.content|trim }}>{% endfor %}{{ ns.n }}{{ strftime_now('%S') }}`)
	inputs := make([]templates.ChatInput, 8)
	want := make([]string, len(inputs))
	for i := range inputs {
		v, err := templates.DecodeJSON(fmt.Appendf(nil, `[{"role": "user", "content": " q%d "}, {"role": "assistant", "content": "a%d"}]`, i, i))
		if err != nil {
			t.Fatal(err)
		}
		inputs[i] = templates.ChatInput{Messages: v.([]any), Now: time.Date(2025, 1, 1, 0, 0, i, 0, time.Local)}
		want[i] = fmt.Sprintf("<user:q%d><assistant:a%d>2%02d", i, i, i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(inputs))
	for g := range inputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				got, err := tpl.RenderChat(inputs[g])
				if err != nil || got != want[g] {
					errs <- fmt.Errorf("goroutine %d: %q %v", g, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestInputsUnchanged checks that rendering never modifies its inputs,
// even with templates that try to.
func TestInputsUnchanged(t *testing.T) {
	v, err := templates.DecodeJSON([]byte(`[{"role": "user", "content": "x", "meta": {"a": [1, 2]}}]`))
	if err != nil {
		t.Fatal(err)
	}
	before := templates.ReprForTest(v)
	for _, src := range []string{
		"{% set m = messages + [1] %}{% set l = messages[0].meta.a + [3] %}{{ m|length }}{{ l }}{{ messages[0].meta.a[::-1] }}",
		"{{ messages.append(1) }}",
		"{{ messages[0].update({'role': 'x'}) }}",
		"{% set messages = messages[1:] %}{{ messages }}",
		"{% set x = messages[0].copy() %}{{ x }}",
	} {
		_, _ = mustCompile(t, src).RenderChat(templates.ChatInput{Messages: v.([]any)})
	}
	if after := templates.ReprForTest(v); after != before {
		t.Fatalf("inputs changed:\n%s\n%s", before, after)
	}
}

func TestDecodeJSON(t *testing.T) {
	tests := []struct {
		in, want string // want is the Python repr
		err      bool
	}{
		{`{"b": 1, "a": 1.0, "c": [1e2, -0, -0.0, 10000000000000000000000]}`, `{'b': 1, 'a': 1.0, 'c': [100.0, 0, -0.0, 10000000000000000000000]}`, false},
		{`{"a": 1, "b": 2, "a": 3}`, `{'a': 3, 'b': 2}`, false},
		{`[NaN, Infinity, -Infinity, 1e400]`, `[nan, inf, -inf, inf]`, false},
		{`"\u00e9\ud83d\ude00\ud800x\n\"\\\/"`, "'é😀\uFFFDx\\n\"\\\\/'", false},
		{` [true, false, null, {}, []] `, `[True, False, None, {}, []]`, false},
		{`[1,]`, "", true},
		{`{"a" 1}`, "", true},
		{`"tab	in string"`, "", true},
		{`[1] 2`, "", true},
		{`01`, "", true},
		{strings.Repeat("[", 2000) + strings.Repeat("]", 2000), "", true},
		{`"\x"`, "", true},
	}
	for _, tc := range tests {
		v, err := templates.DecodeJSON([]byte(tc.in))
		if tc.err {
			if err == nil {
				t.Errorf("%s: want an error", tc.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if got := templates.ReprForTest(v); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
	v, _ := templates.DecodeJSON([]byte(`123456789012345678901234567890`))
	if _, ok := v.(*big.Int); !ok {
		t.Fatalf("a large integer decodes to *big.Int, got %T", v)
	}
}

func TestCompareBoundary(t *testing.T) {
	// A toy tokenizer: one token per word, so a word cut by the boundary
	// changes its token.
	ids := map[string]int32{}
	encode := func(s string) []int32 {
		var out []int32
		for _, w := range strings.SplitAfter(s, " ") {
			if w == "" {
				continue
			}
			if _, ok := ids[w]; !ok {
				ids[w] = int32(len(ids))
			}
			out = append(out, ids[w])
		}
		return out
	}
	tests := []struct {
		h, f                string
		textPrefix, tokPref bool
		chars, tokens       int
	}{
		{"a b ", "a b c", true, true, 4, 2},
		{"a b", "a bc", true, false, 3, 1},
		{"a x ", "a b c", false, false, 2, 1},
		{"é😀 ", "é😀 z", true, true, 3, 1},
		{"", "abc", true, true, 0, 0},
	}
	for _, tc := range tests {
		b := templates.CompareBoundary(tc.h, tc.f, nil, encode)
		if b.TextPrefix != tc.textPrefix || b.TokenPrefix != tc.tokPref || b.CommonChars != tc.chars || b.CommonTokens != tc.tokens {
			t.Errorf("%q/%q: got %+v", tc.h, tc.f, b)
		}
	}
	b := templates.CompareBoundary("a b ", "a b c", []int32{ids["a "], ids["b "], 99}, encode)
	if !b.TokenPrefix || b.CommonTokens != 2 {
		t.Errorf("with prompt ids: %+v", b)
	}
	for _, tc := range []struct {
		h, f  string
		chars int
	}{{"xé", "xè", 1}, {"é😀", "é😁", 1}, {"ab", "abc", 2}, {"abc", "ab", 2}, {"😀", "😀", 1}, {"", "", 0}} {
		if got := templates.CompareBoundary(tc.h, tc.f, nil, nil).CommonChars; got != tc.chars {
			t.Errorf("common prefix of %q and %q: %d chars, want %d", tc.h, tc.f, got, tc.chars)
		}
	}
	b = templates.CompareBoundary("a b ", "a b c", nil, nil)
	if b.HistoryIDs != nil || b.TokenPrefix || !b.TextPrefix {
		t.Errorf("without encoder: %+v", b)
	}
}

func TestHistoryBoundaryAPI(t *testing.T) {
	tpl := mustCompile(t, "{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}{% if add_generation_prompt %}[assistant:{% endif %}")
	v, _ := templates.DecodeJSON([]byte(`[{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]`))
	in := templates.ChatInput{Messages: v.([]any), AddGenerationPrompt: true}
	prompt, err := tpl.RenderChat(in)
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := tpl.HistoryBoundary(in, prompt, nil, nil)
	if err != nil || !ok || b.History != "[user:q1][assistant:a1]" || !b.TextPrefix || b.Messages != 2 || b.CommonChars != len(b.History) {
		t.Fatalf("boundary %+v ok=%v err=%v", b, ok, err)
	}
	if got := templates.LastAssistant(v.([]any)); got != 1 {
		t.Fatalf("LastAssistant = %d", got)
	}
	in.Messages = in.Messages[:1]
	if _, ok, err := tpl.HistoryBoundary(in, "", nil, nil); ok || err != nil {
		t.Fatalf("no assistant message: ok=%v err=%v", ok, err)
	}
	maps := []any{map[string]any{"role": "assistant"}, map[string]any{"role": "user"}}
	if got := templates.LastAssistant(maps); got != 0 {
		t.Fatalf("LastAssistant on Go maps = %d", got)
	}
}

func TestDeepNesting(t *testing.T) {
	deep := strings.Repeat("(", 3000) + "1" + strings.Repeat(")", 3000)
	if _, err := templates.Compile("{{ " + deep + " }}"); err == nil {
		t.Fatal("3000 nested parentheses must be a syntax error, not a stack overflow")
	}
	for _, src := range []string{
		"{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
		"{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l == ns.l + [] }}",
		"{% set ns = namespace(l=[]) %}{% for i in range(5000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l|tojson }}",
		"{% set ns = namespace(l=()) %}{% for i in range(5000) %}{% set ns.l = (ns.l,) %}{% endfor %}{{ {ns.l: 1} }}",
	} {
		_, err := mustCompile(t, src).Render(nil)
		var te *templates.Error
		if !errors.As(err, &te) || te.Type != "RecursionError" {
			t.Errorf("%s: err = %v, want RecursionError", src, err)
		}
	}
}

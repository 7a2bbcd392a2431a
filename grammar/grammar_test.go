package grammar

import (
	"testing"
)

// digits: a JSON-like array of one-digit numbers, [1,2,3], with a
// left-recursive list.
func digitsGrammar(t *testing.T) *Grammar {
	t.Helper()
	var b Builder
	elem := T(Range('0', '9'))
	more := b.Star(b.Seq("more", B(','), elem))
	list := b.Opt(b.Seq("items", elem, more))
	top := b.Rule("array")
	b.Alt(top, B('['), list, B(']'))
	g, err := b.Build(top)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestMatcher(t *testing.T) {
	g := digitsGrammar(t)
	for _, tc := range []struct {
		in       string
		ok, ends bool
	}{
		{"[]", true, true},
		{"[1]", true, true},
		{"[1,2,3]", true, true},
		{"[1,", true, false},
		{"[1,,", false, false},
		{"[12]", false, false},
		{"", true, false},
		{"]", false, false},
		{"[1,2]x", false, false},
	} {
		m := NewMatcher(g)
		ok := m.AdvanceBytes([]byte(tc.in))
		if ok != tc.ok || (ok && m.CanEnd() != tc.ends) {
			t.Errorf("%q: advance %v ends %v; want %v %v", tc.in, ok, m.CanEnd(), tc.ok, tc.ends)
		}
		if !ok && m.Len() != 0 {
			t.Errorf("%q: a refused advance moved the match to %d", tc.in, m.Len())
		}
	}
}

func TestMarkReset(t *testing.T) {
	m := NewMatcher(digitsGrammar(t))
	m.AdvanceBytes([]byte("[1"))
	mark := m.Mark()
	if !m.AdvanceBytes([]byte(",2]")) || !m.CanEnd() {
		t.Fatal("[1,2] refused")
	}
	m.Reset(mark)
	if m.CanEnd() || !m.Advance(']') || !m.CanEnd() {
		t.Fatal("after Reset the match is not at [1")
	}
}

func TestRepeatBounds(t *testing.T) {
	for _, tc := range []struct {
		min, max int
		in       string
		want     bool
	}{
		{2, 4, "a", false}, {2, 4, "aa", true}, {2, 4, "aaaa", true}, {2, 4, "aaaaa", false},
		{0, 0, "", true}, {0, 0, "a", false}, {1, -1, "", false}, {1, -1, "aaaaaaa", true},
		{3, 3, "aaa", true}, {3, 3, "aa", false},
	} {
		var b Builder
		top := b.Rule("top")
		b.Alt(top, b.Repeat(B('a'), tc.min, tc.max))
		g, err := b.Build(top)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMatcher(g)
		got := m.AdvanceBytes([]byte(tc.in)) && m.CanEnd()
		if got != tc.want {
			t.Errorf("a{%d,%d} on %q: %v, want %v", tc.min, tc.max, tc.in, got, tc.want)
		}
	}
}

func TestBuilderLimit(t *testing.T) {
	var b Builder
	b.SetLimit(100)
	top := b.Rule("top")
	b.Alt(top, b.Repeat(B('a'), 0, 1000))
	if _, err := b.Build(top); err == nil {
		t.Fatal("a grammar past the limit was built")
	}
}

// TestMask: over a small vocabulary whose tokens span several lexemes, the
// mask allows exactly the tokens whose every byte the grammar takes, and
// EOS only where it can end.
func TestMask(t *testing.T) {
	g := digitsGrammar(t)
	toks := [][]byte{[]byte("["), []byte("]"), []byte("1"), []byte(","), []byte("1,"), []byte(",2]"), []byte("[]"), []byte("12"), nil, []byte("x")}
	const eos = 8
	v := NewVocab(toks, []int32{eos})
	mask := NewMask(v.Size())
	check := func(at string, want ...int32) {
		t.Helper()
		m := NewMatcher(g)
		if !m.AdvanceBytes([]byte(at)) {
			t.Fatalf("%q refused", at)
		}
		v.Fill(m, mask)
		if m.Len() != len(at) {
			t.Fatalf("Fill moved the match")
		}
		var got []int32
		for id := range int32(len(toks)) {
			if mask.Has(id) {
				got = append(got, id)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("at %q: mask %v, want %v", at, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("at %q: mask %v, want %v", at, got, want)
			}
		}
	}
	check("", 0, 6)
	check("[", 1, 2, 4)
	check("[1", 1, 3, 5)
	check("[1]", eos)
}

package grammar

import (
	"fmt"
	"math/rand"
	"testing"
	"unicode/utf8"
)

// symGrammar builds the grammar whose start rule is s.
func symGrammar(t *testing.T, b *Builder, s Sym) *Grammar {
	t.Helper()
	top := b.Rule("top")
	b.Alt(top, s)
	g, err := b.Build(top)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// accepts reports whether g matches all of in.
func accepts(g *Grammar, in []byte) bool {
	m := NewMatcher(g)
	return m.AdvanceBytes(in) && m.CanEnd()
}

// alts is the number of alternatives of s's rule (1 for a terminal).
func alts(b *Builder, s Sym) int {
	if s.Terminal() {
		return 1
	}
	return len(b.rules[s.NT].alts)
}

func TestCharSet(t *testing.T) {
	for _, tc := range []struct {
		in   []RuneRange
		want string
	}{
		{[]RuneRange{{'c', 'e'}, {'a', 'b'}}, "[{97 101}]"},
		{[]RuneRange{{'a', 'c'}, {'b', 'z'}, {'0', '9'}}, "[{48 57} {97 122}]"},
		{[]RuneRange{{0xD000, 0xE000}}, "[{53248 55295} {57344 57344}]"},
		{[]RuneRange{{0xD800, 0xDFFF}}, "[]"},
		{[]RuneRange{{-5, 3}, {0x10FFFE, 0x200000}}, "[{0 3} {1114110 1114111}]"},
		{[]RuneRange{{5, 3}}, "[]"},
	} {
		if got := fmt.Sprint(NewCharSet(tc.in...)); got != tc.want {
			t.Errorf("NewCharSet(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
	any := AnyChar()
	if len(any) != 2 || any.Contains(0xD800) || !any.Contains(0x10FFFF) || !any.Contains(0) {
		t.Errorf("AnyChar() = %v", any)
	}
	if n := any.Negate(); !n.Empty() {
		t.Errorf("AnyChar().Negate() = %v", n)
	}
	s := NewCharSet(RuneRange{'a', 'z'})
	if got := s.Negate().Negate(); fmt.Sprint(got) != fmt.Sprint(s) {
		t.Errorf("double negation: %v", got)
	}
	if got := s.Minus(Chars('m')); got.Contains('m') || !got.Contains('l') || !got.Contains('n') {
		t.Errorf("Minus: %v", got)
	}
	if got := s.Intersect(NewCharSet(RuneRange{'x', 0x100})); fmt.Sprint(got) != "[{120 122}]" {
		t.Errorf("Intersect: %v", got)
	}
}

// sampleRunes are code points worth checking: every encoding boundary and
// its neighbours, the surrogates' edges, and random ones.
func sampleRunes(rng *rand.Rand) []rune {
	var out []rune
	for _, r := range []rune{0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x103FF, 0x10400, 0xFFFFF, 0x100000, 0x10FFFF} {
		for d := rune(-2); d <= 2; d++ {
			if c := r + d; c >= 0 && c <= maxRune && (c < surrLo || c > surrHi) {
				out = append(out, c)
			}
		}
	}
	for len(out) < 600 {
		var c rune
		switch rng.Intn(4) {
		case 0:
			c = rng.Int31n(0x80)
		case 1:
			c = rng.Int31n(0x800)
		case 2:
			c = rng.Int31n(0x10000)
		default:
			c = rng.Int31n(maxRune + 1)
		}
		if c < surrLo || c > surrHi {
			out = append(out, c)
		}
	}
	return out
}

func utf8Sets() []CharSet {
	return []CharSet{
		AnyChar(),
		NewCharSet(RuneRange{0x7F, 0x80}),
		NewCharSet(RuneRange{0x7FF, 0x800}),
		NewCharSet(RuneRange{0xFFFF, 0x10000}),
		NewCharSet(RuneRange{0x41, 0x10FFFF}),
		NewCharSet(RuneRange{0xD000, 0xE005}),
		NewCharSet(RuneRange{0x3FFFE, 0x40001}, RuneRange{0x123, 0x456}),
		NewCharSet(RuneRange{'a', 'z'}, RuneRange{0xE9, 0xE9}, RuneRange{0x1F600, 0x1F64F}),
		AnyChar().Minus(Chars('\n', 0x2028, 0x10FFFF)),
		Chars('x'),
	}
}

func TestUTF8(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	runes := sampleRunes(rng)
	for _, set := range utf8Sets() {
		var b Builder
		s := b.UTF8(set)
		g := symGrammar(t, &b, s)
		for _, r := range runes {
			enc := utf8.AppendRune(nil, r)
			if got, want := accepts(g, enc), set.Contains(r); got != want {
				t.Errorf("UTF8(%v) on U+%04X (% x): got %v, want %v", set, r, enc, got, want)
			}
		}
	}
	// Never an invalid encoding, even for every character.
	var b Builder
	any := b.UTF8(AnyChar())
	if n := alts(&b, any); n > 9 {
		t.Errorf("UTF8(AnyChar()) has %d alternatives, want at most 9", n)
	}
	g := symGrammar(t, &b, any)
	for _, bad := range [][]byte{
		{0xC0, 0x80}, {0xC1, 0xBF}, // overlong 2-byte
		{0xE0, 0x80, 0x80}, {0xE0, 0x9F, 0xBF}, // overlong 3-byte
		{0xF0, 0x80, 0x80, 0x80}, {0xF0, 0x8F, 0xBF, 0xBF}, // overlong 4-byte
		{0xED, 0xA0, 0x80}, {0xED, 0xBF, 0xBF}, // surrogates
		{0xF4, 0x90, 0x80, 0x80}, {0xF5, 0x80, 0x80, 0x80}, {0xFF}, // past U+10FFFF
		{0x80}, {0xC3}, {0xE2, 0x82}, {0xC3, 0xA9, 0xA9}, {}, // stray, truncated, too long, empty
	} {
		if accepts(g, bad) {
			t.Errorf("UTF8(AnyChar()) accepts % x", bad)
		}
	}
	// An empty set matches nothing, and builds.
	var eb Builder
	eg := symGrammar(t, &eb, eb.UTF8(nil))
	if accepts(eg, []byte("a")) || accepts(eg, nil) {
		t.Error("UTF8(empty) accepts something")
	}
}

// jsonEncodings are the ways r may be written between a JSON string's
// quotes.
func jsonEncodings(r rune) []string {
	var out []string
	if r >= 0x20 && r != '"' && r != '\\' {
		out = append(out, string(r))
	}
	for _, e := range jsonShort {
		if e.r == r {
			out = append(out, `\`+string(e.letter))
		}
	}
	if r < 0x10000 {
		out = append(out, fmt.Sprintf(`\u%04x`, r), fmt.Sprintf(`\u%04X`, r))
	} else {
		c := r - 0x10000
		hi, lo := 0xD800+c>>10, 0xDC00+c&0x3FF
		out = append(out, fmt.Sprintf(`\u%04x\u%04x`, hi, lo), fmt.Sprintf(`\u%04X\u%04X`, hi, lo),
			fmt.Sprintf(`\u%04x\u%04X`, hi, lo))
	}
	return out
}

func TestJSONChar(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	runes := append(sampleRunes(rng), '"', '\\', '/', '\b', '\f', '\n', '\r', '\t', 0x1F, 0x20, 0xE9)
	sets := append(utf8Sets(), NewCharSet(RuneRange{0x10000, 0x10FFFF}), NewCharSet(RuneRange{0x103FF, 0x10400}),
		NewCharSet(RuneRange{0x10000, 0x1FFFF}, RuneRange{0x10FC00, 0x10FFFE}), NewCharSet(RuneRange{0, 0x1F}, RuneRange{'"', '"'}))
	for _, set := range sets {
		var b Builder
		g := symGrammar(t, &b, b.JSONChar(set))
		for _, r := range runes {
			for _, enc := range jsonEncodings(r) {
				if got, want := accepts(g, []byte(enc)), set.Contains(r); got != want {
					t.Errorf("JSONChar(%v) on U+%04X as %q: got %v, want %v", set, r, enc, got, want)
				}
			}
		}
	}

	var b Builder
	any := b.JSONChar(AnyChar())
	if n := alts(&b, any); n > 16 {
		t.Errorf("JSONChar(AnyChar()) has %d alternatives", n)
	}
	g := symGrammar(t, &b, any)
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"é", true}, {`\u00e9`, true}, {`\u00E9`, true}, {`\U00e9`, false},
		{"😀", true}, {`\ud83d\ude00`, true}, {`\uD83D\uDE00`, true},
		{`\"`, true}, {`\\`, true}, {`\/`, true}, {`\n`, true}, {`\u0000`, true}, {`\u0022`, true},
		{`"`, false}, {"\n", false}, {"\x00", false}, {`\`, false}, {`\x41`, false}, {`\a`, false},
		{`\ud83d`, false}, {`\ude00`, false}, {`\ude00\ud83d`, false}, {`\uD800\u0041`, false}, {`\uDBFF\uDBFF`, false},
		{`\u12`, false}, {`\u12G4`, false}, {"ab", false}, {"", false},
	} {
		if got := accepts(g, []byte(tc.in)); got != tc.ok {
			t.Errorf("JSONChar(AnyChar()) on %q: got %v, want %v", tc.in, got, tc.ok)
		}
	}

	var eb Builder
	eg := symGrammar(t, &eb, eb.JSONChar(Chars('é')))
	for _, tc := range []struct {
		in string
		ok bool
	}{{"é", true}, {`\u00e9`, true}, {`\u00E9`, true}, {"e", false}, {`\u00e8`, false}, {`\u00c9`, false}} {
		if got := accepts(eg, []byte(tc.in)); got != tc.ok {
			t.Errorf("JSONChar(é) on %q: got %v, want %v", tc.in, got, tc.ok)
		}
	}
}

// A large set of scattered ranges stays a few alternatives per range.
func TestJSONCharCompact(t *testing.T) {
	var rs []RuneRange
	for c := rune(0x100); c < 0x30000; c += 0x1234 {
		rs = append(rs, RuneRange{c, c + 0x200})
	}
	set := NewCharSet(rs...)
	var b Builder
	s := b.JSONChar(set)
	if b.size > 200*len(set) {
		t.Errorf("JSONChar of %d ranges costs %d symbols", len(set), b.size)
	}
	g := symGrammar(t, &b, s)
	for _, c := range []rune{0x100, 0x300, 0x301, 0x1334, 0x1534, 0x1535, 0x2FFFF} {
		for _, enc := range jsonEncodings(c) {
			if got := accepts(g, []byte(enc)); got != set.Contains(c) {
				t.Errorf("U+%04X as %q: got %v", c, enc, got)
			}
		}
	}
}

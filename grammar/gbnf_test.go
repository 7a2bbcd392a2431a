package grammar

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func mustGBNF(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := ParseGBNF(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return g
}

func checkStrings(t *testing.T, name string, g *Grammar, ok, bad []string) {
	t.Helper()
	for _, s := range ok {
		if !acceptsString(g, s) {
			t.Errorf("%s: %q refused", name, s)
		}
	}
	for _, s := range bad {
		if acceptsString(g, s) {
			t.Errorf("%s: %q accepted", name, s)
		}
	}
}

const jsonGBNF = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: made up of a few spaces, tabs or newlines
ws ::= | " " | "\n" [ \t]{0,20}
`

func TestGBNFJSON(t *testing.T) {
	g := mustGBNF(t, jsonGBNF)
	checkStrings(t, "json", g,
		[]string{`{}`, `{"a": 1}`, `{"a":[1,2,{"b":null}],"c":"x\ny"}`, `{"k": "é☃😀"}`, `{"a": -1.5e3}`, "{\n\"a\": true}", `{"u":"\u00e9"}`},
		[]string{`[]`, `{`, `{"a"}`, `{"a": 01x}`, `{"a": "` + "\x01" + `"}`, `{"a": "\q"}`, `{"a": tru}`, `{"a": "` + "\xff" + `"}`})
}

func TestGBNFArithmetic(t *testing.T) {
	g := mustGBNF(t, `
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
`)
	checkStrings(t, "arith", g,
		[]string{"1+2=3\n", "(a+b)*c= x1\n", "x=1\ny=2\n", "a_b/(1-2)=q\n"},
		[]string{"", "1+2=3", "1+=3\n", "=3\n", "A=1\n", "(1+2=3\n"})
	// Left recursion.
	g = mustGBNF(t, "root ::= root \"+\" n | n\nn ::= [0-9]+")
	checkStrings(t, "leftrec", g, []string{"1", "1+22+3"}, []string{"", "+1", "1+", "1++2"})
}

func TestGBNFList(t *testing.T) {
	g := mustGBNF(t, `root ::= item+
# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"`)
	checkStrings(t, "list", g,
		[]string{"- a\n", "- milk\n- eggs ☃\n"},
		[]string{"", "- \n", "-a\n", "- a", "- a\u2028b\n", "- a\u0085\n", "- a\x0b\n"})
}

func TestGBNFChess(t *testing.T) {
	g := mustGBNF(t, `# Specifies chess moves as a list in algebraic notation, using PGN conventions

# Force first move to "1. ", then any 1-2 digit number after, relying on model to follow the pattern
root    ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move    ::= (pawn | nonpawn | castle) [+#]?

# piece type, optional file/rank, optional capture, dest file & rank
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]

# optional file & capture, dest file & rank, optional promotion
pawn    ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?

castle  ::= "O-O" "-O"?
`)
	checkStrings(t, "chess", g,
		[]string{"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n12. O-O-O Qxd8#\n", "1. e4 e5\n2. exd5=Q+ Kh1\n"},
		[]string{"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n", "1. e4 e5\n0. a1 a2\n", "1. e4 e5\n2. Zf3 a2\n", "1. O-O-O-O a1\n2. a1 a2\n"})
}

func TestGBNFSyntax(t *testing.T) {
	g := mustGBNF(t, `root ::= "a"{2} b{1,} c{0,2} d{2,3} e? ( f
  | g-2 )
b ::= "b"
c ::= "c"
d ::= "d"  # comment
e ::= ""
f ::= | "f" # an empty alternative first
g-2 ::= [\x41-\x43\]\-] .`)
	checkStrings(t, "syntax", g,
		[]string{"aabdd", "aabbbccddd", "aabddf", "aabddA☃", "aabdd]x", "aabdd-\U0010FFFF", "aabddB\x7f"},
		[]string{"abdd", "aadd", "aabcccdd", "aabdddd", "aabddD", "aabddAA\xed\xa0\x80", "aabddA\xc0\x80", "aabddA\xf4\x90\x80\x80"})
}

func TestGBNFUnicode(t *testing.T) {
	g := mustGBNF(t, `root ::= "é\u00e9\U0001F600" [α-ω]+ [^a-zα-ω]`)
	checkStrings(t, "unicode", g,
		[]string{"éé😀αω!", "éé😀βγδ€", "éé😀λ😀"},
		[]string{"éé😀αa", "éé😀!!", "ee😀α!", "éé😀ΑB"})
	// Every code point against a wide class, its complement and '.'.
	for _, tc := range []struct {
		src string
		in  func(r rune) bool
	}{
		{`root ::= [\x00-\U0010FFFF]`, func(r rune) bool { return true }},
		{`root ::= .`, func(r rune) bool { return true }},
		{`root ::= [\u00e0-\u2fff\U0001F000-\U0001F0FF]`, func(r rune) bool { return r >= 0xe0 && r <= 0x2fff || r >= 0x1f000 && r <= 0x1f0ff }},
		{`root ::= [^\u00e0-\u2fff\U0001F000-\U0001F0FF]`, func(r rune) bool { return !(r >= 0xe0 && r <= 0x2fff || r >= 0x1f000 && r <= 0x1f0ff) }},
		{`root ::= [\u07ff-\u0800\uffff\U00010000]`, func(r rune) bool { return r == 0x7ff || r == 0x800 || r == 0xffff || r == 0x10000 }},
	} {
		g := mustGBNF(t, tc.src)
		for r := rune(0); r <= utf8.MaxRune; r += 1 + r/64 {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			for _, c := range []rune{r, r + 1, r - 1} {
				if c < 0 || c > utf8.MaxRune || c >= 0xD800 && c <= 0xDFFF {
					continue
				}
				if got := acceptsString(g, string(c)); got != tc.in(c) {
					t.Fatalf("%s: %U accepted %v", tc.src, c, got)
				}
			}
		}
		for _, s := range []string{"\xed\xa0\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xf0\x80\x80\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\x80", "\xff"} {
			if acceptsString(g, s) {
				t.Errorf("%s: invalid UTF-8 %q accepted", tc.src, s)
			}
		}
	}
}

func TestGBNFErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"", "gbnf:1:1: empty grammar"},
		{"  # only a comment\n\n", "empty grammar"},
		{`a ::= "x"`, "no rule named root"},
		{"root ::= a\nb ::= \"x\"", `gbnf:1:10: undefined rule "a"`},
		{"root ::= \"x\"\nroot ::= \"y\"", `gbnf:2:1: rule "root" defined twice`},
		{"root = \"x\"", "gbnf:1:6: expecting ::="},
		{"root ::= \"x", "gbnf:1:12: unterminated string literal"},
		{"root ::= [a-z", "gbnf:1:10: unterminated character class"},
		{"root ::= (\"x\"\n  \"y\"", "gbnf:2:6: expecting ')'"},
		{"root ::= * \"x\"", "gbnf:1:10: expecting an item before '*'"},
		{"root ::= \"x\"{2,1}", "gbnf:1:14: repetition {2,1}: maximum below minimum"},
		{"root ::= \"x\"{a}", "gbnf:1:14: expecting an integer"},
		{"root ::= \"x\"{2;3}", "gbnf:1:15: expecting ',' or '}'"},
		{"root ::= \"x\"{2,3", "gbnf:1:17: expecting '}'"},
		{"root ::= \"\\q\"", `gbnf:1:11: unknown escape \q`},
		{"root ::= \"\\x4\"", "gbnf:1:14: expecting 2 hex digits"},
		{"root ::= \"\\uD800\"", `gbnf:1:11: escape \uD800 is not a Unicode scalar value`},
		{"root ::= [z-a]", "gbnf:1:12: range z-a out of order"},
		{"root ::= \"x\" )", "gbnf:1:14: expecting newline or end"},
		{"root ::= \"é\" )", "gbnf:1:14: expecting newline or end"},
		{"::= \"x\"", "gbnf:1:1: expecting a rule name"},
		{"root ::= \"x\"\n  \"y\"", "gbnf:2:3: expecting a rule name"},
		{"root ::= \"x\"\nb \"y\"", "gbnf:2:3: expecting ::="},
		{"root ::= \"\xff\"", "gbnf:1:11: invalid UTF-8"},
	} {
		_, err := ParseGBNF(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

// TestGBNFNoFiniteString: a rule that produces no finite string builds; it
// accepts nothing.
func TestGBNFNoFiniteString(t *testing.T) {
	g := mustGBNF(t, "root ::= \"a\" | loop\nloop ::= \"b\" loop")
	checkStrings(t, "loop", g, []string{"a"}, []string{"", "b", "bb"})
	g = mustGBNF(t, "root ::= \"a\" []")
	checkStrings(t, "emptyclass", g, nil, []string{"a", "a]"})
	g = mustGBNF(t, "root ::= [^]")
	checkStrings(t, "anyclass", g, []string{"a", "☃"}, []string{"", "ab"})
}

func TestGBNFTooLarge(t *testing.T) {
	var b Builder
	b.SetLimit(1000)
	if _, err := b.GBNF(`root ::= "x"{5000}`); err == nil {
		t.Error("a grammar past the limit built")
	}
	if _, err := ParseGBNF(`root ::= "x"{99999999999}`); err == nil {
		t.Error("a huge count accepted")
	}
}

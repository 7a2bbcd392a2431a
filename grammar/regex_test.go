package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"unicode/utf16"
)

// regexGrammar compiles pattern into a grammar of its own.
func regexGrammar(t *testing.T, pattern string, opts RegexOptions) *Grammar {
	t.Helper()
	var b Builder
	s, err := b.Regex(pattern, opts)
	if err != nil {
		t.Fatalf("Regex(%q): %v", pattern, err)
	}
	return symGrammar(t, &b, s)
}

// jsonRaw is s as Go's encoding/json writes it between the quotes (raw
// UTF-8, with <, >, &, U+2028 and U+2029 escaped).
func jsonRaw(s string) string {
	out, _ := json.Marshal(s)
	return string(out[1 : len(out)-1])
}

// jsonASCII is s as Python's json.dumps writes it between the quotes: every
// non-ASCII character as \uXXXX (surrogate pairs beyond the BMP), upper
// case hex when upper.
func jsonASCII(s string, upper bool) string {
	var sb strings.Builder
	hex := `\u%04x`
	if upper {
		hex = `\u%04X`
	}
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x20 || r > 0x7E:
			if r > 0xFFFF {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(&sb, hex+hex, hi, lo)
			} else {
				fmt.Fprintf(&sb, hex, r)
			}
		default:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

var regexPatterns = []string{
	``, `a`, `abc`, `a|b`, `a*`, `a+b?`, `(ab)+`, `a{2}`, `a{2,}`, `a{1,3}`, `x{0,2}y`,
	`[a-c]+`, `[^a]`, `[^a\n]*`, `\d+`, `\w+`, `\D`, `\W`, `\s`, `\S+`, `[\s]`, `[\S]`, `[\s\S]`, `[^\s]`,
	`.`, `a.c`, `.*`, `^.*$`, `^a`, `a$`, `^a$`, `^(a|b)*$`, `^$`, `^`, `$`, `^a|b$`, `(^a|b)c`,
	`^ab$|^ac`, `^a$|^b`, `(^a|^b)$`, `^(a|b$)`, `(?:^|b)a`, `a(?:c|$)`, `(?:ab|cd)*`, `a*?`, `a+?b`, `a??`, `[é😀]`, `\u00e9`, `\u00E9+`, `\uD83D\uDE00`, `(?i)a`, `(?i)é`, `(?i:A)b`,
	`\p{L}+`, `\P{L}`, `\p{Greek}`, `[a-z\d_-]+`, `[-a]`, `[\]a]`, `[]`, `[^]`, `a[^]b`, `\.`, `\/`, `\cJ`,
	`[\b]`, `\x41`, `"`, `\\`, `[\u0000-\u001f]`, `^[a-c]{2,3}$`, `(a|b|ab)*c`, `((a)|b)+$`, `^\d{3}-\d{4}$`,
	`(?<name>a)b`, `(?P<x>b)+`, `\t`, `\r\n`, `\u2028`, `[\u2000-\u200f]`,
}

// regexAlphabet is what the generated strings are made of.
var regexAlphabet = []string{"a", "b", "c", "ab", "0", "9", "-", "_", " ", "\n", "\r", "\t", "\b", "é", "É", "😀", "A", ".", "/", `"`, `\`, "α", "\u2028", "\u00a0", "\x00", "J"}

func genStrings(rng *rand.Rand, n int) []string {
	out := []string{"", "a", "ab", "abc", "aa", "aaa", "aaaa", "b", "c", "ac", "abac", "y", "xy", "xxy", "xxxy", "zxy",
		"123-4567", "12-4567", "123-45678", "a.c", "a\nc", "a\rc", ".", "\\", "\n", "\b", "\u2000", "\u200f", "\u2010", "\u2028",
		"\r\n", "x abc\n", "a😀b", "aZb", "\nab", "ab\n", "bc", "abcabc"}
	for len(out) < n {
		var sb strings.Builder
		for k := rng.Intn(7); k > 0; k-- {
			sb.WriteString(regexAlphabet[rng.Intn(len(regexAlphabet))])
		}
		out = append(out, sb.String())
	}
	return out
}

// TestRegexProperty compares the grammars of patterns with Go's regexp on
// the same (ECMA-translated) patterns, anchored and searching, in raw and
// JSON modes.
func TestRegexProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	strs := genStrings(rng, 250)
	if testing.Short() {
		strs = strs[:80]
	}
	for _, p := range regexPatterns {
		goPat, err := ecmaToGo(p)
		if err != nil {
			t.Fatalf("ecmaToGo(%q): %v", p, err)
		}
		for _, anchored := range []bool{true, false} {
			var re *regexp.Regexp
			if anchored {
				re = regexp.MustCompile(`^(?:` + goPat + `)$`)
			} else {
				re = regexp.MustCompile(goPat)
			}
			raw := regexGrammar(t, p, RegexOptions{Anchored: anchored})
			js := regexGrammar(t, p, RegexOptions{Anchored: anchored, JSON: true})
			for _, s := range strs {
				want := re.MatchString(s)
				if got := accepts(raw, []byte(s)); got != want {
					t.Errorf("Regex(%q, anchored=%v) raw on %q: got %v, want %v", p, anchored, s, got, want)
				}
				for _, enc := range []string{jsonRaw(s), jsonASCII(s, false), jsonASCII(s, true)} {
					if got := accepts(js, []byte(enc)); got != want {
						t.Errorf("Regex(%q, anchored=%v) JSON on %q (%s): got %v, want %v", p, anchored, s, enc, got, want)
					}
				}
			}
		}
	}
}

// ECMA-262's meanings where Go's differ.
func TestRegexECMA(t *testing.T) {
	for _, tc := range []struct {
		pattern, in string
		ok          bool
	}{
		{`.`, "\r", false}, {`.`, "\u2028", false}, {`.`, "\n", false}, {`.`, "é", true},
		{`\s`, "\u00a0", true}, {`\s`, "\v", true}, {`\s`, "\ufeff", true}, {`\S`, "\u3000", false},
		{`[\S]`, "\u3000", false}, {`[\S]`, "x", true}, {`[^\S]`, "\u2029", true},
		{`[]`, "", false}, {`[]`, "a", false}, {`[^]`, "\n", true}, {`\u00e9`, "é", true},
		{`\uD83D\uDE00`, "😀", true}, {`\cJ`, "\n", true}, {`[\b]`, "\b", true}, {`[[:a]+`, "[:a", true},
		{`a{2,3}`, "aaaa", false}, {`(?i)straße`, "STRASSE", false}, {`(?i)k`, "\u212a", true},
	} {
		g := regexGrammar(t, tc.pattern, RegexOptions{Anchored: true})
		if got := accepts(g, []byte(tc.in)); got != tc.ok {
			t.Errorf("Regex(%q) on %q: got %v, want %v", tc.pattern, tc.in, got, tc.ok)
		}
	}
	// Search semantics: the surroundings take any character, newlines too,
	// while the pattern's own '.' does not.
	g := regexGrammar(t, `a.b`, RegexOptions{})
	for in, ok := range map[string]bool{"\nazb\n": true, "a\nb": false, "\r\n\u2028axb": true} {
		if got := accepts(g, []byte(in)); got != ok {
			t.Errorf("search a.b on %q: got %v, want %v", in, got, ok)
		}
	}
}

func TestRegexErrors(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{`(?=a)b`, "lookahead"},
		{`a(?!b)`, "lookahead"},
		{`(?<=a)b`, "lookbehind"},
		{`(?<!a)b`, "lookbehind"},
		{`(a)\1`, "backreference"},
		{`(?<x>a)\k<x>`, "backreference"},
		{`a^b`, "anchor ^"},
		{`a$b`, "anchor $"},
		{`(^a)*`, "anchor ^"},
		{`\bfoo`, "word boundar"},
		{`(?m)^a`, "multi-line"},
		{`(?s).`, "flag s"},
		{`a{1001}`, "repeat count"},
		{`(a`, "missing closing )"},
		{`\ud800`, "surrogate"},
	} {
		var b Builder
		_, err := b.Regex(tc.pattern, RegexOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Regex(%q): error %v, want one naming %q", tc.pattern, err, tc.want)
		}
	}
	var b Builder
	b.SetLimit(500)
	_, err := b.Regex(`(abc){1000}`, RegexOptions{Anchored: true})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Regex past the size limit: %v, want ErrTooLarge", err)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		good   []string
		bad    []string
	}{
		{"date", []string{"2024-01-31", "1999-12-01", "2024-02-29", "2023-04-30"},
			[]string{"2024-13-01", "2024-00-10", "2024-01-32", "2024-04-31", "2024-02-30", "24-01-01", "2024-1-01", "2024-01-01T"}},
		{"time", []string{"12:34:56Z", "23:59:59z", "00:00:00.123+05:30", "01:02:03-08:00"},
			[]string{"12:34:56", "24:00:00Z", "12:60:00Z", "12:34Z", "12:34:56+5:30", "12:34:56.Z", "23:59:60Z", "12:30:60Z"}},
		{"date-time", []string{"2024-01-31T12:34:56Z", "2024-01-31t12:34:56.5+01:00"},
			[]string{"2024-01-31 12:34:56Z", "2024-01-31T12:34:56", "2024-01-31"}},
		{"uuid", []string{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"},
			[]string{"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"}},
		{"email", []string{"a@b.c", "john.doe+x@example.com", "a!#$%&'*+/=?^_`{|}~-@x-y.org"},
			[]string{"a@", "@b.c", "a..b@c.d", ".a@b.c", "a@b..c", "a@-b.c", "a b@c.d", "a@b@c"}},
		{"ipv4", []string{"0.0.0.0", "255.255.255.255", "192.168.1.10"},
			[]string{"256.0.0.1", "1.2.3", "01.2.3.4", "1.2.3.4.5", "1.2.3.a"}},
		{"ipv6", []string{"::", "::1", "1::", "2001:db8::8a2e:370:7334", "2001:0db8:0000:0000:0000:ff00:0042:8329",
			"fe80::1:2", "::ffff:192.0.2.128", "1:2:3:4:5:6:7::", "1:2:3:4:5:6:1.2.3.4", "ABCD::EF"},
			[]string{":", ":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7", "::1.2.3", "g::1", "1:2:3:4:5:6:7:8::"}},
		{"hostname", []string{"example.com", "a", "a-b.c1", "xn--bcher-kva.example", strings.Repeat("a", 63) + ".com"},
			[]string{"-a.com", "a-.com", "a..b", ".a", "a.", "a_b.com", strings.Repeat("a", 64)}},
		{"uri", []string{"https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c", "x:", "http://a/%20b"},
			[]string{"example.com", "1http://a", "http://a b", "http://a/%2", "://a", "http://a/<b>"}},
	} {
		var b Builder
		s, err := b.Format(tc.format)
		if err != nil {
			t.Fatalf("Format(%q): %v", tc.format, err)
		}
		g := symGrammar(t, &b, s)
		for _, in := range tc.good {
			for _, enc := range []string{jsonRaw(in), jsonASCII(in, false)} {
				if !accepts(g, []byte(enc)) {
					t.Errorf("format %s refuses %q (as %s)", tc.format, in, enc)
				}
			}
		}
		for _, in := range tc.bad {
			if accepts(g, []byte(jsonRaw(in))) {
				t.Errorf("format %s accepts %q", tc.format, in)
			}
		}
	}
	// JSON mode: a character may come escaped.
	var b Builder
	s, _ := b.Format("date")
	if g := symGrammar(t, &b, s); !accepts(g, []byte(`2024\u002d01-0\u0032`)) {
		t.Error("format date refuses escaped characters")
	}
	var eb Builder
	if _, err := eb.Format("color"); err == nil || !strings.Contains(err.Error(), `"color"`) {
		t.Errorf("Format(color): %v", err)
	}
}

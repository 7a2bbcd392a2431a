package tokenizer

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The hand-written matchers must find exactly the matches a backtracking
// regex engine finds for the same pattern. regexp2 stands in for
// Oniguruma here; the two agree on these patterns except that Oniguruma's
// case-insensitive (?i:'s) also matches U+017F LONG S, which the
// hand-written matchers follow and the random alphabet leaves out.
var knownPatterns = map[string]string{
	"gpt2":      patGPT2,
	"cl100k":    patCL100K,
	"qwen2":     patQwen2,
	"o200k":     patO200K,
	"digits3":   patDigits3,
	"deepseekC": patDeepSeekC,
	"deepseek":  patDeepSeek,
}

// alphabet mixes every class the patterns distinguish.
var alphabet = []string{
	"a", "b", "s", "t", "e", "l", "m", "d", "r", "v", "S", "T", "R", "E", "L", "M", "D", "V", "Z",
	"'", "'", "0", "7", "9", "٣", "²", "Ⅻ", " ", " ", " ", "\t", "\r", "\n", "\n", "\u000b", "\f",
	"\u00a0", "\u2028", "\u3000", "\u0085", "\u200d", "\u0301", "\u0308", "ǅ", "ʰ", "ª", "中", "ぁ",
	"ア", "ｶ", "Δ", "δ", "Ё", "é", "!", ".", ",", "-", "/", "_", "(", ")", "<", "|", ">", "$", "€",
	"©", "😀", "🏽", "\x00", "\x07", "\x7f", "।", "«", "»",
}

func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(alphabet[r.IntN(len(alphabet))])
	}
	return sb.String()
}

func allMatches(m matcher, s string) [][2]int {
	var out [][2]int
	m.each(s, func(i, j int) { out = append(out, [2]int{i, j}) })
	return out
}

func checkAgainstRegexp2(t *testing.T, name, pat, s string) {
	t.Helper()
	hand, err := compilePattern(pat)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := (regexMatcherCompiler{}).compile(pat)
	if err != nil {
		t.Fatal(err)
	}
	got, want := allMatches(hand, s), allMatches(ref, s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s on %q:\n got  %v\n want %v", name, s, got, want)
	}
	// next must agree with each.
	var stepped [][2]int
	st := hand.(stepMatcher)
	for from := 0; ; {
		i, j := st.next(s, from)
		if i < 0 {
			break
		}
		stepped = append(stepped, [2]int{i, j})
		from = j
	}
	if !reflect.DeepEqual(stepped, got) {
		t.Fatalf("%s next/each disagree on %q", name, s)
	}
}

func TestKnownPatternsMatchRegexp2(t *testing.T) {
	cases := []string{
		"Hello world", "I'm sure it's what we've wanted; they'd agree", "DON'T STOP", "  leading",
		"trailing   ", "a\n\n  b", "x \r\n y", "1234567", "٣٣٣٣", "ÀB̀cd", "HELLOworld", "helloWORLD",
		"ǅungla", "/* c */ // x\n/", "<|im_start|>", "  \t\n  ", "'s", "'", "a'S", "中文字符テスト",
		"!abc", "?Abc!", "(x)", "1e-10", "emoji 😀🏽!", "", " ", "\n",
	}
	for name, pat := range knownPatterns {
		t.Run(name, func(t *testing.T) {
			for _, c := range cases {
				checkAgainstRegexp2(t, name, pat, c)
			}
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			for range 1200 {
				checkAgainstRegexp2(t, name, pat, randomText(r, 1+r.IntN(24)))
			}
		})
	}
}

func TestLongSFolds(t *testing.T) {
	m, _ := compilePattern(patCL100K)
	got := allMatches(m, "it'ſ")
	want := [][2]int{{0, 2}, {2, 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func FuzzKnownPatterns(f *testing.F) {
	for _, s := range []string{"Hello world", "it's 42!", "a\r\n\tb", "ÀB̀cd 中文"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0x17F) || strings.ContainsRune(s, 0x212A) {
			t.Skip("case folding differs between Oniguruma and regexp2")
		}
		s = validUTF8(s)
		for name, pat := range knownPatterns {
			checkAgainstRegexp2(t, name, pat, s)
		}
	})
}

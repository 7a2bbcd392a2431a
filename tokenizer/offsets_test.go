package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// Offsets follow the alignment rule of the Rust NormalizedString: each
// normalized character maps back to the span of one original character.
// A decomposed or expanded character's parts all keep its span; a
// composite keeps only the span of the starter it was composed onto (the
// absorbed marks' spans are dropped: fixtures t068 "Å vs Å" and t069
// "각" show HF giving the composite [0, 1) in code points); when combining
// marks are reordered, the spans stay in source order (the Rust transform
// consumes the source characters positionally).

// offsetNormalizers are the normalizer configurations whose alignments the
// tests below check, by name.
var offsetNormalizers = map[string]string{
	"NFC":            `{"type":"NFC"}`,
	"NFD":            `{"type":"NFD"}`,
	"NFKC":           `{"type":"NFKC"}`,
	"NFKD":           `{"type":"NFKD"}`,
	"Lowercase":      `{"type":"Lowercase"}`,
	"Strip":          `{"type":"Strip","strip_left":true,"strip_right":true}`,
	"Replace":        `{"type":"Replace","pattern":{"String":"ß"},"content":"ss"}`,
	"ReplaceDel":     `{"type":"Replace","pattern":{"Regex":"[\u200b\u00ad]"},"content":""}`,
	"Prepend":        `{"type":"Prepend","prepend":"▁"}`,
	"StripAccents":   `{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"},{"type":"Lowercase"}]}`,
	"SentencePiece":  `{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]}`,
	"Bert":           `{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":true,"strip_accents":null,"lowercase":true}`,
	"BertCased":      `{"type":"BertNormalizer","clean_text":true,"handle_chinese_chars":false,"strip_accents":null,"lowercase":false}`,
	"NFKC+Lowercase": `{"type":"Sequence","normalizers":[{"type":"NFKC"},{"type":"Lowercase"},{"type":"Strip","strip_left":false,"strip_right":true}]}`,
}

// alignments normalizes text with the named normalizer and returns the
// output and the span of each output character.
func alignments(t testing.TB, name, text string) (string, [][2]int) {
	t.Helper()
	n, err := parseNormalizer(json.RawMessage(offsetNormalizers[name]))
	if err != nil {
		t.Fatal(err)
	}
	got, al := n.normalize(text, charSpans(text, 0))
	if plain, _ := n.normalize(text, nil); plain != got {
		t.Fatalf("%s %q: tracked %q, untracked %q", name, text, got, plain)
	}
	var offs [][2]int
	for i := range got {
		if utf8.RuneStart(got[i]) {
			offs = append(offs, [2]int{int(al[i].s), int(al[i].e)})
		}
	}
	return got, offs
}

func TestNormalizerOffsets(t *testing.T) {
	zalgo := "a" + strings.Repeat("\u0301", 40) + "b"
	zalgoWant := [][2]int{{0, 1}}
	for k := range 39 {
		zalgoWant = append(zalgoWant, [2]int{3 + 2*k, 5 + 2*k})
	}
	zalgoWant = append(zalgoWant, [2]int{81, 82})
	tests := []struct {
		name, norm, text, want string
		offs                   [][2]int // per output character
	}{
		// Composition: the composite keeps the starter's span.
		{"nfc two marks compose", "NFC", "a\u0323\u0302b", "\u1ead" + "b", [][2]int{{0, 1}, {5, 6}}},
		{"nfc mark left over", "NFC", "e\u0301\u0301x", "é\u0301x", [][2]int{{0, 1}, {3, 5}, {5, 6}}},
		// The ogonek (ccc 202) sorts before the acute (230) and composes; the
		// acute then takes the next source span, the ogonek's.
		{"nfc reordered marks", "NFC", "a\u0301\u0328 x", "ą\u0301 x", [][2]int{{0, 1}, {3, 5}, {5, 6}, {6, 7}}},
		{"nfc hangul jamo", "NFC", "\u1100\u1161\u11a8 x", "각 x", [][2]int{{0, 3}, {9, 10}, {10, 11}}},
		{"nfc starter onto starter", "NFC", "\u0cc6\u0cd5x", "\u0cc7x", [][2]int{{0, 3}, {6, 7}}},
		{"nfc leading mark", "NFC", "\u0301a", "\u0301a", [][2]int{{0, 2}, {2, 3}}},
		{"nfc precomposed stays", "NFC", "Åx", "Åx", [][2]int{{0, 2}, {2, 3}}},
		{"nfc angstrom sign", "NFC", "\u212bx", "Åx", [][2]int{{0, 3}, {3, 4}}},
		// More than 30 marks: no U+034F is inserted (the Rust normalizer
		// does not apply the Stream-Safe Text Format).
		{"nfc zalgo", "NFC", zalgo, "á" + strings.Repeat("\u0301", 39) + "b", zalgoWant},
		{"nfc emoji zwj", "NFC", "👨\u200d👩\u200d👧!", "👨\u200d👩\u200d👧!", [][2]int{{0, 4}, {4, 7}, {7, 11}, {11, 14}, {14, 18}, {18, 19}}},
		// Decomposition: every part keeps the character's span; reordered
		// marks keep the spans in source order.
		{"nfd several parts", "NFD", "ệ!", "e\u0323\u0302!", [][2]int{{0, 3}, {0, 3}, {0, 3}, {3, 4}}},
		{"nfd reordered marks", "NFD", "a\u0301\u0323b", "a\u0323\u0301b", [][2]int{{0, 1}, {1, 3}, {3, 5}, {5, 6}}},
		{"nfd hangul", "NFD", "각x", "\u1100\u1161\u11a8x", [][2]int{{0, 3}, {0, 3}, {0, 3}, {3, 4}}},
		{"nfd zalgo keeps its marks", "NFD", "á" + strings.Repeat("\u0301", 31), "a" + strings.Repeat("\u0301", 32),
			append([][2]int{{0, 2}, {0, 2}}, seqSpans(2, 2, 31)...)},
		// Compatibility.
		{"nfkc ligature", "NFKC", "ﬁx", "fix", [][2]int{{0, 3}, {0, 3}, {3, 4}}},
		{"nfkc circled digits", "NFKC", "①②", "12", [][2]int{{0, 3}, {3, 6}}},
		{"nfkc dz with caron", "NFKC", "ǅa", "Dža", [][2]int{{0, 2}, {0, 2}, {2, 3}}},
		{"nfkd dz with caron", "NFKD", "ǅa", "Dz\u030ca", [][2]int{{0, 2}, {0, 2}, {0, 2}, {2, 3}}},
		{"nfkc fullwidth", "NFKC", "Ａｂ", "Ab", [][2]int{{0, 3}, {3, 6}}},
		{"nfkc emoji zwj", "NFKC", "👩\u200d💻", "👩\u200d💻", [][2]int{{0, 4}, {4, 7}, {7, 11}}},
		// Lowercase expands İ into two characters.
		{"lowercase expansion", "Lowercase", "İX", "i\u0307x", [][2]int{{0, 2}, {0, 2}, {2, 3}}},
		{"strip", "Strip", "\u3000 a b\n", "a b", [][2]int{{4, 5}, {5, 6}, {6, 7}}},
		{"replace expansion", "Replace", "aßb", "assb", [][2]int{{0, 1}, {1, 3}, {1, 3}, {3, 4}}},
		{"replace removal", "ReplaceDel", "a\u200bb\u00adc", "abc", [][2]int{{0, 1}, {4, 5}, {7, 8}}},
		{"prepend", "Prepend", "é", "▁é", [][2]int{{0, 2}, {0, 2}}},
		{"nfd strip accents lowercase", "StripAccents", "Ệx", "ex", [][2]int{{0, 3}, {3, 4}}},
		{"sentencepiece", "SentencePiece", "a b", "▁a▁b", [][2]int{{0, 1}, {0, 1}, {1, 2}, {2, 3}}},
		// BertNormalizer: clean text, padded ideographs, accents, lowercase.
		{"bert", "Bert", "Héllo\u00a0中文\x01\tX", "hello  中  文  x", [][2]int{{0, 1}, {1, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 8},
			{8, 11}, {8, 11}, {8, 11}, {11, 14}, {11, 14}, {11, 14}, {15, 16}, {16, 17}}},
		{"bert cased keeps accents", "BertCased", "É\u200bx\ufffd\u0085y", "Éxy", [][2]int{{0, 2}, {5, 6}, {11, 12}}},
		{"nfkc lowercase strip", "NFKC+Lowercase", "ＡﬁＩ  ", "afii", [][2]int{{0, 3}, {3, 6}, {3, 6}, {6, 9}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, offs := alignments(t, tc.norm, tc.text)
			if got != tc.want {
				t.Fatalf("normalized %+q, want %+q", got, tc.want)
			}
			if !reflect.DeepEqual(offs, tc.offs) {
				t.Fatalf("spans %v\n want %v", offs, tc.offs)
			}
		})
	}
}

// seqSpans returns n spans of width w starting at byte from.
func seqSpans(from, w, n int) [][2]int {
	var out [][2]int
	for k := range n {
		out = append(out, [2]int{from + k*w, from + (k+1)*w})
	}
	return out
}

// The tokens after a base character with several reordered combining
// marks point at their own characters (they used to point one character
// early).
func TestEncodeOffsetsAfterCombiningMarks(t *testing.T) {
	tk := inlineTokenizer(t, "NFC")
	enc := tk.Encode("a\u0301\u0328 xy", false)
	wantToks := []string{"ą", "\u0301", " ", "x", "y"}
	wantOffs := [][2]int{{0, 1}, {3, 5}, {5, 6}, {6, 7}, {7, 8}}
	if !reflect.DeepEqual(enc.Tokens, wantToks) || !reflect.DeepEqual(enc.Offsets, wantOffs) {
		t.Fatalf("tokens %+q offsets %v\n want %+q %v", enc.Tokens, enc.Offsets, wantToks, wantOffs)
	}
	// Zalgo text keeps the Rust normalization: no U+034F token appears.
	enc = tk.Encode("e"+strings.Repeat("\u0300", 35)+"y", false)
	want := append(append([]string{"è"}, strings.Split(strings.Repeat("\u0300", 34), "")...), "y")
	if !reflect.DeepEqual(enc.Tokens, want) {
		t.Fatalf("zalgo tokens %+q", enc.Tokens)
	}
}

// offsetAlphabet is what the property tests draw text from: starters,
// combining marks of several classes, decomposable and compatibility
// characters, Hangul jamo, emoji with ZWJ and variation selectors,
// characters Replace and Strip touch.
var offsetAlphabet = []string{
	"a", "e", "o", "A", "x", " ", "  ", "\t", "\n", "\u3000", "ß", "\u200b", "\u00ad", "▁",
	"\u0301", "\u0300", "\u0302", "\u0308", "\u0323", "\u0328", "\u0327", "\u0345", "\u0344", "\u05b0", "\u0f71", "\u0f72", "\u0f73", "\u0f77", "\u1f80", "\u0313", "\u0345", "\u0cc6", "\u0cd5", "\u0b47", "\u0b3e",
	"é", "Å", "\u212b", "ệ", "ǅ", "ﬁ", "ﬃ", "①", "Ａ", "İ", "Σ", "ς", "½", "™", "㍿",
	"\u1100", "\u1161", "\u11a8", "각", "가",
	"👨\u200d👩\u200d👧", "👍🏽", "❤\ufe0f", "🇫🇷", "😀",
	"中", "文", "\x01", "\u00a0", "\u2028", "\ufffd", "\x00", "ｶ", "ﾞ", "\u0915\u093c", "\u0958",
}

// inlineTokenizer is a tokenizer with the named normalizer over a
// one-character-per-token vocabulary that holds every character the
// normalizers can produce from offsetAlphabet, so each token is exactly one
// normalized character.
func inlineTokenizer(tb testing.TB, normName string) *Tokenizer {
	tb.Helper()
	vocab := map[string]int{"<unk>": 0}
	addChars := func(s string) {
		for _, r := range s {
			if _, ok := vocab[string(r)]; !ok {
				vocab[string(r)] = len(vocab)
			}
		}
	}
	for _, js := range offsetNormalizers {
		n, err := parseNormalizer(json.RawMessage(js))
		if err != nil {
			tb.Fatal(err)
		}
		for _, a := range offsetAlphabet {
			for _, b := range offsetAlphabet {
				out, _ := n.normalize(a+b, nil)
				addChars(out)
			}
		}
		addChars("ą\u1ead\u034fèxy")
	}
	doc := map[string]any{
		"model":      map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "unk_token": "<unk>"},
		"normalizer": json.RawMessage(offsetNormalizers[normName]),
	}
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	tk, err := LoadBytes(b, nil, Options{Raw: true})
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// checkOffsetProperties checks the offsets of tk.Encode(text) (tk from
// inlineTokenizer with normalizer n):
//   - every offset is a [start, end) range of whole characters of the input;
//   - starts and ends never decrease, and two tokens overlap at most in one
//     input character (the parts of one expanded character);
//   - each token spans exactly one input character, and the tokens
//     together spell the normalized input;
//   - when the normalizer works character by character on this input (no
//     composition or reordering across characters), each input character
//     re-normalizes to exactly the tokens that point at it;
//   - Encode and the untracked EncodeIDs agree.
func checkOffsetProperties(t *testing.T, name string, tk *Tokenizer, text string) {
	t.Helper()
	if !utf8.ValidString(text) {
		return
	}
	enc := tk.Encode(text, false)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s %+q: tokens %+q offsets %v: %s", name, text, enc.Tokens, enc.Offsets, fmt.Sprintf(format, args...))
	}
	if ids := tk.EncodeIDs(text, false); !reflect.DeepEqual(nz(ids), nz(enc.IDs)) {
		fail("EncodeIDs %v != Encode %v", ids, enc.IDs)
	}
	boundary := func(i int) bool { return i == len(text) || utf8.RuneStart(text[i]) }
	for i, o := range enc.Offsets {
		if o[0] < 0 || o[1] > len(text) || o[0] >= o[1] || !boundary(o[0]) || !boundary(o[1]) {
			fail("token %d: %v is not a range of whole characters", i, o)
		}
		if _, w := utf8.DecodeRuneInString(text[o[0]:]); o[0]+w != o[1] {
			fail("token %d: %v is not one input character", i, o)
		}
		if i == 0 {
			continue
		}
		p := enc.Offsets[i-1]
		if o[0] < p[0] || o[1] < p[1] {
			fail("token %d: %v goes back from %v", i, o, p)
		}
		if o[0] < p[1] && o != p {
			fail("token %d: %v overlaps %v in more than one character", i, o, p)
		}
	}
	for _, tok := range enc.Tokens {
		if tok == "<unk>" {
			return // a character outside the vocabulary: no text to compare
		}
	}
	normalized, _ := tk.normalizer.normalize(text, nil)
	if got := strings.Join(enc.Tokens, ""); got != normalized {
		fail("tokens spell %+q, normalized text is %+q", got, normalized)
	}
	// Character-wise input: group the tokens by the input character they
	// point at; every group is that character normalized on its own.
	var perChar strings.Builder
	for _, r := range text {
		s, _ := tk.normalizer.normalize(string(r), nil)
		perChar.WriteString(s)
	}
	if perChar.String() != normalized || strings.ContainsAny(normalized, "▁") {
		return // composition, reordering, Strip or Prepend act across characters
	}
	for i := 0; i < len(enc.Tokens); {
		j := i
		var group strings.Builder
		for j < len(enc.Tokens) && enc.Offsets[j] == enc.Offsets[i] {
			group.WriteString(enc.Tokens[j])
			j++
		}
		o := enc.Offsets[i]
		if want, _ := tk.normalizer.normalize(text[o[0]:o[1]], nil); want != group.String() {
			fail("input %v %+q re-normalizes to %+q, its tokens spell %+q", o, text[o[0]:o[1]], want, group.String())
		}
		i = j
	}
}

func TestOffsetProperties(t *testing.T) {
	for name := range offsetNormalizers {
		t.Run(name, func(t *testing.T) {
			tk := inlineTokenizer(t, name)
			r := rand.New(rand.NewPCG(5, uint64(len(name))))
			for range 300 {
				var sb strings.Builder
				for range 1 + r.IntN(12) {
					sb.WriteString(offsetAlphabet[r.IntN(len(offsetAlphabet))])
				}
				checkOffsetProperties(t, name, tk, sb.String())
			}
		})
	}
}

// Below 31 combining marks in a row, the Unicode normalizers produce the
// text of golang.org/x/text (the alignment-tracking rebuild changes only
// the spans).
func TestUnicodeNormalizerText(t *testing.T) {
	forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
	r := rand.New(rand.NewPCG(7, 9))
	for range 2000 {
		var sb strings.Builder
		for range 1 + r.IntN(10) {
			sb.WriteString(offsetAlphabet[r.IntN(len(offsetAlphabet))])
		}
		text := sb.String()
		for name, f := range forms {
			got, _ := unicodeNormalizer{form: f}.normalize(text, charSpans(text, 0))
			if want := f.String(text); got != want {
				t.Fatalf("%s(%+q) = %+q, want %+q", name, text, got, want)
			}
		}
	}
}

// FuzzNormalizerOffsets runs the offset properties on arbitrary text for
// every normalizer path. It needs no fixtures.
func FuzzNormalizerOffsets(f *testing.F) {
	for _, s := range []string{"", "a\u0301\u0328 x", "e\u0301\u0301x", "ﬁ①ǅ", "İx ß", "\u1100\u1161\u11a8",
		"👨\u200d👩\u200d👧 👍🏽", "a" + strings.Repeat("\u0301", 40), " \u3000a\u200b\u00adb ", "ệ\u0344\u0f71\u0f72"} {
		f.Add(s)
	}
	names := make([]string, 0, len(offsetNormalizers))
	for name := range offsetNormalizers {
		names = append(names, name)
	}
	tks := make(map[string]*Tokenizer, len(names))
	for _, name := range names {
		tks[name] = inlineTokenizer(f, name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range names {
			checkOffsetProperties(t, name, tks[name], s)
		}
	})
}

// The offset properties hold on the HF reference offsets of the fixture
// corpus too (so they describe HF's behaviour, not ours), and on ours.
func TestOffsetPropertiesFixtures(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			recs := readRecords(t, fixtures.Path(t, "tokenizers", "expected", fam+".jsonl"))
			tk := loadFamily(t, fam, true)
			for _, r := range recs {
				for _, add := range []bool{false, true} {
					checkEncodeDecode(t, fam, tk, r.Text, add)
				}
				mask := make([]bool, len(r.OffsetsBytes))
				for i, m := range r.SpecialTokensMask {
					mask[i] = m == 1
				}
				checkOffsetOrder(t, fam+" (HF reference)", r.Text, r.OffsetsBytes, mask)
			}
		})
	}
}

package tokenizer

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// runPre splits text with a pre-tokenizer given as JSON and returns the
// pieces' texts (ByteLevel pieces mapped) and original byte offsets.
func runPre(t *testing.T, js, text string) ([]string, [][2]int) {
	t.Helper()
	p, err := parsePreTokenizer(json.RawMessage(js))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	var offs [][2]int
	p.split(piece{text: text, al: charSpans(text, 0)}, func(q piece) {
		q = materializeByteLevel(q)
		texts = append(texts, q.text)
		offs = append(offs, [2]int{int(q.al[0].s), int(q.al[len(q.al)-1].e)})
	})
	return texts, offs
}

func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		name, js, text string
		want           []string
		offs           [][2]int
	}{
		{"metaspace always", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`,
			"Hey  you", []string{"▁Hey", "▁", "▁you"}, [][2]int{{0, 3}, {3, 4}, {4, 8}}},
		{"metaspace never nosplit", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":false}`,
			"a b", []string{"a▁b"}, [][2]int{{0, 3}}},
		{"metaspace first", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true}`,
			"a b", []string{"▁a", "▁b"}, [][2]int{{0, 1}, {1, 3}}},
		{"metaspace legacy", `{"type":"Metaspace","replacement":"▁","add_prefix_space":true}`,
			"x", []string{"▁x"}, [][2]int{{0, 1}}},
		{"digits contiguous", `{"type":"Digits","individual_digits":false}`,
			"ab123c4", []string{"ab", "123", "c", "4"}, [][2]int{{0, 2}, {2, 5}, {5, 6}, {6, 7}}},
		{"digits individual", `{"type":"Digits","individual_digits":true}`,
			"a12", []string{"a", "1", "2"}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{"punctuation", `{"type":"Punctuation","behavior":"Isolated"}`,
			"Hi, you!", []string{"Hi", ",", " you", "!"}, [][2]int{{0, 2}, {2, 3}, {3, 7}, {7, 8}}},
		{"whitespace", `{"type":"Whitespace"}`,
			"Hey man!! ça", []string{"Hey", "man", "!!", "ça"}, [][2]int{{0, 3}, {4, 7}, {7, 9}, {10, 13}}},
		{"whitespace split", `{"type":"WhitespaceSplit"}`,
			" a\tb ", []string{"a", "b"}, [][2]int{{1, 2}, {3, 4}}},
		{"split removed", `{"type":"Split","pattern":{"String":"-"},"behavior":"Removed","invert":false}`,
			"a-b--c", []string{"a", "b", "c"}, [][2]int{{0, 1}, {2, 3}, {5, 6}}},
		{"split merged previous", `{"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithPrevious","invert":false}`,
			"a-b--c", []string{"a-", "b-", "-", "c"}, [][2]int{{0, 2}, {2, 4}, {4, 5}, {5, 6}}},
		{"split merged next", `{"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithNext","invert":false}`,
			"a-b--c", []string{"a", "-b", "-", "-c"}, [][2]int{{0, 1}, {1, 3}, {3, 4}, {4, 6}}},
		{"split contiguous", `{"type":"Split","pattern":{"String":"-"},"behavior":"Contiguous","invert":false}`,
			"a-b--c", []string{"a", "-", "b", "--", "c"}, [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 5}, {5, 6}}},
		{"split invert removed", `{"type":"Split","pattern":{"Regex":"\\d+"},"behavior":"Removed","invert":true}`,
			"ab12c3", []string{"12", "3"}, [][2]int{{2, 4}, {5, 6}}},
		{"bytelevel gpt2", `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`,
			"Hi é", []string{"ĠHi", "ĠÃ©"}, [][2]int{{0, 2}, {2, 5}}},
		{"sequence", `{"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true}]}`,
			"a1 b", []string{"a", "1", "b"}, [][2]int{{0, 1}, {1, 2}, {3, 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, offs := runPre(t, tc.js, tc.text)
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(offs, tc.offs) {
				t.Fatalf("got %q %v, want %q %v", got, offs, tc.want, tc.offs)
			}
		})
	}
}

func TestNormalizers(t *testing.T) {
	tests := []struct {
		name, js, text, want string
		offs                 [][2]int // per output character
	}{
		{"nfd", `{"type":"NFD"}`, "é", "e\u0301", [][2]int{{0, 2}, {0, 2}}},
		{"nfc composes onto the starter", `{"type":"NFC"}`, "e\u0301x", "éx", [][2]int{{0, 1}, {3, 4}}},
		{"nfkc", `{"type":"NFKC"}`, "ﬁ", "fi", [][2]int{{0, 3}, {0, 3}}},
		{"nfkd", `{"type":"NFKD"}`, "①", "1", [][2]int{{0, 3}}},
		{"lowercase", `{"type":"Lowercase"}`, "AİB", "ai\u0307b", [][2]int{{0, 1}, {1, 3}, {1, 3}, {3, 4}}},
		{"strip", `{"type":"Strip","strip_left":true,"strip_right":true}`, " \ta b\u3000", "a b", [][2]int{{2, 3}, {3, 4}, {4, 5}}},
		{"replace takes the last matched byte", `{"type":"Replace","pattern":{"String":"ab"},"content":"X"}`, "cab", "cX", [][2]int{{0, 1}, {2, 3}}},
		{"replace regex", `{"type":"Replace","pattern":{"Regex":" {2,}"},"content":" "}`, "a   b", "a b", [][2]int{{0, 1}, {3, 4}, {4, 5}}},
		{"prepend", `{"type":"Prepend","prepend":"▁"}`, "ab", "▁ab", [][2]int{{0, 1}, {0, 1}, {1, 2}}},
		{"strip accents", `{"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"StripAccents"}]}`, "café", "cafe", [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := parseNormalizer(json.RawMessage(tc.js))
			if err != nil {
				t.Fatal(err)
			}
			got, al := n.normalize(tc.text, charSpans(tc.text, 0))
			plain, _ := n.normalize(tc.text, nil)
			if got != tc.want || plain != tc.want {
				t.Fatalf("got %q (untracked %q), want %q", got, plain, tc.want)
			}
			var offs [][2]int
			for i := range got {
				if utf8.RuneStart(got[i]) {
					offs = append(offs, [2]int{int(al[i].s), int(al[i].e)})
				}
			}
			if !reflect.DeepEqual(offs, tc.offs) {
				t.Fatalf("alignments %v, want %v", offs, tc.offs)
			}
		})
	}
}

// decodeWith runs tokens through a decoder given as JSON, in one go and
// token by token.
func decodeWith(t *testing.T, js string, toks []string) string {
	t.Helper()
	d, err := parseDecoder(json.RawMessage(js))
	if err != nil {
		t.Fatal(err)
	}
	run := func() string {
		stages := d.newStages()
		var sb strings.Builder
		emits := make([]emitFn, len(stages))
		for i := len(stages) - 1; i >= 0; i-- {
			if i == len(stages)-1 {
				emits[i] = func(s string, _ bool) { sb.WriteString(s) }
			} else {
				st, next := stages[i+1], emits[i+1]
				emits[i] = func(s string, start bool) { st.push(s, start, next) }
			}
		}
		for _, tok := range toks {
			stages[0].push(tok, true, emits[0])
		}
		for i, st := range stages {
			st.flush(emits[i])
		}
		return sb.String()
	}
	return run()
}

func TestDecoders(t *testing.T) {
	sp := `{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}`
	tests := []struct {
		name, js string
		toks     []string
		want     string
	}{
		{"sentencepiece", sp, []string{"▁Hello", "▁wor", "ld", "<0xE2>", "<0x9C>", "<0x85>"}, "Hello world✅"},
		{"sentencepiece invalid fallback run", sp, []string{"▁a", "<0xE2>", "<0x9C>", "▁b"}, "a\uFFFD\uFFFD b"},
		{"sentencepiece lone continuation", sp, []string{"<0x80>"}, "\uFFFD"},
		{"strip only first", sp, []string{"▁", "▁x"}, " x"},
		{"strip stop", `{"type":"Strip","content":"x","start":0,"stop":2}`, []string{"axxx", "bx"}, "axb"},
		{"metaspace", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`, []string{"▁Hey", "▁▁friend"}, "Hey  friend"},
		{"metaspace first token drops all", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"}`, []string{"▁a▁b", "▁c"}, "ab c"},
		{"metaspace never", `{"type":"Metaspace","replacement":"▁","prepend_scheme":"never"}`, []string{"▁a"}, " a"},
		{"bytelevel", `{"type":"ByteLevel"}`, []string{"Hello", "Ġwor", "ld", "Ġâľ", "ħ"}, "Hello world ✅"},
		{"bytelevel invalid", `{"type":"ByteLevel"}`, []string{"a", "âľ", "b", "ÿ"}, "a\uFFFDb\uFFFD"},
		{"bytelevel raw token", `{"type":"ByteLevel"}`, []string{"<｜User｜>", "Hi"}, "<｜User｜>Hi"},
		{"fuse then replace across pieces", `{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"String":"ab"},"content":"X"}]}`, []string{"xa", "by", "a", "b"}, "xXyX"},
		{"no fuse: replace per token", `{"type":"Replace","pattern":{"String":"ab"},"content":"X"}`, []string{"xa", "by", "ab"}, "xabyX"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := decodeWith(t, tc.js, tc.toks); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLossyPrefix(t *testing.T) {
	tests := []struct {
		in    string
		final bool
		want  string
		n     int
	}{
		{"abc", false, "abc", 3},
		{"a\xe2\x9c", false, "a", 1},
		{"a\xe2\x9c", true, "a\uFFFD", 3},
		{"\xe2\x9cb", false, "\uFFFDb", 3},
		{"\xff\xfe", false, "\uFFFD\uFFFD", 2},
		{"\xed\xa0\x80", true, "\uFFFD\uFFFD\uFFFD", 3}, // surrogates are invalid byte by byte
		{"\xf0\x9f\x98", false, "", 0},
		{"\xf0\x9f\x98\x80", false, "😀", 4},
	}
	for _, tc := range tests {
		got, n := lossyPrefix([]byte(tc.in), tc.final)
		if got != tc.want || n != tc.n {
			t.Errorf("lossyPrefix(%q, %v) = %q, %d; want %q, %d", tc.in, tc.final, got, n, tc.want, tc.n)
		}
	}
}

func TestCleanUpStreaming(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	parts := []string{" ", " .", " ?", "'", " '", "n't", " n", "'m", "'s", "ve", "re", "a", "word", ",", " ,", "!", "é"}
	for range 2000 {
		var chunks []string
		for range 1 + r.IntN(12) {
			chunks = append(chunks, parts[r.IntN(len(parts))])
		}
		full := cleanUpTokenization(strings.Join(chunks, ""))
		d := &StreamDecoder{cleanup: true}
		var sb strings.Builder
		for _, c := range chunks {
			d.settle(c, false, &sb)
		}
		d.settle("", true, &sb)
		if sb.String() != full {
			t.Fatalf("chunks %q: streamed %q, want %q", chunks, sb.String(), full)
		}
	}
}

func TestUnsupportedComponents(t *testing.T) {
	base := func(part, js string) string {
		return `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},` + `"` + part + `":` + js + `}`
	}
	tests := []struct{ name, js, want string }{
		{"model", `{"model":{"type":"Unigram","vocab":[["a",0.0]]}}`, `unsupported model "Unigram"`},
		{"normalizer", base("normalizer", `{"type":"Precompiled","precompiled_charsmap":""}`), `unsupported normalizer "Precompiled"`},
		{"pre_tokenizer", base("pre_tokenizer", `{"type":"BertPreTokenizer"}`), `unsupported pre_tokenizer "BertPreTokenizer"`},
		{"post_processor", base("post_processor", `{"type":"RobertaProcessing"}`), `unsupported post_processor "RobertaProcessing"`},
		{"decoder", base("decoder", `{"type":"WordPiece"}`), `unsupported decoder "WordPiece"`},
		{"nested", base("decoder", `{"type":"Sequence","decoders":[{"type":"CTC"}]}`), `unsupported decoder "CTC"`},
		{"dropout", `{"model":{"type":"BPE","dropout":0.1,"vocab":{"a":0},"merges":[]}}`, `dropout`},
		{"bad merge", `{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}`, `not in vocab`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tc.js), nil, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

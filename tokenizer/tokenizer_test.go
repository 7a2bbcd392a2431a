package tokenizer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// charTokenizer builds a tokenizer.json whose BPE vocabulary is the
// single characters of alphabet (no merges), with the given extra
// top-level members.
func charTokenizer(t *testing.T, alphabet string, extra map[string]any) *Tokenizer {
	t.Helper()
	vocab := map[string]int{"<unk>": 0}
	for _, r := range alphabet {
		if _, ok := vocab[string(r)]; !ok {
			vocab[string(r)] = len(vocab)
		}
	}
	doc := map[string]any{
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "unk_token": "<unk>"},
	}
	for k, v := range extra {
		doc[k] = v
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := LoadBytes(b, nil, Options{Raw: true})
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestAddedTokenOptions(t *testing.T) {
	added := []map[string]any{
		{"id": 100, "content": "[CLS]", "special": true, "normalized": false},
		{"id": 101, "content": "[SEP]", "special": true, "normalized": false},
		{"id": 102, "content": "my", "lstrip": true, "rstrip": true, "normalized": true},
		{"id": 103, "content": "name", "normalized": true},
		{"id": 104, "content": "ony", "single_word": true, "normalized": true},
	}
	tk := charTokenizer(t, "abcdefghijklmnopqrstuvwxyz ", map[string]any{
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "Lowercase"},
	})
	enc := tk.Encode("[CLS] My name is Anthony [SEP]", true)
	type tok struct {
		id  int32
		s   string
		off [2]int
	}
	var got []tok
	for i, id := range enc.IDs {
		if id >= 100 {
			got = append(got, tok{id, enc.Tokens[i], enc.Offsets[i]})
		}
	}
	want := []tok{
		{100, "[CLS]", [2]int{0, 5}},
		{102, " my ", [2]int{5, 9}}, // lstrip and rstrip take the spaces
		{103, "name", [2]int{9, 13}},
		{101, "[SEP]", [2]int{25, 30}}, // "ony" inside "anthony" is not a single word
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("added tokens %+v, want %+v", got, want)
	}
	if d := tk.Decode(enc.IDs, true); strings.Contains(d, "[CLS]") || !strings.Contains(d, "name") {
		t.Fatalf("skip-special decode %q", d)
	}
	if !tk.IsSpecial(100) || tk.IsSpecial(103) {
		t.Fatal("special flags wrong")
	}
	// single_word accepts a standalone occurrence.
	enc = tk.Encode("x ony y", false)
	if !reflect.DeepEqual(enc.IDs[2], int32(104)) {
		t.Fatalf("standalone single_word token not matched: %v", enc.Tokens)
	}
}

func TestUnknownAndFuseUnk(t *testing.T) {
	for _, fuse := range []bool{false, true} {
		doc := fmt.Sprintf(`{"model":{"type":"BPE","vocab":{"<unk>":0,"a":1},"merges":[],"unk_token":"<unk>","fuse_unk":%v}}`, fuse)
		tk, err := LoadBytes([]byte(doc), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		enc := tk.Encode("xyaz", false)
		want := []int32{0, 0, 1, 0}
		offs := [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}}
		if fuse {
			want = []int32{0, 1, 0}
			offs = [][2]int{{0, 2}, {2, 3}, {3, 4}}
		}
		if !reflect.DeepEqual(enc.IDs, want) || !reflect.DeepEqual(enc.Offsets, offs) {
			t.Fatalf("fuse_unk=%v: %v %v", fuse, enc.IDs, enc.Offsets)
		}
	}
}

func TestAPIHelpers(t *testing.T) {
	tk := loadFamily(t, "llama3_1", false)
	if id, ok := tk.TokenID("<|begin_of_text|>"); !ok || id != 128000 {
		t.Fatalf("TokenID = %d, %v", id, ok)
	}
	if s, ok := tk.IDToken(9906); !ok || s != "Hello" {
		t.Fatalf("IDToken = %q, %v", s, ok)
	}
	if _, ok := tk.IDToken(-1); ok {
		t.Fatal("IDToken(-1) found")
	}
	if tk.VocabSize() != 128256 {
		t.Fatalf("VocabSize = %d", tk.VocabSize())
	}
	if id, ok := tk.BOS(); !ok || id != 128000 {
		t.Fatalf("BOS = %d, %v", id, ok)
	}
	if id, ok := tk.EOS(); !ok || id != 128009 {
		t.Fatalf("EOS = %d, %v", id, ok)
	}
	if got := tk.AppendIDs([]int32{7}, "Hi", false); !reflect.DeepEqual(got, []int32{7, 13347}) {
		t.Fatalf("AppendIDs = %v", got)
	}
}

// Stream decoding of random id sequences (including byte-fallback and
// partial UTF-8 tokens) must equal Decode and never split a character.
func TestStreamDecoderRandom(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			for _, raw := range []bool{true, false} {
				tk := loadFamily(t, fam, raw)
				r := rand.New(rand.NewPCG(3, uint64(len(fam))))
				var interesting []int32
				for _, s := range []string{"<0xE2>", "<0x9C>", "<0x85>", "<0xFF>", "▁", "Ġ", "âľ", "ħ", " .", "Ġ.", "Ġ'", "n't", "'s"} {
					if id, ok := tk.TokenID(s); ok {
						interesting = append(interesting, id)
					}
				}
				for range 150 {
					ids := make([]int32, 1+r.IntN(30))
					for i := range ids {
						switch r.IntN(3) {
						case 0:
							if len(interesting) > 0 {
								ids[i] = interesting[r.IntN(len(interesting))]
								continue
							}
							fallthrough
						default:
							ids[i] = int32(r.IntN(tk.VocabSize() + 10))
						}
					}
					for _, skip := range []bool{false, true} {
						want := tk.Decode(ids, skip)
						if got := streamAll(tk, ids, skip); got != want {
							t.Fatalf("raw=%v skip=%v ids %v:\n stream %q\n decode %q", raw, skip, ids, got, want)
						}
					}
				}
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	tk := loadFamily(t, "qwen3", false)
	texts := []string{"Hello, world!", "concurrent tokenizers share one cache", "日本語のテキスト", strings.Repeat("ab ", 50)}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tk.EncodeIDs(s, true)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				i := (g + k) % len(texts)
				if got := tk.EncodeIDs(texts[i], true); !reflect.DeepEqual(got, want[i]) {
					t.Errorf("goroutine %d: %q encoded differently", g, texts[i])
					return
				}
				if k%50 == 0 {
					_ = tk.Encode(texts[i], false)
					_ = tk.Decode(want[i], false)
				}
			}
		}()
	}
	wg.Wait()
}

// fuzzEncodeSeeds are the seeds of the encode/decode fuzz targets.
var fuzzEncodeSeeds = []string{"", "Hello, world!", "a\x00b\xff\xfe", "<|im_start|>x<|im_end|>", "  \n\t", "🏳️‍🌈 émoji", "<0xE2>▁x",
	"İstanbul ǅ", "\u2028\u0085", "a\u0301\u0328 x", "ﬁ① ", "e" + strings.Repeat("\u0301", 35)}

// byteLevelTokenizer is an inline GPT-2 style tokenizer (ByteLevel
// pre-tokenizer and decoder over all 256 byte characters, a few merges, an
// NFC normalizer and ChatML special tokens), so the encode/decode fuzz
// target runs without fixtures.
func byteLevelTokenizer(tb testing.TB) *Tokenizer {
	tb.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := []string{"Ġ t", "h e", "Ġt he", "i n", "Ã ©", "Ġ Ġ"}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		vocab[a+b] = len(vocab)
	}
	doc := map[string]any{
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
		"normalizer":    map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"added_tokens": []map[string]any{
			{"id": 300, "content": "<|im_start|>", "special": true},
			{"id": 301, "content": "<|im_end|>", "special": true},
			{"id": 302, "content": "<think>", "special": false, "normalized": true},
		},
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

// checkEncodeDecode is the body of the encode/decode fuzz targets: offsets
// in range, Encode and EncodeIDs agree, decoding gives valid UTF-8 and the
// stream decoder gives the same text.
func checkEncodeDecode(t *testing.T, name string, tk *Tokenizer, s string, add bool) {
	t.Helper()
	enc := tk.Encode(s, add)
	fixed := validUTF8(s)
	for i, o := range enc.Offsets {
		if o[0] < 0 || o[1] < o[0] || o[1] > len(fixed) {
			t.Fatalf("%s: token %d offsets %v out of range for %q", name, i, o, s)
		}
	}
	checkOffsetOrder(t, name, fixed, enc.Offsets, enc.SpecialMask)
	if ids := tk.EncodeIDs(s, add); !reflect.DeepEqual(nz(ids), nz(enc.IDs)) {
		t.Fatalf("%s: EncodeIDs %v != Encode %v for %q", name, ids, enc.IDs, s)
	}
	dec := tk.Decode(enc.IDs, false)
	if !utf8.ValidString(dec) {
		t.Fatalf("%s: invalid UTF-8 decode", name)
	}
	if got := streamAll(tk, enc.IDs, false); got != dec {
		t.Fatalf("%s: stream %q != decode %q", name, got, dec)
	}
}

// checkOffsetOrder checks that the offsets of the tokens not added by the
// post-processor never go back and that two of them share at most one
// input character (a character split over byte-level tokens, or expanded
// by the normalizer).
func checkOffsetOrder(t *testing.T, name, text string, offs [][2]int, special []bool) {
	t.Helper()
	prev := -1
	for i, o := range offs {
		if special[i] {
			continue
		}
		if prev >= 0 {
			p := offs[prev]
			if o[0] < p[0] || o[1] < p[1] {
				t.Fatalf("%s: token %d offsets %v go back from %v in %q", name, i, o, p, text)
			}
			if o[0] < p[1] {
				if _, w := utf8.DecodeRuneInString(text[o[0]:]); o[0]+w != p[1] {
					t.Fatalf("%s: token %d offsets %v overlap %v by more than a character in %q", name, i, o, p, text)
				}
			}
		}
		prev = i
	}
}

// FuzzEncodeDecode runs on inline tokenizers (no fixtures needed): a
// byte-level BPE with an NFC normalizer, which round-trips any NFC text,
// and a character vocabulary under each normalizer.
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range fuzzEncodeSeeds {
		f.Add(s, true)
	}
	bl := byteLevelTokenizer(f)
	var names []string
	inline := map[string]*Tokenizer{}
	for name := range offsetNormalizers {
		names = append(names, name)
		inline[name] = inlineTokenizer(f, name)
	}
	f.Fuzz(func(t *testing.T, s string, add bool) {
		checkEncodeDecode(t, "bytelevel", bl, s, add)
		for _, name := range names {
			checkEncodeDecode(t, name, inline[name], s, add)
		}
		if !utf8.ValidString(s) {
			return
		}
		nfc, _ := bl.normalizer.normalize(s, nil)
		if got := bl.Decode(bl.EncodeIDs(s, false), false); got != nfc {
			t.Fatalf("bytelevel: round trip of %q gave %q, want its NFC %q", s, got, nfc)
		}
	})
}

// Identity-normalizer families round-trip any valid UTF-8 text.
var roundTripFamilies = []string{"llama3_1", "deepseek_v3", "gptoss"}

// FuzzEncodeDecodeFixtures is FuzzEncodeDecode on the six fixture
// tokenizers (skipped with a message without fixtures, failed under
// CI=true).
func FuzzEncodeDecodeFixtures(f *testing.F) {
	for _, s := range fuzzEncodeSeeds {
		f.Add(s, true)
	}
	all := make(map[string]*Tokenizer)
	for _, fam := range families {
		all[fam] = loadFamily(f, fam, true)
	}
	f.Fuzz(func(t *testing.T, s string, add bool) {
		for fam, tk := range all {
			checkEncodeDecode(t, fam, tk, s, add)
		}
		if !utf8.ValidString(s) {
			return
		}
		for _, fam := range roundTripFamilies {
			tk := all[fam]
			if got := tk.Decode(tk.EncodeIDs(s, false), false); got != s {
				t.Fatalf("%s: round trip of %q gave %q", fam, s, got)
			}
		}
	})
}

// Cutting SentencePiece words before "▁" (metaSplit) must not change any
// encoding: compare against the same model merging whole pieces.
func TestMetaSplitExact(t *testing.T) {
	parts := []string{" ", " ", "▁", ">", "</", "> </", ">▁</", "a", "the", "ing", "\n", "😀", "é", "<0x41>", "<unk>", "x", "  ", "e▁t"}
	for _, fam := range []string{"llama2", "gemma3"} {
		t.Run(fam, func(t *testing.T) {
			tk := loadFamily(t, fam, true)
			if !tk.model.metaSplit {
				t.Fatal("metaSplit is off")
			}
			whole := *tk.model
			whole.metaSplit = false
			whole.cache = newWordCache()
			ref := &Tokenizer{}
			*ref = Tokenizer{model: &whole, normalizer: tk.normalizer, pre: tk.pre, post: tk.post, decoder: tk.decoder,
				added: tk.added, addedRaw: tk.addedRaw, addedNorm: tk.addedNorm, idToTok: tk.idToTok, hasTok: tk.hasTok,
				special: tk.special, addedByContent: tk.addedByContent, raw: true}
			r := rand.New(rand.NewPCG(11, 13))
			for range 400 {
				var sb strings.Builder
				for range 1 + r.IntN(40) {
					sb.WriteString(parts[r.IntN(len(parts))])
				}
				s := sb.String()
				got, want := tk.Encode(s, true), ref.Encode(s, true)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%q:\n split %v\n whole %v", s, got.Tokens, want.Tokens)
				}
			}
		})
	}
}

// A ByteLevel pre-tokenizer over a vocabulary without all 256 ByteLevel
// characters tokenizes the mapped text (no byte mode); offsets still refer
// to the input.
func TestByteLevelWithoutByteMode(t *testing.T) {
	tk := charTokenizer(t, "abcĠÃ©", map[string]any{
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
	})
	if tk.model.byteMode {
		t.Fatal("byte mode should be off")
	}
	enc := tk.Encode("ab é!", false)
	wantToks := []string{"a", "b", "Ġ", "Ã", "©", "<unk>"}
	wantOffs := [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 5}, {3, 5}, {5, 6}}
	if !reflect.DeepEqual(enc.Tokens, wantToks) || !reflect.DeepEqual(enc.Offsets, wantOffs) {
		t.Fatalf("got %q %v", enc.Tokens, enc.Offsets)
	}
	if got := tk.Decode(enc.IDs[:5], false); got != "ab é" {
		t.Fatalf("decode %q", got)
	}
}

func TestByteLevelTrimOffsets(t *testing.T) {
	tk := charTokenizer(t, "abĠ", map[string]any{
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true},
	})
	enc := tk.Encode("a  b", true)
	want := [][2]int{{0, 1}, {2, 2}, {3, 3}, {3, 4}}
	if !reflect.DeepEqual(enc.Offsets, want) {
		t.Fatalf("tokens %q offsets %v, want %v", enc.Tokens, enc.Offsets, want)
	}
}

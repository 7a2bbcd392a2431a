package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// ggufCases is tokenizer/cases.json of the GGUF fixtures: strings with the
// ids llama.cpp's llama-tokenize gives for two vocabularies.
type ggufCases struct {
	Vocabularies map[string]struct {
		GGUF string `json:"gguf"`
	} `json:"vocabularies"`
	Cases []map[string]json.RawMessage `json:"cases"`
}

type ggufCaseIDs struct {
	IDs               []int32 `json:"ids"`
	IDsNoParseSpecial []int32 `json:"ids_no_parse_special"`
}

func readGGUFCases(t *testing.T) (string, ggufCases) {
	t.Helper()
	dir := fixtures.Path(t, "gguf")
	path := fixtures.Path(t, "gguf", "tokenizer", "cases.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c ggufCases
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(c.Cases) == 0 || len(c.Vocabularies) == 0 {
		t.Fatalf("%s: no cases or no vocabularies", path)
	}
	return dir, c
}

// TestGGUFParity checks LoadGGUF against llama-tokenize: every case of
// both vocabularies, with special-token text parsed as special tokens
// (EncodeIDs) and not (AppendIDsSplitSpecial), BOS as the file says.
func TestGGUFParity(t *testing.T) {
	dir, c := readGGUFCases(t)
	for _, vocab := range []string{"spm", "bpe"} {
		t.Run(vocab, func(t *testing.T) {
			v, ok := c.Vocabularies[vocab]
			if !ok {
				t.Fatalf("cases.json has no vocabulary %q", vocab)
			}
			tk, err := LoadGGUF(filepath.Join(dir, v.GGUF), Options{})
			if err != nil {
				t.Fatal(err)
			}
			match := [2]int{}
			for i, cs := range c.Cases {
				var text string
				var want ggufCaseIDs
				if err := json.Unmarshal(cs["text"], &text); err != nil {
					t.Fatalf("case %d: text: %v", i, err)
				}
				if err := json.Unmarshal(cs[vocab], &want); err != nil {
					t.Fatalf("case %d: %s: %v", i, vocab, err)
				}
				for mode, got := range [2][]int32{
					tk.EncodeIDs(text, true),
					tk.AppendIDsSplitSpecial(nil, text, true),
				} {
					w := [2][]int32{want.IDs, want.IDsNoParseSpecial}[mode]
					if slices.Equal(got, w) {
						match[mode]++
						continue
					}
					name := [2]string{"ids", "ids_no_parse_special"}[mode]
					t.Errorf("case %d %q %s:\n got %v\nwant %v", i, text, name, got, w)
				}
				// The slow path (tokens and offsets) gives the same ids.
				if enc := tk.Encode(text, true); !slices.Equal(enc.IDs, tk.EncodeIDs(text, true)) {
					t.Errorf("case %d %q: Encode ids %v differ from EncodeIDs", i, text, enc.IDs)
				}
			}
			t.Logf("%s: %d/%d cases match with specials parsed, %d/%d without", vocab, match[0], len(c.Cases), match[1], len(c.Cases))
		})
	}
}

// TestGGUFRoundTrip decodes the ids of every case back to its text (both
// vocabularies; special-token text encoded as plain text, since
// SentencePiece prefixes a space to the text after a special token), and
// checks that skipSpecial leaves the control tokens out.
func TestGGUFRoundTrip(t *testing.T) {
	dir, c := readGGUFCases(t)
	for _, vocab := range []string{"spm", "bpe"} {
		t.Run(vocab, func(t *testing.T) {
			tk, err := LoadGGUF(filepath.Join(dir, c.Vocabularies[vocab].GGUF), Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, cs := range c.Cases {
				var text string
				if err := json.Unmarshal(cs["text"], &text); err != nil {
					t.Fatal(err)
				}
				ids := tk.AppendIDsSplitSpecial(nil, text, false)
				if got := tk.Decode(ids, false); got != text {
					t.Errorf("case %d: Decode(Encode(%q)) = %q", i, text, got)
				}
				// Streaming gives the same text.
				d := tk.NewStreamDecoder(false)
				var s string
				for _, id := range ids {
					s += d.Add(id)
				}
				if s += d.Flush(); s != text {
					t.Errorf("case %d: streamed decode of %q = %q", i, text, s)
				}
			}
		})
	}
	t.Run("skip special", func(t *testing.T) {
		tk, err := LoadGGUF(filepath.Join(dir, c.Vocabularies["bpe"].GGUF), Options{})
		if err != nil {
			t.Fatal(err)
		}
		ids := tk.EncodeIDs("<|im_start|>user\nhi<|im_end|>", true)
		if got, want := tk.Decode(ids, true), "user\nhi"; got != want {
			t.Errorf("Decode(skipSpecial) = %q, want %q", got, want)
		}
		if got, want := tk.Decode(ids, false), "<|im_start|>user\nhi<|im_end|>"; got != want {
			t.Errorf("Decode = %q, want %q", got, want)
		}
	})
}

// TestGGUFSpecialIDs checks the ids and flags read from the fixtures'
// metadata, as their README states them.
func TestGGUFSpecialIDs(t *testing.T) {
	dir, c := readGGUFCases(t)
	tests := []struct {
		vocab            string
		bos, eos         int32
		size             int
		hasTemplate      bool
		specialID        int32
		specialFirstText string
	}{
		{"spm", 1, 2, 512, false, 0, "<unk>"},
		{"bpe", 49150, 49151, 49152, true, 49149, "<|endoftext|>"},
	}
	for _, tc := range tests {
		t.Run(tc.vocab, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, c.Vocabularies[tc.vocab].GGUF))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tk, err := LoadGGUFFile(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := GGUFChatTemplate(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(tmpl, "<|im_start|>"); got != tc.hasTemplate {
				t.Errorf("chat template %q: has ChatML = %v, want %v", tmpl, got, tc.hasTemplate)
			}
			if id, ok := tk.BOS(); !ok || id != tc.bos {
				t.Errorf("BOS = %d, %v; want %d", id, ok, tc.bos)
			}
			if id, ok := tk.EOS(); !ok || id != tc.eos {
				t.Errorf("EOS = %d, %v; want %d", id, ok, tc.eos)
			}
			if tk.VocabSize() != tc.size {
				t.Errorf("VocabSize = %d, want %d", tk.VocabSize(), tc.size)
			}
			if !tk.IsSpecial(tc.specialID) {
				t.Errorf("id %d is not special", tc.specialID)
			}
			if s, _ := tk.IDToken(tc.specialID); s != tc.specialFirstText {
				t.Errorf("IDToken(%d) = %q, want %q", tc.specialID, s, tc.specialFirstText)
			}
		})
	}
}

// TestEncodeSplitSpecial checks, on a tokenizer.json tokenizer, that
// special-token text is encoded as plain text: no special id comes out,
// the text decodes back, and the detailed and fast paths agree.
func TestEncodeSplitSpecial(t *testing.T) {
	tk, err := Load(fixtures.Path(t, "tokenizers", "qwen3"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\nhi<|im_end|>"
	parsed := tk.EncodeIDs(text, false)
	if !slices.ContainsFunc(parsed, tk.IsSpecial) {
		t.Fatalf("EncodeIDs(%q) = %v has no special token", text, parsed)
	}
	split := tk.AppendIDsSplitSpecial(nil, text, false)
	if slices.ContainsFunc(split, tk.IsSpecial) {
		t.Errorf("AppendIDsSplitSpecial(%q) = %v has a special token", text, split)
	}
	if got := tk.Decode(split, true); got != text {
		t.Errorf("Decode(AppendIDsSplitSpecial(%q)) = %q", text, got)
	}
	if enc := tk.EncodeSplitSpecial(text, false); !slices.Equal(enc.IDs, split) {
		t.Errorf("EncodeSplitSpecial ids %v, AppendIDsSplitSpecial %v", enc.IDs, split)
	}
}

// BenchmarkLoadGGUF measures building the tokenizer of the fixtures'
// byte-level BPE file (49,152 tokens, 48,893 merges).
func BenchmarkLoadGGUF(b *testing.B) {
	path := fixtures.Path(b, "gguf", "tokenizer", "bpe-tokenizer-q4_0.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadGGUFFile(f, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGGUFPre: the tokenizer.json pre-tokenizers of the fixtures get the
// tokenizer.ggml.pre names llama.cpp gives them, and LoadGGUF reads each
// name back to the same regexes.
func TestGGUFPre(t *testing.T) {
	for _, tc := range []struct{ dir, want string }{{"qwen3", "qwen2"}, {"llama3_1", "llama-bpe"}} {
		tk, err := Load(fixtures.Path(t, "tokenizers", tc.dir), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := tk.GGUFPre(); err != nil || got != tc.want {
			t.Errorf("%s: GGUFPre = %q, %v; want %q", tc.dir, got, err, tc.want)
		}
	}
	// A SentencePiece tokenizer (Metaspace) has none.
	tk, err := Load(fixtures.Path(t, "tokenizers", "llama2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tk.GGUFPre(); err == nil {
		t.Errorf("llama2: GGUFPre = %q, want an error", got)
	}
}

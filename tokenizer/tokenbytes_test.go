package tokenizer

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

var byteLevelFamilies = []string{"qwen3", "llama3_1", "deepseek_v3", "gptoss"}

// TestTokenBytesCorpus: for every family and corpus text, the bytes of the
// ids (encoded without special tokens) concatenate to their continuation
// decode. Both load variants are checked: the clean-up pass of llama3_1's
// tokenizer_config.json is not part of the decoder chain (see TokenBytes),
// so the expected text comes from the Raw variant.
func TestTokenBytesCorpus(t *testing.T) {
	corpus := readRecords(t, fixtures.Path(t, "tokenizers", "corpus.jsonl"))
	if len(corpus) == 0 {
		t.Fatal("empty corpus")
	}
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			raw, served := loadFamily(t, fam, true), loadFamily(t, fam, false)
			notOK := 0
			stages := raw.decoder.newStages() // the general path, which the table may shortcut
			for id := range int32(raw.VocabSize()) {
				b, ok := raw.TokenBytes(id)
				if tok, has := raw.IDToken(id); ok && has {
					if s, ok := continuationBytes(stages, tok); !ok || s != string(b) {
						t.Fatalf("id %d: table %q, continuationBytes %q %v", id, b, s, ok)
					}
				}
				if _, has := raw.IDToken(id); has && !raw.IsSpecial(id) && !ok {
					notOK++
				}
				if b2, ok2 := served.TokenBytes(id); ok2 != ok || !bytes.Equal(b, b2) {
					t.Fatalf("id %d: Raw %q %v, served %q %v", id, b, ok, b2, ok2)
				}
			}
			if notOK > 0 {
				t.Errorf("%d non-special tokens have ok=false", notOK)
			}
			for _, r := range corpus {
				ids := raw.EncodeIDs(r.Text, false)
				d := raw.NewContinuationDecoder(true)
				var want strings.Builder
				var got []byte
				for _, id := range ids {
					want.WriteString(d.Add(id))
					b, ok := raw.TokenBytes(id)
					if ok != !raw.IsSpecial(id) {
						t.Errorf("%s: id %d: ok %v, special %v", r.ID, id, ok, raw.IsSpecial(id))
					}
					got = append(got, b...)
				}
				want.WriteString(d.Flush())
				if string(got) != want.String() {
					t.Errorf("%s: TokenBytes %q, continuation decode %q", r.ID, got, want.String())
				}
			}
		})
	}
}

func TestTokenBytesCases(t *testing.T) {
	type tc struct {
		fam  string
		tok  string // token string (looked up with TokenID), or
		id   int32  // id when tok is ""
		want string
		ok   bool
	}
	var cases []tc
	for _, fam := range byteLevelFamilies {
		cases = append(cases,
			tc{fam: fam, tok: "Ã", want: "\xc3", ok: true},      // lead byte of a 2-byte character
			tc{fam: fam, tok: "ðŁ", want: "\xf0\x9f", ok: true}, // first half of an emoji
			tc{fam: fam, tok: "Ċ", want: "\n", ok: true},
			tc{fam: fam, tok: "Ġthe", want: " the", ok: true},
			tc{fam: fam, id: -1},
			tc{fam: fam, id: 1 << 30},
		)
	}
	for _, fam := range []string{"gemma3", "llama2"} {
		cases = append(cases,
			tc{fam: fam, tok: "<0x0A>", want: "\n", ok: true},
			tc{fam: fam, tok: "<0xE2>", want: "\xe2", ok: true},
			tc{fam: fam, tok: "<0xFF>", want: "\xff", ok: true},
			tc{fam: fam, tok: "▁the", want: " the", ok: true}, // the leading space is kept mid-text
			tc{fam: fam, tok: "▁", want: " ", ok: true},
			tc{fam: fam, id: -1},
		)
	}
	cases = append(cases,
		tc{fam: "qwen3", tok: "<think>", want: "<think>", ok: true}, // added, not special
		tc{fam: "qwen3", tok: "<tool_call>", want: "<tool_call>", ok: true},
		tc{fam: "qwen3", tok: "<|im_end|>"},
		tc{fam: "qwen3", tok: "<|endoftext|>"},
		tc{fam: "llama3_1", tok: "<|begin_of_text|>"},
		tc{fam: "llama3_1", tok: "<|eot_id|>"},
		tc{fam: "deepseek_v3", tok: "<｜begin▁of▁sentence｜>"},
		tc{fam: "gptoss", tok: "<|return|>"},
		tc{fam: "gemma3", tok: "<bos>"},
		tc{fam: "gemma3", tok: "<eos>"},
		tc{fam: "llama2", tok: "<s>"},
		tc{fam: "llama2", tok: "</s>"},
	)
	for _, c := range cases {
		tk := loadFamily(t, c.fam, false)
		id := c.id
		if c.tok != "" {
			var ok bool
			if id, ok = tk.TokenID(c.tok); !ok {
				t.Errorf("%s: no token %q", c.fam, c.tok)
				continue
			}
		}
		b, ok := tk.TokenBytes(id)
		if ok != c.ok || string(b) != c.want {
			t.Errorf("%s %q (id %d): %q %v, want %q %v", c.fam, c.tok, id, b, ok, c.want, c.ok)
		}
		if c.tok != "" && tk.IsSpecial(id) == c.ok {
			t.Errorf("%s %q: IsSpecial %v", c.fam, c.tok, tk.IsSpecial(id))
		}
		all := tk.AllTokenBytes()
		if len(all) != tk.VocabSize() {
			t.Errorf("%s: AllTokenBytes has %d entries, VocabSize %d", c.fam, len(all), tk.VocabSize())
		}
		if id >= 0 && int(id) < len(all) && (all[id] != nil) != ok {
			t.Errorf("%s %q: AllTokenBytes entry %q, ok %v", c.fam, c.tok, all[id], ok)
		}
	}
}

// TestTokenBytesEveryByte: in the byte-level families the 256 one-byte
// tokens give their byte.
func TestTokenBytesEveryByte(t *testing.T) {
	for _, fam := range byteLevelFamilies {
		tk := loadFamily(t, fam, false)
		for b := range 256 {
			id, ok := tk.TokenID(string(byteToRune[b]))
			if !ok {
				t.Errorf("%s: no token for byte %#x", fam, b)
				continue
			}
			if got, ok := tk.TokenBytes(id); !ok || !bytes.Equal(got, []byte{byte(b)}) {
				t.Errorf("%s: byte %#x: %q %v", fam, b, got, ok)
			}
		}
	}
}

// TestTokenBytesConcurrent: the first calls may race to build the table
// (run with -race).
func TestTokenBytesConcurrent(t *testing.T) {
	tk, err := Load(fixtures.Path(t, "tokenizers", "llama2"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	res := make([][][]byte, 8)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				tk.TokenBytes(int32(i))
			}
			res[i] = tk.AllTokenBytes()
		}()
	}
	wg.Wait()
	for i := range res {
		if &res[i][0] != &res[0][0] {
			t.Fatal("AllTokenBytes built more than once")
		}
	}
}

// TestContinuationBytesChains covers decoder shapes the fixtures lack.
func TestContinuationBytesChains(t *testing.T) {
	cases := []struct {
		decoder string // tokenizer.json decoder; "" for none
		tok     string
		want    string
		ok      bool
	}{
		{"", "abc", " abc", true},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}`, "▁the", " the", true},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never"}`, "▁a▁b", " a b", true},
		// After Fuse all tokens are the first one: Metaspace drops every ▁.
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}]}`, "▁a", "a", true},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Metaspace","replacement":"▁","prepend_scheme":"never"}]}`, "▁a", " a", true},
		// A per-token Strip applies to each token.
		{`{"type":"Strip","content":" ","start":1,"stop":1}`, "  a  ", " a ", true},
		{`{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Strip","content":" ","start":1,"stop":0}]}`, "<0x20>", "", false},
		{`{"type":"Sequence","decoders":[{"type":"ByteFallback"},{"type":"Strip","content":" ","start":1,"stop":0}]}`, " x", "x", true},
		// After Fuse a trailing Strip only acts at the end of the text.
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":1}]}`, " a", " a", true},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":1}]}`, "a ", "", false},
		// A pattern of several characters can straddle fused tokens.
		{`{"type":"Replace","pattern":{"String":"ab"},"content":"X"}`, "cabab", "cXX", true},
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"String":"ab"},"content":"X"}]}`, "cab", "", false},
		// Byte-level output fed to a non-ASCII pattern.
		{`{"type":"Sequence","decoders":[{"type":"ByteLevel"},{"type":"Replace","pattern":{"String":"▁"},"content":" "}]}`, "âĸģx", " x", true},
		{`{"type":"Sequence","decoders":[{"type":"ByteLevel"},{"type":"Replace","pattern":{"String":"▁"},"content":" "}]}`, "âĸ", "", false},
		{`{"type":"Sequence","decoders":[{"type":"ByteLevel"},{"type":"Replace","pattern":{"String":"x"},"content":"y"}]}`, "âĸx", "\xe2\x96y", true},
		// Byte tokens are bytes only where a token starts.
		{`{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"ByteFallback"}]}`, "<0x41>", "<0x41>", true},
		{`{"type":"ByteFallback"}`, "<0x41>", "A", true},
	}
	for _, c := range cases {
		var stages []stage
		if c.decoder != "" {
			d, err := parseDecoder(json.RawMessage(c.decoder))
			if err != nil {
				t.Fatal(err)
			}
			stages = d.newStages()
		} else {
			stages = []stage{&joinStage{}}
		}
		got, ok := continuationBytes(stages, c.tok)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s %q: %q %v, want %q %v", c.decoder, c.tok, got, ok, c.want, c.ok)
		}
	}
}

// BenchmarkAllTokenBytes: the one-time cost of the table (llama3_1, 128k
// tokens), on a fresh Tokenizer each iteration.
func BenchmarkAllTokenBytes(b *testing.B) {
	tk := loadFamily(b, "llama3_1", false)
	n := 0
	for b.Loop() {
		fresh := &Tokenizer{decoder: tk.decoder, idToTok: tk.idToTok, hasTok: tk.hasTok, special: tk.special}
		all := fresh.AllTokenBytes()
		n = 0
		for _, t := range all {
			n += len(t)
		}
	}
	b.ReportMetric(float64(len(tk.idToTok)), "tokens")
	b.ReportMetric(float64(n), "bytes")
}

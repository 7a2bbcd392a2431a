package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

var families = []string{"qwen3", "llama3_1", "gemma3", "deepseek_v3", "gptoss", "llama2"}

// fixtureRecord is one line of expected/<family>.jsonl (see the fixtures
// README for every field).
type fixtureRecord struct {
	ID                            string   `json:"id"`
	Text                          string   `json:"text"`
	IDs                           []int32  `json:"ids"`
	Tokens                        []string `json:"tokens"`
	Offsets                       [][2]int `json:"offsets"`
	OffsetsBytes                  [][2]int `json:"offsets_bytes"`
	SpecialTokensMask             []int    `json:"special_tokens_mask"`
	IDsNoSpecial                  []int32  `json:"ids_no_special"`
	TokensNoSpecial               []string `json:"tokens_no_special"`
	OffsetsNoSpecial              [][2]int `json:"offsets_no_special"`
	Decode                        string   `json:"decode"`
	DecodeSkipSpecial             string   `json:"decode_skip_special"`
	DecodeNoSpecial               string   `json:"decode_no_special"`
	IDsTransformers               []int32  `json:"ids_transformers"`
	DecodeTransformers            *string  `json:"decode_transformers"`
	DecodeSkipSpecialTransformers *string  `json:"decode_skip_special_transformers"`
}

func readRecords(t testing.TB, path string) []fixtureRecord {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixtureRecord
	// Split on "\n" only: texts may hold raw U+2028/U+2029/U+0085.
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var r fixtureRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, r)
	}
	return out
}

// loadCache shares loaded tokenizers between the tests of one run.
var loadCache sync.Map

func loadFamily(t testing.TB, fam string, raw bool) *Tokenizer {
	t.Helper()
	key := fmt.Sprint(fam, raw)
	if v, ok := loadCache.Load(key); ok {
		return v.(*Tokenizer)
	}
	// Both variants are assembled on one parsed tokenizer.json, which halves
	// the loading time of the suite.
	dir := fixtures.Path(t, "tokenizers", fam)
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := parseTokenizerJSON(tj)
	if err != nil {
		t.Fatal(err)
	}
	var out *Tokenizer
	for _, r := range []bool{true, false} {
		tk, err := p.assemble(cfg, Options{Raw: r})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := loadCache.LoadOrStore(fmt.Sprint(fam, r), tk)
		if r == raw {
			out = v.(*Tokenizer)
		}
	}
	return out
}

// cpToBytes converts code-point offsets to byte offsets of text.
func cpToBytes(text string, offs [][2]int) [][2]int {
	idx := make([]int, 0, len(text)+1)
	for i := range text {
		idx = append(idx, i)
	}
	idx = append(idx, len(text))
	out := make([][2]int, len(offs))
	for k, o := range offs {
		out[k] = [2]int{idx[o[0]], idx[o[1]]}
	}
	return out
}

func TestParity(t *testing.T) {
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			t.Parallel()
			recs := readRecords(t, fixtures.Path(t, "tokenizers", "expected", fam+".jsonl"))
			raw := loadFamily(t, fam, true)
			tf := loadFamily(t, fam, false)
			checks, fails := 0, 0
			check := func(r fixtureRecord, what string, got, want any) {
				checks++
				if !reflect.DeepEqual(got, want) {
					fails++
					t.Errorf("%s %q: %s\n got  %v\n want %v", r.ID, trunc(r.Text), what, got, want)
				}
			}
			for _, r := range recs {
				enc := raw.Encode(r.Text, true)
				check(r, "ids", nz(enc.IDs), nz(r.IDs))
				check(r, "tokens", nzs(enc.Tokens), nzs(r.Tokens))
				check(r, "offsets (bytes)", nzo(enc.Offsets), nzo(r.OffsetsBytes))
				mask := make([]int, len(enc.SpecialMask))
				for i, m := range enc.SpecialMask {
					if m {
						mask[i] = 1
					}
				}
				check(r, "special_tokens_mask", nzi(mask), nzi(r.SpecialTokensMask))
				check(r, "EncodeIDs", nz(raw.EncodeIDs(r.Text, true)), nz(r.IDs))
				ns := raw.Encode(r.Text, false)
				check(r, "ids_no_special", nz(ns.IDs), nz(r.IDsNoSpecial))
				check(r, "tokens_no_special", nzs(ns.Tokens), nzs(r.TokensNoSpecial))
				check(r, "offsets_no_special", nzo(ns.Offsets), nzo(cpToBytes(r.Text, r.OffsetsNoSpecial)))
				check(r, "EncodeIDs no special", nz(raw.EncodeIDs(r.Text, false)), nz(r.IDsNoSpecial))
				check(r, "decode", raw.Decode(r.IDs, false), r.Decode)
				check(r, "decode_skip_special", raw.Decode(r.IDs, true), r.DecodeSkipSpecial)
				check(r, "decode_no_special", raw.Decode(r.IDsNoSpecial, false), r.DecodeNoSpecial)
				check(r, "stream decode", streamAll(raw, r.IDs, false), r.Decode)
				check(r, "stream decode skip", streamAll(raw, r.IDs, true), r.DecodeSkipSpecial)

				wantTF := r.IDs
				if r.IDsTransformers != nil {
					wantTF = r.IDsTransformers
				}
				check(r, "ids (transformers)", nz(tf.EncodeIDs(r.Text, true)), nz(wantTF))
				check(r, "Encode ids (transformers)", nz(tf.Encode(r.Text, true).IDs), nz(wantTF))
				decTF, skipTF := r.Decode, r.DecodeSkipSpecial
				if r.DecodeTransformers != nil {
					decTF = *r.DecodeTransformers
				}
				if r.DecodeSkipSpecialTransformers != nil {
					skipTF = *r.DecodeSkipSpecialTransformers
				}
				check(r, "decode (transformers)", tf.Decode(r.IDs, false), decTF)
				check(r, "decode skip (transformers)", tf.Decode(r.IDs, true), skipTF)
				check(r, "stream decode (transformers)", streamAll(tf, r.IDs, false), decTF)
			}
			t.Logf("%s: %d records, %d checks, %d failed", fam, len(recs), checks, fails)
		})
	}
}

// streamAll decodes through a StreamDecoder, checking that no delta splits
// a UTF-8 character.
func streamAll(tk *Tokenizer, ids []int32, skip bool) string {
	d := tk.NewStreamDecoder(skip)
	var sb strings.Builder
	for _, id := range ids {
		s := d.Add(id)
		if !utf8.ValidString(s) {
			return "invalid UTF-8 delta " + fmt.Sprintf("%q", s)
		}
		sb.WriteString(s)
	}
	sb.WriteString(d.Flush())
	return sb.String()
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// nz* normalise nil and empty slices for comparison.
func nz(v []int32) []int32 {
	if v == nil {
		return []int32{}
	}
	return v
}

func nzs(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func nzo(v [][2]int) [][2]int {
	if v == nil {
		return [][2]int{}
	}
	return v
}

func nzi(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}

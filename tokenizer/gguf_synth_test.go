package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
)

// ggufKV is one metadata entry for writeGGUF: a string, bool, uint32,
// []string, []float32 or []int32 value.
type ggufKV struct {
	key string
	val any
}

// writeGGUF writes a GGUF v3 file with the given metadata and no tensors.
func writeGGUF(t *testing.T, kvs ...ggufKV) string {
	t.Helper()
	var b bytes.Buffer
	le := binary.LittleEndian
	u32 := func(v uint32) { b.Write(le.AppendUint32(nil, v)) }
	u64 := func(v uint64) { b.Write(le.AppendUint64(nil, v)) }
	str := func(s string) { u64(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	u32(3)
	u64(0)
	u64(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.key)
		switch v := kv.val.(type) {
		case string:
			u32(8)
			str(v)
		case bool:
			u32(7)
			if v {
				b.WriteByte(1)
			} else {
				b.WriteByte(0)
			}
		case uint32:
			u32(4)
			u32(v)
		case []string:
			u32(9)
			u32(8)
			u64(uint64(len(v)))
			for _, s := range v {
				str(s)
			}
		case []float32:
			u32(9)
			u32(6)
			u64(uint64(len(v)))
			for _, x := range v {
				u32(math.Float32bits(x))
			}
		case []int32:
			u32(9)
			u32(5)
			u64(uint64(len(v)))
			for _, x := range v {
				u32(uint32(x))
			}
		default:
			t.Fatalf("writeGGUF: unsupported value %T", v)
		}
	}
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// spmVocab is a small SentencePiece vocabulary: "ab" and "ba" have equal
// scores and "ba" the lower id, so that only the leftmost-first rule of
// llama.cpp gives "▁", "ab", "a" for "aba".
func spmVocab() []ggufKV {
	toks := []string{"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "▁", "a", "b", "ba", "ab", "▁a", "<|user|>"}
	scores := []float32{0, 0, 0, 0, 0, -10, -10, -10, -1, -1, -5, 0}
	types := []int32{2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 4}
	return []ggufKV{
		{"general.architecture", "llama"},
		{GGUFModelKey, "llama"},
		{ggufTokensKey, toks},
		{ggufScoresKey, scores},
		{ggufTypesKey, types},
		{ggufBOSKey, uint32(1)},
		{ggufEOSKey, uint32(2)},
		{ggufUNKKey, uint32(0)},
	}
}

func TestGGUFSentencePieceRules(t *testing.T) {
	tests := []struct {
		name  string
		extra []ggufKV
		text  string
		split bool
		want  []int32
	}{
		{"equal scores merge leftmost first", nil, "aba", false, []int32{1, 5, 9, 6}},
		{"higher score first", nil, "ab a", false, []int32{1, 5, 9, 10}},
		{"byte fallback", nil, "é", false, []int32{1, 5, 3, 4}},
		{"user-defined token matched, space prefixed after it", nil, "a<|user|>a", false, []int32{1, 10, 11, 10}},
		{"user-defined tokens are matched without parse_special too", nil, "<|user|>", true, []int32{1, 11}},
		{"control token parsed", nil, "</s>", false, []int32{1, 2}},
		{"add_bos_token false, add_eos_token true", []ggufKV{{ggufAddBOSKey, false}, {ggufAddEOSKey, true}}, "a", false, []int32{10, 2}},
		{"add_space_prefix false", []ggufKV{{ggufAddSpaceKey, false}}, "a a", false, []int32{1, 6, 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk, err := LoadGGUF(writeGGUF(t, append(spmVocab(), tc.extra...)...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := tk.EncodeIDs(tc.text, true)
			if tc.split {
				got = tk.AppendIDsSplitSpecial(nil, tc.text, true)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("encode %q = %v, want %v", tc.text, got, tc.want)
			}
		})
	}
	tk, err := LoadGGUF(writeGGUF(t, spmVocab()...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.Decode([]int32{1, 5, 9, 6, 5, 3, 4}, true); got != "aba é" {
		t.Errorf("Decode = %q, want %q", got, "aba é")
	}
	if !tk.IsSpecial(2) || tk.IsSpecial(11) {
		t.Errorf("IsSpecial(</s>) = %v, IsSpecial(<|user|>) = %v; want true, false", tk.IsSpecial(2), tk.IsSpecial(11))
	}
}

func TestGGUFErrors(t *testing.T) {
	bpe := func(pre string) []ggufKV {
		return []ggufKV{
			{GGUFModelKey, "gpt2"},
			{GGUFPreKey, pre},
			{ggufTokensKey, []string{"a", "b", "ab"}},
			{ggufMergesKey, []string{"a b"}},
		}
	}
	without := func(kvs []ggufKV, key string) []ggufKV {
		return slices.DeleteFunc(kvs, func(kv ggufKV) bool { return kv.key == key })
	}
	tests := []struct {
		name string
		kvs  []ggufKV
		want []string // substrings of the error
	}{
		{"no tokenizer", []ggufKV{{"general.architecture", "llama"}}, []string{`"tokenizer.ggml.model" is missing`}},
		{"t5", []ggufKV{{GGUFModelKey, "t5"}}, []string{`tokenizer.ggml.model "t5" is not supported`, `"gpt2"`, `"llama"`}},
		{"bert", []ggufKV{{GGUFModelKey, "bert"}}, []string{`"bert" is not supported`}},
		{"model key of the wrong type", []ggufKV{{GGUFModelKey, uint32(1)}}, []string{GGUFModelKey, "STRING"}},
		{"unknown pre", bpe("nonsense"), []string{`tokenizer.ggml.pre "nonsense"`, "qwen2", "llama-bpe"}},
		{"no merges", without(bpe("qwen2"), ggufMergesKey), []string{`"tokenizer.ggml.merges" is missing`}},
		{"bad merge", append(without(bpe("qwen2"), ggufMergesKey), ggufKV{ggufMergesKey, []string{"ab"}}), []string{`tokenizer.ggml.merges[0] "ab"`}},
		{"no tokens", without(spmVocab(), ggufTokensKey), []string{`"tokenizer.ggml.tokens"`, "missing"}},
		{"duplicate token", append(without(spmVocab(), ggufTokensKey), ggufKV{ggufTokensKey, []string{"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "▁", "a", "b", "ba", "ab", "▁a", "a"}}), []string{`duplicate token "a"`}},
		{"short scores", append(without(spmVocab(), ggufScoresKey), ggufKV{ggufScoresKey, []float32{0}}), []string{"tokenizer.ggml.scores has 1 scores for 12 tokens"}},
		{"add_bos without bos", append(bpe("glm4"), ggufKV{ggufAddBOSKey, true}), []string{"add_bos_token is true but tokenizer.ggml.bos_token_id is not set"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeGGUF(t, tc.kvs...)
			_, err := LoadGGUF(path, Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(tc.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := LoadGGUF(filepath.Join(t.TempDir(), "missing.gguf"), Options{}); err == nil {
		t.Error("LoadGGUF of a missing file: no error")
	}
}

func TestGGUFPreTokenizers(t *testing.T) {
	names := GGUFPreTokenizers()
	for _, want := range []string{"default", "llama3", "llama-bpe", "qwen2", "gpt-2", "smollm", "deepseek-llm", "deepseek-coder", "deepseek-v3", "gpt-4o", "tekken", "falcon", "starcoder"} {
		if !slices.Contains(names, want) {
			t.Errorf("GGUFPreTokenizers lacks %q", want)
		}
	}
	// Every pattern of the table compiles, and every pre-tokenizer loads
	// and splits text.
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			kvs := []ggufKV{
				{GGUFModelKey, "gpt2"},
				{GGUFPreKey, name},
				{ggufTokensKey, byteLevelAlphabet()},
				{ggufMergesKey, []string{"a b"}},
				{ggufBOSKey, uint32(0)},
			}
			tk, err := LoadGGUF(writeGGUF(t, kvs...), Options{Raw: true})
			if err != nil {
				t.Fatal(err)
			}
			text := "Hello world, 12345 don't\n  x"
			if got := tk.Decode(tk.EncodeIDs(text, false), false); got != text {
				t.Errorf("round trip %q = %q", text, got)
			}
		})
	}
}

// byteLevelAlphabet is the 256 byte-level characters plus "ab".
func byteLevelAlphabet() []string {
	var out []string
	for b := range 256 {
		out = append(out, string(byteToRune[b]))
	}
	return append(out, "ab")
}

func TestLoadPath(t *testing.T) {
	file := writeGGUF(t, spmVocab()...)
	dir := filepath.Dir(file)
	for _, path := range []string{file, dir} {
		tk, err := LoadPath(path, Options{})
		if err != nil {
			t.Fatalf("LoadPath(%s): %v", path, err)
		}
		if got := tk.EncodeIDs("aba", true); !slices.Equal(got, []int32{1, 5, 9, 6}) {
			t.Errorf("LoadPath(%s): encode = %v", path, got)
		}
	}
	// tokenizer.json wins over the GGUF file beside it.
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model": {"type": "BPE", "vocab": {"x": 0}, "merges": []}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tk, err := LoadPath(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 1 {
		t.Errorf("LoadPath of a folder with tokenizer.json and a .gguf: vocab size %d, want tokenizer.json's 1", tk.VocabSize())
	}
	if _, err := LoadPath(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("LoadPath of a missing path: no error")
	}
}

func TestGGUFChatTemplates(t *testing.T) {
	open := func(kvs ...ggufKV) *gguf.File {
		f, err := gguf.Open(writeGGUF(t, kvs...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	f := open(ggufKV{GGUFChatTemplateKey, "{{ messages }}"},
		ggufKV{"tokenizer.chat_templates", []string{"tool_use"}},
		ggufKV{"tokenizer.chat_template.tool_use", "{{ tools }}"})
	if s, err := GGUFChatTemplate(f); err != nil || s != "{{ messages }}" {
		t.Errorf("GGUFChatTemplate = %q, %v", s, err)
	}
	if m, err := GGUFNamedChatTemplates(f); err != nil || len(m) != 1 || m["tool_use"] != "{{ tools }}" {
		t.Errorf("GGUFNamedChatTemplates = %v, %v", m, err)
	}
	none := open(ggufKV{GGUFModelKey, "llama"})
	if s, err := GGUFChatTemplate(none); err != nil || s != "" {
		t.Errorf("GGUFChatTemplate without one = %q, %v", s, err)
	}
	if m, err := GGUFNamedChatTemplates(none); err != nil || len(m) != 0 {
		t.Errorf("GGUFNamedChatTemplates without any = %v, %v", m, err)
	}
	bad := open(ggufKV{GGUFChatTemplateKey, uint32(3)}, ggufKV{"tokenizer.chat_templates", []string{"rag"}})
	if _, err := GGUFChatTemplate(bad); err == nil || !strings.Contains(err.Error(), GGUFChatTemplateKey) {
		t.Errorf("GGUFChatTemplate of a number: %v", err)
	}
	if _, err := GGUFNamedChatTemplates(bad); err == nil || !strings.Contains(err.Error(), `"rag"`) {
		t.Errorf("GGUFNamedChatTemplates with a missing template: %v", err)
	}
}

// TestGGUFTokenTypeFixups checks llama.cpp's corrections of token types by
// text: an end-of-turn token stored as NORMAL is still a special token,
// gpt-oss's "<|channel|>" is matched but not special, and with "<|return|>"
// and "<|call|>" present "<|end|>" is no longer special.
func TestGGUFTokenTypeFixups(t *testing.T) {
	toks := append(byteLevelAlphabet(), "<|im_end|>", "<|channel|>", "<|end|>", "<|return|>", "<|call|>")
	types := make([]int32, len(toks))
	for i := range types {
		types[i] = 1
	}
	n := int32(len(toks))
	types[n-4] = 3 // <|channel|> stored as CONTROL
	types[n-3] = 3 // <|end|>
	tk, err := LoadGGUF(writeGGUF(t,
		ggufKV{GGUFModelKey, "gpt2"}, ggufKV{GGUFPreKey, "gpt-4o"},
		ggufKV{ggufTokensKey, toks}, ggufKV{ggufTypesKey, types}, ggufKV{ggufMergesKey, []string{"a b"}},
	), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id            int32
		special       bool
		matchedAsText bool // matched in text even with split_special_tokens
	}{
		{n - 5, true, false}, // <|im_end|>: NORMAL in the file, CONTROL by its text
		{n - 4, false, true}, // <|channel|>: USER_DEFINED
		{n - 3, false, true}, // <|end|>: USER_DEFINED next to <|return|> and <|call|>
		{n - 2, true, false}, // <|return|>
	}
	for _, tc := range tests {
		tok, _ := tk.IDToken(tc.id)
		if tk.IsSpecial(tc.id) != tc.special {
			t.Errorf("%s: IsSpecial = %v, want %v", tok, !tc.special, tc.special)
		}
		if got := tk.EncodeIDs(tok, false); !slices.Equal(got, []int32{tc.id}) {
			t.Errorf("%s: EncodeIDs = %v, want [%d]", tok, got, tc.id)
		}
		got := tk.AppendIDsSplitSpecial(nil, tok, false)
		if matched := slices.Equal(got, []int32{tc.id}); matched != tc.matchedAsText {
			t.Errorf("%s: AppendIDsSplitSpecial = %v; matched %v, want %v", tok, got, matched, tc.matchedAsText)
		}
	}
}

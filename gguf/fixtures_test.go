package gguf

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// manifest is the part of fixtures/gguf/manifest.json these tests read.
type manifest struct {
	Models map[string]struct {
		Architecture  string  `json:"general.architecture"`
		Hidden        int     `json:"hidden_size"`
		Intermediate  int     `json:"intermediate_size"`
		Layers        int     `json:"num_hidden_layers"`
		Heads         int     `json:"num_attention_heads"`
		KVHeads       int     `json:"num_key_value_heads"`
		HeadDim       int     `json:"head_dim"`
		Vocab         int     `json:"vocab_size"`
		RopeTheta     float64 `json:"rope_theta"`
		RMSNormEps    float64 `json:"rms_norm_eps"`
		ContextLength int     `json:"context_length"`
	} `json:"models"`
	Files []struct {
		File     string `json:"file"`
		Bytes    int64  `json:"bytes"`
		Family   string `json:"family"`
		FileType int    `json:"general.file_type"`
		Tensors  map[string]struct {
			Type      string  `json:"type"`
			Ne        []int64 `json:"ne"`
			SHA256Raw string  `json:"sha256_raw"`
		} `json:"tensors"`
	} `json:"files"`
}

func loadManifest(t *testing.T) (string, *manifest) {
	t.Helper()
	p := fixtures.Path(t, "gguf", "manifest.json")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if len(m.Files) == 0 {
		t.Fatalf("%s lists no files", p)
	}
	return filepath.Dir(p), &m
}

// TestFixtureTensors opens every GGUF file of the manifest and checks its
// tensors' names, types, dims and the sha256 of their bytes as stored.
func TestFixtureTensors(t *testing.T) {
	dir, m := loadManifest(t)
	for _, mf := range m.Files {
		t.Run(mf.File, func(t *testing.T) {
			f, err := Open(filepath.Join(dir, mf.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version != 3 || f.Alignment != DefaultAlignment {
				t.Errorf("version %d alignment %d, want 3 and %d", f.Version, f.Alignment, DefaultAlignment)
			}
			if ft, err := f.Uint32(FileTypeKey); err != nil || int(ft) != mf.FileType {
				t.Errorf("%s = %d (%v), want %d", FileTypeKey, ft, err, mf.FileType)
			}
			if got := len(f.Tensors()); got != len(mf.Tensors) {
				t.Errorf("%d tensors, manifest lists %d", got, len(mf.Tensors))
			}
			for name, want := range mf.Tensors {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("tensor %s missing", name)
					continue
				}
				if ti.Type.String() != want.Type || !slices.Equal(ti.Dims, want.Ne) {
					t.Errorf("%s: %v %v, want %s %v", name, ti.Type, ti.Dims, want.Type, want.Ne)
				}
				data, err := f.TensorData(name)
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(data)) != ti.Size {
					t.Errorf("%s: %d bytes of data, info says %d", name, len(data), ti.Size)
				}
				sum := sha256.Sum256(data)
				if got := hex.EncodeToString(sum[:]); got != want.SHA256Raw {
					t.Errorf("%s: sha256 of the raw bytes %s, want %s", name, got, want.SHA256Raw)
				}
			}
		})
	}
}

// TestFixtureMetadata reads the hyperparameters and tokenizer keys of every
// file and compares them with the model table of fixtures/gguf/README.md
// (manifest "models").
func TestFixtureMetadata(t *testing.T) {
	dir, m := loadManifest(t)
	for _, mf := range m.Files {
		t.Run(mf.File, func(t *testing.T) {
			want, ok := m.Models[mf.Family]
			if !ok {
				t.Fatalf("manifest has no model %q", mf.Family)
			}
			f, err := Open(filepath.Join(dir, mf.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			arch, err := f.Architecture()
			if err != nil || arch != want.Architecture {
				t.Fatalf("architecture %q (%v), want %q", arch, err, want.Architecture)
			}
			type intKey struct {
				key  string
				want int
			}
			ints := []intKey{
				{arch + ".block_count", want.Layers},
				{arch + ".embedding_length", want.Hidden},
				{arch + ".feed_forward_length", want.Intermediate},
				{arch + ".attention.head_count", want.Heads},
				{arch + ".attention.head_count_kv", want.KVHeads},
				{arch + ".context_length", want.ContextLength},
			}
			// The converter writes key_length/value_length only when the HF
			// config has head_dim (qwen3), and rope.dimension_count and
			// vocab_size only for llama.
			if arch == "qwen3" {
				ints = append(ints, intKey{arch + ".attention.key_length", want.HeadDim}, intKey{arch + ".attention.value_length", want.HeadDim})
			} else {
				ints = append(ints, intKey{arch + ".rope.dimension_count", want.HeadDim}, intKey{arch + ".vocab_size", want.Vocab})
				if f.Has(arch + ".attention.key_length") {
					t.Errorf("%s.attention.key_length present; the README says the llama files lack it", arch)
				}
			}
			for _, c := range ints {
				got, err := f.Int(c.key)
				if err != nil || got != c.want {
					t.Errorf("%s = %d (%v), want %d", c.key, got, err, c.want)
				}
				if _, err := f.Uint32(c.key); err != nil {
					t.Errorf("%s: %v (the converter writes UINT32)", c.key, err)
				}
			}
			for _, c := range []struct {
				key  string
				want float64
			}{
				{arch + ".rope.freq_base", want.RopeTheta},
				{arch + ".attention.layer_norm_rms_epsilon", want.RMSNormEps},
			} {
				got, err := f.Float32(c.key)
				if err != nil || got != float32(c.want) {
					t.Errorf("%s = %v (%v), want %v", c.key, got, err, float32(c.want))
				}
			}

			// Tokenizer keys (README "Tokenizer").
			if s, err := f.String("tokenizer.ggml.model"); err != nil || s != "llama" {
				t.Errorf("tokenizer.ggml.model = %q (%v), want llama", s, err)
			}
			tokens, err := f.Strings("tokenizer.ggml.tokens")
			if err != nil || len(tokens) != want.Vocab {
				t.Fatalf("tokenizer.ggml.tokens: %d tokens (%v), want %d", len(tokens), err, want.Vocab)
			}
			if tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" || tokens[3] != "<0x00>" {
				t.Errorf("first tokens %q", tokens[:4])
			}
			scores, err := f.Float32s("tokenizer.ggml.scores")
			if err != nil || len(scores) != want.Vocab {
				t.Errorf("tokenizer.ggml.scores: %d scores (%v), want %d", len(scores), err, want.Vocab)
			} else if scores[1] != -1000 {
				t.Errorf("score of <s> %v, want -1000 (CONTROL)", scores[1])
			}
			types, err := f.Int32s("tokenizer.ggml.token_type")
			if err != nil || len(types) != want.Vocab {
				t.Errorf("tokenizer.ggml.token_type: %d types (%v), want %d", len(types), err, want.Vocab)
			} else if types[0] != 3 || types[1] != 3 || types[2] != 3 || types[3] != 6 || types[want.Vocab-1] != 1 {
				t.Errorf("token types %v ... %v, want CONTROL (3) x3, BYTE (6), ..., NORMAL (1)", types[:4], types[want.Vocab-1])
			}
			for _, c := range []struct {
				key  string
				want int
			}{
				{"tokenizer.ggml.bos_token_id", 1},
				{"tokenizer.ggml.eos_token_id", 2},
				{"tokenizer.ggml.unknown_token_id", 0},
			} {
				if got, err := f.Int(c.key); err != nil || got != c.want {
					t.Errorf("%s = %d (%v), want %d", c.key, got, err, c.want)
				}
			}
			for _, c := range []struct {
				key  string
				want bool
			}{
				{"tokenizer.ggml.add_bos_token", true},
				{"tokenizer.ggml.add_eos_token", false},
			} {
				if got, err := f.Bool(c.key); err != nil || got != c.want {
					t.Errorf("%s = %v (%v), want %v", c.key, got, err, c.want)
				}
			}
		})
	}
}

// TestFixtureBPETokenizerFile reads the byte-level BPE vocabulary of
// tokenizer/bpe-tokenizer-q4_0.gguf (README "Tokenizer cases").
func TestFixtureBPETokenizerFile(t *testing.T) {
	f, err := Open(fixtures.Path(t, "gguf", "tokenizer", "bpe-tokenizer-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for key, want := range map[string]string{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"} {
		if got, err := f.String(key); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %q", key, got, err, want)
		}
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(tokens) != 49152 {
		t.Fatalf("tokenizer.ggml.tokens: %d (%v), want 49152", len(tokens), err)
	}
	for id, want := range map[int]string{49149: "<|endoftext|>", 49150: "<|im_start|>", 49151: "<|im_end|>"} {
		if tokens[id] != want {
			t.Errorf("token %d = %q, want %q", id, tokens[id], want)
		}
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil || len(merges) != 48893 {
		t.Errorf("tokenizer.ggml.merges: %d (%v), want 48893", len(merges), err)
	}
	for key, want := range map[string]int{"tokenizer.ggml.bos_token_id": 49150, "tokenizer.ggml.eos_token_id": 49151, "tokenizer.ggml.padding_token_id": 49149} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", key, got, err, want)
		}
	}
	if b, err := f.Bool("tokenizer.ggml.add_bos_token"); err != nil || b {
		t.Errorf("tokenizer.ggml.add_bos_token = %v (%v), want false", b, err)
	}
	if tmpl, err := f.String("tokenizer.chat_template"); err != nil || len(tmpl) == 0 {
		t.Errorf("tokenizer.chat_template: %d bytes (%v)", len(tmpl), err)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Type != Q4_0 || !slices.Equal(emb.Dims, []int64{64, 49152}) {
		t.Errorf("token_embd.weight: %+v, want Q4_0 [64 49152]", emb)
	}
}

// TestFixtureTruncated opens a real file cut in its tensor data: an
// ErrTruncated error naming a tensor.
func TestFixtureTruncated(t *testing.T) {
	b, err := os.ReadFile(fixtures.Path(t, "gguf", "llama", "llama-q4_k_m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "cut.gguf")
	if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(p)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "tensor \"") || !strings.Contains(err.Error(), "cut.gguf") {
		t.Errorf("error %v, want ErrTruncated naming the file and a tensor", err)
	}
}

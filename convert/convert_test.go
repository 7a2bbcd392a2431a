package convert

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/model/safetensors"
	"github.com/troupe-ai/troupe/quant"
	"github.com/troupe-ai/troupe/tokenizer"
)

// tinyCheckpoint writes a random tiny checkpoint of arch with a byte-level
// tokenizer.
func tinyCheckpoint(t *testing.T, arch string) string {
	t.Helper()
	return tinyCheckpointWith(t, arch, nil)
}

// tinyCheckpointWith is tinyCheckpoint with config.json keys set.
func tinyCheckpointWith(t *testing.T, arch string, set map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	c, err := checkpoint.Tiny(arch)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(c, set)
	if err := checkpoint.Write(dir, c, checkpoint.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizerSized(dir, 512); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWriteF32: an f32 file holds the checkpoint's tensors exactly, under
// llama.cpp's names (llama's Q/K rows permuted, which un-permuting gives
// back), the architecture's keys, and a tokenizer that encodes as the
// checkpoint's tokenizer.json does.
func TestWriteF32(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3_text"} {
		t.Run(arch, func(t *testing.T) {
			dir := tinyCheckpoint(t, arch)
			out := filepath.Join(t.TempDir(), "m.gguf")
			done := 0
			if err := Write(dir, out, Options{Type: "f32", Progress: func(d, n int) { done = d }}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if done != len(f.Tensors()) {
				t.Errorf("progress reached %d of %d tensors", done, len(f.Tensors()))
			}
			a := archs[arch]
			if got, _ := f.Architecture(); got != a.name {
				t.Errorf("architecture %q, want %q", got, a.name)
			}
			for key, want := range map[string]int{"block_count": 2, "embedding_length": 64, "feed_forward_length": 160,
				"attention.head_count": 4, "attention.head_count_kv": 2, "context_length": 2048} {
				if got, err := f.Int(a.name + "." + key); err != nil || got != want {
					t.Errorf("%s.%s = %d (%v), want %d", a.name, key, got, err, want)
				}
			}
			if a.headDimKeys {
				if got, _ := f.Int(a.name + ".attention.key_length"); got != 16 {
					t.Errorf("%s.attention.key_length = %d, want 16", a.name, got)
				}
			}
			st, err := safetensors.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, info := range f.Tensors() {
				if info.Type != gguf.F32 {
					t.Errorf("%s is %v in an f32 file", info.Name, info.Type)
				}
				hf := hfName(t, a.name, info.Name)
				ht, err := st.Tensor(hf)
				if err != nil {
					t.Fatal(err)
				}
				w, _ := gpu.NewWeight(ht.DType, max(1, ht.Elements()/int(info.RowLen())), int(info.RowLen()), ht.Data)
				want := slices.Clone(w.Float32s())
				if strings.HasSuffix(hf, "norm.weight") {
					for i := range want {
						want[i] += a.normShift
					}
				}
				data, _ := f.TensorData(info.Name)
				got, err := ref.Dequantize(info.Type, data, int(info.Elements()))
				if err != nil {
					t.Fatal(err)
				}
				if a.permuteQK && (strings.HasSuffix(info.Name, "attn_q.weight") || strings.HasSuffix(info.Name, "attn_k.weight")) {
					heads := 4
					if strings.HasSuffix(info.Name, "attn_k.weight") {
						heads = 2
					}
					got = unpermute(got, int(info.Rows()), int(info.RowLen()), heads)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s differs from %s", info.Name, hf)
				}
			}
			// The tokenizer encodes as tokenizer.json does.
			hfTok, err := tokenizer.Load(dir, tokenizer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			gTok, err := tokenizer.LoadGGUF(out, tokenizer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, text := range []string{"Hello, world!", "<|im_start|>user\nhé 123<|im_end|>", "  tabs\tand\nnewlines  "} {
				if a, b := hfTok.EncodeIDs(text, true), gTok.EncodeIDs(text, true); !slices.Equal(a, b) {
					t.Errorf("%q: tokenizer.json %v, GGUF %v", text, a, b)
				}
			}
			tmpl, err := tokenizer.GGUFChatTemplate(f)
			if err != nil || !strings.Contains(tmpl, "<|im_start|>") {
				t.Errorf("chat template %q (%v)", tmpl, err)
			}
		})
	}
}

// TestWriteQuantized: every file type writes, each matrix gets the type
// quant.FileType.Type names, and dequantizes near the weights.
func TestWriteQuantized(t *testing.T) {
	dir := tinyCheckpoint(t, "qwen3")
	for _, ft := range quant.FileTypes {
		t.Run(string(ft), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := Write(dir, out, Options{Type: ft}); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, _ := f.Uint32(gguf.FileTypeKey); got != ft.GeneralFileType() {
				t.Errorf("general.file_type %d, want %d", got, ft.GeneralFileType())
			}
			_, untied := f.Tensor("output.weight")
			for _, info := range f.Tensors() {
				want := ft.Type(info.Name, info.RowLen(), len(info.Dims), !untied, quant.Model{Layers: 2, GQA: 2})
				if info.Type != want {
					t.Errorf("%s: %v, want %v", info.Name, info.Type, want)
				}
				data, _ := f.TensorData(info.Name)
				x, err := ref.Dequantize(info.Type, data, int(info.Elements()))
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range x {
					if math.IsNaN(float64(v)) || math.Abs(float64(v)) > 2 {
						t.Fatalf("%s: dequantizes to %g", info.Name, v)
					}
				}
			}
		})
	}
}

// TestWriteRefuses: what cannot be written says why.
func TestWriteRefuses(t *testing.T) {
	mamba := t.TempDir()
	c, _ := checkpoint.Tiny("mamba")
	if err := checkpoint.Write(mamba, c, checkpoint.Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Write(mamba, filepath.Join(t.TempDir(), "m.gguf"), Options{Type: "f16"}); err == nil || !strings.Contains(err.Error(), `model_type "mamba"`) {
		t.Errorf("mamba: %v", err)
	}
	dir := tinyCheckpoint(t, "llama")
	if err := Write(dir, filepath.Join(t.TempDir(), "m.gguf"), Options{Type: "q3_k_m"}); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Errorf("q3_k_m: %v", err)
	}
}

// hfName is the checkpoint name of a GGUF tensor of arch (gguf's table,
// read backwards).
func hfName(t *testing.T, arch, g string) string {
	fixed := map[string]string{"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight"}
	if n, ok := fixed[g]; ok {
		return n
	}
	var layer int
	var rest string
	if _, err := fmt.Sscanf(g, "blk.%d.%s", &layer, &rest); err != nil {
		t.Fatalf("tensor %q: %v", g, err)
	}
	base, kind, _ := strings.Cut(rest, ".")
	hf, ok := gguf.ArchBlockTensorName(arch, base, true)
	if !ok {
		t.Fatalf("tensor %q: no Hugging Face name", g)
	}
	return fmt.Sprintf("model.layers.%d.%s.%s", layer, hf, kind)
}

// unpermute is the README's inverse of the converter's permute.
func unpermute(x []float32, rows, cols, heads int) []float32 {
	out := make([]float32, len(x))
	half := rows / heads / 2
	for h := range heads {
		for k := range half {
			for j := range 2 {
				src := (h*half+k)*2 + j
				dst := (h*2+j)*half + k
				copy(out[dst*cols:(dst+1)*cols], x[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

// TestWriteLoadsBack: what Write writes, troupe's own GGUF loader reads back
// into the same model: an f32 file computes the checkpoint's logits exactly,
// and a q8_0 file within its quantization error.
func TestWriteLoadsBack(t *testing.T) {
	prompt := []int32{1, 17, 200, 33, 5, 480, 2, 99}
	cases := []struct {
		name, arch string
		set        map[string]any
	}{{"llama", "llama", nil}, {"qwen2", "qwen2", nil}, {"qwen3", "qwen3", nil}}
	// The checkpoints of TestLlamaCppParity: what only a key of the file
	// carries (partial rotary, soft-capping, the local rope base, the
	// layer pattern) is read back.
	cases = append(cases, llamaCppCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := tinyCheckpointWith(t, c.arch, c.set)
			want := logitsOf(t, dir, prompt)
			for _, tc := range []struct {
				ft  quant.FileType
				tol float64
			}{{"f32", 0}, {"q8_0", 0.05}} {
				out := filepath.Join(t.TempDir(), "m.gguf")
				if err := Write(dir, out, Options{Type: tc.ft}); err != nil {
					t.Fatal(err)
				}
				got := logitsOf(t, out, prompt)
				var d float64
				for i := range want {
					d = max(d, math.Abs(float64(got[i]-want[i])))
				}
				if d > tc.tol {
					t.Errorf("%s: logits differ from the checkpoint's by %g (tolerance %g)", tc.ft, d, tc.tol)
				}
			}
		})
	}
}

// loadSeq loads the model at path (closed when the test ends) with a KV
// pool and one sequence reserved for n tokens.
func loadSeq(t *testing.T, path string, n int) (model.Model, *kvcache.Pool, *kvcache.Seq) {
	t.Helper()
	m, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, (n+15)/16, 1)
	if err != nil {
		t.Fatal(err)
	}
	var seq kvcache.Seq
	if err := pool.Reserve(&seq, n); err != nil {
		t.Fatal(err)
	}
	if err := pool.EnsureSlot(&seq); err != nil {
		t.Fatal(err)
	}
	return m, pool, &seq
}

// logitsOf loads the model at path and returns the last position's logits
// after prompt, on the reference device.
func logitsOf(t *testing.T, path string, prompt []int32) []float32 {
	t.Helper()
	m, pool, seq := loadSeq(t, path, len(prompt))
	out, err := m.Forward(ref.Device{}, pool, []model.Seq{{Tokens: prompt, Pages: seq.Pages, Slot: seq.Slot, Logits: model.LastLogits}})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(out)
}

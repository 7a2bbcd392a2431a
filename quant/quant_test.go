package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// TestQuantizeFixtures: llama.cpp's llama-quantize made every quantized
// file of the GGUF fixtures from its F16 base; quantizing the base's
// tensors here gives the same bytes for every tensor of every type this
// package writes.
func TestQuantizeFixtures(t *testing.T) {
	dir := fixtures.Path(t, "gguf")
	for _, family := range []string{"llama", "qwen3"} {
		base, err := gguf.Open(filepath.Join(dir, family, family+"-f16.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer base.Close()
		for _, ft := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k", "q3_k_m", "q2_k"} {
			name := fmt.Sprintf("%s/%s-%s.gguf", family, family, ft)
			t.Run(name, func(t *testing.T) {
				f, err := gguf.Open(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				checked := 0
				for _, info := range f.Tensors() {
					if !slices.Contains(Types, info.Type) || info.Type == gguf.F32 {
						continue
					}
					src, err := base.TensorData(info.Name)
					if err != nil {
						t.Fatal(err)
					}
					bi, _ := base.Tensor(info.Name)
					x, err := ref.Dequantize(bi.Type, src, int(bi.Elements()))
					if err != nil {
						t.Fatal(err)
					}
					got, err := Quantize(info.Type, x)
					if err != nil {
						t.Fatal(err)
					}
					want, _ := f.TensorData(info.Name)
					if !bytes.Equal(got, want) {
						i := 0
						for i < len(got) && got[i] == want[i] {
							i++
						}
						bs := info.Type.TypeSize()
						t.Errorf("%s (%v): differs from llama-quantize's first at byte %d (block %d, byte %d of %d)", info.Name, info.Type, i, i/bs, i%bs, bs)
						continue
					}
					checked++
				}
				t.Logf("%d tensors identical to llama-quantize's", checked)
			})
		}
	}
}

// TestQuantizeRoundTrip: dequantizing what Quantize wrote gives the input
// back within each type's step, for random rows, all-zero blocks and
// constant blocks.
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	clear(x[256:512]) // a zero super-block
	for i := 512; i < 768; i++ {
		x[i] = 0.5
	}
	// Relative bound on |error| / block amax, generous.
	bound := map[gguf.GGMLType]float64{gguf.F32: 0, gguf.F16: 1e-3, gguf.BF16: 8e-3, gguf.Q8_0: 0.01, gguf.Q4_0: 0.15,
		gguf.Q4_1: 0.1, gguf.Q5_0: 0.08, gguf.Q5_1: 0.05, gguf.Q4_K: 0.15, gguf.Q5_K: 0.08, gguf.Q6_K: 0.04}
	for _, typ := range Types {
		t.Run(typ.String(), func(t *testing.T) {
			q, err := Quantize(typ, x)
			if err != nil {
				t.Fatal(err)
			}
			y, err := ref.Dequantize(typ, q, len(x))
			if err != nil {
				t.Fatal(err)
			}
			bs := max(32, typ.BlockSize())
			for b := 0; b < len(x); b += bs {
				var amax float64
				for _, v := range x[b : b+bs] {
					amax = max(amax, math.Abs(float64(v)))
				}
				for i := b; i < b+bs; i++ {
					if e := math.Abs(float64(y[i] - x[i])); e > bound[typ]*amax+1e-7 {
						t.Fatalf("element %d: %g back as %g (block amax %g)", i, x[i], y[i], amax)
					}
				}
			}
		})
	}
	if _, err := Quantize(gguf.Q4_K, x[:100]); err == nil {
		t.Error("a row that is not whole blocks quantized")
	}
	if _, err := Quantize(gguf.Q2_K, x); err == nil {
		t.Error("Q2_K quantized without a quantizer")
	}
}

// TestFileTypeMixtures: every tensor of every fixture file llama-quantize
// wrote (for the file types this package writes) gets the type Type gives.
func TestFileTypeMixtures(t *testing.T) {
	dir := fixtures.Path(t, "gguf")
	for _, family := range []string{"llama", "qwen3"} {
		for _, ft := range []FileType{"f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k"} {
			name := fmt.Sprintf("%s/%s-%s.gguf", family, family, ft)
			t.Run(name, func(t *testing.T) {
				f, err := gguf.Open(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if got, err := f.Uint32(gguf.FileTypeKey); err != nil || got != ft.GeneralFileType() {
					t.Errorf("general.file_type %d (%v), GeneralFileType %d", got, err, ft.GeneralFileType())
				}
				layers, _ := f.Int(family + ".block_count")
				heads, _ := f.Int(family + ".attention.head_count")
				kv, _ := f.Int(family + ".attention.head_count_kv")
				_, hasOutput := f.Tensor("output.weight")
				for _, info := range f.Tensors() {
					got := ft.Type(info.Name, info.RowLen(), len(info.Dims), !hasOutput, Model{Layers: layers, GQA: heads / kv})
					if got != info.Type {
						t.Errorf("%s: Type says %v, llama-quantize wrote %v", info.Name, got, info.Type)
					}
				}
			})
		}
	}
	if ft, err := ParseFileType("Q4_K_M"); err != nil || ft != "q4_k_m" {
		t.Errorf("ParseFileType(Q4_K_M) = %q, %v", ft, err)
	}
	if _, err := ParseFileType("q3_k_m"); err == nil {
		t.Error("q3_k_m parsed")
	}
	// Rows that are not whole super-blocks (SmolLM2's 576) fall back.
	for _, tc := range []struct {
		ft   FileType
		cols int64
		want gguf.GGMLType
	}{{"q4_k", 576, gguf.Q5_0}, {"q5_k", 576, gguf.Q5_1}, {"q6_k", 576, gguf.Q8_0}, {"q8_0", 48, gguf.F16}, {"q4_k", 512, gguf.Q4_K}} {
		if got := tc.ft.Type("blk.0.attn_q.weight", tc.cols, 2, false, Model{Layers: 30, GQA: 3}); got != tc.want {
			t.Errorf("%s with rows of %d: %v, want %v", tc.ft, tc.cols, got, tc.want)
		}
	}
	// Phi-3's fused attn_qkv is an attn_v to llama-quantize (checked by
	// hand against llama-quantize 34af94cd on a 2-layer phi3: layer 1 gets
	// Q6_K, here falling back to Q8_0 for rows of 64).
	for _, tc := range []struct {
		ft    FileType
		layer int
		want  gguf.GGMLType
	}{{"q4_k_m", 0, gguf.Q4_K}, {"q4_k_m", 1, gguf.Q6_K}, {"q5_k_m", 1, gguf.Q6_K}, {"q4_k", 1, gguf.Q4_K}} {
		name := fmt.Sprintf("blk.%d.attn_qkv.weight", tc.layer)
		if got := tc.ft.Type(name, 3072, 2, false, Model{Layers: 2, GQA: 1}); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.ft, name, got, tc.want)
		}
	}
}

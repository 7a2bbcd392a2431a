package model_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"github.com/troupe-ai/troupe/convert"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// TestGGUFConverted converts the Hugging Face fixtures of every family
// that loads from GGUF into GGUF files as llama.cpp's converter lays them
// out (gguf_convert_test.go) and checks the loaded model against
// transformers' logits and greedy ids, as TestParity does for the
// safetensors folders. For qwen2, phi3, gemma2 and gemma3 this is the only
// check (there is no llama.cpp-written fixture of them); llama and qwen3
// are also checked against llama.cpp in TestGGUFParity.
func TestGGUFConverted(t *testing.T) {
	root := fixtures.Dir(t)
	for _, tc := range []struct {
		name  string
		extra []ggufKV
	}{
		{name: "llama_gqa"},
		{name: "llama_tied"},
		{name: "qwen2"},
		{name: "qwen3"},
		{name: "phi3"},
		{name: "gemma2"},
		// This fixture's sliding_window_pattern is 2; llama.cpp's
		// converter writes no pattern and llama.cpp assumes 6, so the
		// file says it.
		{name: "gemma3_text", extra: []ggufKV{{"gemma3.attention.sliding_window_pattern", uint32(2)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, "models", tc.name)
			refs := readReference(t, dir)
			want := readLogits(t, filepath.Join(dir, "reference_logits.safetensors"), "prompt_logits")["prompt_logits"]
			path := filepath.Join(t.TempDir(), tc.name+".gguf")
			toGGUF(t, dir, path, tc.extra...)
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, b := range backends(t)[:2] {
				t.Run(b.name, func(t *testing.T) {
					checkPromptLogits(t, m, b.dev, refs, want)
					checkGreedy(t, m, b.dev, refs)
				})
			}
		})
	}
}

// tinyHF writes a tiny random checkpoint of arch with the config changes
// in set, and returns its folder.
func tinyHF(t *testing.T, arch string, set map[string]any) string {
	t.Helper()
	cfg, err := checkpoint.Tiny(arch)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(cfg, set)
	dir := t.TempDir()
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: gpu.F32, Seed: 3, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// f32Tensor is a 1-D F32 GGUF tensor.
func f32Tensor(name string, v []float32) ggufTensorOut {
	var data []byte
	for _, x := range v {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	return ggufTensorOut{name: name, typ: gguf.F32, dims: []int64{int64(len(v))}, data: data}
}

// llama3Factors are the rope_freqs the converter writes for llama3 rope
// scaling: per frequency, what its inverse frequency is divided by.
func llama3Factors(base float64, dim int, factor, low, high, orig float64) []float32 {
	out := make([]float32, dim/2)
	for i := range out {
		wave := 2 * math.Pi * math.Pow(base, float64(2*i)/float64(dim))
		switch {
		case wave < orig/high:
			out[i] = 1
		case wave > orig/low:
			out[i] = float32(factor)
		default:
			smooth := (orig/wave - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// TestGGUFRopeScaling: rope scaling as GGUF stores it (llama3 as a
// rope_freqs tensor, linear as keys, Phi-3's longrope as factor tensors)
// gives the logits of the Hugging Face checkpoint with the same scaling,
// and differs from the model without it.
func TestGGUFRopeScaling(t *testing.T) {
	longF := []float32{1, 1.5, 2, 3, 4, 6, 8, 12}
	shortF := []float32{1, 1.1, 1.2, 1.4, 1.6, 2, 2.5, 3}
	for _, tc := range []struct {
		name    string
		arch    string
		set     map[string]any
		kvs     []ggufKV
		tensors []ggufTensorOut
	}{
		{name: "llama3", arch: "llama",
			set: map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
				"high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
			tensors: []ggufTensorOut{f32Tensor("rope_freqs.weight", llama3Factors(10000, 16, 8, 1, 4, 64))}},
		{name: "linear", arch: "llama",
			set: map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 4.0}},
			kvs: []ggufKV{{"llama.rope.scaling.type", "linear"}, {"llama.rope.scaling.factor", float32(4)}}},
		{name: "phi3-longrope", arch: "phi3",
			set: map[string]any{"max_position_embeddings": 2048, "original_max_position_embeddings": 256,
				"rope_scaling": map[string]any{"type": "longrope", "long_factor": floatsOf(longF), "short_factor": floatsOf(shortF)}},
			kvs:     []ggufKV{{"phi3.rope.scaling.type", "longrope"}},
			tensors: []ggufTensorOut{f32Tensor("rope_factors_long.weight", longF), f32Tensor("rope_factors_short.weight", shortF)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tinyHF(t, tc.arch, tc.set)
			hf, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			kvs, tensors := convertHF(t, dir)
			scaled := filepath.Join(t.TempDir(), "scaled.gguf")
			writeGGUF(t, scaled, append(kvs, tc.kvs...), append(tensors, tc.tensors...))
			plain := filepath.Join(t.TempDir(), "plain.gguf")
			writeGGUF(t, plain, kvs, tensors)
			prompt := make([]int32, 48)
			for i := range prompt {
				prompt[i] = int32(i*37%500 + 3)
			}
			want := lastLogits(t, hf, ref.Device{}, [][]int32{prompt})
			for _, c := range []struct {
				path   string
				scaled bool
			}{{scaled, true}, {plain, false}} {
				m, err := model.Load(c.path)
				if err != nil {
					t.Fatal(err)
				}
				d := maxAbsDiff(lastLogits(t, m, ref.Device{}, [][]int32{prompt}), want)
				m.Close()
				if c.scaled && d > 1e-4 {
					t.Errorf("with the scaling from GGUF: logits differ from the Hugging Face model's by %.3g", d)
				}
				if !c.scaled && d < 1e-3 {
					t.Errorf("without the scaling: logits differ only by %.3g: the test does not exercise the scaling", d)
				}
			}
		})
	}
}

func floatsOf(v []float32) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// edit returns copies of kvs and tensors changed by the functions given.
type ggufEdit struct {
	kv     func([]ggufKV) []ggufKV
	tensor func([]ggufTensorOut) []ggufTensorOut
}

func setKV(key string, val any) func([]ggufKV) []ggufKV {
	return func(kvs []ggufKV) []ggufKV {
		out := slices.Clone(kvs)
		for i := range out {
			if out[i].key == key {
				out[i].val = val
				return out
			}
		}
		return append(out, ggufKV{key, val})
	}
}

func dropKV(key string) func([]ggufKV) []ggufKV {
	return func(kvs []ggufKV) []ggufKV {
		return slices.DeleteFunc(slices.Clone(kvs), func(kv ggufKV) bool { return kv.key == key })
	}
}

// TestGGUFLoadErrors: a GGUF file troupe cannot serve fails to load with an
// error that names what is wrong (the key, the tensor and its type), never
// a panic.
func TestGGUFLoadErrors(t *testing.T) {
	kvs, tensors := convertHF(t, tinyHF(t, "llama", nil))
	for _, tc := range []struct {
		name string
		edit ggufEdit
		want []string
	}{
		{"unknown architecture", ggufEdit{kv: setKV("general.architecture", "falcon")}, []string{`"falcon"`, "llama, qwen2, qwen3"}},
		{"missing hyperparameter", ggufEdit{kv: dropKV("llama.block_count")}, []string{"llama.block_count", "not found"}},
		{"hyperparameter of the wrong type", ggufEdit{kv: setKV("llama.embedding_length", "64")}, []string{"llama.embedding_length"}},
		{"unsupported rope scaling", ggufEdit{kv: setKV("llama.rope.scaling.type", "yarn")}, []string{"yarn", "not supported"}},
		{"shape that contradicts the metadata", ggufEdit{kv: setKV("llama.feed_forward_length", uint32(128))}, []string{"blk.0", "shape"}},
		{"tensor type without a dequantizer", ggufEdit{tensor: func(ts []ggufTensorOut) []ggufTensorOut {
			out := slices.Clone(ts)
			for i := range out {
				if out[i].name == "blk.1.attn_q.weight" {
					// IQ4_NL: blocks of 32 elements in 18 bytes.
					n := out[i].dims[0] * out[i].dims[1]
					out[i].typ, out[i].data = gguf.IQ4_NL, make([]byte, n/32*18)
				}
			}
			return out
		}}, []string{`"blk.1.attn_q.weight"`, "IQ4_NL"}},
		{"tensor without a Hugging Face counterpart", ggufEdit{tensor: func(ts []ggufTensorOut) []ggufTensorOut {
			return append(slices.Clone(ts), f32Tensor("blk.0.attn_sinks.weight", make([]float32, 4)))
		}}, []string{`"blk.0.attn_sinks.weight"`}},
		{"no token embedding", ggufEdit{tensor: func(ts []ggufTensorOut) []ggufTensorOut {
			return slices.DeleteFunc(slices.Clone(ts), func(t ggufTensorOut) bool { return t.name == "token_embd.weight" })
		}}, []string{"token_embd.weight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, ts := kvs, tensors
			if tc.edit.kv != nil {
				k = tc.edit.kv(k)
			}
			if tc.edit.tensor != nil {
				ts = tc.edit.tensor(ts)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			writeGGUF(t, path, k, ts)
			m, err := model.Load(path)
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestGGUFPaths: what a model path may name. A GGUF file, or a folder
// without config.json holding one GGUF file, loads the GGUF; a folder with
// config.json is a Hugging Face checkpoint even beside a GGUF file; two GGUF
// files and a file that is not GGUF are clear errors. (A file named as the
// first part of a split set, without split keys, is one whole model; sets
// are gguf's TestSplitSet.)
func TestGGUFPaths(t *testing.T) {
	hfDir := tinyHF(t, "llama", nil)
	kvs, tensors := convertHF(t, hfDir)
	write := func(path string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		writeGGUF(t, path, kvs, tensors)
	}
	root := t.TempDir()
	one := filepath.Join(root, "one")
	write(filepath.Join(one, "tiny-f32.gguf"))
	two := filepath.Join(root, "two")
	write(filepath.Join(two, "a.gguf"))
	write(filepath.Join(two, "b.gguf"))
	split := filepath.Join(root, "split", "tiny-00001-of-00002.gguf")
	write(split)
	notGGUF := filepath.Join(root, "junk.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a model at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A Hugging Face folder that also holds an unreadable .gguf file.
	if err := os.WriteFile(filepath.Join(hfDir, "stray.gguf"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       string // error substring; "" loads
	}{
		{"a GGUF file", filepath.Join(one, "tiny-f32.gguf"), ""},
		{"a folder with one GGUF file", one, ""},
		{"a Hugging Face folder beside a GGUF file", hfDir, ""},
		{"a folder with two GGUF files", two, "a.gguf, b.gguf"},
		{"a file named as a first part", split, ""},
		{"a folder holding it", filepath.Dir(split), ""},
		{"a file that is not GGUF", notGGUF, "not a GGUF file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := model.Load(tc.path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if info := m.Info(); info.Arch != "LlamaForCausalLM" || info.Layers != 2 || info.BOS != 1 || !slices.Equal(info.EOS, []int{2}) {
					t.Errorf("Info %+v", info)
				}
				return
			}
			if err == nil {
				m.Close()
				t.Fatal("loaded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestGGUFWeightMemory: a GGUF model computes the same whether its weights
// were copied into weight memory (the default) or left in the mapping
// (LoadOptions.Mmap; dequantized tensors then live on the heap), and Info
// tells what the weights cost: F16 as stored, quantized types as F32.
func TestGGUFWeightMemory(t *testing.T) {
	dir, man := readGGUFManifest(t)
	prompt := man.Prompt.IDs
	for _, tc := range []struct {
		file       string
		dtype      gpu.DType
		dequantize bool
	}{
		{"llama/llama-f16.gguf", gpu.F16, false},
		{"llama/llama-q4_k_m.gguf", gpu.Q4_K, false},
		{"qwen3/qwen3-q8_0.gguf", gpu.Q8_0, false},
		{"llama/llama-q4_k_m.gguf", gpu.F32, true},
		{"qwen3/qwen3-q8_0.gguf", gpu.F32, true},
	} {
		t.Run(fmt.Sprintf("%s dequantize=%v", tc.file, tc.dequantize), func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			copied, err := model.LoadWith(context.Background(), path, model.LoadOptions{Prefault: true, Dequantize: tc.dequantize})
			if err != nil {
				t.Fatal(err)
			}
			defer copied.Close()
			mapped, err := model.LoadWith(context.Background(), path, model.LoadOptions{Mmap: true, Dequantize: tc.dequantize})
			if err != nil {
				t.Fatal(err)
			}
			defer mapped.Close()
			a := lastLogits(t, copied, ref.Device{}, [][]int32{prompt})
			b := lastLogits(t, mapped, ref.Device{}, [][]int32{prompt})
			if d := maxAbsDiff(a, b); d != 0 {
				t.Fatalf("logits differ by %g between copied and mapped weights", d)
			}
			info := copied.Info()
			if info.DType != tc.dtype {
				t.Errorf("DType %v, want %v", info.DType, tc.dtype)
			}
			if tc.dtype == gpu.F32 && info.WeightBytes != 4*info.Params {
				t.Errorf("dequantized weights take %d bytes for %d parameters, want 4 per parameter", info.WeightBytes, info.Params)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			// Kept quantized, the weights take what the file does.
			if tc.dtype.Quantized() && (info.WeightBytes > st.Size() || info.WeightBytes < st.Size()*9/10) {
				t.Errorf("quantized weights take %d bytes, the file %d", info.WeightBytes, st.Size())
			}
			t.Logf("%s: file %d bytes, weights in memory %d bytes (%.2fx), %d parameters", tc.file, st.Size(), info.WeightBytes,
				float64(info.WeightBytes)/float64(st.Size()), info.Params)
		})
	}
}

// TestQuantizeAtLoad: LoadOptions.Quantize turns the weight matrices into
// the blocks asked for (serve --quantize): a quarter of f32's bytes at
// Q8_0, logits near the unquantized model's on the CPU kernels; matrices
// whose rows are not whole blocks keep their type.
func TestQuantizeAtLoad(t *testing.T) {
	dir := tinyHF(t, "qwen3", nil)
	plain, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	q, err := model.LoadWith(context.Background(), dir, model.LoadOptions{Quantize: gpu.Q8_0})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	pi, qi := plain.Info(), q.Info()
	if qi.DType != gpu.Q8_0 || qi.Params != pi.Params || qi.WeightBytes*3 > pi.WeightBytes {
		t.Errorf("quantized Info: %v, %d params, %d bytes (f32: %d params, %d bytes)", qi.DType, qi.Params, qi.WeightBytes, pi.Params, pi.WeightBytes)
	}
	// DTypeParams splits Params by the dtype held: all f32 unquantized;
	// quantized, the matrices Q8_0 and the vectors still f32.
	for _, info := range []model.Info{pi, qi} {
		var sum int64
		for _, n := range info.DTypeParams {
			sum += n
		}
		if sum != info.Params {
			t.Errorf("%v model: DTypeParams %v sum to %d, Params %d", info.DType, info.DTypeParams, sum, info.Params)
		}
	}
	if pi.DTypeParams[gpu.F32] != pi.Params {
		t.Errorf("f32 model: DTypeParams %v", pi.DTypeParams)
	}
	if n := qi.DTypeParams[gpu.Q8_0]; n == 0 || n >= qi.Params || qi.DTypeParams[gpu.F32] != qi.Params-n {
		t.Errorf("Q8_0 model: DTypeParams %v of %d", qi.DTypeParams, qi.Params)
	}
	// The weights' error alone (the reference backend dots dequantized
	// rows): small against the logits of this (chaotic, std 0.3) model.
	prompt := [][]int32{{1, 5, 9, 200, 33, 7}}
	a, b := lastLogits(t, plain, ref.Device{}, prompt), lastLogits(t, q, ref.Device{}, prompt)
	var scale float64
	for _, v := range a {
		scale = max(scale, math.Abs(float64(v)))
	}
	if d := maxAbsDiff(a, b); d > 0.05*scale || d == 0 {
		t.Errorf("Q8_0 weights move the logits by %g (largest %g)", d, scale)
	}
	// The same blocks as troupe quantize writes: the CPU kernels compute
	// the same logits from either.
	if err := checkpoint.WriteByteTokenizerSized(dir, 512); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "q8_0.gguf")
	if err := convert.Write(dir, file, convert.Options{Type: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	g, err := model.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	dev, err := cpu.New(cpu.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if d := maxAbsDiff(lastLogits(t, q, dev, prompt), lastLogits(t, g, dev, prompt)); d != 0 {
		t.Errorf("quantized at load and read from troupe quantize's file: logits differ by %g", d)
	}
	// Q4_K needs rows of 256: the tiny model's 64-wide rows stay f32.
	k, err := model.LoadWith(context.Background(), dir, model.LoadOptions{Quantize: gpu.Q4_K})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if ki := k.Info(); ki.DType != pi.DType || ki.WeightBytes != pi.WeightBytes {
		t.Errorf("Q4_K on 64-wide rows: %v, %d bytes; want them kept (%v, %d)", ki.DType, ki.WeightBytes, pi.DType, pi.WeightBytes)
	}
}

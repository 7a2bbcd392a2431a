package model_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// This file writes GGUF files for the tests: a minimal GGUF v3 writer and
// a converter from a Hugging Face checkpoint that lays the file out as
// llama.cpp's convert_hf_to_gguf.py does (tensor names, metadata keys,
// llama's Q/K row permutation, Gemma's norms stored as 1 + w), keeping each
// tensor's dtype. It covers the families that have no llama.cpp-written
// fixture: what it checks is that the loader undoes what the converter
// does, against transformers' logits.

// ggufKV is one metadata entry: a string, uint32, float32 or bool value.
type ggufKV struct {
	key string
	val any
}

// ggufTensorOut is one tensor to write; dims are ggml's ne (fastest first).
type ggufTensorOut struct {
	name string
	typ  gguf.GGMLType
	dims []int64
	data []byte
}

// writeGGUF writes a GGUF v3 file (gguf.WriteFile).
func writeGGUF(t *testing.T, path string, kvs []ggufKV, tensors []ggufTensorOut) {
	t.Helper()
	var out []gguf.KV
	for _, kv := range kvs {
		var v gguf.Value
		switch x := kv.val.(type) {
		case uint32:
			v = gguf.Uint32Value(x)
		case float32:
			v = gguf.Float32Value(x)
		case bool:
			v = gguf.BoolValue(x)
		case string:
			v = gguf.StringValue(x)
		default:
			t.Fatalf("writeGGUF: %s: unsupported value %T", kv.key, kv.val)
		}
		out = append(out, gguf.KV{Key: kv.key, Value: v})
	}
	ts := make([]gguf.WriteTensor, len(tensors))
	for i, x := range tensors {
		ts[i] = gguf.WriteTensor{Name: x.name, Dims: x.dims, Type: x.typ, Data: x.data}
	}
	if err := gguf.WriteFile(path, out, ts, 0); err != nil {
		t.Fatal(err)
	}
}

// ggufArchOf is the general.architecture the converter writes for a
// model_type.
func ggufArchOf(modelType string) string {
	switch modelType {
	case "mistral":
		return "llama"
	case "gemma3_text":
		return "gemma3"
	}
	return modelType
}

// ggufBlockName maps a Hugging Face per-layer tensor (after
// "model.layers.N.", without .weight/.bias) to its GGUF name: the table the
// loader reads by (gguf.ArchBlockTensorName).
func ggufBlockName(arch, hf string) string {
	g, _ := gguf.ArchBlockTensorName(arch, hf, false)
	return g
}

// toGGUF converts the Hugging Face checkpoint in dir into a GGUF file at
// out; extra metadata entries are appended.
func toGGUF(t *testing.T, dir, out string, extra ...ggufKV) {
	t.Helper()
	kvs, tensors := convertHF(t, dir)
	writeGGUF(t, out, append(kvs, extra...), tensors)
}

// convertHF returns the metadata and tensors of the GGUF file the
// converter writes for the Hugging Face checkpoint in dir.
func convertHF(t *testing.T, dir string) ([]ggufKV, []ggufTensorOut) {
	t.Helper()
	c, err := model.ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	num := func(key string, def float64) float64 {
		v, err := c.Float(key, def)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	mt, _ := c.String("model_type", "")
	arch := ggufArchOf(mt)
	hidden, heads := int(num("hidden_size", 0)), int(num("num_attention_heads", 0))
	kvHeads := int(num("num_key_value_heads", float64(heads)))
	headDim := int(num("head_dim", float64(hidden/heads)))
	a := func(k string) string { return arch + "." + k }
	kvs := []ggufKV{
		{"general.architecture", arch},
		{a("block_count"), uint32(num("num_hidden_layers", 0))},
		{a("context_length"), uint32(num("max_position_embeddings", 0))},
		{a("embedding_length"), uint32(hidden)},
		{a("feed_forward_length"), uint32(num("intermediate_size", 0))},
		{a("attention.head_count"), uint32(heads)},
		{a("attention.head_count_kv"), uint32(kvHeads)},
		{a("rope.freq_base"), float32(num("rope_theta", 10000))},
		{a("attention.layer_norm_rms_epsilon"), float32(num("rms_norm_eps", 1e-6))},
		{"tokenizer.ggml.bos_token_id", uint32(num("bos_token_id", 1))},
		{"tokenizer.ggml.eos_token_id", uint32(num("eos_token_id", 2))},
	}
	if c.Has("head_dim") {
		kvs = append(kvs, ggufKV{a("attention.key_length"), uint32(headDim)}, ggufKV{a("attention.value_length"), uint32(headDim)})
	}
	switch arch {
	case "llama", "phi3":
		kvs = append(kvs, ggufKV{a("rope.dimension_count"), uint32(float64(headDim) * num("partial_rotary_factor", 1))})
	}
	if c.Has("sliding_window") && arch != "llama" && arch != "qwen2" && arch != "qwen3" {
		kvs = append(kvs, ggufKV{a("attention.sliding_window"), uint32(num("sliding_window", 0))})
	}
	if arch == "phi3" && c.Has("original_max_position_embeddings") {
		kvs = append(kvs, ggufKV{a("rope.scaling.original_context_length"), uint32(num("original_max_position_embeddings", 0))})
	}
	if arch == "gemma2" {
		kvs = append(kvs, ggufKV{a("attn_logit_softcapping"), float32(num("attn_logit_softcapping", 50))},
			ggufKV{a("final_logit_softcapping"), float32(num("final_logit_softcapping", 30))})
	}
	st, err := safetensors.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var tensors []ggufTensorOut
	for _, name := range st.Names() {
		tn, err := st.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		base, kind := name[:strings.LastIndex(name, ".")], name[strings.LastIndex(name, ".")+1:]
		var gname string
		switch base {
		case "model.embed_tokens":
			gname = "token_embd"
		case "model.norm":
			gname = "output_norm"
		case "lm_head":
			gname = "output"
		default:
			var layer int
			var rest string
			if _, err := fmt.Sscanf(base, "model.layers.%d.", &layer); err != nil {
				t.Fatalf("toGGUF: unexpected tensor %q", name)
			}
			rest = strings.SplitN(base, ".", 4)[3]
			g := ggufBlockName(arch, rest)
			if g == "" {
				t.Fatalf("toGGUF: no GGUF name for %q", name)
			}
			gname = fmt.Sprintf("blk.%d.%s", layer, g)
		}
		data, dt := bytes.Clone(tn.Data), tn.DType
		if arch == "llama" && (strings.HasSuffix(base, "q_proj") || strings.HasSuffix(base, "k_proj")) {
			n := heads
			if strings.HasSuffix(base, "k_proj") {
				n = kvHeads
			}
			data = permuteRows(data, tn.Shape[0], n)
		}
		if strings.HasPrefix(arch, "gemma") && strings.HasSuffix(name, "norm.weight") {
			w := (&gpu.Weight{DType: dt, Rows: 1, Cols: tn.Elements(), Data: data}).Float32s()
			data = nil
			for _, x := range w {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x+1))
			}
			dt = gpu.F32
		}
		typ := map[gpu.DType]gguf.GGMLType{gpu.F32: gguf.F32, gpu.F16: gguf.F16, gpu.BF16: gguf.BF16}[dt]
		dims := make([]int64, len(tn.Shape))
		for i, d := range tn.Shape {
			dims[len(dims)-1-i] = int64(d)
		}
		tensors = append(tensors, ggufTensorOut{name: gname + "." + kind, typ: typ, dims: dims, data: data})
	}
	return kvs, tensors
}

// permuteRows is the converter's LlamaModel.permute on rows of any size:
// row h*hd + j*hd/2 + i (rotate-half order) moves to h*hd + 2i + j.
func permuteRows(data []byte, rows, heads int) []byte {
	hd, rb := rows/heads, len(data)/rows
	out := make([]byte, len(data))
	for r := 0; r < rows; r++ {
		h, in := r/hd, r%hd
		j, i := in/(hd/2), in%(hd/2)
		dst := h*hd + 2*i + j
		copy(out[dst*rb:(dst+1)*rb], data[r*rb:(r+1)*rb])
	}
	return out
}

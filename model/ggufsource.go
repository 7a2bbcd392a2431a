package model

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/mmap"
)

// GGUF checkpoints. A GGUF file carries what a Hugging Face folder splits
// over config.json and safetensors: the hyperparameters as metadata keys
// under general.architecture, the tensors under llama.cpp's names and in
// llama.cpp's layouts. ggufSource turns it back into the Hugging Face view
// the families read: ggufConfig writes the config.json the converter
// (llama.cpp's convert_hf_to_gguf.py) started from, and Tensor hands out
// each tensor under its Hugging Face name with the converter's changes
// undone (Q/K row order of llama, the +1 of Gemma's norms); quantized
// matrices keep their blocks (keepsQuantized), other quantized tensors are
// dequantized to float32.

// ggufArch is how one general.architecture maps onto a family.
type ggufArch struct {
	modelType string // config.json model_type of the family
	hfArch    string // config.json architectures[0]
	// permuteQK: attn_q/attn_k rows (and biases) are stored in the order of
	// llama.cpp's adjacent-pair rope; transformers rotates halves.
	permuteQK bool
	// normShift was added to every *norm.weight by the converter (Gemma
	// stores 1 + w for its (1 + w) RMSNorm).
	normShift float32
	// block maps a GGUF block tensor ("attn_q") to its Hugging Face name
	// under model.layers.N. ("self_attn.q_proj").
	block func(string) (string, bool)
	// config adds the family's own keys to the translated config.json.
	config func(g *ggufKeys, c *Config)
	// configTensors are tensors that hold hyperparameters (read by config),
	// not weights.
	configTensors []string
}

// ggufArchFor returns the mapping of a general.architecture, false for
// one troupe does not load from GGUF.
func ggufArchFor(arch string) (ggufArch, bool) {
	switch arch {
	case "llama":
		return ggufArch{modelType: "llama", hfArch: "LlamaForCausalLM", permuteQK: true, block: blockNames("llama"), config: llamaGGUFConfig}, true
	case "qwen2":
		return ggufArch{modelType: "qwen2", hfArch: "Qwen2ForCausalLM", block: blockNames("qwen2")}, true
	case "qwen3":
		return ggufArch{modelType: "qwen3", hfArch: "Qwen3ForCausalLM", block: blockNames("qwen3"), config: biasGGUFConfig}, true
	case "phi3":
		return ggufArch{modelType: "phi3", hfArch: "Phi3ForCausalLM", block: blockNames("phi3"), config: phi3GGUFConfig,
			configTensors: []string{"rope_factors_long.weight", "rope_factors_short.weight"}}, true
	case "gemma2":
		return ggufArch{modelType: "gemma2", hfArch: "Gemma2ForCausalLM", normShift: 1, block: blockNames("gemma2"), config: gemma2GGUFConfig}, true
	case "gemma3":
		return ggufArch{modelType: "gemma3_text", hfArch: "Gemma3ForCausalLM", normShift: 1, block: blockNames("gemma3"), config: gemma3GGUFConfig}, true
	}
	return ggufArch{}, false
}

// ggufArchs lists the architectures ggufArchFor knows, for messages.
const ggufArchs = "llama, qwen2, qwen3, phi3, gemma2, gemma3"

// blockNames maps the per-layer tensors of a general.architecture to
// their Hugging Face names (gguf.ArchBlockTensorName: the table the
// converter in package convert writes by).
func blockNames(arch string) func(string) (string, bool) {
	return func(s string) (string, bool) { return gguf.ArchBlockTensorName(arch, s, true) }
}

// biasGGUFConfig sets attention_bias and mlp_bias from the tensors present
// (the converter writes no key for them).
func biasGGUFConfig(g *ggufKeys, c *Config) {
	c.raw["attention_bias"] = g.hasTensor("blk.0.attn_q.bias")
	c.raw["mlp_bias"] = g.hasTensor("blk.0.ffn_gate.bias")
}

// llamaGGUFConfig: Llama 3.1+ files carry their rope scaling as
// per-frequency divisors (rope_freqs.weight) rather than as keys.
func llamaGGUFConfig(g *ggufKeys, c *Config) {
	biasGGUFConfig(g, c)
	if g.hasTensor("rope_freqs.weight") {
		c.ropeFactors = g.f32Tensor("rope_freqs.weight")
	}
}

// phi3GGUFConfig: sliding window, and longrope scaling from the
// rope_factors_long/short tensors and the original context length.
func phi3GGUFConfig(g *ggufKeys, c *Config) {
	if g.has("attention.sliding_window") {
		c.raw["sliding_window"] = float64(g.int("attention.sliding_window"))
	}
	if g.has("rope.scaling.original_context_length") {
		c.raw["original_max_position_embeddings"] = float64(g.int("rope.scaling.original_context_length"))
	}
	long, short := g.hasTensor("rope_factors_long.weight"), g.hasTensor("rope_factors_short.weight")
	if long != short {
		g.fail(fmt.Errorf("a phi3 file needs both rope_factors_long and rope_factors_short, or neither"))
	}
	if kind, _ := g.f.String(g.arch + ".rope.scaling.type"); (kind == "longrope" || kind == "su") && !long {
		g.fail(fmt.Errorf("%s.rope.scaling.type is %q but the file has no rope_factors_long/short tensors", g.arch, kind))
	}
	if long {
		c.raw["rope_scaling"] = map[string]any{"type": "longrope",
			"long_factor": floatList(g.f32Tensor("rope_factors_long.weight")), "short_factor": floatList(g.f32Tensor("rope_factors_short.weight"))}
	}
}

// gemma2GGUFConfig: soft-capping, sliding window and its pattern, and the
// query scale.
func gemma2GGUFConfig(g *ggufKeys, c *Config) {
	for _, k := range []string{"attn_logit_softcapping", "final_logit_softcapping"} {
		if g.has(k) {
			c.raw[k] = g.float(k, 0)
		}
	}
	gemmaSWAPattern(g, c)
	gemmaGGUFConfig(g, c, 46)
}

// gemmaSWAPattern reads attention.sliding_window_pattern as llama.cpp's
// gemma2 and gemma3 read it (34af94cd, get_key_or_arr into one integer):
// an integer n makes layer i local when i%n < n-1 (every nth layer global;
// 0: every layer local), written here as layer_types; an array is ignored
// there, and so here, leaving the family's default (every other layer
// local for gemma2, five of six for gemma3).
func gemmaSWAPattern(g *ggufKeys, c *Config) {
	v, ok := g.f.Value(g.arch + ".attention.sliding_window_pattern")
	if !ok {
		return
	}
	n, ok := v.Int()
	if !ok {
		if v.Type() != gguf.TypeArray {
			g.fail(fmt.Errorf("%s.attention.sliding_window_pattern is %v, want an integer", g.arch, v.Type()))
		}
		return
	}
	if n < 0 {
		g.fail(fmt.Errorf("%s.attention.sliding_window_pattern %d is negative", g.arch, n))
		return
	}
	types := make([]any, g.int("block_count"))
	for i := range types {
		types[i] = "full_attention"
		if n == 0 || int64(i)%n < n-1 {
			types[i] = "sliding_attention"
		}
	}
	c.raw["layer_types"] = types
}

// gemma3GGUFConfig: sliding window and its pattern, the query scale and
// the local layers' rope base (rope.freq_base_swa, 10000 when absent, as
// llama.cpp reads it). As in llama.cpp, a file without a sliding window
// (or a window of 0) has no local layers: every layer attends globally
// with the global rope base.
func gemma3GGUFConfig(g *ggufKeys, c *Config) {
	if g.has("final_logit_softcapping") {
		c.raw["final_logit_softcapping"] = g.float("final_logit_softcapping", 0)
	}
	c.raw["rope_local_base_freq"] = g.float("rope.freq_base_swa", 10000)
	c.raw["sliding_window_pattern"] = 6.0
	if !g.has("attention.sliding_window") || g.int("attention.sliding_window") == 0 {
		c.raw["sliding_window_pattern"] = 1.0
	} else {
		gemmaSWAPattern(g, c)
	}
	gemmaGGUFConfig(g, c, 62)
}

// gemmaGGUFConfig sets what Gemma 2 and 3 share. GGUF has no
// query_pre_attn_scalar: llama.cpp scales queries by 1/sqrt(head_dim),
// except for the 27B models (bigLayers layers), which use
// 1/sqrt(hidden/heads), as their configs say.
func gemmaGGUFConfig(g *ggufKeys, c *Config, bigLayers int) {
	if g.has("attention.sliding_window") {
		c.raw["sliding_window"] = float64(g.int("attention.sliding_window"))
	}
	hidden, heads := g.int("embedding_length"), g.int("attention.head_count")
	headDim := g.int("attention.key_length", 0)
	if headDim == 0 && heads > 0 {
		headDim = hidden / heads
	}
	scalar := headDim
	if g.int("block_count") == bigLayers && heads > 0 {
		scalar = hidden / heads
	}
	c.raw["query_pre_attn_scalar"] = float64(scalar)
}

// floatList is v as the []any of float64 a parsed config.json holds.
func floatList(v []float32) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// ggufKeys reads an architecture's metadata, keeping the first error.
type ggufKeys struct {
	f    *gguf.File
	arch string
	err  error
}

func (g *ggufKeys) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

func (g *ggufKeys) hasTensor(name string) bool { _, ok := g.f.Tensor(name); return ok }

// f32Tensor reads a small 1-D F32 tensor that holds hyperparameters.
func (g *ggufKeys) f32Tensor(name string) []float32 {
	t, _ := g.f.Tensor(name)
	data, err := g.f.TensorData(name)
	if err != nil {
		g.fail(err)
		return nil
	}
	if t.Type != gguf.F32 || len(t.Dims) != 1 {
		g.fail(fmt.Errorf("tensor %q is %v %v, want a 1-D F32 tensor", name, t.Type, t.Dims))
		return nil
	}
	return (&gpu.Weight{DType: gpu.F32, Rows: 1, Cols: len(data) / 4, Data: data}).Float32s()
}

// has reports whether <arch>.key is present.
func (g *ggufKeys) has(key string) bool { return g.f.Has(g.arch + "." + key) }

// int reads the integer <arch>.key; a missing key is an error unless def is
// given.
func (g *ggufKeys) int(key string, def ...int) int {
	k := g.arch + "." + key
	if !g.f.Has(k) && len(def) > 0 {
		return def[0]
	}
	v, err := g.f.Int(k)
	g.fail(err)
	return v
}

// float reads the number <arch>.key, def when absent.
func (g *ggufKeys) float(key string, def float64) float64 {
	k := g.arch + "." + key
	if !g.f.Has(k) {
		return def
	}
	v, err := g.f.Float(k)
	g.fail(err)
	return v
}

// ggufConfig translates the metadata of f into the config.json a Hugging
// Face checkpoint of the same model holds.
func ggufConfig(f *gguf.File) (*Config, ggufArch, error) {
	arch, err := f.Architecture()
	if err != nil {
		return nil, ggufArch{}, err
	}
	a, ok := ggufArchFor(arch)
	if !ok {
		return nil, a, fmt.Errorf("%s: architecture %q cannot be loaded from GGUF (supported: %s)", f.Path, arch, ggufArchs)
	}
	g := &ggufKeys{f: f, arch: arch}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok || len(embd.Dims) != 2 {
		return nil, a, fmt.Errorf("%s: no 2-D tensor token_embd.weight", f.Path)
	}
	hidden := g.int("embedding_length")
	heads := g.int("attention.head_count")
	raw := map[string]any{
		"model_type":              a.modelType,
		"architectures":           []any{a.hfArch},
		"vocab_size":              float64(embd.Dims[1]),
		"hidden_size":             float64(hidden),
		"intermediate_size":       float64(g.int("feed_forward_length")),
		"num_hidden_layers":       float64(g.int("block_count")),
		"num_attention_heads":     float64(heads),
		"num_key_value_heads":     float64(g.int("attention.head_count_kv", heads)),
		"max_position_embeddings": float64(g.int("context_length")),
		"rms_norm_eps":            g.float("attention.layer_norm_rms_epsilon", 1e-5),
		"rope_theta":              g.float("rope.freq_base", 10000),
		"tie_word_embeddings":     !g.hasTensor("output.weight"),
	}
	if g.has("vocab_size") && g.int("vocab_size") != int(embd.Dims[1]) {
		g.fail(fmt.Errorf("%s.vocab_size %d but token_embd.weight has %d rows", arch, g.int("vocab_size"), embd.Dims[1]))
	}
	headDim := 0
	if heads > 0 {
		headDim = hidden / heads
	}
	if g.has("attention.key_length") {
		headDim = g.int("attention.key_length")
		raw["head_dim"] = float64(headDim)
	}
	if g.has("attention.value_length") && g.int("attention.value_length") != headDim {
		g.fail(fmt.Errorf("%s.attention.value_length %d differs from the key length %d: not supported", arch, g.int("attention.value_length"), headDim))
	}
	if g.has("rope.dimension_count") && headDim > 0 {
		if n := g.int("rope.dimension_count"); n != headDim {
			raw["partial_rotary_factor"] = float64(n) / float64(headDim)
		}
	}
	ropeScaling(g, raw)
	if f.Has("tokenizer.ggml.bos_token_id") {
		v, err := f.Int("tokenizer.ggml.bos_token_id")
		g.fail(err)
		raw["bos_token_id"] = float64(v)
	}
	// Generation ends at EOS and, as in llama.cpp, at end-of-turn and
	// end-of-message tokens (a chat model's generation_config.json lists
	// them among its eos ids).
	var eos []any
	for _, key := range []string{"eos_token_id", "eot_token_id", "eom_token_id"} {
		if k := "tokenizer.ggml." + key; f.Has(k) {
			v, err := f.Int(k)
			g.fail(err)
			if !slices.Contains(eos, any(float64(v))) {
				eos = append(eos, float64(v))
			}
		}
	}
	if eos != nil {
		raw["eos_token_id"] = eos
	}
	c := &Config{Path: f.Path, raw: raw}
	if a.config != nil {
		a.config(g, c)
	}
	if g.err != nil {
		return nil, a, fmt.Errorf("%s: %w", f.Path, g.err)
	}
	return c, a, nil
}

// ropeScaling translates <arch>.rope.scaling.* (and the older
// rope.scale_linear) into rope_scaling.
func ropeScaling(g *ggufKeys, raw map[string]any) {
	kind := "none"
	if g.has("rope.scaling.type") {
		s, err := g.f.String(g.arch + ".rope.scaling.type")
		g.fail(err)
		kind = s
	} else if g.has("rope.scale_linear") {
		kind = "linear"
	}
	switch {
	case kind == "none":
	case (kind == "longrope" || kind == "su") && g.arch == "phi3":
		// phi3GGUFConfig reads the factors from their tensors.
	case kind == "linear":
		factor := g.float("rope.scaling.factor", g.float("rope.scale_linear", 1))
		if factor != 1 {
			raw["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": factor}
		}
	default:
		g.fail(fmt.Errorf("%s.rope.scaling.type %q is not supported (supported: none, linear)", g.arch, kind))
	}
}

// ggufSource serves the tensors of a GGUF file under Hugging Face names.
type ggufSource struct {
	f     *gguf.File
	arch  ggufArch
	names map[string]string // Hugging Face name -> GGUF name
	// permute: Hugging Face names whose rows are to be put back in
	// rotate-half order, with the head count to do it with.
	permute map[string]int
	// mapped: the first byte of every Data handed out that aliases the
	// file mapping (only those pages may be dropped).
	mapped map[*byte]bool
	bytes  int64
	// dequantize: quantized matrices are dequantized to float32
	// (LoadOptions.Dequantize) instead of handed out as stored.
	dequantize bool
}

// openGGUF opens the GGUF file at path as a checkpoint: its config.json
// equivalent and its tensors.
func openGGUF(path string, dequantize bool) (*Config, *ggufSource, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, arch, err := ggufConfig(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	s := &ggufSource{f: f, arch: arch, names: map[string]string{}, permute: map[string]int{}, mapped: map[*byte]bool{}, dequantize: dequantize}
	heads, _ := cfg.Int("num_attention_heads", 0)
	kvHeads, _ := cfg.Int("num_key_value_heads", heads)
	for _, t := range f.Tensors() {
		if slices.Contains(arch.configTensors, t.Name) || (t.Name == "rope_freqs.weight" && cfg.ropeFactors != nil) {
			continue
		}
		hf, ok := arch.hfName(t.Name)
		if !ok {
			f.Close()
			return nil, nil, fmt.Errorf("%s: tensor %q has no counterpart in the %s family (troupe would ignore a weight)", path, t.Name, arch.modelType)
		}
		s.names[hf] = t.Name
		if t.Type.Quantized() && !s.keepsQuantized(t) {
			s.bytes += 4 * t.Elements()
		} else {
			s.bytes += t.Size
		}
		if arch.permuteQK {
			switch {
			case strings.HasSuffix(hf, "self_attn.q_proj.weight"), strings.HasSuffix(hf, "self_attn.q_proj.bias"):
				s.permute[hf] = heads
			case strings.HasSuffix(hf, "self_attn.k_proj.weight"), strings.HasSuffix(hf, "self_attn.k_proj.bias"):
				s.permute[hf] = kvHeads
			}
		}
	}
	return cfg, s, nil
}

// hfName maps a GGUF tensor name to its Hugging Face name.
func (a ggufArch) hfName(name string) (string, bool) {
	base, kind, ok := cutLast(name, ".")
	if !ok || (kind != "weight" && kind != "bias") {
		return "", false
	}
	switch base {
	case "token_embd":
		return "model.embed_tokens." + kind, true
	case "output_norm":
		return "model.norm." + kind, true
	case "output":
		return "lm_head." + kind, true
	}
	rest, ok := strings.CutPrefix(base, "blk.")
	if !ok {
		return "", false
	}
	idx, t, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	if n, err := strconv.Atoi(idx); err != nil || n < 0 || strconv.Itoa(n) != idx {
		return "", false
	}
	hf, ok := a.block(t)
	if !ok {
		return "", false
	}
	return "model.layers." + idx + "." + hf + "." + kind, true
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// keepsQuantized says whether a quantized tensor is handed out as stored
// (a matrix of a type gpu has, unless LoadOptions.Dequantize) rather than
// dequantized to float32.
func (s *ggufSource) keepsQuantized(t gguf.TensorInfo) bool {
	dt, ok := gpu.DTypeOf(t.Type)
	return ok && dt.Quantized() && len(t.Dims) == 2 && !s.dequantize
}

func (s *ggufSource) Has(name string) bool { _, ok := s.names[name]; return ok }
func (s *ggufSource) Count() int           { return len(s.names) }
func (s *ggufSource) Bytes() int64         { return s.bytes }
func (s *ggufSource) Close() error         { return s.f.Close() }

// Tensor returns the tensor called name (a Hugging Face name) in Hugging
// Face layout: F32, F16 and BF16 data as stored, quantized matrices as
// stored (keepsQuantized) and other quantized tensors dequantized to F32
// (gpu/ref.Dequantize), Q/K rows of llama files un-permuted, Gemma norms
// shifted back.
func (s *ggufSource) Tensor(name string) (*srcTensor, error) {
	gname, ok := s.names[name]
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %q (GGUF name for it not found): %w", s.f.Path, name, gguf.ErrNotFound)
	}
	info, _ := s.f.Tensor(gname)
	data, err := s.f.TensorData(gname)
	if err != nil {
		return nil, err
	}
	t := &srcTensor{Stored: gname, Shape: make([]int, len(info.Dims)), File: s.f.Path}
	for i, d := range info.Dims {
		t.Shape[len(info.Dims)-1-i] = int(d)
	}
	owned := false
	switch info.Type {
	case gguf.F32:
		t.DType = gpu.F32
	case gguf.F16:
		t.DType = gpu.F16
	case gguf.BF16:
		t.DType = gpu.BF16
	default:
		if s.keepsQuantized(info) {
			// As stored: the kernels dot the blocks with quantized
			// activations (gpu's quantized dtypes).
			t.DType, _ = gpu.DTypeOf(info.Type)
			break
		}
		if !ref.CanDequantize(info.Type) {
			return nil, fmt.Errorf("%s: tensor %q: type %v cannot be loaded (supported: %v)", s.f.Path, gname, info.Type, ref.DequantizableTypes())
		}
		vals := make([]float32, info.Elements())
		if err := dequantize(vals, info.Type, data, int(info.Rows())); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", s.f.Path, gname, err)
		}
		t.DType, data, owned = gpu.F32, f32Bytes(vals), true
	}
	if heads, ok := s.permute[name]; ok {
		if data, err = unpermuteRows(data, t.Shape[0], heads); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", s.f.Path, gname, err)
		}
		owned = true
	}
	if s.arch.normShift != 0 && strings.HasSuffix(name, "norm.weight") {
		w := (&gpu.Weight{DType: t.DType, Rows: 1, Cols: len(data) / t.DType.Size(), Data: data}).Float32s()
		for i := range w {
			w[i] -= s.arch.normShift
		}
		t.DType, data, owned = gpu.F32, f32Bytes(w), true
	}
	t.Data = data
	if !owned && len(data) > 0 {
		s.mapped[&data[0]] = true
	}
	return t, nil
}

// dequantize is gpu/ref.DequantizeInto over the rows rows of data, split
// across GOMAXPROCS goroutines (the reference dequantizers are plain Go;
// loading a multi-gigabyte file one core at a time takes minutes).
func dequantize(dst []float32, t gguf.GGMLType, data []byte, rows int) error {
	workers := min(runtime.GOMAXPROCS(0), rows, len(dst)/(1<<16)+1)
	if workers <= 1 || len(dst)%rows != 0 || len(data)%rows != 0 {
		return ref.DequantizeInto(dst, t, data)
	}
	rowLen, rowBytes := len(dst)/rows, len(data)/rows
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		r0, r1 := rows*w/workers, rows*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = ref.DequantizeInto(dst[r0*rowLen:r1*rowLen], t, data[r0*rowBytes:r1*rowBytes])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// f32Bytes views v as its little-endian bytes (every platform troupe
// builds for is little-endian), without a copy.
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// unpermuteRows undoes the converter's Q/K permutation: data holds rows
// rows (heads heads of rows/heads rows each, any row size) in llama.cpp's
// order, where head row 2i+j holds what transformers keeps in row
// j*(rows/heads/2)+i. It returns a new slice in transformers' order.
func unpermuteRows(data []byte, rows, heads int) ([]byte, error) {
	if heads <= 0 || rows%heads != 0 || (rows/heads)%2 != 0 || len(data)%rows != 0 {
		return nil, fmt.Errorf("cannot undo the rope row permutation: %d rows in %d heads", rows, heads)
	}
	hd, rb := rows/heads, len(data)/rows
	half := hd / 2
	out := make([]byte, len(data))
	for r := 0; r < rows; r++ {
		h, in := r/hd, r%hd
		j, i := in/half, in%half
		src := h*hd + 2*i + j
		copy(out[r*rb:(r+1)*rb], data[src*rb:(src+1)*rb])
	}
	return out, nil
}

// Prefault reads every page of the tensor data once.
func (s *ggufSource) Prefault(ctx context.Context, progress func(done, total int64)) error {
	infos := s.f.Tensors()
	data := make([][]byte, len(infos))
	for i, t := range infos {
		var err error
		if data[i], err = s.f.TensorData(t.Name); err != nil {
			return err
		}
	}
	return mmap.Prefault(ctx, data, progress)
}

// DropPages drops the mapped pages of data when data is a tensor handed out
// as stored (not one dequantized or reordered into fresh memory).
func (s *ggufSource) DropPages(data []byte) {
	if len(data) > 0 && s.mapped[&data[0]] {
		mmap.DropPages(data)
	}
}

// GGUFFile returns the GGUF file a model path names, as LoadWith reads
// it: path itself when it is a file (GGUF or not: loading then says; the
// first part of a split set opens the whole set), or the GGUF model of a
// folder without config.json (gguf.Find). It returns "" for a Hugging Face
// folder, a folder without a .gguf file, or a path that does not exist
// (ReadConfig reports those), and an error for a folder with several GGUF
// models.
func GGUFFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil // ReadConfig reports it
	}
	if !st.IsDir() {
		return path, nil
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return "", nil
	}
	matches, err := filepath.Glob(filepath.Join(path, "*.gguf"))
	if err != nil || len(matches) == 0 {
		return "", nil
	}
	return gguf.Find(path)
}

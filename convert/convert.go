// Package convert writes a Hugging Face checkpoint folder (config.json,
// safetensors, tokenizer.json, tokenizer_config.json) as one GGUF file, in
// any of quant's file types: what `troupe quantize` does.
//
// The file is the one llama.cpp's convert_hf_to_gguf.py and llama-quantize
// would make from the same folder: the same metadata keys for the
// architecture, the same tensor names, llama's Q/K rows permuted for
// llama.cpp's adjacent-pair rope, the tokenizer as GGUF metadata, and the
// matrices quantized as llama-quantize quantizes them (package quant). So
// llama.cpp and troupe can be measured side by side on the same file, and a
// model troupe makes (model init) can be served by either.
//
// Supported: the llama (SmolLM, Mistral-style), qwen2 and qwen3 families
// with a byte-level BPE tokenizer. Anything else is an error naming what is
// missing, never a file llama.cpp would misread.
package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/safetensors"
	"github.com/troupe-ai/troupe/quant"
)

// Options are the choices of Write.
type Options struct {
	// Type is the file type (quant.FileTypes).
	Type quant.FileType
	// Name is general.name (default: the folder's name).
	Name string
	// Progress, when set, is called after each tensor with the number done
	// and the total.
	Progress func(done, total int)
}

// arch is what differs between the families this package writes.
type arch struct {
	name string // general.architecture
	// permuteQK: the Q and K rows are stored for llama.cpp's adjacent-pair
	// rope (llama); the others rope in the NEOX order as stored.
	permuteQK bool
	// headDimKeys: attention.key_length and value_length are written.
	headDimKeys bool
	// vocabKey: <arch>.vocab_size and rope.dimension_count are written.
	vocabKey bool
}

var archs = map[string]arch{
	"llama":   {name: "llama", permuteQK: true, vocabKey: true},
	"mistral": {name: "llama", permuteQK: true, vocabKey: true},
	"qwen2":   {name: "qwen2"},
	"qwen3":   {name: "qwen3", headDimKeys: true},
}

// Write converts the checkpoint in dir to a GGUF file at out.
func Write(dir, out string, opts Options) error {
	if _, err := quant.ParseFileType(string(opts.Type)); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	mt, err := cfg.String("model_type", "")
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	a, ok := archs[mt]
	if !ok {
		return fmt.Errorf("convert: %s: model_type %q is not one troupe writes as GGUF (it writes llama, mistral, qwen2, qwen3)", dir, mt)
	}
	hp, err := readHParams(cfg)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", dir, err)
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	kvs := []gguf.KV{
		{Key: gguf.ArchitectureKey, Value: gguf.StringValue(a.name)},
		{Key: "general.type", Value: gguf.StringValue("model")},
		{Key: "general.name", Value: gguf.StringValue(name)},
	}
	kvs = append(kvs, hp.kvs(a)...)
	kvs = append(kvs,
		gguf.KV{Key: gguf.FileTypeKey, Value: gguf.Uint32Value(opts.Type.GeneralFileType())},
		gguf.KV{Key: gguf.QuantizationVersionKey, Value: gguf.Uint32Value(2)})
	tok, err := tokenizerKVs(dir, cfg, hp.vocab)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", dir, err)
	}
	kvs = append(kvs, tok...)

	st, err := safetensors.Open(dir)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	defer st.Close()
	plan, err := tensorPlan(st, a, hp)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", dir, err)
	}
	m := quant.Model{Layers: hp.layers, GQA: hp.heads / hp.kvHeads}
	var tensors []gguf.WriteTensor
	for i, p := range plan {
		t, err := st.Tensor(p.hf)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		rows, cols := 1, t.Elements()
		if len(t.Shape) == 2 {
			rows, cols = t.Shape[0], t.Shape[1]
		} else if len(t.Shape) != 1 {
			return fmt.Errorf("convert: %s: tensor %s has shape %v (1 or 2 dimensions expected)", dir, p.hf, t.Shape)
		}
		w, err := gpu.NewWeight(t.DType, rows, cols, t.Data)
		if err != nil {
			return fmt.Errorf("convert: tensor %s: %w", p.hf, err)
		}
		x := w.Float32s()
		if p.permuteHeads > 0 {
			x = permuteRows(x, rows, cols, p.permuteHeads)
		}
		dims := []int64{int64(cols)}
		if len(t.Shape) == 2 {
			dims = append(dims, int64(rows))
		}
		typ := opts.Type.Type(p.gguf, int64(cols), len(dims), hp.tied, m)
		data, err := quant.Quantize(typ, x)
		if err != nil {
			return fmt.Errorf("convert: tensor %s as %v: %w", p.hf, typ, err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: p.gguf, Dims: dims, Type: typ, Data: data})
		if opts.Progress != nil {
			opts.Progress(i+1, len(plan))
		}
	}
	if err := gguf.WriteFile(out, kvs, tensors, 0); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}

// hparams are the config's numbers GGUF keeps.
type hparams struct {
	layers, hidden, ffn, heads, kvHeads, headDim, vocab, ctx int
	ropeTheta, rmsEps                                        float64
	ropeScaling                                              float64 // linear factor, 0: none
	tied                                                     bool
	headDimSet                                               bool
}

func readHParams(c *model.Config) (hparams, error) {
	var h hparams
	var errs []error
	get := func(key string, def int) int {
		v, err := c.Int(key, def)
		errs = append(errs, err)
		return v
	}
	h.layers = get("num_hidden_layers", 0)
	h.hidden = get("hidden_size", 0)
	h.ffn = get("intermediate_size", 0)
	h.heads = get("num_attention_heads", 0)
	h.kvHeads = get("num_key_value_heads", h.heads)
	h.vocab = get("vocab_size", 0)
	h.ctx = get("max_position_embeddings", 2048)
	h.headDimSet = c.Has("head_dim") && c.Raw("head_dim") != nil
	if h.heads > 0 {
		h.headDim = get("head_dim", h.hidden/h.heads)
	}
	var err error
	h.ropeTheta, err = c.Float("rope_theta", 10000)
	errs = append(errs, err)
	h.rmsEps, err = c.Float("rms_norm_eps", 1e-6)
	errs = append(errs, err)
	h.tied, err = c.Bool("tie_word_embeddings", false)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return h, err
	}
	if h.layers <= 0 || h.hidden <= 0 || h.ffn <= 0 || h.heads <= 0 || h.kvHeads <= 0 || h.vocab <= 0 || h.heads%h.kvHeads != 0 {
		return h, fmt.Errorf("config.json: layers %d, hidden %d, ffn %d, heads %d/%d, vocab %d: not a model this package can write", h.layers, h.hidden, h.ffn, h.heads, h.kvHeads, h.vocab)
	}
	if rs, ok := c.Raw("rope_scaling").(map[string]any); ok && rs != nil {
		typ, _ := rs["rope_type"].(string)
		if typ == "" {
			typ, _ = rs["type"].(string)
		}
		f, _ := rs["factor"].(float64)
		if typ != "linear" || f <= 0 {
			return h, fmt.Errorf("config.json: rope_scaling %v is not written yet (only linear)", rs)
		}
		h.ropeScaling = f
	}
	return h, nil
}

// kvs are the architecture's keys, as convert_hf_to_gguf.py writes them.
func (h hparams) kvs(a arch) []gguf.KV {
	k := func(s string) string { return a.name + "." + s }
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	out := []gguf.KV{
		{Key: k("block_count"), Value: u(h.layers)},
		{Key: k("context_length"), Value: u(h.ctx)},
		{Key: k("embedding_length"), Value: u(h.hidden)},
		{Key: k("feed_forward_length"), Value: u(h.ffn)},
		{Key: k("attention.head_count"), Value: u(h.heads)},
		{Key: k("attention.head_count_kv"), Value: u(h.kvHeads)},
		{Key: k("rope.freq_base"), Value: gguf.Float32Value(float32(h.ropeTheta))},
		{Key: k("attention.layer_norm_rms_epsilon"), Value: gguf.Float32Value(float32(h.rmsEps))},
	}
	if a.headDimKeys || h.headDimSet && h.headDim != h.hidden/h.heads {
		out = append(out, gguf.KV{Key: k("attention.key_length"), Value: u(h.headDim)},
			gguf.KV{Key: k("attention.value_length"), Value: u(h.headDim)})
	}
	if a.vocabKey {
		out = append(out, gguf.KV{Key: k("vocab_size"), Value: u(h.vocab)},
			gguf.KV{Key: k("rope.dimension_count"), Value: u(h.headDim)})
	}
	if h.ropeScaling > 0 {
		out = append(out, gguf.KV{Key: k("rope.scaling.type"), Value: gguf.StringValue("linear")},
			gguf.KV{Key: k("rope.scaling.factor"), Value: gguf.Float32Value(float32(h.ropeScaling))})
	}
	return out
}

// planned is one tensor to write: its names, and for llama's Q and K the
// heads to permute the rows by.
type planned struct {
	hf, gguf     string
	permuteHeads int
}

// tensorPlan lists the tensors in llama.cpp's order (embeddings, each
// block, final norm, output), refusing a tensor it does not know.
func tensorPlan(st *safetensors.Model, a arch, h hparams) ([]planned, error) {
	var plan []planned
	used := map[string]bool{}
	add := func(hf string, heads int, required bool) error {
		if !st.Has(hf) {
			if required {
				return fmt.Errorf("tensor %s is missing", hf)
			}
			return nil
		}
		g, ok := gguf.TensorName(hf)
		if !ok {
			return fmt.Errorf("tensor %s has no GGUF name", hf)
		}
		used[hf] = true
		plan = append(plan, planned{hf, g, heads})
		return nil
	}
	qHeads, kHeads := 0, 0
	if a.permuteQK {
		qHeads, kHeads = h.heads, h.kvHeads
	}
	if err := add("model.embed_tokens.weight", 0, true); err != nil {
		return nil, err
	}
	for i := range h.layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, t := range []struct {
			hf       string
			heads    int
			required bool
		}{
			{"input_layernorm.weight", 0, true},
			{"self_attn.q_proj.weight", qHeads, true},
			{"self_attn.q_proj.bias", qHeads, false},
			{"self_attn.k_proj.weight", kHeads, true},
			{"self_attn.k_proj.bias", kHeads, false},
			{"self_attn.v_proj.weight", 0, true},
			{"self_attn.v_proj.bias", 0, false},
			{"self_attn.o_proj.weight", 0, true},
			{"self_attn.q_norm.weight", 0, a.name == "qwen3"},
			{"self_attn.k_norm.weight", 0, a.name == "qwen3"},
			{"post_attention_layernorm.weight", 0, true},
			{"mlp.gate_proj.weight", 0, true},
			{"mlp.up_proj.weight", 0, true},
			{"mlp.down_proj.weight", 0, true},
		} {
			if err := add(p+t.hf, t.heads, t.required); err != nil {
				return nil, err
			}
		}
	}
	if err := add("model.norm.weight", 0, true); err != nil {
		return nil, err
	}
	if !h.tied {
		if err := add("lm_head.weight", 0, true); err != nil {
			return nil, err
		}
	}
	for _, n := range st.Names() {
		if !used[n] && !strings.HasSuffix(n, "rotary_emb.inv_freq") && !(h.tied && n == "lm_head.weight") {
			return nil, fmt.Errorf("tensor %s has no GGUF name here", n)
		}
	}
	return plan, nil
}

// permuteRows reorders the rows of a Q or K projection (heads of rows/heads
// rows) from Hugging Face's rotate-half pairing (i, i + d/2) to the
// adjacent pairs (2i, 2i+1) llama.cpp ropes, as convert_hf_to_gguf.py's
// permute does: row (h, j, k) of shape (heads, 2, d/2) goes to (h, k, j).
// A bias (cols 1) is permuted the same way.
func permuteRows(x []float32, rows, cols, heads int) []float32 {
	out := make([]float32, len(x))
	half := rows / heads / 2
	for h := range heads {
		for j := range 2 {
			for k := range half {
				src := (h*2+j)*half + k
				dst := (h*half+k)*2 + j
				copy(out[dst*cols:(dst+1)*cols], x[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

// readJSON reads dir/name into v; ok is false when the file does not exist.
func readJSON(dir, name string, v any) (bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return true, nil
}

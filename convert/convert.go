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
// Supported: the llama (SmolLM, Mistral-style), qwen2, qwen3, phi3, gemma2
// and gemma3 (model_type gemma3_text) families with a byte-level BPE
// tokenizer. Anything else is an error naming what is
// missing, never a file llama.cpp would misread.
package convert

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
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
	// rope (llama); the others (qwen, phi3, gemma) rope in the NEOX order
	// as stored.
	permuteQK bool
	// headDimKeys: attention.key_length and value_length are written.
	headDimKeys bool
	// vocabKey: <arch>.vocab_size and rope.dimension_count are written.
	vocabKey bool
	// qkNorm: the per-head attn_q_norm and attn_k_norm are required.
	qkNorm bool
	// normShift is added to every *norm.weight (Gemma's RMSNorm scales by
	// 1 + w; llama.cpp's by w).
	normShift float32
	// tiedDefault is tie_word_embeddings when config.json does not say;
	// alwaysTied: lm_head.weight is never written (llama.cpp's gemma2
	// projects with token_embd).
	tiedDefault, alwaysTied bool
	// ropeTheta is rope_theta when config.json does not say.
	ropeTheta float64
	// keys, when set, adds the family's own keys.
	keys func(c *model.Config, h hparams, k func(string) string) ([]gguf.KV, error)
}

var archs = map[string]arch{
	"llama":       {name: "llama", permuteQK: true, vocabKey: true},
	"mistral":     {name: "llama", permuteQK: true, vocabKey: true},
	"qwen2":       {name: "qwen2"},
	"qwen3":       {name: "qwen3", headDimKeys: true, qkNorm: true},
	"phi3":        {name: "phi3", keys: phi3Keys},
	"gemma2":      {name: "gemma2", headDimKeys: true, normShift: 1, tiedDefault: true, alwaysTied: true, keys: gemma2Keys},
	"gemma3_text": {name: "gemma3", headDimKeys: true, qkNorm: true, normShift: 1, tiedDefault: true, ropeTheta: 1e6, keys: gemma3Keys},
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
		return fmt.Errorf("convert: %s: model_type %q is not one troupe writes as GGUF (it writes llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text)", dir, mt)
	}
	hp, err := readHParams(cfg, a)
	if err != nil {
		return fmt.Errorf("convert: %s: %w", dir, err)
	}
	archKVs, err := hp.kvs(cfg, a)
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
	kvs = append(kvs, archKVs...)
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
	tensors, err := hp.extraTensors()
	if err != nil {
		return fmt.Errorf("convert: %s: %w", dir, err)
	}
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
		if p.shift != 0 {
			x = slices.Clone(x) // may alias the mapped file
			for i := range x {
				x[i] += p.shift
			}
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
	// longFactors and shortFactors are phi3's longrope rescaling of the
	// rotary frequencies (nil: none).
	longFactors, shortFactors []float32
	tied                      bool
	headDimSet                bool
}

func readHParams(c *model.Config, a arch) (hparams, error) {
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
	h.ropeTheta, err = c.Float("rope_theta", cmp.Or(a.ropeTheta, 10000))
	errs = append(errs, err)
	h.rmsEps, err = c.Float("rms_norm_eps", 1e-6)
	errs = append(errs, err)
	h.tied, err = c.Bool("tie_word_embeddings", a.tiedDefault)
	errs = append(errs, err)
	h.tied = h.tied || a.alwaysTied
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
		if (typ == "longrope" || typ == "su") && a.name == "phi3" {
			sub, err := c.Sub("rope_scaling")
			if err != nil {
				return h, err
			}
			long, err1 := sub.Floats("long_factor")
			short, err2 := sub.Floats("short_factor")
			if err := errors.Join(err1, err2); err != nil {
				return h, err
			}
			h.longFactors, h.shortFactors = toFloat32(long), toFloat32(short)
			return h, nil
		}
		f, _ := rs["factor"].(float64)
		if typ != "linear" || f <= 0 {
			return h, fmt.Errorf("config.json: rope_scaling %v is not written yet (only linear, and phi3's longrope)", rs)
		}
		h.ropeScaling = f
	}
	return h, nil
}

// toFloat32 narrows v to float32 (GGUF stores the rope factors so).
func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}

// kvs are the architecture's keys, as convert_hf_to_gguf.py writes them.
func (h hparams) kvs(c *model.Config, a arch) ([]gguf.KV, error) {
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
	if a.keys != nil {
		more, err := a.keys(c, h, k)
		if err != nil {
			return nil, fmt.Errorf("config.json: %w", err)
		}
		out = append(out, more...)
	}
	return out, nil
}

// phi3Keys: the rotary dimensions (partial_rotary_factor of the head),
// the original context length, and the sliding window (0 for none), which
// llama.cpp reads but does not apply to phi3.
func phi3Keys(c *model.Config, h hparams, k func(string) string) ([]gguf.KV, error) {
	var errs []error
	partial, err := c.Float("partial_rotary_factor", 1)
	errs = append(errs, err)
	window, err := c.Int("sliding_window", 0)
	errs = append(errs, err)
	orig, err := c.Int("original_max_position_embeddings", 0)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	ropeDims := int(partial*float64(h.hidden)) / h.heads
	out := []gguf.KV{
		{Key: k("rope.dimension_count"), Value: gguf.Uint32Value(uint32(ropeDims))},
		{Key: k("attention.sliding_window"), Value: gguf.Uint32Value(uint32(window))},
	}
	if orig > 0 {
		out = append(out, gguf.KV{Key: k("rope.scaling.original_context_length"), Value: gguf.Uint32Value(uint32(orig))})
	}
	if h.longFactors != nil {
		// The factors themselves are tensors (extraTensors); the
		// attention factor is longrope's, from the context extension.
		if orig <= 0 {
			return nil, errors.New("rope_scaling is longrope but original_max_position_embeddings is not set")
		}
		if len(h.longFactors) != ropeDims/2 || len(h.shortFactors) != ropeDims/2 {
			return nil, fmt.Errorf("rope_scaling: %d long and %d short factors, want %d each", len(h.longFactors), len(h.shortFactors), ropeDims/2)
		}
		attn := 1.0
		if scale := float64(h.ctx) / float64(orig); scale > 1 {
			attn = math.Sqrt(1 + math.Log(scale)/math.Log(float64(orig)))
		}
		out = append(out, gguf.KV{Key: k("rope.scaling.type"), Value: gguf.StringValue("longrope")},
			gguf.KV{Key: k("rope.scaling.attn_factor"), Value: gguf.Float32Value(float32(attn))})
	}
	return out, nil
}

// extraTensors are the tensors that hold hyperparameters rather than
// weights: phi3's longrope factors, which convert_hf_to_gguf.py writes
// first, as F32.
func (h hparams) extraTensors() ([]gguf.WriteTensor, error) {
	if h.longFactors == nil {
		return nil, nil
	}
	var out []gguf.WriteTensor
	for _, t := range []struct {
		name string
		v    []float32
	}{{"rope_factors_long.weight", h.longFactors}, {"rope_factors_short.weight", h.shortFactors}} {
		data, err := quant.Quantize(gguf.F32, t.v)
		if err != nil {
			return nil, err
		}
		out = append(out, gguf.WriteTensor{Name: t.name, Dims: []int64{int64(len(t.v))}, Type: gguf.F32, Data: data})
	}
	return out, nil
}

// gemma2Keys: the soft-capping values (transformers' defaults 50 and 30
// when absent; llama.cpp always caps gemma2, so null is refused), the
// sliding window, and a check of the query scale (gemmaQueryScale).
func gemma2Keys(c *model.Config, h hparams, k func(string) string) ([]gguf.KV, error) {
	var out []gguf.KV
	for _, key := range []struct {
		name string
		def  float64
	}{{"attn_logit_softcapping", 50}, {"final_logit_softcapping", 30}} {
		if c.Null(key.name) {
			return nil, fmt.Errorf("%s is null: llama.cpp's gemma2 always soft-caps", key.name)
		}
		v, err := c.Float(key.name, key.def)
		if err != nil {
			return nil, err
		}
		out = append(out, gguf.KV{Key: k(key.name), Value: gguf.Float32Value(float32(v))})
	}
	window, err := c.Int("sliding_window", 4096)
	if err != nil {
		return nil, err
	}
	if err := gemmaQueryScale(c, h, 46); err != nil {
		return nil, err
	}
	return append(out, gguf.KV{Key: k("attention.sliding_window"), Value: gguf.Uint32Value(uint32(window))}), nil
}

// gemma3Keys: the final soft-capping value when set, the local layers'
// rope base (rope.freq_base_swa) and the sliding window, unless every
// layer is global (sliding_window_pattern 1), the pattern when it is not
// the 6 llama.cpp assumes, and a check of the query scale and that
// layer_types, when given, follow the pattern.
func gemma3Keys(c *model.Config, h hparams, k func(string) string) ([]gguf.KV, error) {
	var out []gguf.KV
	var errs []error
	if c.Has("attn_logit_softcapping") {
		return nil, errors.New("attn_logit_softcapping is set: Gemma 3 has none, llama.cpp's gemma3 cannot apply it")
	}
	final, err := c.Float("final_logit_softcapping", 0)
	errs = append(errs, err)
	window, err := c.Int("sliding_window", 4096)
	errs = append(errs, err)
	pattern, err := c.Int("sliding_window_pattern", 6)
	errs = append(errs, err)
	local, err := c.Float("rope_local_base_freq", 0)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if final != 0 {
		out = append(out, gguf.KV{Key: k("final_logit_softcapping"), Value: gguf.Float32Value(float32(final))})
	}
	if pattern <= 0 {
		return nil, fmt.Errorf("sliding_window_pattern %d must be positive", pattern)
	}
	if types, ok := c.Raw("layer_types").([]any); ok {
		for i, t := range types {
			want := "sliding_attention"
			if (i+1)%pattern == 0 {
				want = "full_attention"
			}
			if t != want {
				return nil, fmt.Errorf("layer_types[%d] is %v: GGUF says only that every %dth layer is global", i, t, pattern)
			}
		}
	}
	if local > 0 {
		out = append(out, gguf.KV{Key: k("rope.freq_base_swa"), Value: gguf.Float32Value(float32(local))})
	}
	if pattern != 1 {
		out = append(out, gguf.KV{Key: k("attention.sliding_window"), Value: gguf.Uint32Value(uint32(window))})
	}
	if pattern != 1 && pattern != 6 {
		// convert_hf_to_gguf.py writes no pattern (llama.cpp assumes 6);
		// llama.cpp reads this key as an integer when it is there.
		out = append(out, gguf.KV{Key: k("attention.sliding_window_pattern"), Value: gguf.Uint32Value(uint32(pattern))})
	}
	if err := gemmaQueryScale(c, h, 62); err != nil {
		return nil, err
	}
	return out, nil
}

// gemmaQueryScale checks query_pre_attn_scalar against the one llama.cpp
// uses, which GGUF has no key for: the head size, or hidden_size/heads for
// the 27B models (bigLayers layers).
func gemmaQueryScale(c *model.Config, h hparams, bigLayers int) error {
	scalar, err := c.Float("query_pre_attn_scalar", 256)
	if err != nil {
		return err
	}
	want := h.headDim
	if h.layers == bigLayers {
		want = h.hidden / h.heads
	}
	if scalar != float64(want) {
		return fmt.Errorf("query_pre_attn_scalar %g: llama.cpp scales queries by 1/sqrt(%d) for this shape, and GGUF has no key to say otherwise", scalar, want)
	}
	return nil
}

// planned is one tensor to write: its names, for llama's Q and K the
// heads to permute the rows by, and what to add to every value (Gemma's
// norms).
type planned struct {
	hf, gguf     string
	permuteHeads int
	shift        float32
}

// tensorPlan lists the tensors in llama.cpp's order (embeddings, each
// block in the order of gguf.ArchBlockNames, final norm, output), refusing
// a tensor it does not know.
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
		g, ok := gguf.ArchTensorName(a.name, hf)
		if !ok {
			return fmt.Errorf("tensor %s has no GGUF name", hf)
		}
		var shift float32
		if strings.HasSuffix(hf, "norm.weight") {
			shift = a.normShift
		}
		used[hf] = true
		plan = append(plan, planned{hf, g, heads, shift})
		return nil
	}
	if err := add("model.embed_tokens.weight", 0, true); err != nil {
		return nil, err
	}
	for i := range h.layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		for _, names := range gguf.ArchBlockNames(a.name) {
			hf := names[0]
			heads := 0
			if a.permuteQK {
				switch hf {
				case "self_attn.q_proj":
					heads = h.heads
				case "self_attn.k_proj":
					heads = h.kvHeads
				}
			}
			required := a.qkNorm || (hf != "self_attn.q_norm" && hf != "self_attn.k_norm")
			if err := add(p+hf+".weight", heads, required); err != nil {
				return nil, err
			}
			if err := add(p+hf+".bias", heads, false); err != nil {
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

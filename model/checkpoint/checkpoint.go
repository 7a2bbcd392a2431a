package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// Config is a config.json as an ordered set of fields.
type Config map[string]any

// presets are named configurations.
var presets = map[string]func() Config{
	// SmolLM2-135M's shapes (HuggingFaceTB/SmolLM2-135M).
	"smollm2-135m": func() Config {
		return Config{
			"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
			"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
			"num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
			"tie_word_embeddings": true, "rope_theta": 100000.0, "rms_norm_eps": 1e-5,
			"max_position_embeddings": 8192, "bos_token_id": 1, "eos_token_id": 2,
			"hidden_act": "silu",
		}
	},
	// mamba-130m's shapes (state-spaces/mamba-130m-hf).
	"mamba-130m": func() Config {
		return Config{
			"architectures": []string{"MambaForCausalLM"}, "model_type": "mamba",
			"hidden_size": 768, "intermediate_size": 1536, "num_hidden_layers": 24,
			"state_size": 16, "expand": 2, "conv_kernel": 4, "time_step_rank": 48,
			"vocab_size": 50280, "layer_norm_epsilon": 1e-5, "use_bias": false, "use_conv_bias": true,
			"tie_word_embeddings": true, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0,
		}
	},
	// A Llama small enough to load in milliseconds.
	"tiny": func() Config { return tiny("llama") },
}

// Archs lists the architectures --arch accepts (model_type values).
func Archs() []string {
	return []string{"llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3_text", "mamba", "mamba2", "jamba", "bamba"}
}

// Tiny returns a tiny configuration of architecture arch (a model_type).
func Tiny(arch string) (Config, error) {
	if c := tiny(arch); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("unknown architecture %q (have %v)", arch, Archs())
}

func tiny(arch string) Config {
	c := Config{
		"model_type": arch, "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
		"num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
		"rope_theta": 10000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 2048,
		"bos_token_id": 1, "eos_token_id": 2,
	}
	class := map[string]string{
		"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
		"mistral": "MistralForCausalLM", "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
		"gemma3_text": "Gemma3ForCausalLM", "mamba": "MambaForCausalLM", "mamba2": "Mamba2ForCausalLM",
		"jamba": "JambaForCausalLM", "bamba": "BambaForCausalLM",
	}[arch]
	if class == "" {
		return nil
	}
	c["architectures"] = []string{class}
	switch arch {
	case "llama":
		c["tie_word_embeddings"] = true
	case "qwen3", "gemma2", "gemma3_text":
		c["head_dim"] = 16
		c["query_pre_attn_scalar"] = 16
		c["sliding_window"] = 32
	case "mistral":
		c["sliding_window"] = 32
	case "mamba":
		c["intermediate_size"], c["state_size"], c["expand"], c["conv_kernel"], c["time_step_rank"] = 128, 16, 2, 4, 4
		c["layer_norm_epsilon"] = 1e-5
	case "mamba2":
		c["state_size"], c["expand"], c["conv_kernel"], c["num_heads"], c["head_dim"], c["n_groups"], c["chunk_size"] = 16, 2, 4, 8, 16, 1, 16
		c["layer_norm_epsilon"] = 1e-5
	case "jamba":
		c["num_hidden_layers"] = 4
		c["attn_layer_period"], c["attn_layer_offset"], c["expert_layer_period"], c["expert_layer_offset"] = 2, 1, 2, 1
		c["num_experts"], c["num_experts_per_tok"] = 4, 2
		c["mamba_d_state"], c["mamba_d_conv"], c["mamba_expand"], c["mamba_dt_rank"] = 16, 4, 2, 4
	case "bamba":
		c["num_hidden_layers"] = 4
		c["attn_layer_indices"] = []int{1, 3}
		c["mamba_n_heads"], c["mamba_d_head"], c["mamba_n_groups"], c["mamba_d_state"], c["mamba_d_conv"], c["mamba_expand"] = 8, 16, 1, 16, 4, 2
		c["partial_rotary_factor"] = 0.5
	}
	return c
}

// PresetNames lists the presets.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Preset returns a fresh copy of a named configuration.
func Preset(name string) (Config, error) {
	p, ok := presets[name]
	if !ok {
		return nil, fmt.Errorf("unknown preset %q (have %v)", name, PresetNames())
	}
	return p(), nil
}

// ReadConfig reads a config.json file to start from.
func ReadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Options say how to write a checkpoint.
type Options struct {
	DType gpu.DType // F32 (default) or BF16
	Seed  uint64
	Std   float64 // standard deviation of the matrices; 0 means 0.02
	// Script, when set, makes a script model (dense families only): one
	// whose next token depends only on the current one, following the
	// chain Script[0] → Script[1] → … whatever came before. Greedy decoding
	// (and, with its wide margins, sampling too) then replays the script
	// once the prompt ends in its first token: a real forward pass whose
	// output a test can predict. Tokens may repeat only with the same
	// successor.
	Script []int32
}

func (c Config) int(key string, def int) int {
	switch v := c[key].(type) {
	case int:
		return v
	case float64:
		return int(v)
	}
	return def
}

func (c Config) bool(key string, def bool) bool {
	if v, ok := c[key].(bool); ok {
		return v
	}
	return def
}

// tensorSpec is one tensor to write: name, shape and how to fill it.
type tensorSpec struct {
	name  string
	shape []int
	fill  float64 // NaN: random normal; else a constant
	// logPeriod > 0 fills element i with log(1 + i%logPeriod): the S4D-real
	// initialisation of A_log, which keeps a state-space layer stable.
	logPeriod int
}

// Tensors lists the tensors a checkpoint of config c holds, in the layout the
// model families read.
func tensors(c Config) ([]tensorSpec, error) {
	mt, _ := c["model_type"].(string)
	switch mt {
	case "mamba", "mamba2", "jamba", "bamba":
		return hybridTensors(c)
	}
	H := c.int("hidden_size", 0)
	V := c.int("vocab_size", 0)
	L := c.int("num_hidden_layers", 0)
	heads := c.int("num_attention_heads", 0)
	I := c.int("intermediate_size", 0)
	if H <= 0 || V <= 0 || L <= 0 || heads <= 0 || I <= 0 {
		return nil, fmt.Errorf("config needs positive hidden_size, vocab_size, num_hidden_layers, num_attention_heads, intermediate_size")
	}
	kvh := c.int("num_key_value_heads", heads)
	D := c.int("head_dim", H/heads)
	Q, KV := heads*D, kvh*D
	rnd, one, zero := math.NaN(), 1.0, 0.0
	norm := one
	var tied bool
	switch mt {
	case "llama", "qwen2", "qwen3", "mistral", "phi3":
		tied = c.bool("tie_word_embeddings", false)
	case "gemma2", "gemma3_text":
		tied = c.bool("tie_word_embeddings", true)
		norm = zero // Gemma scales by (1 + w)
	default:
		return nil, fmt.Errorf("model_type %q: the generator knows llama, qwen2, qwen3, mistral, phi3, gemma2, gemma3_text", mt)
	}
	ts := []tensorSpec{{name: "model.embed_tokens.weight", shape: []int{V, H}, fill: rnd}}
	for i := 0; i < L; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		add := func(name string, fill float64, shape ...int) {
			ts = append(ts, tensorSpec{name: p + name, shape: shape, fill: fill})
		}
		add("input_layernorm.weight", norm, H)
		add("post_attention_layernorm.weight", norm, H)
		if mt == "gemma2" || mt == "gemma3_text" {
			add("pre_feedforward_layernorm.weight", norm, H)
			add("post_feedforward_layernorm.weight", norm, H)
		}
		if mt == "phi3" {
			add("self_attn.qkv_proj.weight", rnd, Q+2*KV, H)
			add("mlp.gate_up_proj.weight", rnd, 2*I, H)
		} else {
			add("self_attn.q_proj.weight", rnd, Q, H)
			add("self_attn.k_proj.weight", rnd, KV, H)
			add("self_attn.v_proj.weight", rnd, KV, H)
			add("mlp.gate_proj.weight", rnd, I, H)
			add("mlp.up_proj.weight", rnd, I, H)
		}
		add("self_attn.o_proj.weight", rnd, H, Q)
		add("mlp.down_proj.weight", rnd, H, I)
		bias := c.bool("attention_bias", false)
		if mt == "qwen2" || bias {
			add("self_attn.q_proj.bias", rnd, Q)
			add("self_attn.k_proj.bias", rnd, KV)
			add("self_attn.v_proj.bias", rnd, KV)
		}
		if bias && mt != "qwen2" {
			add("self_attn.o_proj.bias", rnd, H)
		}
		if c.bool("mlp_bias", false) {
			add("mlp.gate_proj.bias", rnd, I)
			add("mlp.up_proj.bias", rnd, I)
			add("mlp.down_proj.bias", rnd, H)
		}
		if mt == "qwen3" || mt == "gemma3_text" {
			add("self_attn.q_norm.weight", norm, D)
			add("self_attn.k_norm.weight", norm, D)
		}
	}
	ts = append(ts, tensorSpec{name: "model.norm.weight", shape: []int{H}, fill: norm})
	if !tied {
		ts = append(ts, tensorSpec{name: "lm_head.weight", shape: []int{V, H}, fill: rnd})
	}
	return ts, nil
}

// Write writes config.json, generation_config.json and model.safetensors for
// config c into dir (created if needed).
func Write(dir string, c Config, opt Options) error {
	var err error
	if opt.DType == 0 {
		opt.DType = gpu.F32
	}
	if opt.DType != gpu.F32 && opt.DType != gpu.BF16 {
		return fmt.Errorf("checkpoint: dtype %v not supported (f32 or bf16)", opt.DType)
	}
	std := opt.Std
	if std == 0 {
		std = 0.02
	}
	var next map[int32]int32
	if len(opt.Script) > 0 {
		if next, err = scriptChain(c, opt.Script); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		c = maps.Clone(c)
		c["tie_word_embeddings"] = false
	}
	var specs []tensorSpec
	specs, err = tensors(c)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if next != nil {
		silenceLayers(specs)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	cfg := Config{}
	for k, v := range c {
		cfg[k] = v
	}
	if opt.DType == gpu.BF16 {
		cfg["torch_dtype"] = "bfloat16"
	} else {
		cfg["torch_dtype"] = "float32"
	}
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return err
	}
	gen := Config{}
	for _, k := range []string{"bos_token_id", "eos_token_id", "pad_token_id"} {
		if v, ok := c[k]; ok {
			gen[k] = v
		}
	}
	if err := writeJSON(filepath.Join(dir, "generation_config.json"), gen); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 0x7472_6f75_7065))
	out := make([]safetensors.WriteTensor, 0, len(specs))
	for _, s := range specs {
		n := 1
		for _, d := range s.shape {
			n *= d
		}
		data := make([]byte, n*opt.DType.Size())
		for i := 0; i < n; i++ {
			v := float32(s.fill)
			switch {
			case s.logPeriod > 0:
				v = float32(math.Log(float64(1 + i%s.logPeriod)))
			case math.IsNaN(s.fill):
				v = float32(rng.NormFloat64() * std)
			}
			setElem(data, opt.DType, i, v)
		}
		out = append(out, safetensors.WriteTensor{Name: s.name, DType: opt.DType.String(), Shape: slices.Clone(s.shape), Data: data})
	}
	if next != nil {
		scriptHead(out, next, opt.DType)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), out, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// setElem stores element i of a tensor in dtype dt (f32 or bf16).
func setElem(data []byte, dt gpu.DType, i int, v float32) {
	if dt == gpu.BF16 {
		binary.LittleEndian.PutUint16(data[2*i:], gpu.F32ToBF16(v))
		return
	}
	binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

package model

import (
	"fmt"
	"math"
)

// Gemma 2 and Gemma 3 text (Gemma2ForCausalLM, Gemma3ForCausalLM): RMSNorm
// scaling by (1 + w), embeddings scaled by sqrt(hidden_size), sandwich norms
// around attention and the MLP, GELU (tanh) gating, attention scaled by
// query_pre_attn_scalar^-1/2, and alternating local (sliding-window) and
// global layers. Gemma 2 soft-caps attention scores and final logits; Gemma 3
// normalises q and k per head and gives local layers their own RoPE base.

var gemma2Family = Family{
	Name:       "gemma2",
	ModelTypes: []string{"gemma2"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readGemmaConfig(c, defaults{
			vocab: 256000, hidden: 2304, inter: 9216, layers: 26, heads: 8, kvHeads: 4, headDim: 256,
			maxPos: 8192, eps: 1e-6, theta: 10000, tied: true,
		}, 50, 30)
		if err != nil {
			return nil, err
		}
		win, err := c.Int("sliding_window", 4096)
		if err != nil {
			return nil, err
		}
		for i := range cfg.window {
			if i%2 == 0 { // even layers are local
				cfg.window[i] = win
			}
		}
		if err := layerTypes(c, &cfg, win); err != nil {
			return nil, err
		}
		return loadDecoder(c, w, cfg, "Gemma2ForCausalLM")
	},
}

var gemma3Family = Family{
	Name:       "gemma3_text",
	ModelTypes: []string{"gemma3_text"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readGemmaConfig(c, defaults{
			vocab: 262208, hidden: 2304, inter: 9216, layers: 26, heads: 8, kvHeads: 4, headDim: 256,
			maxPos: 131072, eps: 1e-6, theta: 1e6, tied: true,
		}, 0, 0)
		if err != nil {
			return nil, err
		}
		cfg.qkNorm = true
		g := getter{c: c}
		win := g.int("sliding_window", 4096)
		pattern := g.int("sliding_window_pattern", 6)
		localBase := g.float("rope_local_base_freq", 10000)
		if g.err != nil {
			return nil, g.err
		}
		if pattern <= 0 {
			return nil, errorf(c, "sliding_window_pattern %d must be positive", pattern)
		}
		for i := range cfg.window {
			if (i+1)%pattern != 0 {
				cfg.window[i] = win
			}
		}
		if err := layerTypes(c, &cfg, win); err != nil {
			return nil, err
		}
		local, err := NewRope(localBase, cfg.headDim, cfg.maxPos, cfg.maxPos, nil)
		if err != nil {
			return nil, errorf(c, "%v", err)
		}
		for i := range cfg.rope {
			if cfg.window[i] > 0 {
				cfg.rope[i] = local
			}
		}
		return loadDecoder(c, w, cfg, "Gemma3ForCausalLM")
	},
}

func readGemmaConfig(c *Config, d defaults, attnCap, finalCap float64) (decoderConfig, error) {
	cfg, err := readDecoderConfig(c, d)
	if err != nil {
		return cfg, err
	}
	g := getter{c: c}
	scalar := g.float("query_pre_attn_scalar", 256)
	g.float("attn_logit_softcapping", 0) // type checks
	g.float("final_logit_softcapping", 0)
	act := g.string("hidden_activation", "gelu_pytorch_tanh")
	bias := g.bool("attention_bias", false)
	if g.err != nil {
		return cfg, g.err
	}
	cfg.attnSoftcap = softcap(c, "attn_logit_softcapping", attnCap)
	cfg.finalSoftcap = softcap(c, "final_logit_softcapping", finalCap)
	switch act {
	case "gelu_pytorch_tanh", "gelu_tanh":
		cfg.gelu = true
	default:
		return cfg, errorf(c, "unsupported hidden_activation %q (supported: gelu_pytorch_tanh)", act)
	}
	cfg.qkvBias, cfg.oBias = bias, bias
	cfg.unitNorm, cfg.sandwich = true, true
	cfg.embedScale = float32(math.Sqrt(float64(cfg.hidden)))
	cfg.attnScale = float32(math.Pow(scalar, -0.5))
	return cfg, nil
}

// softcap reads a soft-capping value: absent means the class default, an
// explicit null means none.
func softcap(c *Config, key string, def float64) float32 {
	v, present := c.raw[key]
	if !present {
		return float32(def)
	}
	f, _ := v.(float64) // null (nil) gives 0: no capping
	return float32(f)
}

// layerTypes applies a layer_types list ("sliding_attention" /
// "full_attention"), which newer configs carry instead of a pattern.
func layerTypes(c *Config, cfg *decoderConfig, win int) error {
	list, ok := c.Raw("layer_types").([]any)
	if !ok {
		return nil
	}
	if len(list) != cfg.layers {
		return errorf(c, "layer_types has %d entries for %d layers", len(list), cfg.layers)
	}
	for i, v := range list {
		switch v {
		case "sliding_attention":
			cfg.window[i] = win
		case "full_attention":
			cfg.window[i] = 0
		default:
			return errorf(c, "layer_types[%d] = %v: want sliding_attention or full_attention", i, v)
		}
	}
	return nil
}

func errorf(c *Config, format string, args ...any) error {
	return fmt.Errorf("%s: %s", c.Path, fmt.Sprintf(format, args...))
}

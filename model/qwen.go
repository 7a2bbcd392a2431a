package model

// Qwen2 and Qwen3 (Qwen2ForCausalLM, Qwen3ForCausalLM): the Llama block with
// q/k/v biases (Qwen2) or per-head RMSNorm on q and k before RoPE (Qwen3).
// Sliding-window attention applies to layers at and past max_window_layers
// when use_sliding_window is set, as in transformers' Qwen2/Qwen3 attention.

var qwen2Family = Family{
	Name:       "qwen2",
	ModelTypes: []string{"qwen2"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{
			vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32,
			maxPos: 32768, eps: 1e-6, theta: 10000,
		})
		if err != nil {
			return nil, err
		}
		cfg.qkvBias = true
		if err := qwenWindows(c, &cfg); err != nil {
			return nil, err
		}
		return loadDecoder(c, w, cfg, "Qwen2ForCausalLM")
	},
}

var qwen3Family = Family{
	Name:       "qwen3",
	ModelTypes: []string{"qwen3"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{
			vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kvHeads: 32, headDim: 128,
			maxPos: 32768, eps: 1e-6, theta: 10000,
		})
		if err != nil {
			return nil, err
		}
		g := getter{c: c}
		bias := g.bool("attention_bias", false)
		if g.err != nil {
			return nil, g.err
		}
		cfg.qkvBias, cfg.oBias = bias, bias
		cfg.qkNorm = true
		if err := qwenWindows(c, &cfg); err != nil {
			return nil, err
		}
		return loadDecoder(c, w, cfg, "Qwen3ForCausalLM")
	},
}

func qwenWindows(c *Config, cfg *decoderConfig) error {
	g := getter{c: c}
	use := g.bool("use_sliding_window", false)
	win := g.int("sliding_window", 4096)
	from := g.int("max_window_layers", 28)
	if g.err != nil || !use {
		return g.err
	}
	for i := from; i < cfg.layers; i++ {
		cfg.window[i] = win
	}
	return nil
}

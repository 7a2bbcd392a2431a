package model

// Llama (LlamaForCausalLM): RMSNorm, rotary embeddings (with llama3, linear
// and dynamic scaling), grouped-query attention, SwiGLU MLP; optional
// attention and MLP biases, explicit head_dim and tied embeddings. Matches
// transformers' modeling_llama.

var llamaFamily = Family{
	Name:       "llama",
	ModelTypes: []string{"llama"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{
			vocab: 32000, hidden: 4096, inter: 11008, layers: 32, heads: 32,
			maxPos: 2048, eps: 1e-6, theta: 10000,
		})
		if err != nil {
			return nil, err
		}
		g := getter{c: c}
		attnBias := g.bool("attention_bias", false)
		cfg.qkvBias, cfg.oBias = attnBias, attnBias
		cfg.mlpBias = g.bool("mlp_bias", false)
		if g.err != nil {
			return nil, g.err
		}
		return loadDecoder(c, w, cfg, "LlamaForCausalLM")
	},
}

// defaults are the values of a family's transformers config class for the
// fields the shared reader looks at.
type defaults struct {
	vocab, hidden, inter, layers, heads, kvHeads, headDim, maxPos int
	eps, theta                                                    float64
	tied                                                          bool
}

// readDecoderConfig reads the fields every dense family shares and sets up
// one RoPE for all layers and no sliding window.
func readDecoderConfig(c *Config, d defaults) (decoderConfig, error) {
	g := getter{c: c}
	cfg := decoderConfig{
		vocab:  g.int("vocab_size", d.vocab),
		hidden: g.int("hidden_size", d.hidden),
		inter:  g.int("intermediate_size", d.inter),
		layers: g.int("num_hidden_layers", d.layers),
		heads:  g.int("num_attention_heads", d.heads),
		maxPos: g.int("max_position_embeddings", d.maxPos),
		eps:    float32(g.float("rms_norm_eps", d.eps)),
		tied:   g.bool("tie_word_embeddings", d.tied),
	}
	kvDef := d.kvHeads
	if kvDef == 0 {
		kvDef = cfg.heads
	}
	cfg.kvHeads = g.int("num_key_value_heads", kvDef)
	hdDef := d.headDim
	if hdDef == 0 && cfg.heads > 0 {
		hdDef = cfg.hidden / cfg.heads
	}
	cfg.headDim = g.int("head_dim", hdDef)
	theta := g.float("rope_theta", d.theta)
	partial := g.float("partial_rotary_factor", 1)
	if g.err != nil {
		return cfg, g.err
	}
	if cfg.headDim <= 0 || cfg.layers <= 0 {
		return cfg, errorf(c, "head_dim %d and num_hidden_layers %d must be positive", cfg.headDim, cfg.layers)
	}
	scaling, err := c.Sub("rope_scaling")
	if err != nil {
		return cfg, err
	}
	orig := g.int("original_max_position_embeddings", cfg.maxPos)
	if g.err != nil {
		return cfg, g.err
	}
	rope, err := NewRope(theta, int(float64(cfg.headDim)*partial), cfg.maxPos, orig, scaling)
	if err != nil {
		return cfg, errorf(c, "%v", err)
	}
	if c.ropeFactors != nil {
		if err := rope.divideFreqs(c.ropeFactors); err != nil {
			return cfg, errorf(c, "%v", err)
		}
	}
	cfg.attnScale = defaultAttnScale(cfg.headDim)
	cfg.window = make([]int, cfg.layers)
	cfg.rope = make([]*Rope, cfg.layers)
	for i := range cfg.rope {
		cfg.rope[i] = rope
	}
	return cfg, nil
}

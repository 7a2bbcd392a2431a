package model

// Phi-3 (Phi3ForCausalLM): the Llama block with fused qkv_proj and
// gate_up_proj weights (split here into row ranges without copying), partial
// rotary embeddings and longrope scaling, and an optional sliding window.

var phi3Family = Family{
	Name:       "phi3",
	ModelTypes: []string{"phi3"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{
			vocab: 32064, hidden: 3072, inter: 8192, layers: 32, heads: 32,
			maxPos: 4096, eps: 1e-5, theta: 10000,
		})
		if err != nil {
			return nil, err
		}
		cfg.fusedQKV, cfg.fusedGateUp = true, true
		win, err := c.Int("sliding_window", 0)
		if err != nil {
			return nil, err
		}
		for i := range cfg.window {
			cfg.window[i] = win
		}
		return loadDecoder(c, w, cfg, "Phi3ForCausalLM")
	},
}

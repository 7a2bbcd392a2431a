package model

// Mistral (MistralForCausalLM): the Llama block with a sliding attention
// window on every layer. The query at position i sees keys i-W < j <= i. The
// KV cache keeps every position and masks (no ring buffer), so its state can
// be cut back like full attention.

var mistralFamily = Family{
	Name:       "mistral",
	ModelTypes: []string{"mistral"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{
			vocab: 32000, hidden: 4096, inter: 14336, layers: 32, heads: 32, kvHeads: 8,
			maxPos: 4096 * 32, eps: 1e-6, theta: 10000,
		})
		if err != nil {
			return nil, err
		}
		win, err := c.Int("sliding_window", 4096)
		if err != nil {
			return nil, err
		}
		for i := range cfg.window {
			cfg.window[i] = win
		}
		return loadDecoder(c, w, cfg, "MistralForCausalLM")
	},
}

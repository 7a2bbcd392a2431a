package model

import "fmt"

// Bamba (BambaForCausalLM): Mamba2 mixers with attention layers (partial
// RoPE) at attn_layer_indices; every layer is followed by an MLP. Matches
// transformers' modeling_bamba.

var bambaFamily = Family{
	Name:       "bamba",
	ModelTypes: []string{"bamba"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{vocab: 128000, hidden: 4096, inter: 14336, layers: 32, heads: 32, kvHeads: 8, maxPos: 262144, eps: 1e-5, theta: 10000})
		if err != nil {
			return nil, err
		}
		g := getter{c: c}
		heads := g.int("mamba_n_heads", 128)
		expand := g.int("mamba_expand", 2)
		s := ssmShape{
			version: 2, hidden: cfg.hidden, dInner: expand * cfg.hidden,
			dState: g.int("mamba_d_state", 256), conv: g.int("mamba_d_conv", 4),
			heads: heads, groups: g.int("mamba_n_groups", 1),
			inBias: g.bool("mamba_proj_bias", false), outBias: g.bool("mamba_proj_bias", false), convBias: g.bool("mamba_conv_bias", true),
			eps: cfg.eps, perGroupNorm: true,
		}
		attnBias := g.bool("attention_bias", false)
		mlpBias := g.bool("mlp_bias", false)
		if g.err != nil {
			return nil, g.err
		}
		switch v := c.Raw("mamba_d_head").(type) {
		case float64:
			s.headDim = int(v)
		default: // "auto"
			if heads > 0 {
				s.headDim = s.dInner / heads
			}
		}
		if s.dtMin, s.dtMax, err = timeStepLimit(c); err != nil {
			return nil, err
		}
		if err := checkSSD(c, s, cfg.vocab, cfg.layers); err != nil {
			return nil, err
		}
		attnAt := map[int]bool{}
		if list, ok := c.Raw("attn_layer_indices").([]any); ok {
			for _, v := range list {
				i, ok := v.(float64)
				if !ok || int(i) < 0 || int(i) >= cfg.layers {
					return nil, errorf(c, "attn_layer_indices entry %v is not a layer index", v)
				}
				attnAt[int(i)] = true
			}
		}
		h := &hybrid{weights: w, hidden: cfg.hidden, eps: cfg.eps, layers: make([]hybridLayer, cfg.layers)}
		h.embed = w.Matrix("model.embed_tokens.weight", cfg.vocab, cfg.hidden)
		for i := range h.layers {
			p := fmt.Sprintf("model.layers.%d.", i)
			l := &h.layers[i]
			l.norm = w.Vector(p+"input_layernorm.weight", cfg.hidden)
			l.ffnNorm = w.Vector(p+"pre_ff_layernorm.weight", cfg.hidden)
			if attnAt[i] {
				a := loadAttention(w, p+"self_attn.", attention{heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim,
					scale: cfg.attnScale, rope: cfg.rope[i], eps: cfg.eps}, cfg.hidden, false, attnBias, attnBias, false)
				l.attn = &a
			} else {
				l.ssm = loadSSM(w, p+"mamba.", s)
			}
			f := loadMLP(w, p+"feed_forward.", cfg.hidden, cfg.inter, false, mlpBias, false)
			l.mlp = &f
		}
		return finishHybrid(c, w, h, "BambaForCausalLM", "model.final_layernorm.weight", cfg.vocab, cfg.tied)
	},
}

package model

import "fmt"

// Jamba (JambaForCausalLM): Mamba v1 mixers (with RMSNorms on dt, B and C)
// interleaved with attention layers that have no positional encoding; every
// layer is followed by an MLP or, on expert layers, a mixture of experts.
// Matches transformers' modeling_jamba.

var jambaFamily = Family{
	Name:       "jamba",
	ModelTypes: []string{"jamba"},
	Load: func(c *Config, w *Weights) (Model, error) {
		cfg, err := readDecoderConfig(c, defaults{vocab: 65536, hidden: 4096, inter: 14336, layers: 32, heads: 32, kvHeads: 8, maxPos: 262144, eps: 1e-6, theta: 10000})
		if err != nil {
			return nil, err
		}
		g := getter{c: c}
		attnPeriod, attnOffset := g.int("attn_layer_period", 8), g.int("attn_layer_offset", 4)
		expPeriod, expOffset := g.int("expert_layer_period", 2), g.int("expert_layer_offset", 1)
		experts, topK := g.int("num_experts", 16), g.int("num_experts_per_tok", 2)
		s := ssmShape{
			version: 1, hidden: cfg.hidden, dInner: g.int("mamba_expand", 2) * cfg.hidden,
			dState: g.int("mamba_d_state", 16), conv: g.int("mamba_d_conv", 4),
			inBias: g.bool("mamba_proj_bias", false), outBias: g.bool("mamba_proj_bias", false), convBias: g.bool("mamba_conv_bias", true),
			bcdtNorms: true, eps: cfg.eps,
		}
		if g.err != nil {
			return nil, g.err
		}
		if s.dtRank, err = dtRankOf(c, "mamba_dt_rank", cfg.hidden); err != nil {
			return nil, err
		}
		if err := positive(c, map[string]int{"attn_layer_period": attnPeriod, "expert_layer_period": expPeriod, "num_experts": experts, "num_experts_per_tok": topK}); err != nil {
			return nil, err
		}
		if topK > experts {
			return nil, errorf(c, "num_experts_per_tok %d exceeds num_experts %d", topK, experts)
		}
		h := &hybrid{weights: w, hidden: cfg.hidden, eps: cfg.eps, layers: make([]hybridLayer, cfg.layers)}
		h.embed = w.Matrix("model.embed_tokens.weight", cfg.vocab, cfg.hidden)
		for i := range h.layers {
			p := fmt.Sprintf("model.layers.%d.", i)
			l := &h.layers[i]
			l.norm = w.Vector(p+"input_layernorm.weight", cfg.hidden)
			l.ffnNorm = w.Vector(p+"pre_ff_layernorm.weight", cfg.hidden)
			if i%attnPeriod == attnOffset {
				a := loadAttention(w, p+"self_attn.", attention{heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim,
					scale: cfg.attnScale, eps: cfg.eps}, cfg.hidden, false, false, false, false)
				l.attn = &a
			} else {
				l.ssm = loadSSM(w, p+"mamba.", s)
			}
			if experts > 1 && i%expPeriod == expOffset {
				m := &moe{router: w.Matrix(p+"feed_forward.router.weight", experts, cfg.hidden), topK: topK}
				for e := 0; e < experts; e++ {
					m.experts = append(m.experts, loadMLP(w, fmt.Sprintf("%sfeed_forward.experts.%d.", p, e), cfg.hidden, cfg.inter, false, false, false))
				}
				l.moe = m
			} else {
				f := loadMLP(w, p+"feed_forward.", cfg.hidden, cfg.inter, false, false, false)
				l.mlp = &f
			}
		}
		return finishHybrid(c, w, h, "JambaForCausalLM", "model.final_layernorm.weight", cfg.vocab, cfg.tied)
	},
}

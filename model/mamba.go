package model

import (
	"fmt"
	"math"
)

// Mamba (MambaForCausalLM) and Mamba2 (Mamba2ForCausalLM): embeddings, then
// per layer x + mixer(RMSNorm(x)), a final RMSNorm and the output projection
// (tied to the embeddings by default for Mamba). Matches transformers'
// modeling_mamba and modeling_mamba2; Mamba2's gated RMSNorm normalises per
// group, as the original Mamba2 kernels do.

var mambaFamily = Family{
	Name:       "mamba",
	ModelTypes: []string{"mamba"},
	Load: func(c *Config, w *Weights) (Model, error) {
		g := getter{c: c}
		vocab := g.int("vocab_size", 50280)
		hidden := g.int("hidden_size", 768)
		layers := g.int("num_hidden_layers", 32)
		expand := g.int("expand", 2)
		dInner := g.int("intermediate_size", expand*hidden)
		s := ssmShape{
			version: 1, hidden: hidden, dInner: dInner,
			dState: g.int("state_size", 16), conv: g.int("conv_kernel", 4),
			inBias: g.bool("use_bias", false), outBias: g.bool("use_bias", false), convBias: g.bool("use_conv_bias", true),
			eps: float32(g.float("layer_norm_epsilon", 1e-5)),
		}
		tied := g.bool("tie_word_embeddings", true)
		if g.err != nil {
			return nil, g.err
		}
		var err error
		if s.dtRank, err = dtRankOf(c, "time_step_rank", hidden); err != nil {
			return nil, err
		}
		if err := positive(c, map[string]int{"hidden_size": hidden, "vocab_size": vocab, "num_hidden_layers": layers, "intermediate_size": dInner, "state_size": s.dState, "conv_kernel": s.conv}); err != nil {
			return nil, err
		}
		h := &hybrid{weights: w, hidden: hidden, eps: s.eps, layers: make([]hybridLayer, layers)}
		h.embed = w.Matrix("backbone.embeddings.weight", vocab, hidden)
		for i := range h.layers {
			p := fmt.Sprintf("backbone.layers.%d.", i)
			h.layers[i] = hybridLayer{norm: w.Vector(p+"norm.weight", hidden), ssm: loadSSM(w, p+"mixer.", s)}
		}
		return finishHybrid(c, w, h, "MambaForCausalLM", "backbone.norm_f.weight", vocab, tied)
	},
}

var mamba2Family = Family{
	Name:       "mamba2",
	ModelTypes: []string{"mamba2"},
	Load: func(c *Config, w *Weights) (Model, error) {
		g := getter{c: c}
		vocab := g.int("vocab_size", 32768)
		hidden := g.int("hidden_size", 4096)
		layers := g.int("num_hidden_layers", 64)
		expand := g.int("expand", 2)
		s := ssmShape{
			version: 2, hidden: hidden, dInner: expand * hidden,
			dState: g.int("state_size", 128), conv: g.int("conv_kernel", 4),
			heads: g.int("num_heads", 128), headDim: g.int("head_dim", 64), groups: g.int("n_groups", 8),
			inBias: g.bool("use_bias", false), outBias: g.bool("use_bias", false), convBias: g.bool("use_conv_bias", true),
			eps: float32(g.float("layer_norm_epsilon", 1e-5)), perGroupNorm: true,
		}
		tied := g.bool("tie_word_embeddings", false)
		if g.err != nil {
			return nil, g.err
		}
		var err error
		if s.dtMin, s.dtMax, err = timeStepLimit(c); err != nil {
			return nil, err
		}
		if err := checkSSD(c, s, vocab, layers); err != nil {
			return nil, err
		}
		h := &hybrid{weights: w, hidden: hidden, eps: s.eps, layers: make([]hybridLayer, layers)}
		h.embed = w.Matrix("backbone.embeddings.weight", vocab, hidden)
		for i := range h.layers {
			p := fmt.Sprintf("backbone.layers.%d.", i)
			h.layers[i] = hybridLayer{norm: w.Vector(p+"norm.weight", hidden), ssm: loadSSM(w, p+"mixer.", s)}
		}
		return finishHybrid(c, w, h, "Mamba2ForCausalLM", "backbone.norm_f.weight", vocab, tied)
	},
}

// timeStepLimit reads time_step_limit, [min, max] for dt (default no limit;
// Python writes the bare Infinity).
func timeStepLimit(c *Config) (lo, hi float64, err error) {
	v, ok := c.Raw("time_step_limit").([]any)
	if !ok {
		if c.Raw("time_step_limit") != nil {
			return 0, 0, errorf(c, "time_step_limit must be a [min, max] list")
		}
		return 0, math.Inf(1), nil
	}
	if len(v) != 2 {
		return 0, 0, errorf(c, "time_step_limit must be a [min, max] list")
	}
	lo, ok1 := v[0].(float64)
	hi, ok2 := v[1].(float64)
	if !ok1 || !ok2 || lo > hi {
		return 0, 0, errorf(c, "time_step_limit %v is not a [min, max] pair of numbers", v)
	}
	return lo, hi, nil
}

// checkSSD validates a Mamba2-style mixer shape.
func checkSSD(c *Config, s ssmShape, vocab, layers int) error {
	if err := positive(c, map[string]int{"hidden_size": s.hidden, "vocab_size": vocab, "num_hidden_layers": layers,
		"state_size": s.dState, "conv_kernel": s.conv, "num_heads": s.heads, "head_dim": s.headDim, "n_groups": s.groups}); err != nil {
		return err
	}
	if s.heads*s.headDim != s.dInner {
		return errorf(c, "num_heads %d x head_dim %d must equal the inner size %d", s.heads, s.headDim, s.dInner)
	}
	if s.heads%s.groups != 0 {
		return errorf(c, "num_heads %d must be a multiple of n_groups %d", s.heads, s.groups)
	}
	return nil
}

func positive(c *Config, fields map[string]int) error {
	for k, v := range fields {
		if v <= 0 {
			return errorf(c, "%s must be positive, got %d", k, v)
		}
	}
	return nil
}

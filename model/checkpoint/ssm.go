package checkpoint

import (
	"fmt"
	"math"
	"slices"
)

// dtBias makes softplus(dt) about 0.01 at initialisation, the middle of
// Mamba's usual [0.001, 0.1] time-step range.
var dtBias = math.Log(math.Expm1(0.01))

// hybridTensors lists the tensors of the state-space families: Mamba and
// Mamba2 (backbone.* names), Jamba and Bamba (model.* names, attention and
// Mamba layers with a feed-forward block after each).
func hybridTensors(c Config) ([]tensorSpec, error) {
	mt, _ := c["model_type"].(string)
	H := c.int("hidden_size", 0)
	V := c.int("vocab_size", 0)
	L := c.int("num_hidden_layers", 0)
	if H <= 0 || V <= 0 || L <= 0 {
		return nil, fmt.Errorf("config needs positive hidden_size, vocab_size, num_hidden_layers")
	}
	rnd := math.NaN()
	var ts []tensorSpec
	add := func(name string, fill float64, shape ...int) {
		ts = append(ts, tensorSpec{name: name, shape: shape, fill: fill})
	}
	aLog := func(name string, period int, shape ...int) {
		ts = append(ts, tensorSpec{name: name, shape: shape, logPeriod: period})
	}
	// mamba1 adds a Mamba (S6) mixer under p.
	mamba1 := func(p string, dI, N, K, R int, norms bool) {
		add(p+"in_proj.weight", rnd, 2*dI, H)
		add(p+"conv1d.weight", rnd, dI, 1, K)
		add(p+"conv1d.bias", rnd, dI)
		add(p+"x_proj.weight", rnd, R+2*N, dI)
		add(p+"dt_proj.weight", rnd, dI, R)
		add(p+"dt_proj.bias", dtBias, dI)
		aLog(p+"A_log", N, dI, N)
		add(p+"D", 1, dI)
		add(p+"out_proj.weight", rnd, H, dI)
		if norms {
			add(p+"dt_layernorm.weight", 1, R)
			add(p+"b_layernorm.weight", 1, N)
			add(p+"c_layernorm.weight", 1, N)
		}
	}
	// mamba2 adds a Mamba2 (SSD) mixer under p.
	mamba2 := func(p string, dI, N, K, heads, groups int) {
		conv := dI + 2*groups*N
		add(p+"in_proj.weight", rnd, 2*dI+2*groups*N+heads, H)
		add(p+"conv1d.weight", rnd, conv, 1, K)
		add(p+"conv1d.bias", rnd, conv)
		add(p+"dt_bias", dtBias, heads)
		aLog(p+"A_log", heads, heads)
		add(p+"D", 1, heads)
		add(p+"norm.weight", 1, dI)
		add(p+"out_proj.weight", rnd, H, dI)
	}
	attn := func(p string) {
		heads := c.int("num_attention_heads", 0)
		kv := c.int("num_key_value_heads", heads)
		if heads <= 0 {
			return
		}
		D := c.int("head_dim", H/heads)
		add(p+"q_proj.weight", rnd, heads*D, H)
		add(p+"k_proj.weight", rnd, kv*D, H)
		add(p+"v_proj.weight", rnd, kv*D, H)
		add(p+"o_proj.weight", rnd, H, heads*D)
	}
	mlp := func(p string, I int) {
		add(p+"gate_proj.weight", rnd, I, H)
		add(p+"up_proj.weight", rnd, I, H)
		add(p+"down_proj.weight", rnd, H, I)
	}
	tied := false
	switch mt {
	case "mamba", "mamba2":
		tied = c.bool("tie_word_embeddings", mt == "mamba")
		add("backbone.embeddings.weight", rnd, V, H)
		expand := c.int("expand", 2)
		N, K := c.int("state_size", 16), c.int("conv_kernel", 4)
		for i := 0; i < L; i++ {
			p := fmt.Sprintf("backbone.layers.%d.", i)
			add(p+"norm.weight", 1, H)
			if mt == "mamba" {
				dI := c.int("intermediate_size", expand*H)
				R := c.int("time_step_rank", (H+15)/16)
				mamba1(p+"mixer.", dI, N, K, R, false)
			} else {
				mamba2(p+"mixer.", expand*H, N, K, c.int("num_heads", 0), c.int("n_groups", 1))
			}
		}
		add("backbone.norm_f.weight", 1, H)
	case "jamba", "bamba":
		tied = c.bool("tie_word_embeddings", false)
		add("model.embed_tokens.weight", rnd, V, H)
		I := c.int("intermediate_size", 0)
		attnAt := func(i int) bool {
			if mt == "jamba" {
				return i%c.int("attn_layer_period", 8) == c.int("attn_layer_offset", 4)
			}
			switch list := c["attn_layer_indices"].(type) {
			case []int:
				return slices.Contains(list, i)
			case []any: // read from a config.json file
				return slices.Contains(list, any(float64(i)))
			}
			return false
		}
		for i := 0; i < L; i++ {
			p := fmt.Sprintf("model.layers.%d.", i)
			add(p+"input_layernorm.weight", 1, H)
			add(p+"pre_ff_layernorm.weight", 1, H)
			switch {
			case attnAt(i):
				attn(p + "self_attn.")
			case mt == "jamba":
				mamba1(p+"mamba.", c.int("mamba_expand", 2)*H, c.int("mamba_d_state", 16), c.int("mamba_d_conv", 4), c.int("mamba_dt_rank", (H+15)/16), true)
			default:
				mamba2(p+"mamba.", c.int("mamba_expand", 2)*H, c.int("mamba_d_state", 16), c.int("mamba_d_conv", 4), c.int("mamba_n_heads", 0), c.int("mamba_n_groups", 1))
			}
			experts := c.int("num_experts", 1)
			if mt == "jamba" && experts > 1 && i%c.int("expert_layer_period", 2) == c.int("expert_layer_offset", 1) {
				add(p+"feed_forward.router.weight", rnd, experts, H)
				for e := 0; e < experts; e++ {
					mlp(fmt.Sprintf("%sfeed_forward.experts.%d.", p, e), I)
				}
			} else {
				mlp(p+"feed_forward.", I)
			}
		}
		add("model.final_layernorm.weight", 1, H)
	}
	if !tied {
		add("lm_head.weight", rnd, V, H)
	}
	return ts, nil
}

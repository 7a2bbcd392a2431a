package gguf

import "testing"

func TestTensorName(t *testing.T) {
	for hf, want := range map[string]string{
		"model.embed_tokens.weight":                      "token_embd.weight",
		"model.layers.12.self_attn.k_proj.weight":        "blk.12.attn_k.weight",
		"model.layers.0.self_attn.q_proj.bias":           "blk.0.attn_q.bias",
		"model.layers.0.post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
		"model.layers.1.self_attn.k_norm.weight":         "blk.1.attn_k_norm.weight",
		"model.norm.weight":                              "output_norm.weight",
		"lm_head.weight":                                 "output.weight",
	} {
		if got, ok := TensorName(hf); !ok || got != want {
			t.Errorf("TensorName(%s) = %q %v, want %q", hf, got, ok, want)
		}
	}
	for _, hf := range []string{"model.layers.x.mlp.up_proj.weight", "model.layers.01.mlp.up_proj.weight", "model.layers.0.mlp.experts.weight", "model.layers.0.mlp.up_proj", "vision.patch"} {
		if got, ok := TensorName(hf); ok {
			t.Errorf("TensorName(%s) = %q", hf, got)
		}
	}
	for _, p := range blockNames() {
		if hf, ok := BlockTensorName(p[1], true); !ok || hf != p[0] {
			t.Errorf("BlockTensorName(%s, toHF) = %q", p[1], hf)
		}
	}
}

func TestArchTensorName(t *testing.T) {
	for _, tc := range []struct{ arch, hf, want string }{
		{"phi3", "model.layers.2.self_attn.qkv_proj.weight", "blk.2.attn_qkv.weight"},
		{"phi3", "model.layers.0.mlp.gate_up_proj.weight", "blk.0.ffn_up.weight"},
		{"phi3", "model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight"},
		{"gemma2", "model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"},
		{"gemma2", "model.layers.1.pre_feedforward_layernorm.weight", "blk.1.ffn_norm.weight"},
		{"gemma3", "model.layers.0.post_feedforward_layernorm.weight", "blk.0.post_ffw_norm.weight"},
		{"gemma3", "model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight"},
		{"qwen3", "model.layers.0.self_attn.q_norm.weight", "blk.0.attn_q_norm.weight"},
		{"gemma3", "model.embed_tokens.weight", "token_embd.weight"},
	} {
		if got, ok := ArchTensorName(tc.arch, tc.hf); !ok || got != tc.want {
			t.Errorf("ArchTensorName(%s, %s) = %q %v, want %q", tc.arch, tc.hf, got, ok, tc.want)
		}
	}
	for _, tc := range []struct{ arch, hf string }{
		{"phi3", "model.layers.0.self_attn.q_proj.weight"},
		{"phi3", "model.layers.0.mlp.up_proj.weight"},
		{"gemma2", "model.layers.0.self_attn.q_norm.weight"},
	} {
		if got, ok := ArchTensorName(tc.arch, tc.hf); ok {
			t.Errorf("ArchTensorName(%s, %s) = %q, want none", tc.arch, tc.hf, got)
		}
	}
	for _, arch := range []string{"llama", "phi3", "gemma2", "gemma3"} {
		for _, p := range ArchBlockNames(arch) {
			if hf, ok := ArchBlockTensorName(arch, p[1], true); !ok || hf != p[0] {
				t.Errorf("ArchBlockTensorName(%s, %s, toHF) = %q", arch, p[1], hf)
			}
		}
	}
}

package gguf

import (
	"strconv"
	"strings"
)

// blockNames pairs the per-layer tensors of the Llama-shaped families as
// Hugging Face names them (under model.layers.N.) with llama.cpp's names
// (under blk.N.), the names convert_hf_to_gguf.py writes.
func blockNames() [][2]string {
	return [][2]string{
		{"input_layernorm", "attn_norm"},
		{"self_attn.q_proj", "attn_q"},
		{"self_attn.k_proj", "attn_k"},
		{"self_attn.v_proj", "attn_v"},
		{"self_attn.o_proj", "attn_output"},
		{"self_attn.q_norm", "attn_q_norm"},
		{"self_attn.k_norm", "attn_k_norm"},
		{"post_attention_layernorm", "ffn_norm"},
		{"mlp.gate_proj", "ffn_gate"},
		{"mlp.up_proj", "ffn_up"},
		{"mlp.down_proj", "ffn_down"},
	}
}

// BlockTensorName is llama.cpp's name of a Llama-shaped block tensor given
// its Hugging Face name under a layer ("self_attn.q_proj" → "attn_q"), or
// the reverse with toHF; ok is false for a name it does not know.
func BlockTensorName(name string, toHF bool) (string, bool) {
	for _, p := range blockNames() {
		from, to := p[0], p[1]
		if toHF {
			from, to = to, from
		}
		if name == from {
			return to, true
		}
	}
	return "", false
}

// TensorName is llama.cpp's name of a Llama-shaped model's tensor given
// its Hugging Face name: "model.embed_tokens.weight" is
// "token_embd.weight", "model.layers.3.self_attn.q_proj.bias" is
// "blk.3.attn_q.bias", and so on (llama, mistral, qwen2, qwen3).
func TensorName(hf string) (string, bool) {
	switch hf {
	case "model.embed_tokens.weight":
		return "token_embd.weight", true
	case "model.norm.weight":
		return "output_norm.weight", true
	case "lm_head.weight":
		return "output.weight", true
	}
	rest, ok := strings.CutPrefix(hf, "model.layers.")
	if !ok {
		return "", false
	}
	idx, sub, ok := strings.Cut(rest, ".")
	if n, err := strconv.Atoi(idx); !ok || err != nil || n < 0 || strconv.Itoa(n) != idx {
		return "", false
	}
	i := strings.LastIndexByte(sub, '.')
	if i < 0 || (sub[i+1:] != "weight" && sub[i+1:] != "bias") {
		return "", false
	}
	g, ok := BlockTensorName(sub[:i], false)
	if !ok {
		return "", false
	}
	return "blk." + idx + "." + g + sub[i:], true
}

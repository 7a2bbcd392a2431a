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

// archBlockNames are the per-layer tensors of the architectures whose
// blocks are not Llama-shaped, by general.architecture, in the same
// (Hugging Face, llama.cpp) pairs as blockNames; nil for the others.
func archBlockNames(arch string) [][2]string {
	switch arch {
	case "phi3":
		// Phi-3 keeps q, k, v in one matrix and gate and up in another,
		// which llama.cpp stores as ffn_up (twice feed_forward_length rows).
		return [][2]string{
			{"input_layernorm", "attn_norm"},
			{"self_attn.qkv_proj", "attn_qkv"},
			{"self_attn.o_proj", "attn_output"},
			{"post_attention_layernorm", "ffn_norm"},
			{"mlp.gate_up_proj", "ffn_up"},
			{"mlp.down_proj", "ffn_down"},
		}
	case "gemma2":
		// Gemma 2 has norms after attention and around the MLP; llama.cpp
		// calls the one before the MLP ffn_norm.
		return gemmaBlockNames(false)
	case "gemma3":
		// Gemma 3 adds Qwen3-style per-head q and k norms.
		return gemmaBlockNames(true)
	}
	return nil
}

func gemmaBlockNames(qkNorm bool) [][2]string {
	out := [][2]string{
		{"input_layernorm", "attn_norm"},
		{"self_attn.q_proj", "attn_q"},
		{"self_attn.k_proj", "attn_k"},
		{"self_attn.v_proj", "attn_v"},
		{"self_attn.o_proj", "attn_output"},
	}
	if qkNorm {
		out = append(out, [2]string{"self_attn.q_norm", "attn_q_norm"}, [2]string{"self_attn.k_norm", "attn_k_norm"})
	}
	return append(out,
		[2]string{"post_attention_layernorm", "post_attention_norm"},
		[2]string{"pre_feedforward_layernorm", "ffn_norm"},
		[2]string{"mlp.gate_proj", "ffn_gate"},
		[2]string{"mlp.up_proj", "ffn_up"},
		[2]string{"mlp.down_proj", "ffn_down"},
		[2]string{"post_feedforward_layernorm", "post_ffw_norm"})
}

// ArchBlockNames lists the per-layer tensors of an architecture
// (general.architecture: llama, qwen2, qwen3, phi3, gemma2, gemma3) as
// pairs of the Hugging Face name under model.layers.N. and llama.cpp's
// name under blk.N., in the order convert_hf_to_gguf.py's tables give
// them. Architectures without a table of their own get the Llama-shaped
// names.
func ArchBlockNames(arch string) [][2]string {
	if t := archBlockNames(arch); t != nil {
		return t
	}
	return blockNames()
}

// BlockTensorName is llama.cpp's name of a Llama-shaped block tensor given
// its Hugging Face name under a layer ("self_attn.q_proj" → "attn_q"), or
// the reverse with toHF; ok is false for a name it does not know.
func BlockTensorName(name string, toHF bool) (string, bool) {
	return ArchBlockTensorName("llama", name, toHF)
}

// ArchBlockTensorName is BlockTensorName for the block tensors of arch
// (ArchBlockNames).
func ArchBlockTensorName(arch, name string, toHF bool) (string, bool) {
	for _, p := range ArchBlockNames(arch) {
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
func TensorName(hf string) (string, bool) { return ArchTensorName("llama", hf) }

// ArchTensorName is TensorName for a model of arch (general.architecture):
// "model.layers.0.mlp.gate_up_proj.weight" of phi3 is "blk.0.ffn_up.weight".
func ArchTensorName(arch, hf string) (string, bool) {
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
	g, ok := ArchBlockTensorName(arch, sub[:i], false)
	if !ok {
		return "", false
	}
	return "blk." + idx + "." + g + sub[i:], true
}

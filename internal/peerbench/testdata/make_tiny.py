#!/usr/bin/env python3
"""Writes the tiny same-weights fixture: tiny-hf/ (config.json, bf16
model.safetensors) and tiny.gguf, with llama.cpp's own gguf-py (commit
34af94cd) and the q/k row permutation its converters apply, the way
make_smollm_random.py writes the peer models. Regenerate with
  /usr/bin/python3 make_tiny.py --gguf-py DIR/gguf-py
"""
import argparse, json, struct, sys
from pathlib import Path
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--gguf-py", required=True)
args = ap.parse_args()
sys.path.insert(0, args.gguf_py)
import gguf  # noqa: E402

HIDDEN, INTER, HEADS, KV, VOCAB = 8, 12, 2, 1, 16
HD = HIDDEN // HEADS
here = Path(__file__).parent
rng = np.random.default_rng(7)

def bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)

def w(*shape):
    return f32(bf16(rng.standard_normal(shape).astype(np.float32)))

t = {
    "model.embed_tokens.weight": w(VOCAB, HIDDEN),
    "model.layers.0.input_layernorm.weight": np.ones(HIDDEN, np.float32),
    "model.layers.0.self_attn.q_proj.weight": w(HEADS * HD, HIDDEN),
    "model.layers.0.self_attn.k_proj.weight": w(KV * HD, HIDDEN),
    "model.layers.0.self_attn.v_proj.weight": w(KV * HD, HIDDEN),
    "model.layers.0.self_attn.o_proj.weight": w(HIDDEN, HEADS * HD),
    "model.layers.0.post_attention_layernorm.weight": np.ones(HIDDEN, np.float32),
    "model.layers.0.mlp.gate_proj.weight": w(INTER, HIDDEN),
    "model.layers.0.mlp.up_proj.weight": w(INTER, HIDDEN),
    "model.layers.0.mlp.down_proj.weight": w(HIDDEN, INTER),
    "model.norm.weight": np.ones(HIDDEN, np.float32),
}
names = {
    "model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
    "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}

hf = here / "tiny-hf"
hf.mkdir(exist_ok=True)
(hf / "config.json").write_text(json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
    "intermediate_size": INTER, "num_hidden_layers": 1, "num_attention_heads": HEADS,
    "num_key_value_heads": KV, "vocab_size": VOCAB, "tie_word_embeddings": True}, indent=2) + "\n")
header, blobs, off = {}, [], 0
for n, a in t.items():
    raw = bf16(a).astype("<u2").tobytes()
    header[n] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(hf / "model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def permute(a, n_head):
    return a.reshape(n_head, 2, a.shape[0] // n_head // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)

gw = gguf.GGUFWriter(str(here / "tiny.gguf"), "llama")
gw.add_block_count(1)
gw.add_embedding_length(HIDDEN)
gw.add_head_count(HEADS)
gw.add_head_count_kv(KV)
gw.add_rope_freq_base(100000.0)
gw.add_tokenizer_model("gpt2")
gw.add_token_list([f"t{i}" for i in range(VOCAB)])
gw.add_token_types([1] * VOCAB)
for n, a in t.items():
    short = names.get(n) or "blk.0." + names[n.split(".", 3)[3]]
    if n.endswith("q_proj.weight"):
        a = permute(a, HEADS)
    elif n.endswith("k_proj.weight"):
        a = permute(a, KV)
    typ = gguf.GGMLQuantizationType.F32 if a.ndim == 1 else gguf.GGMLQuantizationType.BF16
    gw.add_tensor(short, gguf.quants.quantize(np.ascontiguousarray(a, np.float32), typ), raw_dtype=typ)
gw.write_header_to_file()
gw.write_kv_data_to_file()
gw.write_tensors_to_file()
gw.close()
print("wrote", hf, here / "tiny.gguf")

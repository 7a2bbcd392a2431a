// Package model loads Hugging Face checkpoints and GGUF files and runs their
// forward pass.
//
// The loader is deliberately dull: config.json is read leniently (Python's
// bare Infinity and NaN are accepted) with each family's transformers class
// defaults filling absent fields; weights come from our own safetensors
// reader, memory-mapped and kept in their stored dtype; every tensor is
// checked against the shape the config implies, and any mismatch is an error
// naming the file and the tensor.
//
// GGUF files (llama.cpp's format) load through the same families:
// ggufsource.go translates the metadata under general.architecture into
// the config.json the file was converted from, and hands out its tensors
// under their Hugging Face names and in Hugging Face layout, undoing what
// llama.cpp's converter changed (llama's attn_q/attn_k rows permuted for
// adjacent-pair rope, Gemma's norms stored as 1 + w, llama3 rope scaling
// stored as a rope_freqs tensor). Quantized matrices keep their stored
// blocks (gpu's Q8_0 ... Q6_K dtypes; a Q/K row permutation moves whole
// rows of blocks), so a quantized file takes its own size in memory and
// the matmuls stream its blocks; quantized vectors, and every matrix under
// LoadOptions.Dequantize, are dequantized to float32 with gpu/ref's
// reference dequantizers.
// Weights does not know which format a tensor came from (tensorSource).
//
// One file per architecture family declares how its config maps onto the
// shared building blocks (block.go: attention over paged KV, the gated MLP,
// the output head; ssm.go: the Mamba mixers) and which state each layer
// keeps (Cache). The per-layer cache kinds are the single source of the
// prompt-cache capability: SnapshotReuse is true exactly when some layer's
// state cannot be cut back to an earlier position. Sliding windows are masks
// over full KV pages (windowed_attention), so Mistral and Gemma stay
// rewindable; Mamba, Mamba2, Jamba and Bamba carry recurrent state and need
// snapshots (snapshot.go).
//
// Forward is one batched step in the vLLM sense: several sequences, each a
// chunk of any length continuing its state at a position — prefill chunks and
// single-token decodes mixed — with one matmul per weight for all of them.
// The dense decoders (transformer.go) follow transformers' modeling_llama and
// its relatives; the state-space mixers run one selective scan over the whole
// chunk from the stored state, where transformers feeds continuations one
// token at a time, and reach the same state. Parity with transformers is
// tested against ../shared/fixtures/models.
package model

// Package gpu is the compute seam between model code and the hardware.
//
// Model families are written once against Device: a small set of operations
// (matmul against weights kept in their stored dtype, embedding gather,
// RMSNorm, RoPE, gated activations, soft-capping and attention over a paged KV
// cache). Activations are float32 everywhere; weights stay in their stored
// dtype (F32, BF16, F16) so that bf16 checkpoints move half the bytes per token.
//
// Backends:
//   - gpu/ref: plain Go, float64 accumulation. It is the specification of every
//     operation and the truth the fast backends are tested against.
//   - gpu/cpu: C kernels through cgo, picked at run time by CPU feature.
//   - gpu/cuda (build tag cuda, later): the same seam on NVIDIA GPUs.
//
// The seam takes host slices. The CPU backends compute on them directly; a
// device backend will keep activations resident and this package will grow a
// buffer type then. Keeping the operation set narrow now is what makes that
// change local to the backends.
package gpu

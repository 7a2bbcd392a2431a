package cuda

// argKind is the type of one kernel argument as the kernel declares it.
type argKind uint8

const (
	argPtr argKind = iota + 1 // a device pointer (T *)
	argI32                    // int
	argI64                    // long long
	argF32                    // float
)

func (k argKind) String() string {
	switch k {
	case argPtr:
		return "ptr"
	case argI32:
		return "int"
	case argI64:
		return "long long"
	case argF32:
		return "float"
	}
	return "?"
}

// kernelID names a kernel of the table.
type kernelID int

const (
	kAdd kernelID = iota
	kAddBias
	kSiLUMul
	kGELUMul
	kSoftcap
	kScale
	kSoftplus
	kEmbedF32
	kEmbedBF16
	kEmbedF16
	kRMSNorm
	kRMSNormGated
	kRoPE
	kAttnPaged
	kAttnPagedPrefill
	kCausalConv1D
	kSelectiveScan
	numKernels
)

// kernelSpec is one kernel: its extern "C" name in the PTX, its arguments in
// order, and how it is launched.
type kernelSpec struct {
	name   string
	args   []argKind
	launch string
}

// kernels is the table of the kernels the Device launches. The sources in
// gpu/cuda/kernels/*.cu define them (extern "C" __global__, with exactly
// these argument types in this order); this table and those sources change
// together. A kernel listed here that the PTX lacks is not an error: its
// operation falls back to the host (see Device).
//
// It is a function, not a variable, so the package holds no mutable state.
func kernels() [numKernels]kernelSpec {
	p, i32, i64, f32 := argPtr, argI32, argI64, argF32
	return [numKernels]kernelSpec{
		kAdd:      {"tk_add", []argKind{p, p, p, i64}, "(dst, a, b, n); grid-stride, any 1-D grid"},
		kAddBias:  {"tk_add_bias", []argKind{p, p, i64, i32}, "(x, bias, n, nbias); grid-stride"},
		kSiLUMul:  {"tk_silu_mul", []argKind{p, p, p, i64}, "(dst, gate, up, n); grid-stride"},
		kGELUMul:  {"tk_gelu_mul", []argKind{p, p, p, i64}, "(dst, gate, up, n); grid-stride"},
		kSoftcap:  {"tk_softcap", []argKind{p, i64, f32}, "(x, n, c); grid-stride"},
		kScale:    {"tk_scale", []argKind{p, i64, f32}, "(x, n, s); grid-stride"},
		kSoftplus: {"tk_softplus", []argKind{p, i64}, "(x, n); grid-stride"},
		kEmbedF32: {"tk_embed_f32", []argKind{p, p, p, i32}, "(dst, w, ids, cols); one block per id"},
		kEmbedBF16: {"tk_embed_bf16", []argKind{p, p, p, i32},
			"(dst, w, ids, cols); one block per id"},
		kEmbedF16: {"tk_embed_f16", []argKind{p, p, p, i32}, "(dst, w, ids, cols); one block per id"},
		kRMSNorm: {"tk_rmsnorm", []argKind{p, p, p, i32, f32, i32},
			"(dst, x, w, n, eps, unit_offset); one block per row, power-of-two threads <= 1024"},
		kRMSNormGated: {"tk_rmsnorm_gated", []argKind{p, p, p, p, i32, i32, f32},
			"(dst, x, gate, w, n, group, eps); grid (rows, n/group), power-of-two threads <= 1024"},
		kRoPE: {"tk_rope", []argKind{p, p, p, i32, i32, i32},
			"(x, cos, sin, heads, head_dim, half); one block per row"},
		kAttnPaged: {"tk_attn_paged", []argKind{p, p, p, p, p, p, p, i32, i32, i32, i32, i32, f32, i32, f32},
			"(out, q, K, V, pages, row_ptab, row_pos, page_size, kv_dim, heads, kv_heads, head_dim, scale, window, softcap); " +
				"grid (heads, rows), power-of-two threads <= 1024, head_dim <= 256"},
		kAttnPagedPrefill: {"tk_attn_paged_prefill", []argKind{p, p, p, p, p, p, p, p, p, i32, i32, i32, i32, i32, f32, i32, f32},
			"(out, q, K, V, pages, row_ptab, row_pos, tile_row, tile_n, page_size, kv_dim, heads, kv_heads, head_dim, scale, window, softcap); " +
				"grid (heads, tiles of 16 rows of one sequence), threads >= 16, head_dim <= 128"},
		kCausalConv1D: {"tk_causal_conv1d", []argKind{p, p, p, p, p, p, p, p, i32, i32, i32},
			"(out, x, w, bias, states, state_off, seq_row, seq_n, channels, width, silu); grid (channel blocks, sequences)"},
		kSelectiveScan: {"tk_selective_scan", []argKind{p, p, p, p, p, p, p, p, p, p, p, i32, i32, i32, i32},
			"(y, x, dt, B, C, A, D, states, state_off, seq_row, seq_n, heads, head_dim, state_dim, groups); " +
				"grid (channel blocks, sequences)"},
	}
}

// KernelNames lists the kernels the Device launches, in table order.
func KernelNames() []string {
	t := kernels()
	out := make([]string, len(t))
	for i, k := range t {
		out[i] = k.name
	}
	return out
}

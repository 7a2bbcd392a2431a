//go:build cgo

// host.cc compiles the kernels as host C++ through cuhost.h (common.cuh
// includes it when not under nvcc) and wraps each launch in a C function
// for cgo (host.h). Test-only.

#include "attention.cu"
#include "elementwise.cu"
#include "embed.cu"
#include "norm.cu"
#include "recurrent.cu"
#include "rope.cu"

#include "host.h"

using cuhost::launch;

/* Kernels that check the shim itself (host-only). tk_selftest_reverse:
 * block b reverses its blockDim.x elements of in through shared memory,
 * adds the block's first element seen by thread 0 through a shared scalar,
 * and lets threads at or past `active` return before a second barrier
 * (leaving the block). */
extern "C" __global__ void tk_selftest_reverse(float *out, const float *in, int active) {
	SHARED_ARRAY(float, buf, TK_MAX_THREADS);
	SHARED_ARRAY(float, first, 1);
	const int t = threadIdx.x, T = blockDim.x;
	const long long base = (long long)blockIdx.x * T;
	buf[t] = in[base + t];
	if (t == 0) first[0] = in[base];
	__syncthreads();
	float v = buf[T - 1 - t] + first[0];
	if (t >= active) {
		out[base + t] = v;
		return;
	}
	__syncthreads(); /* only the active threads */
	buf[t] = v;
	__syncthreads();
	out[base + t] = buf[t];
}

/* tk_selftest_diverge reaches __syncthreads from two lines: the shim aborts. */
extern "C" __global__ void tk_selftest_diverge(float *out) {
	if (threadIdx.x == 0) {
		__syncthreads();
	} else {
		__syncthreads();
	}
	out[threadIdx.x] = 1.0f;
}

/* tk_selftest_uninit reads shared memory nobody wrote: the shim's poison. */
extern "C" __global__ void tk_selftest_uninit(float *out) {
	SHARED_ARRAY(float, buf, 4);
	out[threadIdx.x] = buf[threadIdx.x];
}

extern "C" {

void tkh_selftest_reverse(float *out, const float *in, int blocks, int block, int active) {
	launch(tk_selftest_reverse, dim3(blocks), dim3(block), out, in, active);
}

void tkh_selftest_diverge(float *out) { launch(tk_selftest_diverge, dim3(1), dim3(4), out); }

void tkh_selftest_uninit(float *out) { launch(tk_selftest_uninit, dim3(1), dim3(4), out); }

void tkh_add(float *dst, const float *a, const float *b, long long n, int grid, int block) {
	launch(tk_add, dim3(grid), dim3(block), dst, a, b, n);
}

void tkh_add_bias(float *x, const float *bias, long long n, int nb, int grid, int block) {
	launch(tk_add_bias, dim3(grid), dim3(block), x, bias, n, nb);
}

void tkh_silu_mul(float *dst, const float *gate, const float *up, long long n, int grid, int block) {
	launch(tk_silu_mul, dim3(grid), dim3(block), dst, gate, up, n);
}

void tkh_gelu_mul(float *dst, const float *gate, const float *up, long long n, int grid, int block) {
	launch(tk_gelu_mul, dim3(grid), dim3(block), dst, gate, up, n);
}

void tkh_softcap(float *x, long long n, float c, int grid, int block) { launch(tk_softcap, dim3(grid), dim3(block), x, n, c); }

void tkh_scale(float *x, long long n, float s, int grid, int block) { launch(tk_scale, dim3(grid), dim3(block), x, n, s); }

void tkh_softplus(float *x, long long n, int grid, int block) { launch(tk_softplus, dim3(grid), dim3(block), x, n); }

void tkh_embed(float *dst, const void *w, int dtype, const int *ids, int rows, int cols, int block) {
	switch (dtype) {
	case 0:
		launch(tk_embed_f32, dim3(rows), dim3(block), dst, (const float *)w, ids, cols);
		break;
	case 1:
		launch(tk_embed_bf16, dim3(rows), dim3(block), dst, (const unsigned short *)w, ids, cols);
		break;
	case 2:
		launch(tk_embed_f16, dim3(rows), dim3(block), dst, (const unsigned short *)w, ids, cols);
		break;
	}
}

void tkh_rmsnorm(float *dst, const float *x, const float *w, int rows, int n, float eps, int unit_offset, int block) {
	launch(tk_rmsnorm, dim3(rows), dim3(block), dst, x, w, n, eps, unit_offset);
}

void tkh_rmsnorm_gated(float *dst, const float *x, const float *gate, const float *w, int rows, int n, int group, float eps, int block) {
	launch(tk_rmsnorm_gated, dim3(rows, n / group), dim3(block), dst, x, gate, w, n, group, eps);
}

void tkh_rope(float *x, const float *cos_, const float *sin_, int rows, int heads, int head_dim, int half, int block) {
	launch(tk_rope, dim3(rows), dim3(block), x, cos_, sin_, heads, head_dim, half);
}

void tkh_attn_paged(float *out, const float *q, const float *K, const float *V, const int *pages, const int *row_ptab,
		    const int *row_pos, int rows, int page_size, int kv_dim, int heads, int kv_heads, int head_dim,
		    float scale, int window, float softcap, int block) {
	launch(tk_attn_paged, dim3(heads, rows), dim3(block), out, q, K, V, pages, row_ptab, row_pos, page_size, kv_dim,
	       heads, kv_heads, head_dim, scale, window, softcap);
}

void tkh_attn_paged_prefill(float *out, const float *q, const float *K, const float *V, const int *pages,
			    const int *row_ptab, const int *row_pos, const int *tile_row, const int *tile_n, int tiles,
			    int page_size, int kv_dim, int heads, int kv_heads, int head_dim, float scale, int window,
			    float softcap, int block) {
	launch(tk_attn_paged_prefill, dim3(heads, tiles), dim3(block), out, q, K, V, pages, row_ptab, row_pos, tile_row,
	       tile_n, page_size, kv_dim, heads, kv_heads, head_dim, scale, window, softcap);
}

void tkh_causal_conv1d(float *out, const float *x, const float *w, const float *bias, float *states,
		       const long long *state_off, const int *seq_row, const int *seq_n, int seqs, int channels,
		       int width, int silu, int block) {
	launch(tk_causal_conv1d, dim3((channels + block - 1) / block, seqs), dim3(block), out, x, w, bias, states,
	       state_off, seq_row, seq_n, channels, width, silu);
}

void tkh_selective_scan(float *y, const float *x, const float *dt, const float *B, const float *C, const float *A,
			const float *D, float *states, const long long *state_off, const int *seq_row, const int *seq_n,
			int seqs, int heads, int head_dim, int state_dim, int groups, int block) {
	int width = heads * head_dim;
	launch(tk_selective_scan, dim3((width + block - 1) / block, seqs), dim3(block), y, x, dt, B, C, A, D, states,
	       state_off, seq_row, seq_n, heads, head_dim, state_dim, groups);
}

} // extern "C"

/*
 * host.h: C entry points of host.cc, for kernels_host.go: each launches one
 * kernel through the host shim (cuhost.h) with the given grid and block and
 * returns when it has run. Test-only: nothing outside this package's tests
 * calls them.
 */
#ifndef TK_HOST_H
#define TK_HOST_H

#ifdef __cplusplus
extern "C" {
#endif

void tkh_selftest_reverse(float *out, const float *in, int blocks, int block, int active);
void tkh_selftest_uninit(float *out);
void tkh_selftest_diverge(float *out);

void tkh_add(float *dst, const float *a, const float *b, long long n, int grid, int block);
void tkh_add_bias(float *x, const float *bias, long long n, int nb, int grid, int block);
void tkh_silu_mul(float *dst, const float *gate, const float *up, long long n, int grid, int block);
void tkh_gelu_mul(float *dst, const float *gate, const float *up, long long n, int grid, int block);
void tkh_softcap(float *x, long long n, float c, int grid, int block);
void tkh_scale(float *x, long long n, float s, int grid, int block);
void tkh_softplus(float *x, long long n, int grid, int block);

/* dtype: 0 f32, 1 bf16, 2 f16 (w points at the raw rows). */
void tkh_embed(float *dst, const void *w, int dtype, const int *ids, int rows, int cols, int block);

void tkh_rmsnorm(float *dst, const float *x, const float *w, int rows, int n, float eps, int unit_offset, int block);
void tkh_rmsnorm_gated(float *dst, const float *x, const float *gate, const float *w, int rows, int n, int group, float eps, int block);
void tkh_rope(float *x, const float *cos_, const float *sin_, int rows, int heads, int head_dim, int half, int block);

void tkh_attn_paged(float *out, const float *q, const float *K, const float *V, const int *pages, const int *row_ptab,
		    const int *row_pos, int rows, int page_size, int kv_dim, int heads, int kv_heads, int head_dim,
		    float scale, int window, float softcap, int block);

void tkh_causal_conv1d(float *out, const float *x, const float *w, const float *bias, float *states,
		       const long long *state_off, const int *seq_row, const int *seq_n, int seqs, int channels,
		       int width, int silu, int block);
void tkh_selective_scan(float *y, const float *x, const float *dt, const float *B, const float *C, const float *A,
			const float *D, float *states, const long long *state_off, const int *seq_row, const int *seq_n,
			int seqs, int heads, int head_dim, int state_dim, int groups, int block);
void tkh_attn_paged_prefill(float *out, const float *q, const float *K, const float *V, const int *pages,
			    const int *row_ptab, const int *row_pos, const int *tile_row, const int *tile_n, int tiles,
			    int page_size, int kv_dim, int heads, int kv_heads, int head_dim, float scale, int window,
			    float softcap, int block);

#ifdef __cplusplus
}
#endif

#endif

/* Internal C interface of package gpu/cpu. Not a stable API. */
#ifndef TROUPE_CPU_TR_H
#define TROUPE_CPU_TR_H

#include <stddef.h>
#include <stdint.h>

/* Weight dtypes: the values of gpu.DType. */
enum { TR_F32 = 1, TR_BF16 = 2, TR_F16 = 3 };
enum {
	TR_Q8_0 = 4,
	TR_Q4_0 = 5,
	TR_Q4_1 = 6,
	TR_Q5_0 = 7,
	TR_Q5_1 = 8,
	TR_Q2_K = 9,
	TR_Q3_K = 10,
	TR_Q4_K = 11,
	TR_Q5_K = 12,
	TR_Q6_K = 13,
	TR_NDTYPE = 14
};
enum { TR_K_PORTABLE = 0, TR_K_AVX2 = 1, TR_K_AVX512BF16 = 2 };

/* Matmul precision strategies for 16-bit weights (see doc.go). */
enum {
	TR_MM_AUTO = 0,  /* pick per shape */
	TR_MM_WIDEN = 1, /* widen weights to f32 in registers, f32 FMA */
	TR_MM_CONV = 2,  /* convert an L2-sized weight block to f32, then f32 kernel */
	TR_MM_SPLIT = 3, /* x = hi + lo (two bf16), two vdpbf16ps per weight load */
	TR_MM_FAST = 4,  /* x rounded to bf16 once, one vdpbf16ps (FastBF16) */
	TR_MM_PACK = 5   /* packed outer-product f32 kernel (any dtype; m >= 16 under AUTO) */
};

typedef struct tr_ctx tr_ctx;

/* Epilogues of the panel matmul: dst = x·Wᵀ, dst += x·Wᵀ, or, with a gated
 * pair of weights, dst = act(x·Gᵀ) * (x·Uᵀ) for SiLU or GELU (tanh). */
enum { TR_EPI_STORE = 0, TR_EPI_ADD = 1, TR_EPI_SILU = 2, TR_EPI_GELU = 3 };

int tr_cpu_supports(int kset);
tr_ctx *tr_new(int kset, int threads, int fast_bf16, int mm_mode);
void tr_free(tr_ctx *c);

void tr_matmul(tr_ctx *c, float *dst, const float *x, long m, const void *w, int dtype, long n, long k);
/* Panel layout of 16-bit weights for the prefill matmul (mm_panel_avx512.c). */
int tr_panel_supported(tr_ctx *c);
size_t tr_panel_bytes(long n, long k);
void tr_panel_pack(tr_ctx *c, uint16_t *dst, const uint16_t *w, long n, long k);
void tr_matmul_panel(tr_ctx *c, float *dst, const float *x, long m, const uint16_t *w, const uint16_t *w2, long n,
		     long k, int epi);
/* One x (m rows of k) against several packed weights, each into its own dst
 * (n columns): one pass of the threads. At most 4 segments. */
typedef struct {
	float *dst;
	const uint16_t *w, *w2;
	long n;
	int epi;
} tr_panel_seg;
void tr_matmul_panels(tr_ctx *c, const float *x, long m, long k, int nseg, const tr_panel_seg *seg);

/* Matmul with quantized weights (dtype TR_Q*; k a multiple of the block
 * size): x is quantized per block once per call, then integer block dot
 * products times the scales (qmm.c). Returns 0, or -1 for a dtype without
 * kernels or out of memory (nothing written). */
/* From this many rows of x on, tr_qmatmul dequantizes the weights to
 * float32 and runs the f32 matmul (exact x, gpu/ref.MatMul's semantics). */
#define TR_QMM_DEQUANT 32
int tr_qmm_dequant_min(void);
int tr_qmatmul(tr_ctx *c, float *dst, const float *x, long m, const void *w, const void *xp, int dtype, long n,
	       long k);
/* The packed group layout of the types with blocks of 32 and Q4_K (tr_impl.h): whether
 * this context's kernels use it for dtype, its size for n rows of k, and
 * the packing of w into dst. tr_qmatmul takes it as xp (NULL: none) for
 * 1-31 rows of x. */
int tr_xp_supported(tr_ctx *c, int dtype);
size_t tr_xp_bytes(int dtype, long n, long k);
void tr_xp_pack(int dtype, uint8_t *dst, const uint8_t *w, long n, long k);
/* Quantizes the m rows of k elements of x into activation blocks for
 * weights of dtype (tests): dst receives tr_qact_bytes(dtype, k) per row. */
size_t tr_qact_bytes(int dtype, long k);
void tr_qact(tr_ctx *c, void *dst, const float *x, long m, long k, int dtype);
/* Name of the quantized kernels in use for dtype ("avx512vnni", "avx2",
 * "portable"). */
const char *tr_qkernels_name(tr_ctx *c, int dtype);

void tr_embed(float *dst, const void *w, int dtype, long cols, const int32_t *ids, long nids);
void tr_rmsnorm(tr_ctx *c, float *dst, const float *x, const float *w, long rows, long n, float eps, int unit);
void tr_rope(tr_ctx *c, float *x, long rows, long heads, long hd, const float *cs, const float *sn, long half);
void tr_add_bias(tr_ctx *c, float *x, long len, const float *b, long n);
void tr_add(tr_ctx *c, float *dst, const float *a, const float *b, long n);
void tr_silu_mul(tr_ctx *c, float *dst, const float *g, const float *u, long n);
void tr_gelu_mul(tr_ctx *c, float *dst, const float *g, const float *u, long n);
void tr_softcap(tr_ctx *c, float *x, long n, float cap);
void tr_scale(tr_ctx *c, float *x, long n, float s);

/* One sequence of an attention call: row, n, pos, offset of its page table
 * in pages, number of pages. */
typedef struct {
	int64_t row, n, pos, page_off, npages;
} tr_seq;

void tr_attention(tr_ctx *c, float *out, const float *q, const float *K, const float *V,
		  long page_size, long dim, const tr_seq *seqs, long nseq, const int32_t *pages,
		  int heads, int kvheads, int hd, float scale, int window, float softcap);

/* Attention kernel choice; tests and benchmarks only. */
enum {
	TR_ATTN_AUTO = 0,  /* tiled for prefill, per head for decode */
	TR_ATTN_HEAD = 1,  /* per (head, 16 queries) two-pass softmax */
	TR_ATTN_FLASH = 2  /* tiled, online softmax */
};
void tr_set_attn_mode(tr_ctx *c, int mode);
/* Decode matmul scheduling: 0 (default) one region per thread with
 * stealing, 1 one shared counter of chunks; benchmarks only. */
void tr_set_mm_sched(tr_ctx *c, int sched);

#endif

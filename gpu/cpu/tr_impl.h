/* Shared internals of the C kernels of package gpu/cpu. */
#ifndef TROUPE_CPU_TR_IMPL_H
#define TROUPE_CPU_TR_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tr.h"

/* tr_half widens an IEEE half (its bits h) to float exactly, as
 * gpu.F16ToF32 does: the one conversion the kernels, the pool's widening
 * and the quantized blocks' scales share. */
static inline float tr_half(uint16_t h) {
	uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, mant = h & 0x3ff, b;
	if (e == 0 && mant == 0)
		b = sign;
	else if (e == 0) {
		float f = ldexpf((float)mant, -24);
		memcpy(&b, &f, 4);
		b |= sign;
	} else if (e == 31)
		b = sign | 0x7f800000u | mant << 13;
	else
		b = sign | (e + 112) << 23 | mant << 13;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

typedef struct {
	float *dst;
	const float *x;
	const void *w;
	const uint16_t *xh, *xl; /* activations as bf16 (hi and lo parts) for SPLIT/FAST */
	long m, n, k;
	int dtype, mode;
} tr_mm_args;

typedef struct {
	float *out;
	const float *q, *K, *V;
	long ps, dim;
	const tr_seq *seqs;
	long nseq;
	const int32_t *pages;
	int heads, kvheads, hd;
	float scale;
	int window;
	float softcap;
} tr_attn_args;

/* Bytes of per-thread scratch an attention block needs for context length ctx. */
#define TR_ATTN_SCRATCH(ctx, hd) (((size_t)(ctx) + 64) * 4 * 16 + (size_t)(hd) * 4 * 16 + 256)
/* Query rows per attention work item. */
#define TR_ATTN_QB 16

/* Tiled attention (attn_flash): keys per block, and the number of query rows
 * (query positions x heads of a KV group) a work item aims at. */
#define TR_FLASH_KB 64
#define TR_FLASH_M 48
/* n floats rounded up to 64 bytes. */
#define TR_AL16(n) (((size_t)(n) + 15) & ~(size_t)15)
/* Bytes of per-thread scratch attn_flash needs for m query rows of head dim hd
 * (sized for the widest vectors, 16 lanes). */
#define TR_FLASH_SCRATCH(m, hd)                                                                                        \
	(4 * (TR_AL16(hd) * TR_AL16(m) + (size_t)TR_FLASH_KB * TR_AL16(m) + TR_AL16(m) * TR_AL16(hd) +               \
	      5 * TR_AL16(m) + (size_t)TR_FLASH_KB * TR_AL16(hd) + TR_AL16(hd) + 16 * 16) +                           \
	 256)

/* Matmul on weights packed ahead of time in the panel layout
 * (mm_panel_avx512.c): dst rows ldd apart, x rows ldx apart, w (and w2, the
 * up panels of a gated pair) in panels of 32 outputs. */
typedef struct {
	float *dst;
	const float *x;
	const void *w, *w2;
	long m, n, k, ldd, ldx;
	int epi; /* TR_EPI_* */
} tr_mmq_args;
/* Rows of x per microkernel call of the panel matmul. */
#define TR_PANEL_MR 12
/* Bytes of per-thread scratch attn_dec needs for H heads (kvh KV heads) of
 * dim hd over n keys. */
#define TR_DEC_SCRATCH(H, kvh, n, hd)                                                                                  \
	(4 * (TR_AL16((size_t)(H) * ((size_t)(n) + 16)) + TR_AL16((size_t)(H) * (hd)) + TR_AL16((size_t)(kvh) * (hd)) + \
	      TR_AL16(H)) +                                                                                            \
	 256)

/* Strip height (x rows) and panel width (outputs) of the packed matmul. */
#define TR_MMP_MR 12
#define TR_MMP_NR 32

typedef struct {
	/* Output rows [n0, n1) of a matmul, all m input rows. scratch holds
	 * scratch_bytes of per-thread memory (see mm_scratch). */
	void (*mm)(const tr_mm_args *a, long n0, long n1, void *scratch);
	size_t (*mm_scratch)(const tr_mm_args *a);
	/* Rows [m0, m1) of x into bf16 hi (and lo when a->mode == TR_MM_SPLIT). */
	void (*xconv)(const tr_mm_args *a, long m0, long m1);
	/* Packed outer-product matmul (TR_MM_PACK; NULL where the set has none).
	 * mmp_packa packs strips [s0, s1) of mmp_mr rows of x into ap (of
	 * mmp_abytes(m, k) bytes); mmp computes dst rows [m0, m1) (m0 a multiple
	 * of mmp_mr) x outputs [n0, n1) from ap, with mmp_scratch bytes of
	 * per-thread scratch. Work items should be whole panels of mmp_nr outputs. */
	void (*mmp_packa)(const tr_mm_args *a, float *ap, long s0, long s1);
	void (*mmp)(const tr_mm_args *a, const float *ap, long m0, long m1, long n0, long n1, void *scratch);
	size_t (*mmp_scratch)(const tr_mm_args *a);
	size_t (*mmp_abytes)(long m, long k);
	int mmp_mr, mmp_nr;
	/* Panel matmul (NULL where the set has none): dst rows [m0, m1) x
	 * panels [p0, p1). */
	void (*mmq)(const tr_mmq_args *a, long m0, long m1, long p0, long p1);
	/* Panel p of a bf16 matrix (n rows of k) into dst (k * 16 words). */
	void (*panel_pack)(uint32_t *dst, const uint16_t *w, long n, long k, long p);

	void (*silu)(float *d, const float *g, const float *u, long n);
	void (*gelu)(float *d, const float *g, const float *u, long n);
	void (*softcap)(float *x, long n, float c);
	void (*scale)(float *x, long n, float s);
	void (*add)(float *d, const float *a, const float *b, long n);
	/* x holds len elements starting at flat offset off of the bias-periodic array. */
	void (*add_bias)(float *x, long len, const float *b, long n, long off);
	void (*rmsnorm)(float *d, const float *x, const float *w, long rows, long n, float eps, int unit);
	void (*rope)(float *x, long rows, long heads, long hd, const float *c, const float *s, long half);
	/* Query rows [r0, r1) (relative to the sequence) of head h of sequence s. */
	void (*attn)(const tr_attn_args *a, const tr_seq *s, long r0, long r1, int h, void *scratch);
	/* Query rows [r0, r1) of the heads [g0, g1) of the group of KV head kvh
	 * (g relative to the group), tiled with an online softmax. */
	void (*attn_flash)(const tr_attn_args *a, const tr_seq *s, long r0, long r1, int kvh, int g0, int g1,
			   void *scratch);
	/* Decode attention (s->n == 1; needs hd a multiple of vw): every head
	 * over the keys [j0, j1); normalised into out when part is NULL, else
	 * per head {max, sum, unnormalised output[hd]} into part (see
	 * attn_dec.h). */
	void (*attn_dec)(const tr_attn_args *a, const tr_seq *s, long j0, long j1, float *part, void *scratch);
	int vw; /* float lanes of the vectors of this set */
} tr_kernels;

/* Quantized activations (qmm.c): a block of 32 for the weight types with
 * blocks of 32, a block of 256 with the sums per 16 for the K types. d is
 * amax/127 and q = round_to_even(x * (127/amax)) (gpu/ref.QuantizeAct). */
typedef struct {
	float d;
	int32_t sum;
	int8_t q[32];
} tr_qa32;
typedef struct {
	float d;
	int16_t bsums[16];
	int8_t q[256];
} tr_qak;

/* Dot products of one weight row (nb blocks) with nx <= 4 rows of quantized
 * activations xs bytes apart: out[r] = w . xq[r]. */
typedef void (*tr_qdot_fn)(int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out);

/* The same for two weight rows at once: out0[r] = w0 . xq[r], out1[r] =
 * w1 . xq[r]. */
typedef void (*tr_qdot2_fn)(int nx, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb,
			    float *out0, float *out1);

/* Bytes of a block of weights of quantized dtype dt, and the elements it
 * holds. */
static inline long tr_qblock_bytes(int dt) {
	switch (dt) {
	case TR_Q8_0: return 34;
	case TR_Q4_0: return 18;
	case TR_Q4_1: return 20;
	case TR_Q5_0: return 22;
	case TR_Q5_1: return 24;
	case TR_Q2_K: return 84;
	case TR_Q3_K: return 110;
	case TR_Q4_K: return 144;
	case TR_Q5_K: return 176;
	case TR_Q6_K: return 210;
	}
	return 0;
}
static inline long tr_qblock_elems(int dt) { return dt >= TR_Q2_K && dt <= TR_Q6_K ? 256 : 32; }

/* The lane layout of the quantized matmul for several rows of x (qmm.c,
 * the VNNI set's xl): a 512-bit vector holds 4 quants of each of 16 weight
 * rows (lane j: row j), and vpdpbusd takes it against 4 quants of one row of
 * x broadcast to every lane, so one 64-byte load of weights serves all the
 * rows of x of a tile and every instruction 16 weight rows. Weights are
 * unpacked into this layout once per call, 16 rows at a time, not once per
 * row of x; the sums come out as 16 consecutive outputs of a row of x.
 *
 * vpdpbusd multiplies unsigned by signed bytes: the weights are the
 * unsigned side, stored as u = q + off (tr_xl_off), and x the signed one,
 * so the offset comes out of x's sums, as in the one-row kernels.
 *
 * A tile holds TR_XL_R rows of quantized x; the tile kernels read the
 * first tr_xl_rows_read of them, and those past m are zero:
 *   xq  k*TR_XL_R bytes: group g of 4 elements of row r at g*4*TR_XL_R + 4*r;
 *   dx  per activation block (tr_xl_xb elements) the TR_XL_R scales;
 *   xs  for the types with minimums, per sub-block (tr_xl_s elements) the
 *       TR_XL_R sums of x: dx times the sum of the quants;
 *   xc  for the types with an offset, per sub-block the TR_XL_R int32
 *       -off * (sum of the quants): vpdpbusd's start.
 * A group of TR_XL_L weight rows unpacked (tr_xl_group_bytes) holds per
 * group of 4 elements the 4 unsigned quants of each row (64 bytes), then
 * per sub-block the rows' scales s (element = s*(u - off) + o), then, for
 * the types with minimums, the rows' offsets o. */
#define TR_XL_L 16
#define TR_XL_R 8
/* The rows of a tile the kernels read when rows of them hold x: a power
 * of two, so that each kernel is compiled for 1, 2, 4 or TR_XL_R rows. */
static inline int tr_xl_rows_read(long rows) { return rows > 4 ? TR_XL_R : rows > 2 ? 4 : rows > 1 ? 2 : 1; }
static inline int tr_xl_s(int dt) { return dt == TR_Q2_K || dt == TR_Q3_K || dt == TR_Q6_K ? 16 : 32; }
/* The activation block: the weight block (tr_qblock_elems). */
static inline int tr_xl_xb(int dt) { return (int)tr_qblock_elems(dt); }
static inline int tr_xl_min(int dt) {
	return dt == TR_Q4_1 || dt == TR_Q5_1 || dt == TR_Q2_K || dt == TR_Q4_K || dt == TR_Q5_K;
}
static inline int tr_xl_off(int dt) {
	switch (dt) {
	case TR_Q8_0: return 128;
	case TR_Q4_0: return 8;
	case TR_Q5_0: return 16;
	case TR_Q3_K: return 4;
	case TR_Q6_K: return 32;
	}
	return 0;
}
static inline size_t tr_xl_tile_bytes(int dt, long k) {
	size_t n = (size_t)k * TR_XL_R + 4 * TR_XL_R * (size_t)(k / tr_xl_xb(dt)) +
		   4 * TR_XL_R * (size_t)(k / tr_xl_s(dt)) * ((tr_xl_min(dt) ? 1 : 0) + (tr_xl_off(dt) ? 1 : 0));
	return (n + 63) & ~(size_t)63;
}
static inline size_t tr_xl_group_bytes(int dt, long k) {
	return (size_t)k * TR_XL_L + 4 * TR_XL_L * (size_t)(k / tr_xl_s(dt)) * (tr_xl_min(dt) ? 2 : 1);
}

/* Weight rows [r0, r1) (rows of rowb bytes, k elements) times the tiles of
 * the m rows of x (tiles tr_xl_tile_bytes apart) into dst (row i of x at
 * dst + i*ldd, weight row r at column r); scratch holds TR_XL_SCRATCH
 * bytes (64-byte aligned). */
#define TR_XL_SCRATCH(dt, k) tr_xl_group_bytes(dt, k)
typedef void (*tr_xl_fn)(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, const uint8_t *tiles,
			 long m, float *dst, long ldd, void *scratch);

/* The packed group layout (tr_xp_pack, made once at load): weights of the
 * types with blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) already in the
 * lane layout's order, so that the matmul of 1-31 rows of x streams them
 * with no unpacking. Rows come in groups of TR_XL_L (the last group
 * repeats the last row); a group holds its k/32 blocks one after the
 * other, each tr_xp_block_bytes (16 times the block's own size), in
 * sections of 16 rows each:
 *   quants  as vectors of 64 bytes whose lane j holds 4 bytes of row j:
 *           Q8_0 8 vectors, the unsigned quants u = q + 128 of elements
 *           4v..4v+3; the others 4, vector v holding the bytes 4v..4v+3 of
 *           each row's nibbles as stored (low nibbles elements 4v..,
 *           high nibbles 16+4v..);
 *   qh      (Q5_0, Q5_1) one vector: lane j the 32 fifth bits of row j;
 *   d       the 16 rows' f16 scales;
 *   m       (Q4_1, Q5_1) the 16 rows' f16 minimums.
 * The bytes are those of the original blocks, rearranged. Q4_K (below)
 * has its 6-bit scales as bytes. */
static inline int tr_xp_type(int dt) {
	return dt == TR_Q8_0 || dt == TR_Q4_0 || dt == TR_Q4_1 || dt == TR_Q5_0 || dt == TR_Q5_1 || dt == TR_Q4_K;
}
/* Q4_K's packed super-block: 32 vectors of quants (vector 8c+q lane j: the
 * bytes 32c+4q.. of row j's qs, low nibbles elements 64c+4q.., high
 * nibbles 64c+32+4q..), then the 6-bit scales and minimums of its 8
 * sub-blocks as bytes (sub-block s of row j at 16s+j), then the rows' f16
 * d and dmin. */
#define TR_XP_Q4K_SC 2048
#define TR_XP_Q4K_MN (TR_XP_Q4K_SC + 128)
#define TR_XP_Q4K_D (TR_XP_Q4K_MN + 128)
#define TR_XP_Q4K_DMIN (TR_XP_Q4K_D + 32)
static inline size_t tr_xp_block_bytes(int dt) { return dt == TR_Q4_K ? TR_XP_Q4K_DMIN + 32 : 16 * tr_qblock_bytes(dt); }
/* Offsets within a packed block of the sections after the quants. */
static inline int tr_xp_qh(int dt) { return dt == TR_Q8_0 ? 512 : 256; }
static inline int tr_xp_d(int dt) { return tr_xp_qh(dt) + (dt == TR_Q5_0 || dt == TR_Q5_1 ? 64 : 0); }
static inline int tr_xp_m(int dt) { return tr_xp_d(dt) + 32; }
/* Bytes of one packed group of TR_XL_L rows of k elements. */
static inline size_t tr_xp_group_bytes(int dt, long k) {
	return (size_t)(k / tr_qblock_elems(dt)) * tr_xp_block_bytes(dt);
}
/* Rows [r0, r1) (r0 a multiple of TR_XL_L) of the packed weights xp (k
 * elements per row) times the tiles of the m rows of x into dst, as tr_xl_fn. */
typedef void (*tr_xp_fn)(int dt, const uint8_t *xp, long r0, long r1, long k, const uint8_t *tiles, long m,
			 float *dst, long ldd);

typedef struct {
	const char *name;
	/* n elements (a multiple of 32, or of 256) into blocks. */
	void (*quant32)(const float *x, tr_qa32 *dst, long n);
	void (*quantk)(const float *x, tr_qak *dst, long n);
	tr_qdot_fn dot[TR_NDTYPE]; /* by dtype; NULL for the plain ones */
	tr_qdot2_fn dot2[TR_NDTYPE]; /* two rows at once; NULL where the set has none */
	tr_xl_fn xl; /* the lane layout (TR_XL_R rows of x per call of a tile); NULL where the set has none */
	tr_xp_fn xp; /* the packed group layout (tr_xp_type); NULL where the set has none */
	/* tr_qdequant's contract on this set's vectors; NULL where the set has none */
	void (*dequant)(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, float *dst);
} tr_qkernels;

extern const tr_qkernels tr_qk_portable;
#if defined(__x86_64__)
extern const tr_qkernels tr_qk_avx2;
extern const tr_qkernels tr_qk_avx512;
#endif

/* Rows [r0, r1) of a quantized weight (rows of rowb bytes, k elements)
 * widened to float32 into dst, exactly as gpu's block dequantizers. */
void tr_qdequant(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, float *dst);

/* The decode scheduler of pool.c: rows [0, n) in regions per thread with
 * stealing, fn(arg, n0, n1, tid) per chunk; rowb is the bytes of a row of
 * weights (chunks are sized from it). */
typedef void (*tr_rows_fn)(void *arg, long n0, long n1, int tid);
void tr_regions(tr_ctx *c, long n, long rowb, tr_rows_fn fn, void *arg, int nth);
/* A buffer of at least bytes owned by the context (64-byte aligned; which
 * picks one of its buffers); NULL when out of memory. */
void *tr_ctx_buf(tr_ctx *c, int which, size_t bytes);
/* Per-thread scratch of at least bytes for thread tid of a tr_run or
 * tr_regions call (64-byte aligned); NULL when out of memory. */
void *tr_ctx_scratch(tr_ctx *c, int tid, size_t bytes);
const tr_qkernels *tr_ctx_qkernels(const tr_ctx *c);

/* The worker pool, for drivers outside pool.c: run calls fn(arg, tid, nth)
 * on nth threads (the caller is tid 0) and returns when all are done. */
typedef void (*tr_job_fn)(void *arg, int tid, int nth);
void tr_run(tr_ctx *c, tr_job_fn fn, void *arg, int nth);
int tr_nthreads(const tr_ctx *c);
const tr_kernels *tr_ctx_kernels(const tr_ctx *c);

extern const tr_kernels tr_kernels_portable;
#if defined(__x86_64__)
extern const tr_kernels tr_kernels_avx2;
extern const tr_kernels tr_kernels_avx512;
#endif

#endif

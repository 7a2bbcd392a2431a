/* AVX-512 matmul kernels (AVX512F/BW/VL + AVX512_BF16).
 *
 * dst[i][j] = x[i] . w[j]: each tile computes MR x-rows against NR w-rows as
 * K-vectorised dot products (16 f32 or 32 bf16 lanes per step), keeping MR*NR
 * accumulators in zmm registers, with masked loads for the K tail and a
 * transposing horizontal reduction at the end that yields the NR sums of one
 * x-row in one xmm register. Weight rows are walked in blocks that stay in L2
 * while every x tile passes over them. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "tr_impl.h"

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")))
#define INL static inline __attribute__((always_inline)) T512

/* Software prefetch distance in bytes for the first pass over a block of
 * weights (the one that streams them from memory). Tile rows are contiguous,
 * so this runs a fixed distance ahead in the weight matrix. */
#ifndef PF_BYTES
#define PF_BYTES 8192
#endif

/* Sums of a, b, c, d as the four lanes of an xmm. */
INL __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
	__m512 ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
	__m512 cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
	__m512 s = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))),
				 _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(ab), _mm512_castps_pd(cd))));
	__m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
	return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* 16 weights from element i, widened to f32. */
INL __m512 wld(const int DT, const void *w, long i) {
	if (DT == TR_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(
		    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i))), 16));
	if (DT == TR_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)));
	return _mm512_loadu_ps((const float *)w + i);
}

INL __m512 wldm(const int DT, const void *w, long i, __mmask16 m) {
	if (DT == TR_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(
		    _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i)), 16));
	if (DT == TR_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i));
	return _mm512_maskz_loadu_ps(m, (const float *)w + i);
}

INL void store_row(const int NR, float *d, __m512 a0, __m512 a1, __m512 a2, __m512 a3) {
	__m128 s = hsum4(a0, a1, a2, a3);
	if (NR == 4)
		_mm_storeu_ps(d, s);
	else
		_mm_mask_storeu_ps(d, (__mmask8)((1u << NR) - 1), s);
}

/* f32 accumulation with weights of dtype DT widened in registers. */
INL void tile_w(const int MR, const int NR, const int DT, const int PF, const float *x, long ldx, const void *w, long ldw,
		float *d, long ldd, long K) {
	const long esz = DT == TR_F32 ? 4 : 2;
	const char *pf = (const char *)w + PF_BYTES;
	__m512 acc[4][4];
	for (int i = 0; i < 4; i++)
		for (int r = 0; r < 4; r++)
			acc[i][r] = _mm512_setzero_ps();
	long k = 0;
	for (; k + 16 <= K; k += 16) {
		__m512 wv[4];
		for (int r = 0; r < NR; r++)
			wv[r] = wld(DT, w, r * ldw + k);
		if (PF)
			for (int r = 0; r < NR; r++)
				_mm_prefetch(pf + (r * ldw + k) * esz, _MM_HINT_T0);
		for (int i = 0; i < MR; i++) {
			__m512 xv = _mm512_loadu_ps(x + i * ldx + k);
			for (int r = 0; r < NR; r++)
				acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
		}
	}
	if (k < K) {
		__mmask16 m = (__mmask16)((1u << (K - k)) - 1);
		__m512 wv[4];
		for (int r = 0; r < NR; r++)
			wv[r] = wldm(DT, w, r * ldw + k, m);
		for (int i = 0; i < MR; i++) {
			__m512 xv = _mm512_maskz_loadu_ps(m, x + i * ldx + k);
			for (int r = 0; r < NR; r++)
				acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
		}
	}
	for (int i = 0; i < MR; i++)
		store_row(NR, d + i * ldd, acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

/* bf16 dot products with vdpbf16ps: x given as bf16 hi (and lo when SPLIT). */
INL void tile_dp(const int MR, const int NR, const int SPLIT, const int PF, const uint16_t *xh, const uint16_t *xl,
		 long ldx, const uint16_t *w, long ldw, float *d, long ldd, long K) {
	const uint16_t *pf = w + PF_BYTES / 2;
	__m512 acc[4][4];
	for (int i = 0; i < 4; i++)
		for (int r = 0; r < 4; r++)
			acc[i][r] = _mm512_setzero_ps();
	long k = 0;
	for (; k + 32 <= K; k += 32) {
		__m512bh wv[4];
		for (int r = 0; r < NR; r++)
			wv[r] = (__m512bh)_mm512_loadu_si512(w + r * ldw + k);
		if (PF)
			for (int r = 0; r < NR; r++)
				_mm_prefetch((const char *)(pf + r * ldw + k), _MM_HINT_T0);
		for (int i = 0; i < MR; i++) {
			__m512bh xv = (__m512bh)_mm512_loadu_si512(xh + i * ldx + k);
			for (int r = 0; r < NR; r++)
				acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xv, wv[r]);
			if (SPLIT) {
				__m512bh xlv = (__m512bh)_mm512_loadu_si512(xl + i * ldx + k);
				for (int r = 0; r < NR; r++)
					acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xlv, wv[r]);
			}
		}
	}
	if (k < K) {
		__mmask32 m = (__mmask32)((1ull << (K - k)) - 1);
		__m512bh wv[4];
		for (int r = 0; r < NR; r++)
			wv[r] = (__m512bh)_mm512_maskz_loadu_epi16(m, w + r * ldw + k);
		for (int i = 0; i < MR; i++) {
			__m512bh xv = (__m512bh)_mm512_maskz_loadu_epi16(m, xh + i * ldx + k);
			for (int r = 0; r < NR; r++)
				acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xv, wv[r]);
			if (SPLIT) {
				__m512bh xlv = (__m512bh)_mm512_maskz_loadu_epi16(m, xl + i * ldx + k);
				for (int r = 0; r < NR; r++)
					acc[i][r] = _mm512_dpbf16_ps(acc[i][r], xlv, wv[r]);
			}
		}
	}
	for (int i = 0; i < MR; i++)
		store_row(NR, d + i * ldd, acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

#define CASES(CALL)                                                                                                    \
	switch (mr * 4 + nr) {                                                                                         \
	case 5: CALL(1, 1); break;                                                                                     \
	case 6: CALL(1, 2); break;                                                                                     \
	case 7: CALL(1, 3); break;                                                                                     \
	case 8: CALL(1, 4); break;                                                                                     \
	case 9: CALL(2, 1); break;                                                                                     \
	case 10: CALL(2, 2); break;                                                                                    \
	case 11: CALL(2, 3); break;                                                                                    \
	case 12: CALL(2, 4); break;                                                                                    \
	case 13: CALL(3, 1); break;                                                                                    \
	case 14: CALL(3, 2); break;                                                                                    \
	case 15: CALL(3, 3); break;                                                                                    \
	case 16: CALL(3, 4); break;                                                                                    \
	case 17: CALL(4, 1); break;                                                                                    \
	case 18: CALL(4, 2); break;                                                                                    \
	case 19: CALL(4, 3); break;                                                                                    \
	case 20: CALL(4, 4); break;                                                                                    \
	}

static T512 void tiles_f32(int pf, int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd,
			   long K) {
#define C(a, b) if (pf) tile_w(a, b, TR_F32, 1, x, ldx, w, ldw, d, ldd, K); else tile_w(a, b, TR_F32, 0, x, ldx, w, ldw, d, ldd, K)
	CASES(C)
#undef C
}
static T512 void tiles_bf16(int pf, int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd,
			    long K) {
#define C(a, b) if (pf) tile_w(a, b, TR_BF16, 1, x, ldx, w, ldw, d, ldd, K); else tile_w(a, b, TR_BF16, 0, x, ldx, w, ldw, d, ldd, K)
	CASES(C)
#undef C
}
static T512 void tiles_f16(int pf, int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd,
			   long K) {
#define C(a, b) if (pf) tile_w(a, b, TR_F16, 1, x, ldx, w, ldw, d, ldd, K); else tile_w(a, b, TR_F16, 0, x, ldx, w, ldw, d, ldd, K)
	CASES(C)
#undef C
}
static T512 void tiles_fast(int pf, int mr, int nr, const uint16_t *xh, const uint16_t *xl, long ldx, const uint16_t *w,
			    long ldw, float *d, long ldd, long K) {
#define C(a, b) if (pf) tile_dp(a, b, 0, 1, xh, xl, ldx, w, ldw, d, ldd, K); else tile_dp(a, b, 0, 0, xh, xl, ldx, w, ldw, d, ldd, K)
	CASES(C)
#undef C
}
static T512 void tiles_split(int pf, int mr, int nr, const uint16_t *xh, const uint16_t *xl, long ldx, const uint16_t *w,
			     long ldw, float *d, long ldd, long K) {
#define C(a, b) if (pf) tile_dp(a, b, 1, 1, xh, xl, ldx, w, ldw, d, ldd, K); else tile_dp(a, b, 1, 0, xh, xl, ldx, w, ldw, d, ldd, K)
	CASES(C)
#undef C
}

/* Weight rows per block: ~256 KB of the weights as the kernel reads them. */
static long block_rows(const tr_mm_args *a) {
	long esz = (a->mode == TR_MM_CONV || a->dtype == TR_F32) ? 4 : 2;
	long nb = (256 * 1024) / (a->k * esz);
	nb &= ~3L;
	return nb < 4 ? 4 : nb;
}

T512 size_t tr_mm_scratch_avx512(const tr_mm_args *a) {
	if (a->mode == TR_MM_CONV && a->dtype != TR_F32)
		return (size_t)block_rows(a) * (size_t)a->k * 4 + 64;
	return 0;
}

static T512 void conv_block(float *dst, const void *w, int dtype, long n) {
	long i = 0;
	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(dst + i, dtype == TR_BF16 ? wld(TR_BF16, w, i) : wld(TR_F16, w, i));
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);
		_mm512_mask_storeu_ps(dst + i, m, dtype == TR_BF16 ? wldm(TR_BF16, w, i, m) : wldm(TR_F16, w, i, m));
	}
}

T512 void tr_mm_avx512(const tr_mm_args *a, long n0, long n1, void *scr) {
	const long K = a->k, N = a->n, M = a->m;
	const long NB = block_rows(a);
	const int mode = a->dtype == TR_F32 ? TR_MM_WIDEN : a->mode;
	for (long nb = n0; nb < n1; nb += NB) {
		long ne = nb + NB < n1 ? nb + NB : n1;
		if (mode == TR_MM_FAST || mode == TR_MM_SPLIT) {
			const uint16_t *w = (const uint16_t *)a->w;
			for (long i0 = 0; i0 < M; i0 += 4) {
				int mr = M - i0 < 4 ? (int)(M - i0) : 4;
				for (long j = nb; j < ne; j += 4) {
					int nr = ne - j < 4 ? (int)(ne - j) : 4;
					if (mode == TR_MM_FAST)
						tiles_fast(i0 == 0, mr, nr, a->xh + i0 * K, NULL, K, w + j * K, K, a->dst + i0 * N + j, N, K);
					else
						tiles_split(i0 == 0, mr, nr, a->xh + i0 * K, a->xl + i0 * K, K, w + j * K, K,
							    a->dst + i0 * N + j, N, K);
				}
			}
			continue;
		}
		const void *w = a->w;
		long base = 0; /* element offset of row nb */
		int dt = a->dtype;
		if (mode == TR_MM_CONV && dt != TR_F32) {
			conv_block((float *)scr, (const uint16_t *)a->w + nb * K, dt, (ne - nb) * K);
			w = scr;
			dt = TR_F32;
			base = -nb * K;
		}
		for (long i0 = 0; i0 < M; i0 += 4) {
			int mr = M - i0 < 4 ? (int)(M - i0) : 4;
			const float *x = a->x + i0 * K;
			float *d = a->dst + i0 * N;
			for (long j = nb; j < ne; j += 4) {
				int nr = ne - j < 4 ? (int)(ne - j) : 4;
				long off = base + j * K;
				if (dt == TR_F32)
					tiles_f32(i0 == 0 && w == a->w, mr, nr, x, K, (const float *)w + off, K, d + j, N, K);
				else if (dt == TR_BF16)
					tiles_bf16(i0 == 0, mr, nr, x, K, (const uint16_t *)w + off, K, d + j, N, K);
				else
					tiles_f16(i0 == 0, mr, nr, x, K, (const uint16_t *)w + off, K, d + j, N, K);
			}
		}
	}
}

/* Rows [m0, m1) of x to bf16: hi = bf16(x) and, for SPLIT, lo = bf16(x - hi). */
T512 void tr_xconv_avx512(const tr_mm_args *a, long m0, long m1) {
	const long K = a->k;
	const int split = a->mode == TR_MM_SPLIT;
	for (long i = m0 * K, e = m1 * K; i < e; i += 16) {
		__mmask16 m = e - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (e - i)) - 1);
		__m512 v = _mm512_maskz_loadu_ps(m, a->x + i);
		__m256bh h = _mm512_cvtneps_pbh(v);
		_mm256_mask_storeu_epi16((uint16_t *)a->xh + i, m, (__m256i)h);
		if (split) {
			__m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)h), 16));
			__m256bh l = _mm512_cvtneps_pbh(_mm512_sub_ps(v, hf));
			_mm256_mask_storeu_epi16((uint16_t *)a->xl + i, m, (__m256i)l);
		}
	}
}
#endif

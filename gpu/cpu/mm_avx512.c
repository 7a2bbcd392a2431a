/* AVX-512 matmul kernels (AVX512F/BW/VL + AVX512_BF16).
 *
 * Prefill (m >= 16, exact f32) uses the packed outer-product kernel at the
 * end of this file. Decode, FastBF16 and the benchmark-only modes use the
 * dot-product tiles below:
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

/* ---- packed outer-product kernel (prefill, m >= 16) ----
 *
 * x is packed once per call into strips of PK_MR rows, k-major (PK_MR floats
 * per k, rows past m zero). For each block of PK_KC k and each panel of
 * PK_NR consecutive outputs, the panel of W is packed transposed (PK_NR
 * widened weights per k, missing outputs zero), and every strip of x passes
 * over it: per k, PK_NV zmm of weights, PK_MR broadcasts of x and
 * PK_MR*PK_NV FMAs into register accumulators. The first k block stores into
 * dst, later ones add to it. Each output is a plain sequential f32 FMA chain
 * over k. */
#if defined(__x86_64__)
#ifndef PK_MR
#define PK_MR TR_MMP_MR
#endif
#ifndef PK_NV
#define PK_NV (TR_MMP_NR / 16)
#endif
#define PK_NR (16 * PK_NV)
#ifndef PK_KC
#define PK_KC 576
#endif

/* Transposes the 16x16 matrix held in r[0..15] (row t in r[t]). */
INL void tr16(__m512 r[16]) {
	__m512 t[16];
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	for (int i = 0; i < 4; i++) {
		__m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
		__m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
		r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
		r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
		r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
		r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
	}
	/* r[4g+c] holds rows 4g..4g+3 of columns c, 4+c, 8+c, 12+c (one per
	 * 128-bit lane); gather lane L of the four groups into column 4L+c. */
	for (int c = 0; c < 4; c++) {
		__m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44);
		__m512 u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xEE);
		__m512 u2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
		__m512 u3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xEE);
		t[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
		t[4 + c] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
		t[8 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
		t[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
	}
	for (int i = 0; i < 16; i++)
		r[i] = t[i];
}

/* Outputs [n0, n0+nn) (nn <= PK_NR) of W for k in [k0, k0+kc), widened to f32,
 * as kc rows of PK_NR floats; outputs past nn are zero. */
INL void packw(const int DT, const void *w, long K, long n0, long nn, long k0, long kc, float *buf) {
	for (long kb = 0; kb < kc; kb += 16) {
		long kk = kc - kb < 16 ? kc - kb : 16;
		__mmask16 km = (__mmask16)((1u << kk) - 1);
		for (int g = 0; g < PK_NV; g++) {
			__m512 r[16];
			for (int t = 0; t < 16; t++) {
				long n = 16 * g + t;
				long off = (n0 + n) * K + k0 + kb;
				if (n >= nn)
					r[t] = _mm512_setzero_ps();
				else if (kk == 16)
					r[t] = wld(DT, w, off);
				else
					r[t] = wldm(DT, w, off, km);
			}
			tr16(r);
			for (int t = 0; t < kk; t++)
				_mm512_storeu_ps(buf + (kb + t) * PK_NR + 16 * g, r[t]);
		}
	}
}

/* Rows [m0, m0+mm) (mm <= PK_MR) of x as K rows of PK_MR floats. */
INL void packa(const float *x, long K, long m0, long mm, float *buf) {
	const __mmask16 sm = (__mmask16)((1u << PK_MR) - 1);
	for (long kb = 0; kb < K; kb += 16) {
		long kk = K - kb < 16 ? K - kb : 16;
		__mmask16 km = (__mmask16)((1u << kk) - 1);
		__m512 r[16];
		for (int t = 0; t < 16; t++)
			r[t] = t < PK_MR && t < mm ? _mm512_maskz_loadu_ps(km, x + (m0 + t) * K + kb) : _mm512_setzero_ps();
		tr16(r);
		for (int t = 0; t < kk; t++)
			_mm512_mask_storeu_ps(buf + (kb + t) * PK_MR, sm, r[t]);
	}
}

/* dst[0..MR) x [outputs of the panel] (+)= strip . panel over kc; vm masks
 * the outputs of each vector. MR is PK_MR, or the rows of the last strip. */
INL void ukr(const int MR, long kc, const float *ap, const float *bp, float *d, long ldd, const __mmask16 *vm,
	     int first) {
	__m512 acc[PK_MR][PK_NV];
	for (int i = 0; i < MR; i++)
		for (int v = 0; v < PK_NV; v++)
			acc[i][v] = _mm512_setzero_ps();
#pragma GCC unroll 4
	for (long k = 0; k < kc; k++) {
		__m512 b[PK_NV];
		for (int v = 0; v < PK_NV; v++)
			b[v] = _mm512_loadu_ps(bp + 16 * v);
		for (int i = 0; i < MR; i++) {
			__m512 a = _mm512_set1_ps(ap[i]);
			for (int v = 0; v < PK_NV; v++)
				acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
		}
		ap += PK_MR;
		bp += PK_NR;
	}
	for (int i = 0; i < MR; i++)
		for (int v = 0; v < PK_NV; v++) {
			float *p = d + i * ldd + 16 * v;
			if (first)
				_mm512_mask_storeu_ps(p, vm[v], acc[i][v]);
			else
				_mm512_mask_storeu_ps(p, vm[v], _mm512_add_ps(acc[i][v], _mm512_maskz_loadu_ps(vm[v], p)));
		}
}

static T512 void ukr_mr(int mr, long kc, const float *ap, const float *bp, float *d, long ldd, const __mmask16 *vm,
			int first) {
	switch (mr) {
#define U(r) case r: ukr(r, kc, ap, bp, d, ldd, vm, first); break;
	U(1) U(2) U(3) U(4) U(5) U(6) U(7) U(8)
#if PK_MR > 8
	U(9) U(10) U(11) U(12)
#endif
#if PK_MR > 12
	U(13) U(14)
#endif
#if PK_MR > 14
#error "PK_MR too large"
#endif
#undef U
	}
}

/* Floats of packed x for m rows of k. */
T512 size_t tr_mmp_abytes_avx512(long m, long k) { return (size_t)((m + PK_MR - 1) / PK_MR) * (size_t)k * PK_MR * 4 + 64; }

/* Strips [s0, s1) of x into ap. */
T512 void tr_mmp_packa_avx512(const tr_mm_args *a, float *ap, long s0, long s1) {
	for (long s = s0; s < s1; s++) {
		long m0 = s * PK_MR, mm = a->m - m0 < PK_MR ? a->m - m0 : PK_MR;
		packa(a->x, a->k, m0, mm, ap + s * a->k * PK_MR);
	}
}

static T512 void packw_any(int dt, const void *w, long K, long n0, long nn, long k0, long kc, float *buf) {
	if (dt == TR_BF16)
		packw(TR_BF16, w, K, n0, nn, k0, kc, buf);
	else if (dt == TR_F16)
		packw(TR_F16, w, K, n0, nn, k0, kc, buf);
	else
		packw(TR_F32, w, K, n0, nn, k0, kc, buf);
}

/* k per block: K split evenly into blocks of at most PK_KC. */
static long pk_kc(long K) {
	long nb = (K + PK_KC - 1) / PK_KC;
	return (K + nb - 1) / nb;
}

T512 size_t tr_mmp_scratch_avx512(const tr_mm_args *a) { return (size_t)pk_kc(a->k) * PK_NR * 4 + 64; }

/* dst rows [m0, m1) (m0 a multiple of PK_MR) x outputs [n0, n1), from x
 * packed by tr_mmp_packa_avx512 into ap. */
T512 void tr_mmp_avx512(const tr_mm_args *a, const float *ap, long m0, long m1, long n0, long n1, void *scr) {
	const long K = a->k, N = a->n;
	const long KC = pk_kc(K);
	float *bp = (float *)scr;
	for (long k0 = 0; k0 < K; k0 += KC) {
		long kc = K - k0 < KC ? K - k0 : KC;
		for (long j = n0; j < n1; j += PK_NR) {
			long nn = n1 - j < PK_NR ? n1 - j : PK_NR;
			packw_any(a->dtype, a->w, K, j, nn, k0, kc, bp);
			__mmask16 vm[PK_NV];
			for (int v = 0; v < PK_NV; v++) {
				long c = nn - 16 * v;
				vm[v] = c >= 16 ? (__mmask16)0xffff : c <= 0 ? 0 : (__mmask16)((1u << c) - 1);
			}
			for (long i = m0; i < m1; i += PK_MR) {
				int mr = m1 - i < PK_MR ? (int)(m1 - i) : PK_MR;
				const float *as = ap + (i / PK_MR) * K * PK_MR + k0 * PK_MR;
				float *d = a->dst + i * N + j;
				ukr_mr(mr, kc, as, bp, d, N, vm, k0 == 0);
			}
		}
	}
}
#endif

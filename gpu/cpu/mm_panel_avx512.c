/* Prefill matmul on weights packed ahead of time (AVX-512).
 *
 * Panel layout of a bf16 matrix W (n rows of k, nn.Linear layout): outputs
 * in panels of 32; panel p holds, for each k in order, 16 little-endian
 * 32-bit words, word i = W[32p+i][k] | W[32p+16+i][k] << 16 (rows past n are
 * zero). One 64-byte load per k gives all 32 weights of the panel, widened
 * exactly to f32 by two integer operations: the low halves shifted left by 16
 * are outputs 0..15, the high halves masked are outputs 16..31. The panels
 * keep 2 bytes per weight.
 *
 * The microkernel computes up to TR_PANEL_MR rows of x against one panel over
 * the whole of k: per k, one panel load, two widening operations, MR
 * broadcasts of x straight from its rows (no packing of x) and 2*MR FMAs into
 * register accumulators. Each output is one sequential f32 FMA chain over k
 * (the same arithmetic as the per-call packed kernel of mm_avx512.c, so both
 * give bit-identical results). The epilogue stores, adds to dst (a residual
 * connection), or, for a gated pair of panels (gate and up), writes
 * act(gate) * up. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "tr_impl.h"

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define INL static inline __attribute__((always_inline)) T512

#define MR TR_PANEL_MR

/* acc[i][0..1] = x rows [0, R) . panel over k; x rows ldx apart. */
INL void pk_tile(const int R, long K, const float *x, long ldx, const uint32_t *bp, __m512 acc[MR][2]) {
	const __m512i hm = _mm512_set1_epi32((int)0xffff0000u);
	for (int i = 0; i < R; i++) {
		acc[i][0] = _mm512_setzero_ps();
		acc[i][1] = _mm512_setzero_ps();
	}
#pragma GCC unroll 4
	for (long k = 0; k < K; k++) {
		__m512i v = _mm512_loadu_si512(bp + 16 * k);
		__m512 b0 = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
		__m512 b1 = _mm512_castsi512_ps(_mm512_and_si512(v, hm));
		for (int i = 0; i < R; i++) {
			__m512 a = _mm512_set1_ps(x[i * ldx + k]);
			acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
			acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
		}
	}
}

INL void pk_one(const int R, int epi, long K, const float *x, long ldx, const uint32_t *bp, const uint32_t *bp2,
		float *d, long ldd, __mmask16 m0, __mmask16 m1) {
	__m512 acc[MR][2];
	if (epi == TR_EPI_SILU || epi == TR_EPI_GELU) {
		float g[MR * 32] __attribute__((aligned(64)));
		float u[MR * 32] __attribute__((aligned(64)));
		pk_tile(R, K, x, ldx, bp, acc);
		for (int i = 0; i < R; i++) {
			_mm512_store_ps(g + 32 * i, acc[i][0]);
			_mm512_store_ps(g + 32 * i + 16, acc[i][1]);
		}
		pk_tile(R, K, x, ldx, bp2, acc);
		for (int i = 0; i < R; i++) {
			_mm512_store_ps(u + 32 * i, acc[i][0]);
			_mm512_store_ps(u + 32 * i + 16, acc[i][1]);
		}
		/* The activation runs on whole rows of 32 in scratch, then the valid
		 * outputs are copied out (dst may be narrower than the panel). */
		if (epi == TR_EPI_SILU)
			tr_kernels_avx512.silu(g, g, u, (long)R * 32);
		else
			tr_kernels_avx512.gelu(g, g, u, (long)R * 32);
		for (int i = 0; i < R; i++) {
			_mm512_mask_storeu_ps(d + i * ldd, m0, _mm512_load_ps(g + 32 * i));
			_mm512_mask_storeu_ps(d + i * ldd + 16, m1, _mm512_load_ps(g + 32 * i + 16));
		}
		return;
	}
	pk_tile(R, K, x, ldx, bp, acc);
	for (int i = 0; i < R; i++) {
		float *p = d + i * ldd;
		if (epi == TR_EPI_ADD) {
			acc[i][0] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, p), acc[i][0]);
			acc[i][1] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, p + 16), acc[i][1]);
		}
		_mm512_mask_storeu_ps(p, m0, acc[i][0]);
		_mm512_mask_storeu_ps(p + 16, m1, acc[i][1]);
	}
}

static T512 void pk_rows(int r, int epi, long K, const float *x, long ldx, const uint32_t *bp, const uint32_t *bp2,
			 float *d, long ldd, __mmask16 m0, __mmask16 m1) {
	switch (r) {
#define U(n)                                                                                                           \
	case n:                                                                                                        \
		pk_one(n, epi, K, x, ldx, bp, bp2, d, ldd, m0, m1);                                                    \
		break;
		U(1) U(2) U(3) U(4) U(5) U(6) U(7) U(8) U(9) U(10) U(11) U(12)
#undef U
	}
}

/* Transposes the 16x16 matrix of 32-bit elements held in r[0..15] (row t in
 * r[t]); the same network as tr16 in mm_avx512.c. */
INL void pk_tr16(__m512i r[16]) {
	__m512i t[16];
	for (int i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
	}
	for (int i = 0; i < 4; i++) {
		r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	for (int c = 0; c < 4; c++) {
		__m512i u0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44);
		__m512i u1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
		__m512i u2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
		__m512i u3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
		t[c] = _mm512_shuffle_i32x4(u0, u2, 0x88);
		t[4 + c] = _mm512_shuffle_i32x4(u0, u2, 0xDD);
		t[8 + c] = _mm512_shuffle_i32x4(u1, u3, 0x88);
		t[12 + c] = _mm512_shuffle_i32x4(u1, u3, 0xDD);
	}
	for (int i = 0; i < 16; i++)
		r[i] = t[i];
}

/* Panel p of the bf16 matrix w (n rows of k) into dst (k * 16 words): for 16
 * k at a time, word j pairs rows 32p+j and 32p+16+j, then a 16x16 transpose
 * of the words makes them k-major. */
T512 void tr_panel_pack_avx512(uint32_t *dst, const uint16_t *w, long n, long K, long p) {
	for (long k0 = 0; k0 < K; k0 += 16) {
		long kk = K - k0 < 16 ? K - k0 : 16;
		__mmask16 km = (__mmask16)((1u << kk) - 1);
		__m512i r[16];
		for (int j = 0; j < 16; j++) {
			long r0 = 32 * p + j, r1 = r0 + 16;
			__m512i a = r0 < n ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, w + r0 * K + k0))
					   : _mm512_setzero_si512();
			__m512i b = r1 < n ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, w + r1 * K + k0))
					   : _mm512_setzero_si512();
			r[j] = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
		}
		pk_tr16(r);
		for (long t = 0; t < kk; t++)
			_mm512_storeu_si512(dst + (k0 + t) * 16, r[t]);
	}
}

/* dst rows [m0, m1) x panels [p0, p1): for each strip of MR rows, every
 * panel (the strip's x rows stay in L1 while the panels stream from L2). */
T512 void tr_mmq_avx512(const tr_mmq_args *a, long m0, long m1, long p0, long p1) {
	const long K = a->k, N = a->n;
	for (long i = m0; i < m1; i += MR) {
		int r = m1 - i < MR ? (int)(m1 - i) : MR;
		const float *x = a->x + i * a->ldx;
		for (long p = p0; p < p1; p++) {
			long nn = N - 32 * p;
			__mmask16 mk0 = nn >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nn) - 1);
			__mmask16 mk1 = nn >= 32 ? (__mmask16)0xffff : nn <= 16 ? 0 : (__mmask16)((1u << (nn - 16)) - 1);
			const uint32_t *bp = (const uint32_t *)a->w + p * K * 16;
			const uint32_t *bp2 = a->w2 ? (const uint32_t *)a->w2 + p * K * 16 : NULL;
			pk_rows(r, a->epi, K, x, a->ldx, bp, bp2, a->dst + i * a->ldd + 32 * p, a->ldd, mk0, mk1);
		}
	}
}
#endif

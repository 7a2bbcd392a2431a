/* Quantized-weight kernels on 256-bit integer vectors, included by
 * q_avx2.c (AVX2: vpmaddubsw + vpmaddwd) and q_avx512.c (AVX-512 VNNI on
 * 256-bit vectors: vpdpbusd, and AVX512BW masks). The including file
 * defines:
 *   QFN(x)  x with the set's suffix
 *   QTGT    the target attribute
 *   QVNNI   1 to use vpdpbusd and the AVX512BW mask moves
 *
 * The arithmetic is gpu/ref.QuantMatMul's (see q_portable.c): every weight
 * quant is brought into a vector of unsigned bytes as stored (nibbles, 5th
 * and 6th bits or'ed in), multiplied with the signed activation quants and
 * summed four at a time into int32 lanes (u8 x s8: exact, the largest sum
 * of a pair, 63*127*2, fits vpmaddubsw's int16); offsets (-8, -16, -4, -32)
 * and minimums come from the activation sums in integer arithmetic; per 16
 * or 32 elements the int32 lanes are multiplied by the sub-block scale; per
 * block the int32 sums are converted once and scaled in float. Each call
 * dots one weight row with up to 4 rows of activations, unpacking each
 * weight vector once for all of them. */
#include <immintrin.h>
#include <string.h>

#include "tr_impl.h"

#define QI static inline __attribute__((always_inline)) QTGT
#define QF static QTGT

QI __m256i LDU(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
QI float F16(const uint8_t *p) {
	uint16_t h;
	memcpy(&h, p, 2);
	return _cvtsh_ss(h);
}
QI float HSUMF(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}
QI int32_t HSUMI(__m256i v) {
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return _mm_cvtsi128_si32(s);
}

/* acc + the sums of each 4 consecutive products u[i] * s[i] (u unsigned,
 * s signed bytes) in 8 int32 lanes. */
QI __m256i DOT(__m256i acc, __m256i u, __m256i s) {
#if QVNNI
	return _mm256_dpbusd_epi32(acc, u, s);
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
QI __m256i DOT0(__m256i u, __m256i s) { return DOT(_mm256_setzero_si256(), u, s); }

QI __m256i SRL16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }
QI __m256i B8(int v) { return _mm256_set1_epi8((char)v); }

/* 16 bytes of nibbles: the low nibbles as elements 0-15, the high ones as
 * 16-31. */
QI __m256i NIB32(const uint8_t *qs) {
#if QVNNI
	/* both halves from one broadcast load, the upper shifted by 4 */
	__m256i t = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
	t = _mm256_srlv_epi16(t, _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4));
	return _mm256_and_si256(t, B8(15));
#else
	__m128i t = _mm_loadu_si128((const __m128i *)qs);
	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), B8(15));
#endif
}

/* 0x10 in the bytes i whose bit i of qh is set. */
QI __m256i HB32(uint32_t qh) {
#if QVNNI
	return _mm256_maskz_mov_epi8((__mmask32)qh, B8(0x10));
#else
	__m256i v = _mm256_set1_epi32((int)qh);
	const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
					      3, 3, 3, 3, 3, 3, 3);
	v = _mm256_shuffle_epi8(v, shuf);
	const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
	return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), B8(0x10));
#endif
}

/* ---- activations ---- */

/* Quants of 32 floats at x times id, round to nearest even, as 32 bytes in
 * order; *sum receives their sum. */
QI __m256i Q32(const float *x, __m256 id, int32_t *sum) {
	__m256i i[4];
	for (int t = 0; t < 4; t++) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * t), id);
		v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127)), _mm256_set1_ps(127));
		i[t] = _mm256_cvtps_epi32(v);
	}
	sum[0] = HSUMI(_mm256_add_epi32(i[0], i[1]));
	sum[1] = HSUMI(_mm256_add_epi32(i[2], i[3]));
	__m256i a = _mm256_packs_epi32(i[0], i[1]), b = _mm256_packs_epi32(i[2], i[3]);
	__m256i q = _mm256_packs_epi16(a, b);
	return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

QI float AMAX(const float *x, long n) {
	const __m256 sgn = _mm256_set1_ps(-0.0f);
	__m256 m = _mm256_setzero_ps();
	for (long i = 0; i < n; i += 8)
		m = _mm256_max_ps(m, _mm256_andnot_ps(sgn, _mm256_loadu_ps(x + i)));
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

QF void QFN(quant32)(const float *x, tr_qa32 *dst, long n) {
	for (long b = 0; b < n / 32; b++) {
		const float *xb = x + b * 32;
		float amax = AMAX(xb, 32);
		float id = amax != 0 ? 127.0f / amax : 0.0f;
		int32_t s[2];
		_mm256_storeu_si256((__m256i *)dst[b].q, Q32(xb, _mm256_set1_ps(id), s));
		dst[b].d = amax / 127;
		dst[b].sum = s[0] + s[1];
	}
}

QF void QFN(quantk)(const float *x, tr_qak *dst, long n) {
	for (long b = 0; b < n / 256; b++) {
		const float *xb = x + b * 256;
		float amax = AMAX(xb, 256);
		__m256 id = _mm256_set1_ps(amax != 0 ? 127.0f / amax : 0.0f);
		for (int g = 0; g < 8; g++) {
			int32_t s[2];
			_mm256_storeu_si256((__m256i *)(dst[b].q + 32 * g), Q32(xb + 32 * g, id, s));
			dst[b].bsums[2 * g] = (int16_t)s[0];
			dst[b].bsums[2 * g + 1] = (int16_t)s[1];
		}
		dst[b].d = amax / 127;
	}
}

/* ---- blocks of 32 ---- */

#define XA32(r, b) ((const tr_qa32 *)(xq + (r) * xs) + (b))
#define XAK(r, b) ((const tr_qak *)(xq + (r) * xs) + (b))

QI void b_q8_0(const int NX, const uint8_t *wb, const uint8_t *xq, long xs, long b, __m256 *acc) {
	const __m256i q = LDU(wb + 2);
	const __m256i u = _mm256_sign_epi8(q, q); /* |q| (-128 gives 0x80: 128 unsigned) */
	const __m256 dw = _mm256_set1_ps(F16(wb));
	for (int r = 0; r < NX; r++) {
		const tr_qa32 *a = XA32(r, b);
		__m256i p = DOT0(u, _mm256_sign_epi8(LDU(a->q), q));
		/* the activation scale broadcast straight from memory */
		const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(&a->d));
		acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[r]);
	}
}

/* Two accumulators per row (even and odd blocks), so that consecutive
 * blocks do not wait on one FMA chain. */
QI void d_q8_0(const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	__m256 acc[4], acc2[4];
	for (int r = 0; r < NX; r++)
		acc[r] = acc2[r] = _mm256_setzero_ps();
	long b = 0;
	for (; b + 2 <= nb; b += 2) {
		b_q8_0(NX, w + b * 34, xq, xs, b, acc);
		b_q8_0(NX, w + (b + 1) * 34, xq, xs, b + 1, acc2);
	}
	if (b < nb)
		b_q8_0(NX, w + b * 34, xq, xs, b, acc);
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(_mm256_add_ps(acc[r], acc2[r]));
}

/* Q4_0, Q4_1, Q5_0, Q5_1: DT a constant. */
QI void b_q32(const int DT, const int NX, const uint8_t *wb, const uint8_t *xq, long xs, long b, __m256 *acc,
	      float *accm) {
	const int OFF = DT == TR_Q4_0 ? 8 : DT == TR_Q5_0 ? 16 : 0;
	const int MIN = DT == TR_Q4_1 || DT == TR_Q5_1;
	const __m256 dw = _mm256_set1_ps(F16(wb));
	__m256i u;
	if (DT == TR_Q4_0)
		u = NIB32(wb + 2);
	else if (DT == TR_Q4_1)
		u = NIB32(wb + 4);
	else {
		uint32_t qh;
		memcpy(&qh, wb + (DT == TR_Q5_0 ? 2 : 4), 4);
		u = _mm256_or_si256(NIB32(wb + (DT == TR_Q5_0 ? 6 : 8)), HB32(qh));
	}
	const float mw = MIN ? F16(wb + 2) : 0;
	for (int r = 0; r < NX; r++) {
		const tr_qa32 *a = XA32(r, b);
		/* the offset times the activations' sum, as the accumulator's start */
		const __m256i c0 = OFF ? _mm256_setr_epi32(-OFF * a->sum, 0, 0, 0, 0, 0, 0, 0) : _mm256_setzero_si256();
		__m256i p = DOT(c0, u, LDU(a->q));
		const __m256 s = _mm256_mul_ps(dw, _mm256_broadcast_ss(&a->d));
		acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc[r]);
		if (MIN)
			accm[r] += mw * a->d * (float)a->sum;
	}
}

QI void d_q32(const int DT, const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	const long BB = DT == TR_Q4_0 ? 18 : DT == TR_Q4_1 ? 20 : DT == TR_Q5_0 ? 22 : 24;
	__m256 acc[4], acc2[4];
	float accm[4], accm2[4];
	for (int r = 0; r < NX; r++) {
		acc[r] = acc2[r] = _mm256_setzero_ps();
		accm[r] = accm2[r] = 0;
	}
	long b = 0;
	for (; b + 2 <= nb; b += 2) {
		b_q32(DT, NX, w + b * BB, xq, xs, b, acc, accm);
		b_q32(DT, NX, w + (b + 1) * BB, xq, xs, b + 1, acc2, accm2);
	}
	if (b < nb)
		b_q32(DT, NX, w + b * BB, xq, xs, b, acc, accm);
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(_mm256_add_ps(acc[r], acc2[r])) + (accm[r] + accm2[r]);
}

/* ---- K types (super-blocks of 256) ---- */

/* The 8 6-bit scales and minimums of a Q4_K/Q5_K block (12 bytes at s), as
 * 8 int32 lanes each, from 32-bit words: scale j < 4 is the low six bits of
 * byte j, minimum j of byte j+4; for j >= 4 the low four bits come from byte
 * j+4 (scale: low nibble, minimum: high) and the top two from bits 6-7 of
 * bytes j-4 (scale) and j (minimum). */
QI void kscales(const uint8_t *s, __m256i *sc, __m256i *mn) {
	uint32_t u0, u1, u2;
	memcpy(&u0, s, 4);
	memcpy(&u1, s + 4, 4);
	memcpy(&u2, s + 8, 4);
	const uint32_t sc_lo = u0 & 0x3f3f3f3f, mn_lo = u1 & 0x3f3f3f3f;
	const uint32_t sc_hi = (u2 & 0x0f0f0f0f) | ((u0 >> 6) & 0x03030303) << 4;
	const uint32_t mn_hi = ((u2 >> 4) & 0x0f0f0f0f) | ((u1 >> 6) & 0x03030303) << 4;
	*sc = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)((uint64_t)sc_hi << 32 | sc_lo)));
	*mn = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)((uint64_t)mn_hi << 32 | mn_lo)));
}

/* Lane i of v in every lane. */
QI __m256i LANE(__m256i v, int i) { return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(i)); }
/* Lanes 0-3: lane i of v, 4-7: lane i+1. */
QI __m256i LANE2(__m256i v, int i) {
	return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(i, i, i, i, i + 1, i + 1, i + 1, i + 1));
}

/* Lanes 0-3 a, 4-7 b. */
QI __m256i SC2(int a, int b) { return _mm256_set_m128i(_mm_set1_epi32(b), _mm_set1_epi32(a)); }

/* The unsigned quants of the K types, 32 at a time in element order (the
 * one-row kernels and the lane layout's unpacking share them). */

/* Q4_K/Q5_K: elements 64c..64c+31 into lo, 64c+32..64c+63 into hi (qs the
 * block's 4-bit quants, qhv its fifth bits, Q5_K only). */
QI void K45U(const int DT, const uint8_t *qs, __m256i qhv, int c, __m256i *lo, __m256i *hi) {
	const __m256i wq = LDU(qs + 32 * c);
	*lo = _mm256_and_si256(wq, B8(15));
	*hi = _mm256_and_si256(_mm256_srli_epi16(wq, 4), B8(15));
	if (DT == TR_Q5_K) {
		*lo = _mm256_or_si256(*lo, _mm256_slli_epi16(_mm256_and_si256(SRL16(qhv, 2 * c), B8(1)), 4));
		*hi = _mm256_or_si256(*hi, _mm256_slli_epi16(_mm256_and_si256(SRL16(qhv, 2 * c + 1), B8(1)), 4));
	}
}

/* Q6_K: elements 128h+32j..+31 (q1, q2 the half's two vectors of low
 * bits, hv its high bits). */
QI __m256i Q6U(__m256i q1, __m256i q2, __m256i hv, int j) {
	__m256i lo = j == 0 ? q1 : j == 1 ? q2 : j == 2 ? _mm256_srli_epi16(q1, 4) : _mm256_srli_epi16(q2, 4);
	lo = _mm256_and_si256(lo, B8(15));
	return _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(SRL16(hv, 2 * j), B8(3)), 4));
}

/* Q2_K, Q3_K: elements 128h+32j..+31 (qv the half's 2-bit quants, hv the
 * block's high bits, Q3_K only). */
QI __m256i Q23U(const int DT, __m256i qv, __m256i hv, int h, int j) {
	__m256i u = _mm256_and_si256(SRL16(qv, 2 * j), B8(3));
	if (DT == TR_Q3_K)
		u = _mm256_or_si256(u, _mm256_slli_epi16(_mm256_and_si256(SRL16(hv, 4 * h + j), B8(1)), 2));
	return u;
}

/* The 16 signed 6-bit scales of a Q3_K block (s its 12 scale bytes). */
QI void Q3SC(const uint8_t *s, int *sc) {
	for (int i = 0; i < 16; i++) {
		int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
		int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
		sc[i] = (low | high << 4) - 32;
	}
}

QI void d_q45k(const int DT, const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	const long BB = DT == TR_Q4_K ? 144 : 176;
	__m256 acc[4], accm[4];
	for (int r = 0; r < NX; r++)
		acc[r] = accm[r] = _mm256_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * BB;
		const float d = F16(wb), dmin = F16(wb + 2);
		__m256i sc, mins;
		kscales(wb + 4, &sc, &mins);
		const uint8_t *qs = wb + (DT == TR_Q4_K ? 16 : 48);
		__m256i qhv = _mm256_setzero_si256();
		if (DT == TR_Q5_K)
			qhv = LDU(wb + 16);
		__m256i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm256_setzero_si256();
		for (int c = 0; c < 4; c++) {
			__m256i lo, hi;
			K45U(DT, qs, qhv, c, &lo, &hi);
			const __m256i sl = LANE(sc, 2 * c), sh = LANE(sc, 2 * c + 1);
			for (int r = 0; r < NX; r++) {
				const int8_t *xa = XAK(r, b)->q + 64 * c;
				__m256i p0 = DOT0(lo, LDU(xa)), p1 = DOT0(hi, LDU(xa + 32));
				is[r] = _mm256_add_epi32(is[r],
							 _mm256_add_epi32(_mm256_mullo_epi32(p0, sl), _mm256_mullo_epi32(p1, sh)));
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_set1_ps(d * a->d), acc[r]);
			/* per-32 sums of the activations times the minimums */
			__m256i m = _mm256_mullo_epi32(_mm256_madd_epi16(LDU(a->bsums), _mm256_set1_epi16(1)), mins);
			accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin * a->d), accm[r]);
		}
	}
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(acc[r]) - HSUMF(accm[r]);
}

QI void d_q6k(const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	__m256 acc[4];
	for (int r = 0; r < NX; r++)
		acc[r] = _mm256_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * 210;
		const uint8_t *ql = wb, *qh = wb + 128;
		const int8_t *scales = (const int8_t *)(wb + 192);
		const float d = F16(wb + 208);
		const __m128i s8 = _mm_loadu_si128((const __m128i *)scales);
		const __m256i sc16 = _mm256_cvtepi8_epi16(s8);
		const __m256i sc32[2] = {_mm256_cvtepi8_epi32(s8), _mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))};
		__m256i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm256_setzero_si256();
		for (int h = 0; h < 2; h++) {
			const __m256i q1 = LDU(ql + 64 * h), q2 = LDU(ql + 64 * h + 32), hv = LDU(qh + 32 * h);
			for (int j = 0; j < 4; j++) {
				const __m256i u = Q6U(q1, q2, hv, j);
				const __m256i sv = LANE2(sc32[h], 2 * j);
				for (int r = 0; r < NX; r++) {
					__m256i p = DOT0(u, LDU(XAK(r, b)->q + 128 * h + 32 * j));
					is[r] = _mm256_add_epi32(is[r], _mm256_mullo_epi32(p, sv));
				}
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			__m256i off = _mm256_madd_epi16(LDU(a->bsums), sc16);
			__m256i s = _mm256_sub_epi32(is[r], _mm256_slli_epi32(off, 5));
			acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * a->d), acc[r]);
		}
	}
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(acc[r]);
}

QI void d_q2k(const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	__m256 acc[4], accm[4];
	for (int r = 0; r < NX; r++)
		acc[r] = accm[r] = _mm256_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * 84;
		const uint8_t *scales = wb, *qs = wb + 16;
		const float d = F16(wb + 80), dmin = F16(wb + 82);
		const __m128i s8 = _mm_loadu_si128((const __m128i *)scales);
		const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(15)));
		__m256i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm256_setzero_si256();
		for (int h = 0; h < 2; h++) {
			const __m256i qv = LDU(qs + 32 * h);
			for (int j = 0; j < 4; j++) {
				const __m256i u = Q23U(TR_Q2_K, qv, qv, h, j);
				const __m256i sv = SC2(scales[8 * h + 2 * j] & 15, scales[8 * h + 2 * j + 1] & 15);
				for (int r = 0; r < NX; r++) {
					__m256i p = DOT0(u, LDU(XAK(r, b)->q + 128 * h + 32 * j));
					is[r] = _mm256_add_epi32(is[r], _mm256_mullo_epi32(p, sv));
				}
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[r]), _mm256_set1_ps(d * a->d), acc[r]);
			__m256i m = _mm256_madd_epi16(LDU(a->bsums), mins);
			accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(dmin * a->d), accm[r]);
		}
	}
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(acc[r]) - HSUMF(accm[r]);
}

QI void d_q3k(const int NX, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	__m256 acc[4];
	for (int r = 0; r < NX; r++)
		acc[r] = _mm256_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *wb = w + b * 110;
		const uint8_t *hm = wb, *qs = wb + 32, *s = wb + 96;
		const float d = F16(wb + 108);
		int sci[16];
		int16_t sc[16];
		Q3SC(s, sci);
		for (int i = 0; i < 16; i++)
			sc[i] = (int16_t)sci[i];
		const __m256i sc16 = LDU(sc);
		const __m256i hv = LDU(hm);
		__m256i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm256_setzero_si256();
		for (int h = 0; h < 2; h++) {
			const __m256i qv = LDU(qs + 32 * h);
			for (int j = 0; j < 4; j++) {
				const __m256i u = Q23U(TR_Q3_K, qv, hv, h, j);
				const __m256i sv = SC2(sc[8 * h + 2 * j], sc[8 * h + 2 * j + 1]);
				for (int r = 0; r < NX; r++) {
					__m256i p = DOT0(u, LDU(XAK(r, b)->q + 128 * h + 32 * j));
					is[r] = _mm256_add_epi32(is[r], _mm256_mullo_epi32(p, sv));
				}
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			__m256i off = _mm256_madd_epi16(LDU(a->bsums), sc16);
			__m256i t = _mm256_sub_epi32(is[r], _mm256_slli_epi32(off, 2));
			acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(d * a->d), acc[r]);
		}
	}
	for (int r = 0; r < NX; r++)
		out[r] = HSUMF(acc[r]);
}

/* ---- entry points: nx dispatched to the inlined kernels ---- */

#define QSWITCH(call)                                                                                                  \
	switch (nx) {                                                                                                  \
	case 1: call(1); break;                                                                                        \
	case 2: call(2); break;                                                                                        \
	case 3: call(3); break;                                                                                        \
	default: call(4); break;                                                                                       \
	}

#define C_Q8_0(N) d_q8_0(N, w, xq, xs, nb, out)
#define C_Q4_0(N) d_q32(TR_Q4_0, N, w, xq, xs, nb, out)
#define C_Q4_1(N) d_q32(TR_Q4_1, N, w, xq, xs, nb, out)
#define C_Q5_0(N) d_q32(TR_Q5_0, N, w, xq, xs, nb, out)
#define C_Q5_1(N) d_q32(TR_Q5_1, N, w, xq, xs, nb, out)
#define C_Q2_K(N) d_q2k(N, w, xq, xs, nb, out)
#define C_Q3_K(N) d_q3k(N, w, xq, xs, nb, out)
#define C_Q4_K(N) d_q45k(TR_Q4_K, N, w, xq, xs, nb, out)
#define C_Q5_K(N) d_q45k(TR_Q5_K, N, w, xq, xs, nb, out)
#define C_Q6_K(N) d_q6k(N, w, xq, xs, nb, out)

#define QENTRY(T)                                                                                                      \
	QF void QFN(dot_##T)(int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {            \
		QSWITCH(C_##T)                                                                                         \
	}
QENTRY(Q8_0)
QENTRY(Q4_0)
QENTRY(Q4_1)
QENTRY(Q5_0)
QENTRY(Q5_1)
QENTRY(Q2_K)
QENTRY(Q3_K)
QENTRY(Q4_K)
QENTRY(Q5_K)
QENTRY(Q6_K)

#define QTABLE_FIELDS(NAME)                                                                                            \
	.name = NAME, .quant32 = QFN(quant32), .quantk = QFN(quantk),                                                  \
	.dot = {                                                                                                       \
		[TR_Q8_0] = QFN(dot_Q8_0),                                                                             \
		[TR_Q4_0] = QFN(dot_Q4_0),                                                                             \
		[TR_Q4_1] = QFN(dot_Q4_1),                                                                             \
		[TR_Q5_0] = QFN(dot_Q5_0),                                                                             \
		[TR_Q5_1] = QFN(dot_Q5_1),                                                                             \
		[TR_Q2_K] = QFN(dot_Q2_K),                                                                             \
		[TR_Q3_K] = QFN(dot_Q3_K),                                                                             \
		[TR_Q4_K] = QFN(dot_Q4_K),                                                                             \
		[TR_Q5_K] = QFN(dot_Q5_K),                                                                             \
		[TR_Q6_K] = QFN(dot_Q6_K),                                                                             \
	}
#define QTABLE(NAME) {QTABLE_FIELDS(NAME)}

/* Quantized-weight kernels for the avx512bf16 set: q_impl.h with AVX-512
 * VNNI (vpdpbusd) on 256-bit vectors, chosen at run time when the CPU has
 * avx512vnni (pool.c), and, for the types with blocks of 32, kernels that
 * dot two weight rows at once in 512-bit vectors: the two rows' blocks side
 * by side, each row of x broadcast to both halves, so that every vector
 * instruction per row of x serves two outputs. */
#if defined(__x86_64__)
#define QFN(x) x##_qavx512
#define QTGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define QVNNI 1
#include "q_impl.h"

/* 32 bytes at a in the low half, at b in the high half. */
QI __m512i PAIR256(const uint8_t *a, const uint8_t *b) {
	return _mm512_inserti64x4(_mm512_castsi256_si512(LDU(a)), LDU(b), 1);
}
/* a in lanes 0-7, b in lanes 8-15. */
QI __m512 PAIRF(float a, float b) { return _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(a), _mm512_set1_ps(b)); }
QI float HSUMLO(__m512 v) { return HSUMF(_mm512_castps512_ps256(v)); }
QI float HSUMHI(__m512 v) { return HSUMF(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))); }

/* Q8_0: |w| and x with w's sign, both rows' blocks in one vector. */
QI void b2_q8_0(const int NX, const uint8_t *b0, const uint8_t *b1, const uint8_t *xq, long xs, long b, __m512 *acc) {
	const __m512i q = PAIR256(b0 + 2, b1 + 2);
	const __m512i u = _mm512_abs_epi8(q);
	const __mmask64 neg = _mm512_movepi8_mask(q);
	const __m512 dw = PAIRF(F16(b0), F16(b1));
	for (int r = 0; r < NX; r++) {
		const tr_qa32 *a = XA32(r, b);
		__m512i x = _mm512_broadcast_i64x4(LDU(a->q));
		x = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
		__m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, x);
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[r]);
	}
}

/* The 32 nibbles of each of two blocks of 16 bytes: [q0 low, q0 high, q1
 * low, q1 high] by 128-bit lane. */
QI __m512i NIB64(const uint8_t *q0, const uint8_t *q1) {
	__m512i t = _mm512_inserti64x4(
		_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q0))),
		_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)q1)), 1);
	const __m512i sh = _mm512_set_epi64(0x0004000400040004LL, 0x0004000400040004LL, 0, 0, 0x0004000400040004LL,
					    0x0004000400040004LL, 0, 0);
	return _mm512_and_si512(_mm512_srlv_epi16(t, sh), _mm512_set1_epi8(15));
}

/* Q4_0, Q4_1, Q5_0, Q5_1 (DT a constant): unsigned quants, the offset
 * times the activation sum starts each half's accumulator. */
QI void b2_q32(const int DT, const int NX, const uint8_t *b0, const uint8_t *b1, const uint8_t *xq, long xs, long b,
	       __m512 *acc, float *accm0, float *accm1) {
	const int OFF = DT == TR_Q4_0 ? 8 : DT == TR_Q5_0 ? 16 : 0;
	const int MIN = DT == TR_Q4_1 || DT == TR_Q5_1;
	const __m512 dw = PAIRF(F16(b0), F16(b1));
	__m512i u;
	if (DT == TR_Q4_0)
		u = NIB64(b0 + 2, b1 + 2);
	else if (DT == TR_Q4_1)
		u = NIB64(b0 + 4, b1 + 4);
	else {
		const int qo = DT == TR_Q5_0 ? 2 : 4;
		uint32_t h0, h1;
		memcpy(&h0, b0 + qo, 4);
		memcpy(&h1, b1 + qo, 4);
		u = _mm512_or_si512(NIB64(b0 + qo + 4, b1 + qo + 4),
				    _mm512_maskz_mov_epi8((__mmask64)((uint64_t)h1 << 32 | h0), _mm512_set1_epi8(0x10)));
	}
	const float m0 = MIN ? F16(b0 + 2) : 0, m1 = MIN ? F16(b1 + 2) : 0;
	for (int r = 0; r < NX; r++) {
		const tr_qa32 *a = XA32(r, b);
		const __m512i c0 = OFF ? _mm512_maskz_set1_epi32(0x0101, -OFF * a->sum) : _mm512_setzero_si512();
		__m512i p = _mm512_dpbusd_epi32(c0, u, _mm512_broadcast_i64x4(LDU(a->q)));
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_set1_ps(a->d)), acc[r]);
		if (MIN) {
			accm0[r] += m0 * a->d * (float)a->sum;
			accm1[r] += m1 * a->d * (float)a->sum;
		}
	}
}

/* Two accumulators per row of x (even and odd blocks). */
QI void d2_q32(const int DT, const int NX, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb,
	       float *o0, float *o1) {
	const long BB = DT == TR_Q8_0 ? 34 : DT == TR_Q4_0 ? 18 : DT == TR_Q4_1 ? 20 : DT == TR_Q5_0 ? 22 : 24;
	__m512 acc[4], acc2[4];
	float m0[4] = {0, 0, 0, 0}, m1[4] = {0, 0, 0, 0};
	for (int r = 0; r < NX; r++)
		acc[r] = acc2[r] = _mm512_setzero_ps();
	long b = 0;
	for (; b + 2 <= nb; b += 2) {
		if (DT == TR_Q8_0) {
			b2_q8_0(NX, w0 + b * BB, w1 + b * BB, xq, xs, b, acc);
			b2_q8_0(NX, w0 + (b + 1) * BB, w1 + (b + 1) * BB, xq, xs, b + 1, acc2);
		} else {
			b2_q32(DT, NX, w0 + b * BB, w1 + b * BB, xq, xs, b, acc, m0, m1);
			b2_q32(DT, NX, w0 + (b + 1) * BB, w1 + (b + 1) * BB, xq, xs, b + 1, acc2, m0, m1);
		}
	}
	if (b < nb) {
		if (DT == TR_Q8_0)
			b2_q8_0(NX, w0 + b * BB, w1 + b * BB, xq, xs, b, acc);
		else
			b2_q32(DT, NX, w0 + b * BB, w1 + b * BB, xq, xs, b, acc, m0, m1);
	}
	for (int r = 0; r < NX; r++) {
		__m512 t = _mm512_add_ps(acc[r], acc2[r]);
		o0[r] = HSUMLO(t) + m0[r];
		o1[r] = HSUMHI(t) + m1[r];
	}
}

#define C2(DT, N) d2_q32(DT, N, w0, w1, xq, xs, nb, out0, out1)
#define Q2ENTRY(T)                                                                                                     \
	QF void dot2_##T##_qavx512(int nx, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb, \
				   float *out0, float *out1) {                                                         \
		switch (nx) {                                                                                          \
		case 1: C2(TR_##T, 1); break;                                                                          \
		case 2: C2(TR_##T, 2); break;                                                                          \
		case 3: C2(TR_##T, 3); break;                                                                          \
		default: C2(TR_##T, 4); break;                                                                         \
		}                                                                                                      \
	}
Q2ENTRY(Q8_0)
Q2ENTRY(Q4_0)
Q2ENTRY(Q4_1)
Q2ENTRY(Q5_0)
Q2ENTRY(Q5_1)

const tr_qkernels tr_qk_avx512 = {
	QTABLE_FIELDS("avx512vnni"),
	.dot2 =
		{
			[TR_Q8_0] = dot2_Q8_0_qavx512,
			[TR_Q4_0] = dot2_Q4_0_qavx512,
			[TR_Q4_1] = dot2_Q4_1_qavx512,
			[TR_Q5_0] = dot2_Q5_0_qavx512,
			[TR_Q5_1] = dot2_Q5_1_qavx512,
		},
};
#endif

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

/* ---- K types, two rows ---- */

/* Lane i of each 256-bit half of v (a vector of two rows' 8 int32 each) in
 * all lanes of that half. */
QI __m512i LANEP(__m512i v, int i) {
	return _mm512_permutexvar_epi32(_mm512_mask_blend_epi32(0xFF00, _mm512_set1_epi32(i), _mm512_set1_epi32(8 + i)),
					v);
}
/* Lanes 0-3 of each half: lane i of that half, lanes 4-7: lane i+1. */
QI __m512i LANE2P(__m512i v, int i) {
	const __m512i lo = _mm512_mask_blend_epi32(0xF0F0, _mm512_set1_epi32(i), _mm512_set1_epi32(i + 1));
	return _mm512_permutexvar_epi32(_mm512_mask_blend_epi32(0xFF00, lo, _mm512_add_epi32(lo, _mm512_set1_epi32(8))),
					v);
}
QI __m512i JOIN(__m256i a, __m256i b) { return _mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1); }
QI __m512i BX(const void *p) { return _mm512_broadcast_i64x4(LDU(p)); }

QI void d2_q45k(const int DT, const int NX, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb,
		float *o0, float *o1) {
	const long BB = DT == TR_Q4_K ? 144 : 176;
	__m512 acc[4], accm[4];
	for (int r = 0; r < NX; r++)
		acc[r] = accm[r] = _mm512_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *b0 = w0 + b * BB, *b1 = w1 + b * BB;
		const __m512 d = PAIRF(F16(b0), F16(b1)), dmin = PAIRF(F16(b0 + 2), F16(b1 + 2));
		__m256i sc0, mn0, sc1, mn1;
		kscales(b0 + 4, &sc0, &mn0);
		kscales(b1 + 4, &sc1, &mn1);
		const __m512i sc = JOIN(sc0, sc1), mins = JOIN(mn0, mn1);
		const long qo = DT == TR_Q4_K ? 16 : 48;
		__m512i qhv = _mm512_setzero_si512();
		if (DT == TR_Q5_K)
			qhv = PAIR256(b0 + 16, b1 + 16);
		__m512i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm512_setzero_si512();
		for (int c = 0; c < 4; c++) {
			const __m512i wq = PAIR256(b0 + qo + 32 * c, b1 + qo + 32 * c);
			__m512i lo = _mm512_and_si512(wq, _mm512_set1_epi8(15));
			__m512i hi = _mm512_and_si512(_mm512_srli_epi16(wq, 4), _mm512_set1_epi8(15));
			if (DT == TR_Q5_K) {
				const __m512i one = _mm512_set1_epi8(1);
				lo = _mm512_or_si512(
					lo, _mm512_slli_epi16(
						    _mm512_and_si512(_mm512_srl_epi16(qhv, _mm_cvtsi32_si128(2 * c)), one), 4));
				hi = _mm512_or_si512(
					hi, _mm512_slli_epi16(
						    _mm512_and_si512(_mm512_srl_epi16(qhv, _mm_cvtsi32_si128(2 * c + 1)), one),
						    4));
			}
			const __m512i sl = LANEP(sc, 2 * c), sh = LANEP(sc, 2 * c + 1);
			for (int r = 0; r < NX; r++) {
				const int8_t *xa = XAK(r, b)->q + 64 * c;
				__m512i p0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, BX(xa));
				__m512i p1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), hi, BX(xa + 32));
				is[r] = _mm512_add_epi32(is[r], _mm512_add_epi32(_mm512_mullo_epi32(p0, sl),
										 _mm512_mullo_epi32(p1, sh)));
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			const __m512 da = _mm512_set1_ps(a->d);
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[r]), _mm512_mul_ps(d, da), acc[r]);
			__m512i m = _mm512_mullo_epi32(_mm512_madd_epi16(BX(a->bsums), _mm512_set1_epi16(1)), mins);
			accm[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, da), accm[r]);
		}
	}
	for (int r = 0; r < NX; r++) {
		o0[r] = HSUMLO(acc[r]) - HSUMLO(accm[r]);
		o1[r] = HSUMHI(acc[r]) - HSUMHI(accm[r]);
	}
}

QI void d2_q6k(const int NX, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb, float *o0,
	       float *o1) {
	__m512 acc[4];
	for (int r = 0; r < NX; r++)
		acc[r] = _mm512_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *b0 = w0 + b * 210, *b1 = w1 + b * 210;
		const __m512 d = PAIRF(F16(b0 + 208), F16(b1 + 208));
		const __m128i s0 = _mm_loadu_si128((const __m128i *)(b0 + 192));
		const __m128i s1 = _mm_loadu_si128((const __m128i *)(b1 + 192));
		const __m512i sc16 = JOIN(_mm256_cvtepi8_epi16(s0), _mm256_cvtepi8_epi16(s1));
		const __m512i sc32[2] = {
			JOIN(_mm256_cvtepi8_epi32(s0), _mm256_cvtepi8_epi32(s1)),
			JOIN(_mm256_cvtepi8_epi32(_mm_srli_si128(s0, 8)), _mm256_cvtepi8_epi32(_mm_srli_si128(s1, 8))),
		};
		__m512i is[4];
		for (int r = 0; r < NX; r++)
			is[r] = _mm512_setzero_si512();
		for (int h = 0; h < 2; h++) {
			const __m512i q1 = PAIR256(b0 + 64 * h, b1 + 64 * h);
			const __m512i q2 = PAIR256(b0 + 64 * h + 32, b1 + 64 * h + 32);
			const __m512i hv = PAIR256(b0 + 128 + 32 * h, b1 + 128 + 32 * h);
			for (int j = 0; j < 4; j++) {
				__m512i lo = j == 0   ? q1
					     : j == 1 ? q2
					     : j == 2 ? _mm512_srli_epi16(q1, 4)
						      : _mm512_srli_epi16(q2, 4);
				lo = _mm512_and_si512(lo, _mm512_set1_epi8(15));
				const __m512i hb = _mm512_slli_epi16(
					_mm512_and_si512(_mm512_srl_epi16(hv, _mm_cvtsi32_si128(2 * j)), _mm512_set1_epi8(3)), 4);
				const __m512i u = _mm512_or_si512(lo, hb);
				const __m512i sv = LANE2P(sc32[h], 2 * j);
				for (int r = 0; r < NX; r++) {
					__m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u,
									BX(XAK(r, b)->q + 128 * h + 32 * j));
					is[r] = _mm512_add_epi32(is[r], _mm512_mullo_epi32(p, sv));
				}
			}
		}
		for (int r = 0; r < NX; r++) {
			const tr_qak *a = XAK(r, b);
			__m512i off = _mm512_madd_epi16(BX(a->bsums), sc16);
			__m512i t = _mm512_sub_epi32(is[r], _mm512_slli_epi32(off, 5));
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(d, _mm512_set1_ps(a->d)), acc[r]);
		}
	}
	for (int r = 0; r < NX; r++) {
		o0[r] = HSUMLO(acc[r]);
		o1[r] = HSUMHI(acc[r]);
	}
}

#define C2K(DT, N) d2_q45k(DT, N, w0, w1, xq, xs, nb, out0, out1)
#define C26(DT, N) d2_q6k(N, w0, w1, xq, xs, nb, out0, out1)
#define Q2KENTRY(T, CALL)                                                                                              \
	QF void dot2_##T##_qavx512(int nx, const uint8_t *w0, const uint8_t *w1, const uint8_t *xq, long xs, long nb, \
				   float *out0, float *out1) {                                                         \
		switch (nx) {                                                                                          \
		case 1: CALL(TR_##T, 1); break;                                                                        \
		case 2: CALL(TR_##T, 2); break;                                                                        \
		case 3: CALL(TR_##T, 3); break;                                                                        \
		default: CALL(TR_##T, 4); break;                                                                       \
		}                                                                                                      \
	}
Q2KENTRY(Q4_K, C2K)
Q2KENTRY(Q5_K, C2K)
Q2KENTRY(Q6_K, C26)

const tr_qkernels tr_qk_avx512 = {
	QTABLE_FIELDS("avx512vnni"),
	.dot2 =
		{
			[TR_Q8_0] = dot2_Q8_0_qavx512,
			[TR_Q4_0] = dot2_Q4_0_qavx512,
			[TR_Q4_1] = dot2_Q4_1_qavx512,
			[TR_Q5_0] = dot2_Q5_0_qavx512,
			[TR_Q5_1] = dot2_Q5_1_qavx512,
			[TR_Q4_K] = dot2_Q4_K_qavx512,
			[TR_Q5_K] = dot2_Q5_K_qavx512,
			[TR_Q6_K] = dot2_Q6_K_qavx512,
		},
};
#endif

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


/* ---- the lane layout: 16 weight rows per vector, rows of x broadcast (tr_impl.h) ---- */

/* Block b of a weight row of dtype DT: the unsigned quants u (element = s*(u
 * - off) + o), XB/32 vectors of 32 in element order, and the sub-blocks'
 * scales s and offsets o (for the types with minimums). */
QI void xl_block(const int DT, const uint8_t *w, long b, __m256i *u, float *s, float *o) {
	switch (DT) {
	case TR_Q8_0:
	case TR_Q4_0:
	case TR_Q4_1:
	case TR_Q5_0:
	case TR_Q5_1: {
		const uint8_t *wb = w + b * tr_qblock_bytes(DT);
		uint32_t qh;
		switch (DT) {
		case TR_Q8_0: u[0] = _mm256_xor_si256(LDU(wb + 2), B8(0x80)); break;
		case TR_Q4_0: u[0] = NIB32(wb + 2); break;
		case TR_Q4_1: u[0] = NIB32(wb + 4); break;
		case TR_Q5_0:
			memcpy(&qh, wb + 2, 4);
			u[0] = _mm256_or_si256(NIB32(wb + 6), HB32(qh));
			break;
		default:
			memcpy(&qh, wb + 4, 4);
			u[0] = _mm256_or_si256(NIB32(wb + 8), HB32(qh));
		}
		s[0] = F16(wb);
		if (DT == TR_Q4_1 || DT == TR_Q5_1)
			o[0] = F16(wb + 2);
		return;
	}
	case TR_Q4_K:
	case TR_Q5_K: {
		const uint8_t *wb = w + b * tr_qblock_bytes(DT);
		__m256i scv, mnv;
		kscales(wb + 4, &scv, &mnv);
		_mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(F16(wb)), _mm256_cvtepi32_ps(scv)));
		_mm256_storeu_ps(o, _mm256_mul_ps(_mm256_set1_ps(-F16(wb + 2)), _mm256_cvtepi32_ps(mnv)));
		const uint8_t *qs = wb + (DT == TR_Q4_K ? 16 : 48);
		const __m256i qhv = DT == TR_Q5_K ? LDU(wb + 16) : _mm256_setzero_si256();
		for (int c = 0; c < 4; c++)
			K45U(DT, qs, qhv, c, &u[2 * c], &u[2 * c + 1]);
		return;
	}
	default: { /* TR_Q2_K, TR_Q3_K, TR_Q6_K: sub-blocks of 16 */
		const uint8_t *wb = w + b * tr_qblock_bytes(DT);
		if (DT == TR_Q6_K) {
			const __m128i s8 = _mm_loadu_si128((const __m128i *)(wb + 192));
			const __m256 d = _mm256_set1_ps(F16(wb + 208));
			_mm256_storeu_ps(s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8))));
			_mm256_storeu_ps(s + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8)))));
		} else if (DT == TR_Q3_K) {
			const float d = F16(wb + 108);
			int sc[16];
			Q3SC(wb + 96, sc);
			for (int i = 0; i < 16; i++)
				s[i] = d * (float)sc[i];
		} else {
			const float d = F16(wb + 80), dmin = F16(wb + 82);
			for (int i = 0; i < 16; i++) {
				s[i] = d * (float)(wb[i] & 15);
				o[i] = -dmin * (float)(wb[i] >> 4);
			}
		}
		for (int h = 0; h < 2; h++) {
			__m256i q1, q2, hv;
			if (DT == TR_Q6_K) {
				q1 = LDU(wb + 64 * h);
				q2 = LDU(wb + 64 * h + 32);
				hv = LDU(wb + 128 + 32 * h);
			} else {
				q1 = LDU(wb + (DT == TR_Q2_K ? 16 : 32) + 32 * h);
				q2 = hv = DT == TR_Q3_K ? LDU(wb) : q1;
			}
			for (int j = 0; j < 4; j++)
				u[4 * h + j] = DT == TR_Q6_K ? Q6U(q1, q2, hv, j) : Q23U(DT, q1, hv, h, j);
		}
	}
	}
}

/* Rows j (low half) and j+8 (high half) of a[j], 8 dwords each, into
 * a[g] lane j = dword g of row j, lane 8+j = dword g of row 8+j: an 8x8
 * dword transpose in each 256-bit half. */
QI void xl_transpose(__m512i *a) {
	__m512i t[8], s[8];
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
	}
	for (int h = 0; h < 2; h++) {
		s[4 * h] = _mm512_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
		s[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
		s[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
		s[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
	}
	/* s[c] (rows 0-3 and 8-11) and s[4+c] (rows 4-7 and 12-15) hold dword
	 * c in their 128-bit lanes 0 and 2, dword 4+c in lanes 1 and 3 */
	const __m512i lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
	for (int c = 0; c < 4; c++) {
		a[c] = _mm512_permutex2var_epi64(s[c], lo, s[4 + c]);
		a[4 + c] = _mm512_permutex2var_epi64(s[c], hi, s[4 + c]);
	}
}

/* Weight rows w[0..nw) (rowb bytes apart, k elements of dtype DT; the rows
 * past nw repeat the last) into the group layout at dst (tr_impl.h). */
QI void xl_group_t(const int DT, const uint8_t *w, long rowb, int nw, long k, uint8_t *dst) {
	const int XB = tr_xl_xb(DT), S = tr_xl_s(DT), MIN = tr_xl_min(DT), NS = XB / S;
	const long ns = k / S;
	float *sc = (float *)(dst + TR_XL_L * k), *mn = sc + TR_XL_L * ns;
	for (long b = 0; b < k / XB; b++) {
		__m256i u[TR_XL_L][XB / 32];
		float s[TR_XL_L][16], o[TR_XL_L][16];
		for (int j = 0; j < TR_XL_L; j++)
			xl_block(DT, w + (j < nw ? j : nw - 1) * rowb, b, u[j], s[j], o[j]);
		for (int c = 0; c < XB / 32; c++) {
			__m512i a[8];
			for (int j = 0; j < 8; j++)
				a[j] = _mm512_inserti64x4(_mm512_castsi256_si512(u[j][c]), u[j + 8][c], 1);
			xl_transpose(a);
			for (int g = 0; g < 8; g++)
				_mm512_store_si512((void *)(dst + ((b * XB + 32 * c) / 4 + g) * 64), a[g]);
		}
		for (int i = 0; i < NS; i++)
			for (int j = 0; j < TR_XL_L; j++) {
				sc[TR_XL_L * (b * NS + i) + j] = s[j][i];
				if (MIN)
					mn[TR_XL_L * (b * NS + i) + j] = o[j][i];
			}
	}
}

/* CALL(T) for the quantized dtype dt as the constant T (the kernels
 * inline per type). */
#define XL_BY_TYPE(dt, CALL)                                                                                           \
	switch (dt) {                                                                                                  \
	case TR_Q8_0: CALL(TR_Q8_0); break;                                                                            \
	case TR_Q4_0: CALL(TR_Q4_0); break;                                                                            \
	case TR_Q4_1: CALL(TR_Q4_1); break;                                                                            \
	case TR_Q5_0: CALL(TR_Q5_0); break;                                                                            \
	case TR_Q5_1: CALL(TR_Q5_1); break;                                                                            \
	case TR_Q2_K: CALL(TR_Q2_K); break;                                                                            \
	case TR_Q3_K: CALL(TR_Q3_K); break;                                                                            \
	case TR_Q4_K: CALL(TR_Q4_K); break;                                                                            \
	case TR_Q5_K: CALL(TR_Q5_K); break;                                                                            \
	default: CALL(TR_Q6_K); break;                                                                                 \
	}

QF void xl_group(int dt, const uint8_t *w, long rowb, int nw, long k, uint8_t *dst) {
#define C_GROUP(T) xl_group_t(T, w, rowb, nw, k, dst)
	XL_BY_TYPE(dt, C_GROUP)
#undef C_GROUP
}

/* Cache lines to prefetch, per sub-block of a tile's sweep. */
typedef struct {
	const uint8_t *p, *end;
	int per;
} xl_pf;

/* A group of 16 weight rows (unpacked at pw) times the first R rows of a
 * tile of x: acc[r] lane j = (weight row j) . (row r of x). Per group of 4
 * elements one 64-byte load of the weights serves every row of x, each a
 * 4-byte broadcast of its quants; per sub-block the integer sums (started
 * at x's offset correction) are converted and scaled by the weight rows'
 * scales times x's block scale, and the minimums come in through x's sums. */
QI void xl_tile(const int R, const int S, const int XB, const int MIN, const int OFF, const uint8_t *pw, long k,
		const uint8_t *tile, __m512 *acc, xl_pf *pf) {
	const long ns = k / S;
	const uint8_t *xq = tile;
	const float *dx = (const float *)(tile + TR_XL_R * k), *xs = dx + TR_XL_R * (k / XB);
	const int32_t *xc = (const int32_t *)(xs + (MIN ? TR_XL_R * ns : 0));
	const float *sc = (const float *)(pw + TR_XL_L * k), *mn = sc + TR_XL_L * ns;
	for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	for (long si = 0; si < ns; si++) {
		for (int i = 0; i < pf->per && pf->p < pf->end; i++, pf->p += 64)
			_mm_prefetch((const char *)pf->p, _MM_HINT_T0);
		__m512i d[TR_XL_R];
		for (int r = 0; r < R; r++)
			d[r] = OFF ? _mm512_set1_epi32(xc[TR_XL_R * si + r]) : _mm512_setzero_si512();
		for (int g = 0; g < S / 4; g++) {
			const long G = si * (S / 4) + g;
			const __m512i wv = _mm512_load_si512((const void *)(pw + G * 64));
			for (int r = 0; r < R; r++) {
				int32_t xv;
				memcpy(&xv, xq + G * 4 * TR_XL_R + 4 * r, 4);
				d[r] = _mm512_dpbusd_epi32(d[r], wv, _mm512_set1_epi32(xv));
			}
		}
		const __m512 sv = _mm512_load_ps(sc + TR_XL_L * si);
		const long b = si * S / XB;
		for (int r = 0; r < R; r++) {
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[r]), _mm512_mul_ps(sv, _mm512_set1_ps(dx[TR_XL_R * b + r])),
						 acc[r]);
			if (MIN)
				acc[r] = _mm512_fmadd_ps(_mm512_load_ps(mn + TR_XL_L * si), _mm512_set1_ps(xs[TR_XL_R * si + r]),
							 acc[r]);
		}
	}
}

/* xl_tile for the sub-block shapes of the types (S, XB, minimums, offset),
 * R rows of x. */
QI void xl_tile_r(const int R, int S, int XB, int MIN, const uint8_t *pw, long k, const uint8_t *tile, __m512 *acc,
		  xl_pf *pf) {
	if (S == 32 && XB == 32 && MIN)
		xl_tile(R, 32, 32, 1, 0, pw, k, tile, acc, pf);
	else if (S == 32 && XB == 32)
		xl_tile(R, 32, 32, 0, 1, pw, k, tile, acc, pf);
	else if (S == 32)
		xl_tile(R, 32, 256, 1, 0, pw, k, tile, acc, pf);
	else if (MIN)
		xl_tile(R, 16, 256, 1, 0, pw, k, tile, acc, pf);
	else
		xl_tile(R, 16, 256, 0, 1, pw, k, tile, acc, pf);
}

QF void xl_rows_qavx512(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, const uint8_t *tiles, long m,
			float *dst, long ldd, void *scratch) {
	const size_t tb = tr_xl_tile_bytes(dt, k);
	const int S = tr_xl_s(dt), XB = tr_xl_xb(dt), MIN = tr_xl_min(dt);
	const long nt = (m + TR_XL_R - 1) / TR_XL_R;
	uint8_t *pw = scratch;
	for (long r = r0; r < r1; r += TR_XL_L) {
		const int nw = r1 - r < TR_XL_L ? (int)(r1 - r) : TR_XL_L;
		xl_group(dt, w + r * rowb, rowb, nw, k, pw);
		/* the next rows' weights come from memory while these compute: a
		 * few lines per sub-block of the first tile, so that the misses
		 * spread over the pass rather than queue at its start */
		xl_pf pf = {.p = w + (r + TR_XL_L) * rowb, .end = w + (r1 < r + 2 * TR_XL_L ? r1 : r + 2 * TR_XL_L) * rowb};
		pf.per = (int)((pf.end > pf.p ? (pf.end - pf.p) / 64 : 0) / (k / S) + 1);
		const __mmask16 keep = (__mmask16)((1u << nw) - 1);
		for (long t = 0; t < nt; t++) {
			const uint8_t *tile = tiles + t * tb;
			const long rows = m - t * TR_XL_R < TR_XL_R ? m - t * TR_XL_R : TR_XL_R;
			__m512 acc[TR_XL_R];
			switch (tr_xl_rows_read(rows)) {
			case TR_XL_R: xl_tile_r(8, S, XB, MIN, pw, k, tile, acc, &pf); break;
			case 4: xl_tile_r(4, S, XB, MIN, pw, k, tile, acc, &pf); break;
			case 2: xl_tile_r(2, S, XB, MIN, pw, k, tile, acc, &pf); break;
			default: xl_tile_r(1, S, XB, MIN, pw, k, tile, acc, &pf);
			}
			for (long i = 0; i < rows; i++)
				_mm512_mask_storeu_ps(dst + (t * TR_XL_R + i) * ldd + r, keep, acc[i]);
		}
	}
}



/* ---- the packed group layout: the lane layout made once at load (tr_impl.h) ---- */

/* Bytes ahead of the block in use that a packed pass prefetches. */
#define XP_PF 4096

/* u with its fifth bits set: the nibbles of packed vector v (elements
 * sh..sh+3 of each row, sh = 4v or 16 + 4v) get 0x10 where bit sh + e of
 * their lane of qh is set. The bits sit in byte sh/8 of the lane, from bit
 * sh%8 on: one shuffle copies that byte to the lane's four bytes, byte e
 * tests its bit, and a masked add puts 0x10 in (the nibbles' bit 4 is 0). */
QI __m512i xp_hbits(__m512i u, __m512i qh, const int sh) {
	const int by = sh / 8 * 0x01010101;
	const __m512i idx = _mm512_set4_epi32(0x0c0c0c0c + by, 0x08080808 + by, 0x04040404 + by, by);
	const __mmask64 m = _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, idx), _mm512_set1_epi32((int)(0x08040201u << sh % 8)));
	return _mm512_mask_add_epi8(u, m, u, _mm512_set1_epi8(0x10));
}

/* A packed group of 16 weight rows of dtype DT (g: a type with blocks of
 * 32) times the first R rows of a tile of x: acc[r] lane j = (weight row
 * j) . (row r of x). Per block, every 64-byte load of weights (two vectors
 * of nibbles, with their fifth bits for Q5_0 and Q5_1) serves every row
 * of x; the offsets (Q8_0, Q4_0, Q5_0) start the integer sums from x's
 * sums, the minimums (Q4_1, Q5_1) come in through them after the scaling.
 * With fewer than 4 rows of x, two integer chains per row keep enough
 * vpdpbusd in flight. */
/* One sub-block s = 2c + h of a packed Q4_K super-block (blk) times the
 * first R rows of x: the low (h = 0) or high nibbles of the 8 vectors of
 * chunk c, scaled by the sub-block's 6-bit scales times d (dv), plus its
 * minimums times dmin (mv, negated) through x's sums. */
QI void xpk_sub(const int R, const int h, const uint8_t *blk, int c, const uint8_t *xb, float dxs[TR_XL_R],
		const float *xss, __m512 dv, __m512 mv, __m512 *acc) {
	const int NA = R < 4 ? 2 : 1, s = 2 * c + h;
	const __m512i m4 = _mm512_set1_epi8(15);
	__m512i d[2][TR_XL_R];
	for (int r = 0; r < R; r++)
		d[0][r] = d[1][r] = _mm512_setzero_si512();
#pragma GCC unroll 8
	for (int q = 0; q < 8; q++) {
		const __m512i wv = _mm512_loadu_si512((const void *)(blk + (8 * c + q) * 64));
		const __m512i u = h ? _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4) : _mm512_and_si512(wv, m4);
		for (int r = 0; r < R; r++) {
			int32_t xv;
			memcpy(&xv, xb + q * 4 * TR_XL_R + 4 * r, 4);
			d[NA == 2 ? q & 1 : 0][r] = _mm512_dpbusd_epi32(d[NA == 2 ? q & 1 : 0][r], u, _mm512_set1_epi32(xv));
		}
	}
	const __m512 sc = _mm512_mul_ps(
		dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + TR_XP_Q4K_SC + 16 * s)))));
	const __m512 mn = _mm512_mul_ps(
		mv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + TR_XP_Q4K_MN + 16 * s)))));
	for (int r = 0; r < R; r++) {
		const __m512i t = NA == 2 ? _mm512_add_epi32(d[0][r], d[1][r]) : d[0][r];
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(sc, _mm512_set1_ps(dxs[r])), acc[r]);
		acc[r] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xss[TR_XL_R * s + r]), acc[r]);
	}
}

/* xp_tile for Q4_K: per super-block, each of its 8 sub-blocks of 32 sums
 * 8 vectors of quants (the low or the high nibbles of 8 vectors, so a
 * sub-block pair loads its vectors twice, the second time from L1) against
 * the rows of x (xpk_sub). */
QI void xpk_tile(const int R, const uint8_t *g, long k, const uint8_t *tile, __m512 *acc) {
	const long nb = k / 256;
	const size_t BB = tr_xp_block_bytes(TR_Q4_K);
	const uint8_t *xq = tile;
	const float *dx = (const float *)(tile + TR_XL_R * k), *xs = dx + TR_XL_R * nb;
	for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *blk = g + b * BB;
		const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + TR_XP_Q4K_D)));
		const __m512 mv =
			_mm512_sub_ps(_mm512_setzero_ps(), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + TR_XP_Q4K_DMIN))));
		float dxs[TR_XL_R];
		for (int r = 0; r < R; r++)
			dxs[r] = dx[TR_XL_R * b + r];
		for (int c = 0; c < 4; c++) {
			/* a quarter of the super-block's lines, XP_PF ahead */
			for (size_t o = c * BB / 4 & ~(size_t)63; o < (c + 1) * BB / 4; o += 64)
				_mm_prefetch((const char *)(blk + XP_PF + o), _MM_HINT_T0);
			const uint8_t *xb = xq + (b * 64 + 16 * c) * 4 * TR_XL_R;
			xpk_sub(R, 0, blk, c, xb, dxs, xs + TR_XL_R * b * 8, dv, mv, acc);
			xpk_sub(R, 1, blk, c, xb + 8 * 4 * TR_XL_R, dxs, xs + TR_XL_R * b * 8, dv, mv, acc);
		}
	}
}

QI void xp_tile(const int DT, const int R, const uint8_t *g, long k, const uint8_t *tile, __m512 *acc) {
	if (DT == TR_Q4_K) {
		xpk_tile(R, g, k, tile, acc);
		return;
	}
	const long nb = k / 32;
	const size_t BB = 16 * tr_qblock_bytes(DT);
	const int NA = R < 4 ? 2 : 1, MIN = tr_xl_min(DT), OFF = tr_xl_off(DT) != 0;
	const int Q5 = DT == TR_Q5_0 || DT == TR_Q5_1, QH = tr_xp_qh(DT), QD = tr_xp_d(DT), QM = tr_xp_m(DT);
	const uint8_t *xq = tile;
	const float *dx = (const float *)(tile + TR_XL_R * k), *xs = dx + TR_XL_R * nb;
	const int32_t *xc = (const int32_t *)(xs + (MIN ? TR_XL_R * nb : 0));
	const __m512i m4 = _mm512_set1_epi8(15);
	for (int r = 0; r < R; r++)
		acc[r] = _mm512_setzero_ps();
	for (long b = 0; b < nb; b++) {
		const uint8_t *blk = g + b * BB;
		for (size_t o = 0; o < BB; o += 64)
			_mm_prefetch((const char *)(blk + XP_PF + o), _MM_HINT_T0);
		__m512i d[2][TR_XL_R];
		for (int r = 0; r < R; r++) {
			d[0][r] = OFF ? _mm512_set1_epi32(xc[TR_XL_R * b + r]) : _mm512_setzero_si512();
			d[1][r] = _mm512_setzero_si512();
		}
		const uint8_t *xb = xq + b * 8 * 4 * TR_XL_R;
#define XP_DOT(wv, grp, a)                                                                                             \
	for (int r = 0; r < R; r++) {                                                                                  \
		int32_t xv;                                                                                            \
		memcpy(&xv, xb + (grp) * 4 * TR_XL_R + 4 * r, 4);                                                      \
		d[a][r] = _mm512_dpbusd_epi32(d[a][r], wv, _mm512_set1_epi32(xv));                                     \
	}
		if (DT == TR_Q8_0) {
			for (int v = 0; v < 8; v++) {
				const __m512i wv = _mm512_loadu_si512((const void *)(blk + 64 * v));
				XP_DOT(wv, v, NA == 2 ? v & 1 : 0)
			}
		} else {
			const __m512i qh = Q5 ? _mm512_loadu_si512((const void *)(blk + QH)) : _mm512_setzero_si512();
			for (int v = 0; v < 4; v++) {
				const __m512i wv = _mm512_loadu_si512((const void *)(blk + 64 * v));
				__m512i lo = _mm512_and_si512(wv, m4), hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
				if (Q5) {
					lo = xp_hbits(lo, qh, 4 * v);
					hi = xp_hbits(hi, qh, 16 + 4 * v);
				}
				XP_DOT(lo, v, 0)
				XP_DOT(hi, 4 + v, NA - 1)
			}
		}
#undef XP_DOT
		const __m512 sv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + QD)));
		const __m512 mv = MIN ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(blk + QM))) : sv;
		for (int r = 0; r < R; r++) {
			const __m512i t = NA == 2 ? _mm512_add_epi32(d[0][r], d[1][r]) : d[0][r];
			acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_mul_ps(sv, _mm512_set1_ps(dx[TR_XL_R * b + r])),
						 acc[r]);
			if (MIN)
				acc[r] = _mm512_fmadd_ps(mv, _mm512_set1_ps(xs[TR_XL_R * b + r]), acc[r]);
		}
	}
}

QI void xp_rows_t(const int DT, const uint8_t *xp, long r0, long r1, long k, const uint8_t *tiles, long m, float *dst,
		  long ldd) {
	const size_t tb = tr_xl_tile_bytes(DT, k), gb = tr_xp_group_bytes(DT, k);
	const long nt = (m + TR_XL_R - 1) / TR_XL_R;
	for (long r = r0; r < r1; r += TR_XL_L) {
		const uint8_t *g = xp + (size_t)(r / TR_XL_L) * gb;
		const int nw = r1 - r < TR_XL_L ? (int)(r1 - r) : TR_XL_L;
		const __mmask16 keep = (__mmask16)((1u << nw) - 1);
		for (long t = 0; t < nt; t++) {
			const uint8_t *tile = tiles + t * tb;
			const long rows = m - t * TR_XL_R < TR_XL_R ? m - t * TR_XL_R : TR_XL_R;
			__m512 acc[TR_XL_R];
			switch (tr_xl_rows_read(rows)) {
			case TR_XL_R: xp_tile(DT, 8, g, k, tile, acc); break;
			case 4: xp_tile(DT, 4, g, k, tile, acc); break;
			case 2: xp_tile(DT, 2, g, k, tile, acc); break;
			default: xp_tile(DT, 1, g, k, tile, acc);
			}
			for (long i = 0; i < rows; i++)
				_mm512_mask_storeu_ps(dst + (t * TR_XL_R + i) * ldd + r, keep, acc[i]);
		}
	}
}

QF void xp_rows_qavx512(int dt, const uint8_t *xp, long r0, long r1, long k, const uint8_t *tiles, long m, float *dst,
			long ldd) {
	switch (dt) {
	case TR_Q8_0: xp_rows_t(TR_Q8_0, xp, r0, r1, k, tiles, m, dst, ldd); break;
	case TR_Q4_0: xp_rows_t(TR_Q4_0, xp, r0, r1, k, tiles, m, dst, ldd); break;
	case TR_Q4_1: xp_rows_t(TR_Q4_1, xp, r0, r1, k, tiles, m, dst, ldd); break;
	case TR_Q5_0: xp_rows_t(TR_Q5_0, xp, r0, r1, k, tiles, m, dst, ldd); break;
	case TR_Q5_1: xp_rows_t(TR_Q5_1, xp, r0, r1, k, tiles, m, dst, ldd); break;
	default: xp_rows_t(TR_Q4_K, xp, r0, r1, k, tiles, m, dst, ldd); break;
	}
}


/* Rows [r0, r1) of a quantized matrix into float32 (tr_qdequant's
 * contract, bit for bit): each block through xl_block, then per sub-block
 * s * (u - off) (+ o), one rounding per product and per sum as gpu's block
 * dequantizers round (no fused multiply-adds). */
__attribute__((optimize("fp-contract=off"))) QI void xl_dequant_t(const int DT, const uint8_t *w, long rowb, long r0,
								 long r1, long k, float *dst) {
	const int XB = tr_xl_xb(DT), S = tr_xl_s(DT), MIN = tr_xl_min(DT), OFF = tr_xl_off(DT);
	for (long r = r0; r < r1; r++) {
		const uint8_t *wr = w + r * rowb;
		float *o = dst + (r - r0) * k;
		for (long b = 0; b < k / XB; b++) {
			__m256i u[8];
			float sc[16], mn[16];
			xl_block(DT, wr, b, u, sc, mn);
			for (int c = 0; c < XB / 32; c++) {
				for (int q = 0; q < 4; q++) {
					const int e = 32 * c + 8 * q; /* element within the block */
					const __m128i b8 = q < 2 ? _mm256_castsi256_si128(u[c]) : _mm256_extracti128_si256(u[c], 1);
					__m256i iv = _mm256_cvtepu8_epi32(q % 2 ? _mm_srli_si128(b8, 8) : b8);
					if (OFF)
						iv = _mm256_sub_epi32(iv, _mm256_set1_epi32(OFF));
					__m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(iv), _mm256_set1_ps(sc[e / S]));
					if (MIN)
						v = _mm256_add_ps(v, _mm256_set1_ps(mn[e / S]));
					_mm256_storeu_ps(o + b * XB + e, v);
				}
			}
		}
	}
}

QF void xl_dequant(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, float *dst) {
#define C_DEQ(T) xl_dequant_t(T, w, rowb, r0, r1, k, dst)
	XL_BY_TYPE(dt, C_DEQ)
#undef C_DEQ
}

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
	.xl = xl_rows_qavx512,
	.xp = xp_rows_qavx512,
	.dequant = xl_dequant,
};
#endif

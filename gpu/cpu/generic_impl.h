/* Kernel template of package gpu/cpu, written with GCC vector extensions and
 * included once per instruction set by k_portable.c, k_avx2.c and k_avx512.c.
 *
 * The including file defines:
 *   VW       lanes of float per vector (4, 8 or 16)
 *   FN(x)    x with the instruction-set suffix
 *   TGT      a function attribute selecting the target (may be empty)
 *   HAVE_F16C  when _mm256_cvtph_ps may be used (VW == 8)
 * and includes the intrinsics headers it needs before this file. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tr_impl.h"

typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
typedef uint32_t vu __attribute__((vector_size(VW * 4)));
typedef float vfu __attribute__((vector_size(VW * 4), aligned(4)));
typedef uint16_t vh __attribute__((vector_size(VW * 2)));
typedef uint16_t vhu __attribute__((vector_size(VW * 2), aligned(2)));

#define INL static inline __attribute__((always_inline)) TGT
#define FUN static TGT

INL vf LD(const float *p) { return *(const vfu *)p; }
INL void ST(float *p, vf v) { *(vfu *)p = v; }
INL vf SPLAT(float s) {
	/* s - (+0) is s for every s (-0 included; (vf){0} + s would turn -0 into
	 * +0), and GCC folds it to a single broadcast, where a lane-by-lane loop
	 * became one masked broadcast per lane. */
	return s - (vf){0};
}
INL vf SEL(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
INL vf VMAX(vf a, vf b) { return SEL(a > b, a, b); }
INL vf LDBF(const uint16_t *p) {
	vh h = *(const vhu *)p;
	vu u = __builtin_convertvector(h, vu);
	return (vf)(u << 16);
}

INL float HSUM(vf v) {
#if VW == 16
	v += __builtin_shuffle(v, (vi){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
	v += __builtin_shuffle(v, (vi){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
	v += __builtin_shuffle(v, (vi){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
	return v[0] + v[1];
#elif VW == 8
	v += __builtin_shuffle(v, (vi){4, 5, 6, 7, 0, 1, 2, 3});
	v += __builtin_shuffle(v, (vi){2, 3, 0, 1, 6, 7, 4, 5});
	return v[0] + v[1];
#else
	return (v[0] + v[2]) + (v[1] + v[3]);
#endif
}

INL float HMAX(vf v) {
	float m = v[0];
	for (int i = 1; i < VW; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* exp(x) for x in [-86, 88] (clamped outside): 2^n * p(r), r = x - n ln2 with
 * a two-part ln2, p the degree-7 Taylor polynomial (|r| <= ln2/2, truncation
 * error < 6e-9 relative). */
INL vf VEXP(vf x) {
	x = SEL(x > SPLAT(88.0f), SPLAT(88.0f), x);
	x = SEL(x < SPLAT(-86.0f), SPLAT(-86.0f), x);
	const vf magic = SPLAT(12582912.0f); /* 1.5 * 2^23 */
	vf t = x * 1.44269504088896341f + magic;
	vf n = t - magic;
	vi ni = (vi)t - (vi)magic;
	vf r = x - n * 0.693145751953125f;
	r = r - n * 1.42860682030941723212e-6f;
	vf p = SPLAT(1.0f / 5040);
	p = p * r + 1.0f / 720;
	p = p * r + 1.0f / 120;
	p = p * r + 1.0f / 24;
	p = p * r + 1.0f / 6;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	return (vf)((vi)p + (ni << 23));
}

/* tanh: odd Taylor series through x^13 for |x| < 0.4 (error < 4e-9
 * relative), else sign(x) (1 - e) / (1 + e) with e = exp(-2|x|). */
INL vf VTANH(vf x) {
	vi sign = (vi)x & (vi)SPLAT(-0.0f);
	vf ax = (vf)((vi)x & ~sign);
	vf x2 = x * x;
	vf p = SPLAT(21844.0f / 6081075);
	p = p * x2 - 1382.0f / 155925;
	p = p * x2 + 62.0f / 2835;
	p = p * x2 - 17.0f / 315;
	p = p * x2 + 2.0f / 15;
	p = p * x2 - 1.0f / 3;
	vf small = x + x * x2 * p;
	vf e = VEXP(ax * -2.0f);
	vf big = (vf)((vi)((1.0f - e) / (1.0f + e)) | sign);
	return SEL(ax < SPLAT(0.4f), small, big);
}

/* Helpers for loops with a tail: load/store n < VW elements via a buffer. */
INL vf LDN(const float *p, long n) {
	float b[VW] = {0};
	memcpy(b, p, (size_t)n * 4);
	return LD(b);
}
INL void STN(float *p, vf v, long n) {
	float b[VW];
	ST(b, v);
	memcpy(p, b, (size_t)n * 4);
}

INL vf SILU1(vf g, vf u) { return g / (1.0f + VEXP(-g)) * u; }
INL vf GELU1(vf g, vf u) {
	/* 0.5 g (1 + tanh(a)) == g / (1 + exp(-2a)): no cancellation for g < 0. */
	vf a = 0.7978845608028654f * (g + 0.044715f * g * g * g);
	return g / (1.0f + VEXP(-2.0f * a)) * u;
}

FUN void FN(silu)(float *d, const float *g, const float *u, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW)
		ST(d + i, SILU1(LD(g + i), LD(u + i)));
	if (i < n)
		STN(d + i, SILU1(LDN(g + i, n - i), LDN(u + i, n - i)), n - i);
}

FUN void FN(gelu)(float *d, const float *g, const float *u, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW)
		ST(d + i, GELU1(LD(g + i), LD(u + i)));
	if (i < n)
		STN(d + i, GELU1(LDN(g + i, n - i), LDN(u + i, n - i)), n - i);
}

FUN void FN(softcap)(float *x, long n, float c) {
	long i = 0;
	for (; i + VW <= n; i += VW)
		ST(x + i, c * VTANH(LD(x + i) / c));
	if (i < n)
		STN(x + i, c * VTANH(LDN(x + i, n - i) / c), n - i);
}

FUN void FN(scale)(float *x, long n, float s) {
	long i = 0;
	for (; i + VW <= n; i += VW)
		ST(x + i, LD(x + i) * s);
	for (; i < n; i++)
		x[i] *= s;
}

FUN void FN(add)(float *d, const float *a, const float *b, long n) {
	long i = 0;
	for (; i + VW <= n; i += VW)
		ST(d + i, LD(a + i) + LD(b + i));
	for (; i < n; i++)
		d[i] = a[i] + b[i];
}

FUN void FN(add_bias)(float *x, long len, const float *b, long n, long off) {
	long j = off % n, i = 0;
	while (i < len) {
		long run = n - j;
		if (run > len - i)
			run = len - i;
		long t = 0;
		for (; t + VW <= run; t += VW)
			ST(x + i + t, LD(x + i + t) + LD(b + j + t));
		for (; t < run; t++)
			x[i + t] += b[j + t];
		i += run;
		j = 0;
	}
}

FUN void FN(rmsnorm)(float *d, const float *x, const float *w, long rows, long n, float eps, int unit) {
	for (long r = 0; r < rows; r++) {
		const float *xr = x + r * n;
		float *dr = d + r * n;
		vf a0 = SPLAT(0), a1 = SPLAT(0);
		long i = 0;
		for (; i + 2 * VW <= n; i += 2 * VW) {
			vf v0 = LD(xr + i), v1 = LD(xr + i + VW);
			a0 += v0 * v0;
			a1 += v1 * v1;
		}
		double ss = (double)HSUM(a0) + (double)HSUM(a1);
		for (; i < n; i++)
			ss += (double)xr[i] * xr[i];
		float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
		float off = unit ? 1.0f : 0.0f;
		i = 0;
		for (; i + VW <= n; i += VW)
			ST(dr + i, LD(xr + i) * inv * (LD(w + i) + off));
		for (; i < n; i++)
			dr[i] = xr[i] * inv * (w[i] + off);
	}
}

FUN void FN(rope)(float *x, long rows, long heads, long hd, const float *cs, const float *sn, long half) {
	for (long r = 0; r < rows; r++) {
		const float *c = cs + r * half, *s = sn + r * half;
		for (long h = 0; h < heads; h++) {
			float *v = x + (r * heads + h) * hd;
			long i = 0;
			for (; i + VW <= half; i += VW) {
				vf a = LD(v + i), b = LD(v + i + half), cc = LD(c + i), ss = LD(s + i);
				ST(v + i, a * cc - b * ss);
				ST(v + i + half, b * cc + a * ss);
			}
			for (; i < half; i++) {
				float a = v[i], b = v[i + half];
				v[i] = a * c[i] - b * s[i];
				v[i + half] = b * c[i] + a * s[i];
			}
		}
	}
}

/* ---- attention ---- */

INL float DOT(const float *a, const float *b, long n) {
	vf s0 = SPLAT(0), s1 = SPLAT(0);
	long i = 0;
	for (; i + 2 * VW <= n; i += 2 * VW) {
		s0 += LD(a + i) * LD(b + i);
		s1 += LD(a + i + VW) * LD(b + i + VW);
	}
	if (i + VW <= n) {
		s0 += LD(a + i) * LD(b + i);
		i += VW;
	}
	float s = HSUM(s0 + s1);
	for (; i < n; i++)
		s += a[i] * b[i];
	return s;
}

FUN void FN(attn)(const tr_attn_args *a, const tr_seq *s, long r0, long r1, int h, void *scr) {
	const long hd = a->hd, qdim = (long)a->heads * hd;
	const long kvh = (long)(h / (a->heads / a->kvheads)) * hd;
	const int32_t *pages = a->pages + s->page_off;
	float *acc = (float *)scr;                          /* hd rounded up, 64-byte aligned */
	float *sc = acc + ((hd + 15) & ~15L);               /* scores */
	for (long r = r0; r < r1; r++) {
		long pos = s->pos + r;
		long lo = 0;
		if (a->window > 0 && pos - a->window + 1 > lo)
			lo = pos - a->window + 1;
		long cnt = pos + 1 - lo;
		const float *q = a->q + (s->row + r) * qdim + (long)h * hd;
		/* scores */
		for (long j = lo; j <= pos;) {
			long pg = j / a->ps, sl = j % a->ps;
			long end = (pg + 1) * a->ps - 1;
			if (end > pos)
				end = pos;
			const float *kp = a->K + ((long)pages[pg] * a->ps + sl) * a->dim + kvh;
			for (; j <= end; j++, kp += a->dim)
				sc[j - lo] = DOT(q, kp, hd) * a->scale;
		}
		if (a->softcap > 0)
			FN(softcap)(sc, cnt, a->softcap);
		/* max */
		long i = 0;
		vf vm = SPLAT(-INFINITY);
		for (; i + VW <= cnt; i += VW)
			vm = VMAX(vm, LD(sc + i));
		float mx = HMAX(vm);
		for (; i < cnt; i++)
			mx = sc[i] > mx ? sc[i] : mx;
		/* exp and sum */
		vf vs = SPLAT(0);
		i = 0;
		for (; i + VW <= cnt; i += VW) {
			vf e = VEXP(LD(sc + i) - mx);
			ST(sc + i, e);
			vs += e;
		}
		if (i < cnt) {
			long t = cnt - i;
			vf e = VEXP(LDN(sc + i, t) - mx);
			float b[VW];
			ST(b, e);
			for (long u = 0; u < t; u++) {
				sc[i + u] = b[u];
			}
			for (long u = t; u < VW; u++)
				b[u] = 0;
			vs += LD(b);
		}
		float sum = HSUM(vs);
		/* weighted V */
		for (long d = 0; d < hd; d++)
			acc[d] = 0;
		for (long j = lo; j <= pos;) {
			long pg = j / a->ps, sl = j % a->ps;
			long end = (pg + 1) * a->ps - 1;
			if (end > pos)
				end = pos;
			const float *vp = a->V + ((long)pages[pg] * a->ps + sl) * a->dim + kvh;
			for (; j <= end; j++, vp += a->dim) {
				float wgt = sc[j - lo];
				long d = 0;
				for (; d + VW <= hd; d += VW)
					ST(acc + d, LD(acc + d) + wgt * LD(vp + d));
				for (; d < hd; d++)
					acc[d] += wgt * vp[d];
			}
		}
		float inv = 1.0f / sum;
		float *o = a->out + (s->row + r) * qdim + (long)h * hd;
		for (long d = 0; d < hd; d++)
			o[d] = acc[d] * inv;
	}
}

/* ---- tiled attention (flash-attention style) ----
 *
 * One call handles the query rows [r0, r1) of a sequence for the heads
 * [g0, g1) of the group of KV head kvh: M = (r1-r0)*(g1-g0) query rows, ordered
 * position-major (row i is position r0 + i/gs, head g0 + i%gs), so that the
 * visible key range [lo_i, hi_i] of a row never decreases with i.
 *
 * Q is packed transposed and pre-scaled (Qt[d][i] = scale*q_i[d], Mp = M
 * rounded up to whole vectors), so that scores are computed with vectors over
 * queries: S[j][i..i+VW) = sum_d K[j][d] * Qt[d][i..i+VW), K[j][d] broadcast
 * straight from the KV cache (no transposition of K). A register tile is
 * A_RK keys x A_CQ query vectors. Keys are walked once in blocks of A_KB with an
 * online softmax per query lane (running max m and sum l, vectors over
 * queries, so the block max needs no horizontal reduction); P·V accumulates
 * into O[i][hd] with V rows loaded once per A_PR rows x A_PC vectors tile.
 * Tiles that no query of the tile can see (causal or window) are skipped. */

#if VW == 16
#define A_RK 8
#define A_CQ 3
#define A_PR 4
#define A_PC 4
#elif VW == 8
#define A_RK 4
#define A_CQ 2
#define A_PR 4
#define A_PC 2
#else
#define A_RK 4
#define A_CQ 2
#define A_PR 4
#define A_PC 2
#endif
#define A_KB TR_FLASH_KB
/* Copy the block's V rows into a contiguous buffer: needed when hd is not
 * a whole number of vectors (zero padding), and worth it when the KV row
 * stride is a multiple of 1 KB, where the rows of a block fall into a few L1
 * sets and evict each other between row tiles (8 KV heads of 128: 1.2x
 * faster with the copy; 3 of 64: 3% slower). */
#ifndef FL_COPYV
#define FL_COPYV (hd != hdp || (dim & 255) == 0)
#endif
#ifndef FL_KB
#define FL_KB(hd) ((hd) <= 64 ? 64 : (hd) <= 128 ? 32 : 16)
#endif

/* In-place transpose of a VW x VW block held as VW vectors: log2(VW) rounds
 * of interleaving vector i with vector i + VW/2. */
INL void TRANSPOSE(vf *v) {
#if VW == 16
	const vi lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
	const vi hi = lo + 8;
#elif VW == 8
	const vi lo = {0, 8, 1, 9, 2, 10, 3, 11};
	const vi hi = lo + 4;
#else
	const vi lo = {0, 4, 1, 5};
	const vi hi = lo + 2;
#endif
	for (int round = 1; round < VW; round *= 2) {
		vf w[VW];
		for (int i = 0; i < VW / 2; i++) {
			w[2 * i] = __builtin_shuffle(v[i], v[i + VW / 2], lo);
			w[2 * i + 1] = __builtin_shuffle(v[i], v[i + VW / 2], hi);
		}
		for (int i = 0; i < VW; i++)
			v[i] = w[i];
	}
}

/* ST[k][c*VW..] = sum_d kp[k][d] * Qt[d][c*VW..] for k < A_RK, c < CQ. */
INL void FN(fl_stile)(const int CQ, const float *const *kp, const float *qt, long Mp, long hd, float *st) {
	vf acc[A_RK][A_CQ];
	const float *p[A_RK];
	for (int k = 0; k < A_RK; k++) {
		p[k] = kp[k];
		for (int c = 0; c < CQ; c++)
			acc[k][c] = SPLAT(0);
	}
	for (long d = 0; d < hd; d++) {
		vf q[A_CQ];
		for (int c = 0; c < CQ; c++)
			q[c] = LD(qt + d * Mp + c * VW);
		for (int k = 0; k < A_RK; k++) {
			vf kk = SPLAT(p[k][d]);
			for (int c = 0; c < CQ; c++)
				acc[k][c] += kk * q[c];
		}
	}
	for (int k = 0; k < A_RK; k++)
		for (int c = 0; c < CQ; c++)
			ST(st + k * Mp + c * VW, acc[k][c]);
}

FUN void FN(fl_stiles)(int cq, const float *const *kp, const float *qt, long Mp, long hd, float *st) {
	switch (cq) {
	case 1: FN(fl_stile)(1, kp, qt, Mp, hd, st); break;
	case 2: FN(fl_stile)(2, kp, qt, Mp, hd, st); break;
#if A_CQ >= 3
	case 3: FN(fl_stile)(3, kp, qt, Mp, hd, st); break;
#endif
	}
}

/* O[r][off + c*VW..] = alpha[r] * O[...] + sum_{ja <= j < jb} P[j][r] * V[j][off + c*VW..]
 * for r < R, c < C. */
INL void FN(fl_pvtile)(const int R, const int C, const float *const *vp, long off, long ja, long jb, const float *pt,
		       long Mp, const float *alpha, float *o, long hdp) {
	vf acc[A_PR][A_PC];
	for (int r = 0; r < R; r++) {
		vf al = SPLAT(alpha[r]);
		for (int c = 0; c < C; c++)
			acc[r][c] = LD(o + r * hdp + c * VW) * al;
	}
	for (long j = ja; j < jb; j++) {
		const float *v = vp[j] + off;
		const float *pj = pt + j * Mp;
		vf vv[A_PC];
		for (int c = 0; c < C; c++)
			vv[c] = LD(v + c * VW);
		for (int r = 0; r < R; r++) {
			vf pp = SPLAT(pj[r]);
			for (int c = 0; c < C; c++)
				acc[r][c] += pp * vv[c];
		}
	}
	for (int r = 0; r < R; r++)
		for (int c = 0; c < C; c++)
			ST(o + r * hdp + c * VW, acc[r][c]);
}

#define FL_PV(R, C) FN(fl_pvtile)(R, C, vp, off, ja, jb, pt, Mp, alpha, o, hdp)
#if A_PC >= 4
#define FL_PVR(R)                                                                                                      \
	switch (c) {                                                                                                   \
	case 1: FL_PV(R, 1); break;                                                                                    \
	case 2: FL_PV(R, 2); break;                                                                                    \
	case 3: FL_PV(R, 3); break;                                                                                    \
	case 4: FL_PV(R, 4); break;                                                                                    \
	}
#else
#define FL_PVR(R)                                                                                                      \
	switch (c) {                                                                                                   \
	case 1: FL_PV(R, 1); break;                                                                                    \
	case 2: FL_PV(R, 2); break;                                                                                    \
	}
#endif
FUN void FN(fl_pvtiles)(int r, int c, const float *const *vp, long off, long ja, long jb, const float *pt, long Mp,
			const float *alpha, float *o, long hdp) {
	switch (r) {
	case 1: FL_PVR(1) break;
	case 2: FL_PVR(2) break;
	case 3: FL_PVR(3) break;
	case 4: FL_PVR(4) break;
#if A_PR >= 8
	case 5: FL_PVR(5) break;
	case 6: FL_PVR(6) break;
	case 7: FL_PVR(7) break;
	case 8: FL_PVR(8) break;
#endif
	}
}
#undef FL_PVR
#undef FL_PV

FUN void FN(attn_flash)(const tr_attn_args *a, const tr_seq *s, long r0, long r1, int kvh, int g0, int g1,
			void *scr) {
	const long hd = a->hd, qdim = (long)a->heads * hd, G = a->heads / a->kvheads;
	const long gs = g1 - g0, M = (r1 - r0) * gs;
	const long Mp = (M + VW - 1) / VW * VW, NQ = Mp / VW;
	const long hdp = (hd + VW - 1) / VW * VW;
	const long kvoff = (long)kvh * hd, ps = a->ps, dim = a->dim;
	const int32_t *pages = a->pages + s->page_off;
	const float scale = a->scale, cap = a->softcap;

	/* scratch: see TR_FLASH_SCRATCH */
	float *Qt = (float *)scr;
	float *S = Qt + TR_AL16(hd * Mp);
	float *O = S + TR_AL16(A_KB * Mp);
	float *mv = O + TR_AL16(Mp * hdp);
	float *lv = mv + TR_AL16(Mp);
	float *al = lv + TR_AL16(Mp);
	int32_t *lo = (int32_t *)(al + TR_AL16(Mp));
	int32_t *hi = lo + TR_AL16(Mp);
	float *vpad = (float *)(hi + TR_AL16(Mp));
	float *zero = vpad + TR_AL16(A_KB * hdp);

	/* Qt, one query vector at a time: VW rows read along d, written as
	 * contiguous vectors (padding rows read the zero row). */
	memset(zero, 0, (size_t)hdp * 4);
	for (long i0 = 0; i0 < Mp; i0 += VW) {
		const float *qr[VW];
		for (long t = 0; t < VW; t++) {
			long i = i0 + t;
			if (i < M) {
				long r = r0 + i / gs, h = (long)kvh * G + g0 + i % gs;
				qr[t] = a->q + (s->row + r) * qdim + h * hd;
				long pos = s->pos + r;
				hi[i] = (int32_t)pos;
				lo[i] = (int32_t)(a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0);
			} else {
				qr[t] = zero;
				hi[i] = -1;
				lo[i] = INT32_MAX;
			}
			mv[i] = -1e30f;
			lv[i] = 0;
		}
		long d = 0;
		for (; d + VW <= hd; d += VW) {
			vf v[VW];
			for (int t = 0; t < VW; t++)
				v[t] = LD(qr[t] + d);
			TRANSPOSE(v);
			for (int t = 0; t < VW; t++)
				ST(Qt + (d + t) * Mp + i0, v[t] * scale);
		}
		for (; d < hd; d++) {
			float *dst = Qt + d * Mp + i0;
			for (int t = 0; t < VW; t++)
				dst[t] = qr[t][d] * scale;
		}
	}
	memset(O, 0, (size_t)(Mp * hdp) * 4);

	const long klo = lo[0], khi = (long)hi[M - 1] + 1;
	/* Keys per block: the block's K and V rows (2 KB x hd floats) stay
	 * within about 32 KB, so that they and Qt, O and S share L1/L2 well
	 * (hd 128: 64 keys measured 1.5x slower than 32). */
	const long KB = FL_KB(hd);
	const float *kp[A_KB], *vp[A_KB];
	for (long kb0 = klo; kb0 < khi; kb0 += KB) {
		const long kn = khi - kb0 < KB ? khi - kb0 : KB;
		/* key and value rows of the block */
		for (long j = 0; j < kn;) {
			long pos = kb0 + j, pg = pos / ps, sl = pos % ps;
			long off = ((long)pages[pg] * ps + sl) * dim + kvoff;
			const float *kr = a->K + off, *vr = a->V + off;
			for (; j < kn && sl < ps; j++, sl++, kr += dim, vr += dim) {
				kp[j] = kr;
				vp[j] = vr;
			}
		}
		for (long j = kn; j < (kn + A_RK - 1) / A_RK * A_RK; j++)
			kp[j] = zero;
		if (FL_COPYV) {
			for (long j = 0; j < kn; j++) {
				float *dst = vpad + j * hdp;
				memcpy(dst, vp[j], (size_t)hd * 4);
				memset(dst + hd, 0, (size_t)(hdp - hd) * 4);
				vp[j] = dst;
			}
		}

		/* scores: query vectors qv see the key tile [j0, j0+A_RK) when
		 * lo(first row of qv) <= key and hi(last real row of qv) >= key
		 * for some key of the tile; both bounds are monotone in qv. */
		long qa = 0;
		for (long j0 = 0; j0 < kn; j0 += A_RK) {
			long t0 = kb0 + j0, t1 = kb0 + (j0 + A_RK < kn ? j0 + A_RK : kn) - 1;
			while (qa < NQ && hi[(qa * VW + VW < M ? qa * VW + VW : M) - 1] < t0)
				qa++;
			long qb = qa;
			while (qb < NQ && lo[qb * VW] <= t1)
				qb++;
			for (long qv = qa; qv < qb; qv += A_CQ) {
				int cq = qb - qv < A_CQ ? (int)(qb - qv) : A_CQ;
				FN(fl_stiles)(cq, kp + j0, Qt + qv * VW, Mp, hd, S + j0 * Mp + qv * VW);
			}
		}

		/* online softmax per query vector, over the keys it can see */
		for (long qv = 0; qv < NQ; qv++) {
			long i0 = qv * VW, il = (i0 + VW < M ? i0 + VW : M) - 1;
			long va = lo[i0] - kb0, vb = (long)hi[il] - kb0 + 1;
			if (va < 0)
				va = 0;
			if (vb > kn)
				vb = kn;
			if (va >= vb)
				continue;
			/* every real row of qv sees every key of [va, vb): no mask */
			const int full = lo[il] <= kb0 + va && hi[i0] >= kb0 + vb - 1;
			vf m = LD(mv + i0), bm = SPLAT(-INFINITY);
			if (full && !(cap > 0)) {
				/* four chains: the max's latency, not its throughput, bounds this */
				vf b1 = bm, b2 = bm, b3 = bm;
				long j = va;
				for (; j + 4 <= vb; j += 4) {
					bm = VMAX(bm, LD(S + j * Mp + i0));
					b1 = VMAX(b1, LD(S + (j + 1) * Mp + i0));
					b2 = VMAX(b2, LD(S + (j + 2) * Mp + i0));
					b3 = VMAX(b3, LD(S + (j + 3) * Mp + i0));
				}
				for (; j < vb; j++)
					bm = VMAX(bm, LD(S + j * Mp + i0));
				bm = VMAX(VMAX(bm, b1), VMAX(b2, b3));
			} else {
				vi lov = *(const vi *)(lo + i0), hiv = *(const vi *)(hi + i0);
				for (long j = va; j < vb; j++) {
					float *sp = S + j * Mp + i0;
					vf x = LD(sp);
					if (cap > 0)
						x = cap * VTANH(x / cap);
					vi jv = (vi){0} + (int32_t)(kb0 + j);
					x = SEL((jv >= lov) & (jv <= hiv), x, SPLAT(-INFINITY));
					ST(sp, x);
					bm = VMAX(bm, x);
				}
			}
			vf mn = VMAX(m, bm);
			vf sum = SPLAT(0);
			if (full) {
				for (long j = va; j < vb; j++) {
					float *sp = S + j * Mp + i0;
					vf p = VEXP(LD(sp) - mn);
					ST(sp, p);
					sum += p;
				}
			} else {
				for (long j = va; j < vb; j++) {
					float *sp = S + j * Mp + i0;
					vf x = LD(sp);
					vf p = SEL(x > SPLAT(-INFINITY), VEXP(x - mn), SPLAT(0));
					ST(sp, p);
					sum += p;
				}
			}
			vf alpha = VEXP(m - mn);
			ST(lv + i0, LD(lv + i0) * alpha + sum);
			ST(mv + i0, mn);
			ST(al + i0, alpha);
		}

		/* O = alpha O + P V, in tiles of rows that lie within one query vector */
		for (long qv = 0; qv < NQ; qv++) {
			long iend = qv * VW + VW < M ? qv * VW + VW : M;
			for (long i0 = qv * VW; i0 < iend; i0 += A_PR) {
				int rr = iend - i0 < A_PR ? (int)(iend - i0) : A_PR;
				long ja = lo[i0] - kb0, jb = (long)hi[i0 + rr - 1] - kb0 + 1;
				if (ja < 0)
					ja = 0;
				if (jb > kn)
					jb = kn;
				if (ja >= jb)
					continue;
				for (long off = 0; off < hdp; off += A_PC * VW) {
					int cc = (hdp - off) / VW < A_PC ? (int)((hdp - off) / VW) : A_PC;
					FN(fl_pvtiles)(rr, cc, vp, off, ja, jb, S + i0, Mp, al + i0, O + i0 * hdp + off, hdp);
				}
			}
		}
	}

	for (long i = 0; i < M; i++) {
		long r = r0 + i / gs, h = (long)kvh * G + g0 + i % gs;
		float *o = a->out + (s->row + r) * qdim + h * hd;
		float inv = 1.0f / lv[i];
		const float *oi = O + i * hdp;
		for (long d = 0; d < hd; d++)
			o[d] = oi[d] * inv;
	}
}

#include "attn_dec.h"

/* ---- generic matmul (AVX2 and portable) ---- */

#ifndef NO_GENERIC_MM

/* Weight loaders by dtype; DT is a compile-time constant at every call. */
INL vf WLD(const int DT, const void *w, long i) {
	if (DT == TR_BF16)
		return LDBF((const uint16_t *)w + i);
#if defined(HAVE_F16C)
	if (DT == TR_F16)
		return (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + i)));
#endif
	return LD((const float *)w + i);
}

static inline float bf16f(uint16_t h) {
	uint32_t b = (uint32_t)h << 16;
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static inline float f16f(uint16_t h) { return tr_half(h); }

INL float WSC(const int DT, const void *w, long i) {
	if (DT == TR_BF16)
		return bf16f(((const uint16_t *)w)[i]);
	if (DT == TR_F16)
		return f16f(((const uint16_t *)w)[i]);
	return ((const float *)w)[i];
}

/* One MR x NR tile: d[i][r] = x[i] . w[r] over K. */
INL void GTILE(const int MR, const int NR, const int DT, const float *x, long ldx, const void *w, long ldw, float *d,
	       long ldd, long K) {
	vf acc[4][4];
	for (int i = 0; i < MR; i++)
		for (int r = 0; r < NR; r++)
			acc[i][r] = SPLAT(0);
	long k = 0;
	for (; k + VW <= K; k += VW) {
		vf wv[4];
		for (int r = 0; r < NR; r++)
			wv[r] = WLD(DT, w, r * ldw + k);
		for (int i = 0; i < MR; i++) {
			vf xv = LD(x + i * ldx + k);
			for (int r = 0; r < NR; r++)
				acc[i][r] += xv * wv[r];
		}
	}
	for (int i = 0; i < MR; i++)
		for (int r = 0; r < NR; r++) {
			float s = HSUM(acc[i][r]);
			for (long kk = k; kk < K; kk++)
				s += x[i * ldx + kk] * WSC(DT, w, r * ldw + kk);
			d[i * ldd + r] = s;
		}
}

#define GT_CASE(DT)                                                                                                    \
	switch (mr * 4 + nr) {                                                                                         \
	case 5: GTILE(1, 1, DT, x, ldx, w, ldw, d, ldd, K); break;                                                     \
	case 6: GTILE(1, 2, DT, x, ldx, w, ldw, d, ldd, K); break;                                                     \
	case 7: GTILE(1, 3, DT, x, ldx, w, ldw, d, ldd, K); break;                                                     \
	case 8: GTILE(1, 4, DT, x, ldx, w, ldw, d, ldd, K); break;                                                     \
	case 9: GTILE(2, 1, DT, x, ldx, w, ldw, d, ldd, K); break;                                                     \
	case 10: GTILE(2, 2, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 11: GTILE(2, 3, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 12: GTILE(2, 4, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 13: GTILE(3, 1, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 14: GTILE(3, 2, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 15: GTILE(3, 3, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 16: GTILE(3, 4, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 17: GTILE(4, 1, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 18: GTILE(4, 2, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 19: GTILE(4, 3, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	case 20: GTILE(4, 4, DT, x, ldx, w, ldw, d, ldd, K); break;                                                    \
	}

FUN void gtile_f32(int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd, long K) {
	GT_CASE(TR_F32)
}
FUN void gtile_bf16(int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd, long K) {
	GT_CASE(TR_BF16)
}
#if defined(HAVE_F16C)
FUN void gtile_f16(int mr, int nr, const float *x, long ldx, const void *w, long ldw, float *d, long ldd, long K) {
	GT_CASE(TR_F16)
}
#endif

/* Rows of weights per cache block: about 256 KB of f32. */
static long gblock(long k) {
	long nb = (256 * 1024 / 4) / (k > 0 ? k : 1);
	nb &= ~3L;
	return nb < 4 ? 4 : nb;
}

FUN size_t FN(mm_scratch)(const tr_mm_args *a) {
#if defined(HAVE_F16C)
	(void)a;
	return 0;
#else
	if (a->dtype == TR_F16)
		return (size_t)gblock(a->k) * (size_t)a->k * 4;
	return 0;
#endif
}

FUN void FN(mm)(const tr_mm_args *a, long n0, long n1, void *scr) {
	const long K = a->k, N = a->n, M = a->m;
	const long NB = gblock(K);
	for (long nb = n0; nb < n1; nb += NB) {
		long ne = nb + NB < n1 ? nb + NB : n1;
		const void *w;
		long wrow0; /* row of w that corresponds to nb */
		void (*tile)(int, int, const float *, long, const void *, long, float *, long, long) = gtile_f32;
		if (a->dtype == TR_F32) {
			w = a->w;
			wrow0 = nb;
		} else if (a->dtype == TR_BF16) {
			w = a->w;
			wrow0 = nb;
			tile = gtile_bf16;
		} else {
#if defined(HAVE_F16C)
			w = a->w;
			wrow0 = nb;
			tile = gtile_f16;
#else
			float *buf = (float *)scr;
			const uint16_t *src = (const uint16_t *)a->w + nb * K;
			for (long i = 0; i < (ne - nb) * K; i++)
				buf[i] = f16f(src[i]);
			w = buf;
			wrow0 = 0;
#endif
		}
		for (long i0 = 0; i0 < M; i0 += 4) {
			int mr = M - i0 < 4 ? (int)(M - i0) : 4;
			for (long j = nb; j < ne; j += 4) {
				int nr = ne - j < 4 ? (int)(ne - j) : 4;
				long wi = (j - nb + wrow0) * K;
				const void *wp = a->dtype == TR_F32 || (w != a->w) ? (const void *)((const float *)w + wi)
										   : (const void *)((const uint16_t *)w + wi);
				tile(mr, nr, a->x + i0 * K, K, wp, K, a->dst + i0 * N + j, N, K);
			}
		}
	}
	(void)scr;
}

#endif /* NO_GENERIC_MM */

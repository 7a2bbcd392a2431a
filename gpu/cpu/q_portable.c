/* Quantized-weight kernels in plain C (any architecture): the activation
 * quantization and the block dot products of every quantized dtype, written
 * from the block layouts (see gpu/quant.go and gpu/ref/qdot.go, which define
 * the arithmetic: integer dot products of the stored quants with the
 * activation quants, offsets and minimums through the activation sums, then
 * the scales). This is the portable kernel set; the vector sets (q_impl.h)
 * have their own kernel for every dtype. tr_qdequant at the end, which
 * every set uses for large prefills, widens weights to float32. */
#include <math.h>
#include <string.h>

#include "tr_impl.h"

float tr_f16(const uint8_t *p) { return tr_half((uint16_t)(p[0] | p[1] << 8)); }

static inline uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* One block of n activations: d = amax/127, q = round_to_even(x*(127/amax)). */
static float qblock(const float *x, int8_t *q, int n) {
	float amax = 0;
	for (int i = 0; i < n; i++) {
		float a = fabsf(x[i]);
		amax = a > amax ? a : amax;
	}
	float id = amax != 0 ? 127.0f / amax : 0.0f;
	for (int i = 0; i < n; i++) {
		float v = nearbyintf(x[i] * id);
		v = v > 127 ? 127 : v < -127 ? -127 : v;
		q[i] = (int8_t)v;
	}
	return amax / 127;
}

static void quant32_portable(const float *x, tr_qa32 *dst, long n) {
	for (long b = 0; b < n / 32; b++) {
		tr_qa32 *o = &dst[b];
		o->d = qblock(x + b * 32, o->q, 32);
		int32_t s = 0;
		for (int i = 0; i < 32; i++)
			s += o->q[i];
		o->sum = s;
	}
}

static void quantk_portable(const float *x, tr_qak *dst, long n) {
	for (long b = 0; b < n / 256; b++) {
		tr_qak *o = &dst[b];
		o->d = qblock(x + b * 256, o->q, 256);
		for (int s = 0; s < 16; s++) {
			int32_t t = 0;
			for (int i = 0; i < 16; i++)
				t += o->q[s * 16 + i];
			o->bsums[s] = (int16_t)t;
		}
	}
}

/* Blocks of 32: unsigned quants u, the offset off (value = (u - off) * d +
 * m) and the scales. */
static void unpack32(int dt, const uint8_t *w, uint8_t *u, int *off, float *d, float *m) {
	const uint8_t *qs;
	uint32_t qh = 0;
	*m = 0;
	*off = 0;
	*d = tr_f16(w);
	switch (dt) {
	case TR_Q8_0:
		for (int i = 0; i < 32; i++)
			u[i] = (uint8_t)(w[2 + i] ^ 0x80); /* q + 128 */
		*off = 128;
		return;
	case TR_Q4_0:
		qs = w + 2;
		*off = 8;
		break;
	case TR_Q4_1:
		*m = tr_f16(w + 2);
		qs = w + 4;
		break;
	case TR_Q5_0:
		qh = rd32(w + 2);
		qs = w + 6;
		*off = 16;
		break;
	default: /* TR_Q5_1 */
		*m = tr_f16(w + 2);
		qh = rd32(w + 4);
		qs = w + 8;
		break;
	}
	for (int j = 0; j < 16; j++) {
		u[j] = (uint8_t)((qs[j] & 15) | ((qh >> j) & 1) << 4);
		u[j + 16] = (uint8_t)((qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
	}
}

static void dot32_portable(int dt, int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	const long bb = dt == TR_Q8_0 ? 34 : dt == TR_Q4_0 ? 18 : dt == TR_Q4_1 ? 20 : dt == TR_Q5_0 ? 22 : 24;
	float acc[4] = {0, 0, 0, 0};
	for (long b = 0; b < nb; b++) {
		uint8_t u[32];
		int off;
		float d, m;
		unpack32(dt, w + b * bb, u, &off, &d, &m);
		for (int r = 0; r < nx; r++) {
			const tr_qa32 *a = (const tr_qa32 *)(xq + r * xs) + b;
			int32_t s = 0;
			for (int i = 0; i < 32; i++)
				s += (int32_t)u[i] * a->q[i];
			s -= off * a->sum;
			acc[r] += d * a->d * (float)s;
			if (m != 0)
				acc[r] += m * a->d * (float)a->sum;
		}
	}
	for (int r = 0; r < nx; r++)
		out[r] = acc[r];
}

/* K blocks: unsigned quants u[256], the offset, 16 scales and 16 minimums
 * (per 16 elements; 0 when the type has none), d and dmin. */
static void unpackk(int dt, const uint8_t *w, uint8_t *u, int *off, int *sc, int *mn, float *d, float *dmin) {
	*off = 0;
	*dmin = 0;
	for (int s = 0; s < 16; s++)
		mn[s] = 0;
	switch (dt) {
	case TR_Q2_K: {
		const uint8_t *scales = w, *qs = w + 16;
		*d = tr_f16(w + 80);
		*dmin = tr_f16(w + 82);
		for (int e = 0; e < 256; e++)
			u[e] = (qs[e / 128 * 32 + e % 32] >> (2 * (e % 128 / 32))) & 3;
		for (int s = 0; s < 16; s++) {
			sc[s] = scales[s] & 15;
			mn[s] = scales[s] >> 4;
		}
		return;
	}
	case TR_Q3_K: {
		const uint8_t *hm = w, *qs = w + 32, *scales = w + 96;
		*d = tr_f16(w + 108);
		for (int e = 0; e < 256; e++) {
			int h = e / 128, j = e % 128 / 32, l = e % 32;
			u[e] = (uint8_t)(((qs[h * 32 + l] >> (2 * j)) & 3) | ((hm[l] >> (h * 4 + j)) & 1) << 2);
		}
		for (int i = 0; i < 16; i++) {
			int low = i < 8 ? scales[i] & 15 : scales[i - 8] >> 4;
			int high = (scales[8 + i % 4] >> (2 * (i / 4))) & 3;
			sc[i] = (low | high << 4) - 32;
		}
		*off = 4;
		return;
	}
	case TR_Q4_K:
	case TR_Q5_K: {
		const uint8_t *scales = w + 4, *qs = w + 16, *qh = NULL;
		*d = tr_f16(w);
		*dmin = tr_f16(w + 2);
		if (dt == TR_Q5_K) {
			qh = w + 16;
			qs = w + 48;
		}
		for (int s = 0; s < 8; s++) {
			int a, b;
			if (s < 4) {
				a = scales[s] & 63;
				b = scales[s + 4] & 63;
			} else {
				a = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4;
				b = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
			}
			sc[2 * s] = sc[2 * s + 1] = a;
			mn[2 * s] = mn[2 * s + 1] = b;
			for (int l = 0; l < 32; l++) {
				int v = (qs[s / 2 * 32 + l] >> (4 * (s % 2))) & 15;
				if (qh)
					v |= ((qh[l] >> s) & 1) << 4;
				u[s * 32 + l] = (uint8_t)v;
			}
		}
		return;
	}
	default: { /* TR_Q6_K */
		const uint8_t *ql = w, *qh = w + 128, *scales = w + 192;
		*d = tr_f16(w + 208);
		for (int e = 0; e < 256; e++) {
			int h = e / 128, j = e % 128 / 32, l = e % 32;
			int low = (ql[h * 64 + (j % 2) * 32 + l] >> (4 * (j / 2))) & 15;
			int high = (qh[h * 32 + l] >> (2 * j)) & 3;
			u[e] = (uint8_t)(low | high << 4);
		}
		for (int s = 0; s < 16; s++)
			sc[s] = (int8_t)scales[s];
		*off = 32;
	}
	}
}

static void dotk_portable(int dt, int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {
	const long bb = dt == TR_Q2_K ? 84 : dt == TR_Q3_K ? 110 : dt == TR_Q4_K ? 144 : dt == TR_Q5_K ? 176 : 210;
	float acc[4] = {0, 0, 0, 0};
	for (long b = 0; b < nb; b++) {
		uint8_t u[256];
		int off, sc[16], mn[16];
		float d, dmin;
		unpackk(dt, w + b * bb, u, &off, sc, mn, &d, &dmin);
		for (int r = 0; r < nx; r++) {
			const tr_qak *a = (const tr_qak *)(xq + r * xs) + b;
			int32_t isum = 0, msum = 0;
			for (int s = 0; s < 16; s++) {
				int32_t p = 0;
				for (int l = 0; l < 16; l++)
					p += (int32_t)u[s * 16 + l] * a->q[s * 16 + l];
				p -= off * a->bsums[s];
				isum += sc[s] * p;
				msum += mn[s] * a->bsums[s];
			}
			acc[r] += d * a->d * (float)isum;
			if (dmin != 0)
				acc[r] -= dmin * a->d * (float)msum;
		}
	}
	for (int r = 0; r < nx; r++)
		out[r] = acc[r];
}

#define DOT32(T)                                                                                                       \
	static void dot_##T##_portable(int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {  \
		dot32_portable(TR_##T, nx, w, xq, xs, nb, out);                                                        \
	}
#define DOTK(T)                                                                                                        \
	static void dot_##T##_portable(int nx, const uint8_t *w, const uint8_t *xq, long xs, long nb, float *out) {  \
		dotk_portable(TR_##T, nx, w, xq, xs, nb, out);                                                         \
	}
DOT32(Q8_0)
DOT32(Q4_0)
DOT32(Q4_1)
DOT32(Q5_0)
DOT32(Q5_1)
DOTK(Q2_K)
DOTK(Q3_K)
DOTK(Q4_K)
DOTK(Q5_K)
DOTK(Q6_K)

const tr_qkernels tr_qk_portable = {
	.name = "portable",
	.quant32 = quant32_portable,
	.quantk = quantk_portable,
	.dot =
		{
			[TR_Q8_0] = dot_Q8_0_portable,
			[TR_Q4_0] = dot_Q4_0_portable,
			[TR_Q4_1] = dot_Q4_1_portable,
			[TR_Q5_0] = dot_Q5_0_portable,
			[TR_Q5_1] = dot_Q5_1_portable,
			[TR_Q2_K] = dot_Q2_K_portable,
			[TR_Q3_K] = dot_Q3_K_portable,
			[TR_Q4_K] = dot_Q4_K_portable,
			[TR_Q5_K] = dot_Q5_K_portable,
			[TR_Q6_K] = dot_Q6_K_portable,
		},
};

/* Rows [r0, r1) of a quantized matrix (rows of rowb bytes, k elements) into
 * float32 rows of dst (row r at dst + (r - r0) * k), bit for bit as the
 * block dequantizers of package gpu define them: an element is
 * (u - off) * d (+ m) for the blocks of 32, (d * scale) * (u - off)
 * (- dmin * min) for the K types, each product rounded to float32 before the
 * addition (no contraction into fused multiply-adds, which the baseline
 * x86-64 target lacks anyway and the attribute forbids elsewhere). */
__attribute__((optimize("fp-contract=off"))) void tr_qdequant(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, float *dst) {
	const int big = dt >= TR_Q2_K && dt <= TR_Q6_K;
	const long bs = big ? 256 : 32, nb = k / bs, bb = rowb / nb;
	for (long r = r0; r < r1; r++) {
		float *o = dst + (r - r0) * k;
		for (long b = 0; b < nb; b++) {
			const uint8_t *wb = w + r * rowb + b * bb;
			if (!big) {
				uint8_t u[32];
				int off;
				float d, m;
				unpack32(dt, wb, u, &off, &d, &m);
				if (dt == TR_Q8_0)
					for (int i = 0; i < 32; i++)
						o[b * 32 + i] = (float)(int8_t)wb[2 + i] * d;
				else if (dt == TR_Q4_1 || dt == TR_Q5_1)
					for (int i = 0; i < 32; i++) {
						float p = (float)u[i] * d;
						o[b * 32 + i] = p + m;
					}
				else
					for (int i = 0; i < 32; i++)
						o[b * 32 + i] = (float)(u[i] - off) * d;
				continue;
			}
			uint8_t u[256];
			int off, sc[16], mn[16];
			float d, dmin;
			unpackk(dt, wb, u, &off, sc, mn, &d, &dmin);
			for (int s = 0; s < 16; s++) {
				float dl = d * (float)sc[s];
				float *os = o + b * 256 + s * 16;
				const uint8_t *us = u + s * 16;
				if (dt == TR_Q2_K || dt == TR_Q4_K || dt == TR_Q5_K) {
					float ml = dmin * (float)mn[s];
					for (int i = 0; i < 16; i++) {
						float p = dl * (float)us[i];
						os[i] = p - ml;
					}
				} else
					for (int i = 0; i < 16; i++)
						os[i] = dl * (float)(us[i] - off);
			}
		}
	}
}

/* State-space kernels: depthwise causal convolution and the selective scan.
 * Each runs one sequence over a range of channels / heads so the Go side can
 * split the work across threads. target_clones builds AVX-512, AVX2 and
 * baseline versions and picks one at load time (no -march flags). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TR_CLONES
#endif
/* The scan's dot product over the state dimension may be summed in vector
 * lanes: the order is fixed per build and CPU kind, and the result stays
 * within f32 rounding of the sequential sum. */
#if defined(__GNUC__) && !defined(__clang__)
#define TR_REASSOC __attribute__((optimize("associative-math", "no-signed-zeros", "no-trapping-math")))
#else
#define TR_REASSOC
#endif

/* expf with ~2 ulp accuracy, written so the compiler can vectorise it. */
static inline __attribute__((always_inline)) float tr_expf(float x)
{
	if (x < -87.3f)
		x = -87.3f;
	if (x > 88.3f)
		x = 88.3f;
	float k = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
	float r = x - k * 0.693145751953125f;
	r = r - k * 1.428606765330187045e-06f;
	float p = 1.9875691500e-4f;
	p = p * r + 1.3981999507e-3f;
	p = p * r + 8.3334519073e-3f;
	p = p * r + 4.1665795894e-2f;
	p = p * r + 1.6666665459e-1f;
	p = p * r + 5.0000001201e-1f;
	p = p * r * r + r + 1.0f;
	union {
		float f;
		int32_t i;
	} u;
	u.i = ((int32_t)k + 127) << 23;
	return p * u.f;
}

static inline float tr_silu(float v) { return v / (1.0f + tr_expf(-v)); }

/* out[t][c] for rows [row, row+n) and channels [c0, c1); the state holds the
 * last K-1 inputs (oldest first, C wide) and is advanced for those channels. */
TR_CLONES
void tr_causal_conv(float *out, const float *x, long row, long n, long C, long K,
		    const float *w, const float *bias, int silu, float *state, long c0, long c1)
{
	/* Row by row, vectorised across channels: input t-K+1+j comes from the
	 * state while it is before the chunk. */
	for (long t = 0; t < n; t++) {
		float *o = out + (row + t) * C;
		for (long c = c0; c < c1; c++)
			o[c] = bias ? bias[c] : 0.0f;
		for (long j = 0; j < K; j++) {
			long src = t - K + 1 + j;
			const float *in = src < 0 ? state + (K - 1 + src) * C : x + (row + src) * C;
			for (long c = c0; c < c1; c++)
				o[c] += w[c * K + j] * in[c];
		}
		if (silu)
			for (long c = c0; c < c1; c++)
				o[c] = tr_silu(o[c]);
	}
	/* New state: the last K-1 inputs of (state, chunk), oldest first. */
	for (long j = 0; j < K - 1; j++) {
		long src = n - (K - 1) + j;
		if (src < 0) /* short chunk: shift the old state */
			for (long c = c0; c < c1; c++)
				state[j * C + c] = state[(j + n) * C + c];
		else
			for (long c = c0; c < c1; c++)
				state[j * C + c] = x[(row + src) * C + c];
	}
}

/* Selective scan for rows [row, row+n) and heads [h0, h1); see
 * gpu.Device.SelectiveScan for the recurrence. state is H x P x N. */
TR_CLONES TR_REASSOC
void tr_scan(float *y, const float *x, const float *dt, const float *B, const float *Cm,
	     long row, long n, long H, long P, long N, long G, const float *A, const float *D,
	     float *state, long h0, long h1)
{
	long per_group = H / G;
	float dA[256];
	for (long t = row; t < row + n; t++) {
		for (long h = h0; h < h1; h++) {
			float d = dt[t * H + h];
			long g = h / per_group;
			const float *b = B + (t * G + g) * N;
			const float *c = Cm + (t * G + g) * N;
			const float *a = A + h * N;
			for (long k = 0; k < N; k++)
				dA[k] = tr_expf(d * a[k]);
			for (long p = 0; p < P; p++) {
				float xv = x[t * H * P + h * P + p];
				float dx = d * xv;
				float *st = state + (h * P + p) * N;
				float acc = 0.0f;
				for (long k = 0; k < N; k++) {
					float v = dA[k] * st[k] + b[k] * dx;
					st[k] = v;
					acc += v * c[k];
				}
				y[t * H * P + h * P + p] = acc + D[h] * xv;
			}
		}
	}
}

/* softplus(x) = log(1 + exp(x)), x itself above 20 as torch does; written
 * as max(x, 0) + log1p(exp(-|x|)) with log1p(e) = 2 atanh(e / (2 + e)). */
TR_CLONES
void tr_softplus(float *x, long n)
{
	for (long i = 0; i < n; i++) {
		float v = x[i];
		float e = tr_expf(-__builtin_fabsf(v));
		float s = e / (2.0f + e), s2 = s * s;
		float p = 1.0f / 13.0f;
		p = p * s2 + 1.0f / 11.0f;
		p = p * s2 + 1.0f / 9.0f;
		p = p * s2 + 1.0f / 7.0f;
		p = p * s2 + 1.0f / 5.0f;
		p = p * s2 + 1.0f / 3.0f;
		p = p * s2 + 1.0f;
		float r = (v > 0.0f ? v : 0.0f) + 2.0f * s * p;
		x[i] = v > 20.0f ? v : r;
	}
}

/* Gated RMSNorm: h = x * silu(gate), normalised per group of g elements of
 * each row of n, times w. dst may alias x. */
TR_CLONES TR_REASSOC
void tr_rmsnorm_gated(float *dst, const float *x, const float *gate, const float *w,
		      long rows, long n, long g, float eps)
{
	for (long r = 0; r < rows; r++) {
		for (long g0 = 0; g0 < n; g0 += g) {
			const float *xr = x + r * n + g0, *gr = gate + r * n + g0;
			float *d = dst + r * n + g0;
			float ss = 0.0f;
			for (long i = 0; i < g; i++) {
				float h = xr[i] * tr_silu(gr[i]);
				d[i] = h;
				ss += h * h;
			}
			float inv = 1.0f / __builtin_sqrtf(ss / (float)g + eps);
			for (long i = 0; i < g; i++)
				d[i] = d[i] * inv * w[g0 + i];
		}
	}
}

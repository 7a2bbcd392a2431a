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
	float win[16];
	for (long c = c0; c < c1; c++) {
		const float *wc = w + c * K;
		float b = bias ? bias[c] : 0.0f;
		/* window of the last K inputs, oldest first */
		for (long j = 0; j < K - 1; j++)
			win[j] = state[j * C + c];
		for (long t = 0; t < n; t++) {
			win[K - 1] = x[(row + t) * C + c];
			float acc = b;
			for (long j = 0; j < K; j++)
				acc += wc[j] * win[j];
			out[(row + t) * C + c] = silu ? tr_silu(acc) : acc;
			for (long j = 0; j < K - 1; j++)
				win[j] = win[j + 1];
		}
		for (long j = 0; j < K - 1; j++)
			state[j * C + c] = win[j];
	}
}

/* Selective scan for rows [row, row+n) and heads [h0, h1); see
 * gpu.Device.SelectiveScan for the recurrence. state is H x P x N. */
TR_CLONES
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

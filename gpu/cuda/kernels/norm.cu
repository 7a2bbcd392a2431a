/*
 * norm.cu: RMS normalisation.
 *
 *   tk_rmsnorm        Device.RMSNorm: per row of n, dst = x * rsqrt(mean(x^2) + eps) * g,
 *                     g = w or (unit_offset != 0) 1 + w. dst may alias x.
 *   tk_rmsnorm_gated  Device.RMSNormGated: h = x * silu(gate), then each group
 *                     of `group` elements of a row of n is RMS-normalised and
 *                     scaled by w[group offset + i].
 *
 * Launch: tk_rmsnorm grid (rows), tk_rmsnorm_gated grid (rows, n/group);
 * 1-D block of a power of two threads (<= TK_MAX_THREADS). Each thread
 * sums the squares of its strided elements, the block reduces them through
 * shared memory (tk_block_sum), and each thread scales its own elements
 * (so dst aliasing x is safe: every element is read and written by one
 * thread, the read before the reduction's barriers).
 */
#include "common.cuh"

extern "C" __global__ void tk_rmsnorm(float *dst, const float *x, const float *w, int n, float eps, int unit_offset) {
	SHARED_ARRAY(float, red, TK_MAX_THREADS);
	const float *xr = x + (long long)blockIdx.x * n;
	float *o = dst + (long long)blockIdx.x * n;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
	ss = tk_block_sum(ss, red);
	float inv = rsqrtf(ss / (float)n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float g = unit_offset ? 1.0f + w[i] : w[i];
		o[i] = xr[i] * inv * g;
	}
}

extern "C" __global__ void tk_rmsnorm_gated(float *dst, const float *x, const float *gate, const float *w, int n, int group, float eps) {
	SHARED_ARRAY(float, red, TK_MAX_THREADS);
	long long base = (long long)blockIdx.x * n + (long long)blockIdx.y * group;
	const float *wg = w + (long long)blockIdx.y * group;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < group; i += blockDim.x) {
		float g = gate[base + i];
		float h = x[base + i] * (g / (1.0f + expf(-g)));
		ss += h * h;
	}
	ss = tk_block_sum(ss, red);
	float inv = rsqrtf(ss / (float)group + eps);
	for (int i = threadIdx.x; i < group; i += blockDim.x) {
		float g = gate[base + i];
		float h = x[base + i] * (g / (1.0f + expf(-g)));
		dst[base + i] = h * inv * wg[i];
	}
}

/*
 * rope.cu: rotary position embedding, Device.RoPE, in the "rotate half"
 * layout, in place. x is rows x heads*head_dim; cos and sin are rows x half
 * with half = rot/2 <= head_dim/2. For every head h and i < half:
 *   (x[i], x[i+half]) <- (x[i]*c - x[i+half]*s, x[i+half]*c + x[i]*s),
 * c = cos[row][i], s = sin[row][i]; dimensions at and past rot are untouched
 * (partial rotary).
 *
 * Launch: grid (rows), any 1-D block; the threads of block r stride over
 * the heads*half pairs of row r, each pair read and written by one thread.
 */
#include "common.cuh"

extern "C" __global__ void tk_rope(float *x, const float *cos_, const float *sin_, int heads, int head_dim, int half) {
	float *xr = x + (long long)blockIdx.x * heads * head_dim;
	const float *c = cos_ + (long long)blockIdx.x * half;
	const float *s = sin_ + (long long)blockIdx.x * half;
	for (int k = threadIdx.x; k < heads * half; k += blockDim.x) {
		int h = k / half, i = k % half;
		float *v = xr + h * head_dim;
		float a = v[i], b = v[i + half];
		v[i] = a * c[i] - b * s[i];
		v[i + half] = b * c[i] + a * s[i];
	}
}

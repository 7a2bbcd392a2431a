/*
 * elementwise.cu: the elementwise gpu.Device ops on float32 activations.
 *
 *   tk_add        dst = a + b                      Device.Add (dst may alias a or b)
 *   tk_add_bias   x[i] += bias[i % nb]             Device.AddBias
 *   tk_silu_mul   dst = silu(gate) * up            Device.SiLUMul
 *   tk_gelu_mul   dst = gelu_tanh(gate) * up       Device.GELUTanhMul
 *   tk_softcap    x = c * tanh(x / c)              Device.Softcap
 *   tk_scale      x *= s                           Device.Scale
 *   tk_softplus   x = log1p(exp(x)), x above 20    Device.Softplus
 *
 * Launch: 1-D grid of any size, 1-D block of any size; each thread walks
 * the elements i = blockIdx.x*blockDim.x + threadIdx.x in steps of
 * gridDim.x*blockDim.x (a grid-stride loop), so any grid covers any n.
 */
#include "common.cuh"

#define TK_GRID_STRIDE(i, n) \
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

extern "C" __global__ void tk_add(float *dst, const float *a, const float *b, long long n) {
	TK_GRID_STRIDE(i, n) dst[i] = a[i] + b[i];
}

extern "C" __global__ void tk_add_bias(float *x, const float *bias, long long n, int nb) {
	TK_GRID_STRIDE(i, n) x[i] += bias[i % nb];
}

extern "C" __global__ void tk_silu_mul(float *dst, const float *gate, const float *up, long long n) {
	TK_GRID_STRIDE(i, n) {
		float g = gate[i];
		dst[i] = g / (1.0f + expf(-g)) * up[i];
	}
}

extern "C" __global__ void tk_gelu_mul(float *dst, const float *gate, const float *up, long long n) {
	TK_GRID_STRIDE(i, n) {
		float g = gate[i];
		float t = tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)); /* sqrt(2/pi) */
		dst[i] = 0.5f * g * (1.0f + t) * up[i];
	}
}

extern "C" __global__ void tk_softcap(float *x, long long n, float c) {
	TK_GRID_STRIDE(i, n) x[i] = c * tanhf(x[i] / c);
}

extern "C" __global__ void tk_scale(float *x, long long n, float s) {
	TK_GRID_STRIDE(i, n) x[i] *= s;
}

extern "C" __global__ void tk_softplus(float *x, long long n) {
	TK_GRID_STRIDE(i, n) {
		float v = x[i];
		if (v <= 20.0f) x[i] = log1pf(expf(v));
	}
}

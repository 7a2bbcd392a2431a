/*
 * embed.cu: embedding gather, Device.Embed for F32, BF16 and F16 weights:
 * dst[r][c] = widen(w[ids[r]][c]) for r < rows, c < cols (exact widening).
 *
 *   tk_embed_f32   w is rows_w x cols float
 *   tk_embed_bf16  w is rows_w x cols bfloat16 bits
 *   tk_embed_f16   w is rows_w x cols IEEE half bits
 *
 * Launch: grid (rows), any 1-D block; block r copies row ids[r], its
 * threads striding over the columns (consecutive threads, consecutive
 * columns: coalesced loads and stores).
 */
#include "common.cuh"

extern "C" __global__ void tk_embed_f32(float *dst, const float *w, const int *ids, int cols) {
	const float *src = w + (long long)ids[blockIdx.x] * cols;
	float *o = dst + (long long)blockIdx.x * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = src[c];
}

extern "C" __global__ void tk_embed_bf16(float *dst, const unsigned short *w, const int *ids, int cols) {
	const unsigned short *src = w + (long long)ids[blockIdx.x] * cols;
	float *o = dst + (long long)blockIdx.x * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = tk_bf16(src[c]);
}

extern "C" __global__ void tk_embed_f16(float *dst, const unsigned short *w, const int *ids, int cols) {
	const unsigned short *src = w + (long long)ids[blockIdx.x] * cols;
	float *o = dst + (long long)blockIdx.x * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = tk_f16(src[c]);
}

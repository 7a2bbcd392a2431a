/*
 * common.cuh: helpers every kernel file includes. Under nvcc (__CUDACC__)
 * they are device functions; elsewhere cuhost.h makes the same source
 * ordinary C++ (see doc.go).
 *
 * Block reductions go through shared memory and __syncthreads only (no warp
 * shuffles), so the host shim runs them exactly as written. They require
 * blockDim.x to be a power of two and every thread of the block to call
 * them (they contain barriers).
 */
#ifndef TK_COMMON_CUH
#define TK_COMMON_CUH

#ifdef __CUDACC__
#define SHARED_ARRAY(T, name, n) __shared__ T name[n]
#else
#include "cuhost.h"
#endif

/* TK_MAX_THREADS is the largest block (threads in x) the reductions support. */
#define TK_MAX_THREADS 1024

/* TK_INF is +infinity, spelled without relying on math.h's INFINITY in
 * device code. */
#define TK_INF (__uint_as_float(0x7f800000u))

/* tk_bf16 widens a bfloat16 (its bits) exactly. */
__device__ __forceinline__ float tk_bf16(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

/* tk_f16 widens an IEEE half (its bits) exactly, subnormals, infinities and
 * NaNs included. */
__device__ __forceinline__ float tk_f16(unsigned short h) {
	unsigned sign = (unsigned)(h >> 15) << 31;
	unsigned exp = (h >> 10) & 0x1f;
	unsigned mant = h & 0x3ff;
	if (exp == 0) {
		if (mant == 0) return __uint_as_float(sign);
		unsigned e = 127 - 15 + 1; /* subnormal: normalise */
		while ((mant & 0x400) == 0) {
			mant <<= 1;
			e--;
		}
		return __uint_as_float(sign | e << 23 | (mant & 0x3ff) << 13);
	}
	if (exp == 0x1f) return __uint_as_float(sign | 0xffu << 23 | mant << 13);
	return __uint_as_float(sign | (exp + 127 - 15) << 23 | mant << 13);
}

/* tk_block_sum returns the sum of v over the block's threads (1-D blocks),
 * to every thread. red must hold blockDim.x floats. */
__device__ __forceinline__ float tk_block_sum(float v, float *red) {
	unsigned t = threadIdx.x;
	red[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s) red[t] += red[t + s];
		__syncthreads();
	}
	float r = red[0];
	__syncthreads(); /* nobody reuses red before every thread has read it */
	return r;
}

/* tk_block_max is tk_block_sum with max. */
__device__ __forceinline__ float tk_block_max(float v, float *red) {
	unsigned t = threadIdx.x;
	red[t] = v;
	__syncthreads();
	for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
		if (t < s) red[t] = fmaxf(red[t], red[t + s]);
		__syncthreads();
	}
	float r = red[0];
	__syncthreads();
	return r;
}

#endif

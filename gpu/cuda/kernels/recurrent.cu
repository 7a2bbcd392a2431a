/*
 * recurrent.cu: the state-space layers' recurrences over time, per sequence.
 *
 *   tk_causal_conv1d   Device.CausalConv1D (gpu.ConvParams)
 *   tk_selective_scan  Device.SelectiveScan (gpu.ScanParams)
 *
 * Sequences (gpu.RecSeq) arrive flattened: sequence s owns rows
 * [seq_row[s], seq_row[s]+seq_n[s]) of the inputs, and its state starts at
 * states + state_off[s] (state_off includes the params' StateOffset).
 *
 * tk_causal_conv1d: out[t][c] = bias[c] + sum_j w[c*K+j] * in(t-K+1+j)[c],
 * then silu if silu != 0, where in(t) for t < 0 comes from the state (the
 * last K-1 inputs, oldest first, (K-1) x channels) and the state then
 * becomes the last K-1 inputs of (old state, chunk). bias may be null. out
 * must not alias x.
 * Launch: grid (ceil(channels/blockDim.x), sequences), any 1-D block; one
 * thread per (sequence, channel) walks the sequence's rows in order.
 *
 * tk_selective_scan: for each row t and channel (h, p) of heads x head_dim,
 *   s[h,p,n] = exp(dt[t,h]*A[h,n]) * s[h,p,n] + dt[t,h] * B[t,g,n] * x[t,h,p]
 *   y[t,h,p] = sum_n s[h,p,n] * C[t,g,n] + D[h] * x[t,h,p],  g = h / (heads/groups),
 * the state being heads x head_dim x state_dim floats. x and y are rows x
 * heads*head_dim, dt rows x heads, B and C rows x groups*state_dim.
 * Launch: grid (ceil(heads*head_dim/blockDim.x), sequences), any 1-D block;
 * one thread per (sequence, channel) keeps walking its state_dim states
 * through the rows in order. (Simple rather than fast: no chunked SSD.)
 */
#include "common.cuh"

extern "C" __global__ void tk_causal_conv1d(float *out, const float *x, const float *w, const float *bias, float *states,
					    const long long *state_off, const int *seq_row, const int *seq_n, int channels,
					    int width, int silu) {
	const int s = blockIdx.y;
	const int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= channels) return;
	const int K = width, row = seq_row[s], n = seq_n[s];
	float *st = states + state_off[s];
	const float *wc = w + (long long)c * K;
	for (int t = 0; t < n; t++) {
		float acc = bias ? bias[c] : 0.0f;
		for (int j = 0; j < K; j++) {
			int tt = t - K + 1 + j;
			float v = tt < 0 ? st[(long long)(K - 1 + tt) * channels + c] : x[(long long)(row + tt) * channels + c];
			acc += wc[j] * v;
		}
		if (silu) acc = acc / (1.0f + expf(-acc));
		out[(long long)(row + t) * channels + c] = acc;
	}
	/* New state slot i takes input n-(K-1)+i: from the old state at index
	 * n+i >= i when that is negative, so increasing i reads before it writes. */
	for (int i = 0; i < K - 1; i++) {
		int src = n - (K - 1) + i;
		float v = src < 0 ? st[(long long)(K - 1 + src) * channels + c] : x[(long long)(row + src) * channels + c];
		st[(long long)i * channels + c] = v;
	}
}

extern "C" __global__ void tk_selective_scan(float *y, const float *x, const float *dt, const float *B, const float *C,
					     const float *A, const float *D, float *states, const long long *state_off,
					     const int *seq_row, const int *seq_n, int heads, int head_dim, int state_dim,
					     int groups) {
	const int s = blockIdx.y;
	const int ch = blockIdx.x * blockDim.x + threadIdx.x;
	const int width = heads * head_dim;
	if (ch >= width) return;
	const int h = ch / head_dim, N = state_dim;
	const int g = h / (heads / groups);
	float *st = states + state_off[s] + (long long)ch * N;
	const float *a = A + (long long)h * N;
	for (int t = seq_row[s]; t < seq_row[s] + seq_n[s]; t++) {
		const float d = dt[(long long)t * heads + h];
		const float xv = x[(long long)t * width + ch];
		const float *b = B + ((long long)t * groups + g) * N;
		const float *c = C + ((long long)t * groups + g) * N;
		float acc = 0.0f;
		for (int k = 0; k < N; k++) {
			float v = expf(d * a[k]) * st[k] + d * b[k] * xv;
			st[k] = v;
			acc += v * c[k];
		}
		y[(long long)t * width + ch] = acc + D[h] * xv;
	}
}

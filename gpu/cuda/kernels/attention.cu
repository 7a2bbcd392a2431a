/*
 * attention.cu: paged causal attention with grouped KV heads, Device.Attention,
 * for decode and prefill rows alike.
 *
 *   tk_attn_paged  one block per (query head, query row)
 *
 * Semantics (gpu.AttnParams, gpu.KVLayer, gpu.AttnSeq): query row r, at
 * position pos = row_pos[r], head h, attends to the keys of kv head
 * h / (heads/kv_heads) at positions j in [lo, pos], lo = max(0,
 * pos-window+1) when window > 0 else 0, with weights softmax over j of
 *   s_j = scale * q·k_j, then s_j = softcap * tanh(s_j / softcap) if softcap > 0,
 * and out = sum_j w_j v_j. Position j of the row's sequence lives in page
 * pages[row_ptab[r] + j/page_size], slot j%page_size: its key is the
 * kv_dim floats at K[(page*page_size + slot)*kv_dim], this head's part at
 * offset (h / (heads/kv_heads)) * head_dim; V likewise. q and out are
 * rows x heads*head_dim. The host flattens []gpu.AttnSeq into the per-row
 * arrays row_pos (Pos + r - Row) and row_ptab (the offset of the row's
 * sequence's page table in the concatenation pages), so prefill chunks
 * starting at any position and decode rows are the same case.
 *
 * Algorithm: online softmax (the FlashAttention idea) over tiles of
 * blockDim.x keys. Per tile, thread t scores key t0+t (and keeps its slot
 * offset in shared memory); the block reduces the tile's maximum and the
 * sum of exp(s - m_new) through shared memory; every thread then rescales
 * its own output dimensions d = t, t+T, ... by exp(m_old - m_new) and adds
 * the tile's p_j * v_j[d] (consecutive threads read consecutive floats of
 * each value row: coalesced). out = acc / l at the end. Float32 throughout.
 *
 * Launch: grid (heads, rows), 1-D block of a power of two threads
 * <= TK_MAX_THREADS; head_dim <= TK_ATTN_MAX_HEAD_DIM.
 */
#include "common.cuh"

#define TK_ATTN_MAX_HEAD_DIM 256

extern "C" __global__ void tk_attn_paged(float *out, const float *q, const float *K, const float *V, const int *pages,
					 const int *row_ptab, const int *row_pos, int page_size, int kv_dim, int heads,
					 int kv_heads, int head_dim, float scale, int window, float softcap) {
	SHARED_ARRAY(float, qs, TK_ATTN_MAX_HEAD_DIM);
	SHARED_ARRAY(float, acc, TK_ATTN_MAX_HEAD_DIM);
	SHARED_ARRAY(float, p, TK_MAX_THREADS);
	SHARED_ARRAY(long long, off, TK_MAX_THREADS);
	SHARED_ARRAY(float, red, TK_MAX_THREADS);

	const int h = blockIdx.x, r = blockIdx.y, t = threadIdx.x, T = blockDim.x;
	const int kvo = h / (heads / kv_heads) * head_dim;
	const int pos = row_pos[r];
	const int *pt = pages + row_ptab[r];
	int lo = 0;
	if (window > 0 && pos - window + 1 > lo) lo = pos - window + 1;
	const long long qrow = ((long long)r * heads + h) * head_dim;

	for (int d = t; d < head_dim; d += T) {
		qs[d] = q[qrow + d];
		acc[d] = 0.0f;
	}
	__syncthreads();

	float m = -INFINITY, l = 0.0f;
	for (int t0 = lo; t0 <= pos; t0 += T) {
		const int j = t0 + t;
		float s = -INFINITY;
		if (j <= pos) {
			long long o = ((long long)pt[j / page_size] * page_size + j % page_size) * kv_dim + kvo;
			off[t] = o;
			const float *k = K + o;
			float dot = 0.0f;
			for (int i = 0; i < head_dim; i++) dot += qs[i] * k[i];
			s = dot * scale;
			if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
		}
		const float mn = fmaxf(m, tk_block_max(s, red)); /* finite: key t0 is in range */
		const float e = j <= pos ? expf(s - mn) : 0.0f;
		p[t] = e;
		const float sum = tk_block_sum(e, red); /* its barriers publish p and off */
		const float corr = expf(m - mn);        /* 0 on the first tile */
		const int nk = pos - t0 + 1 < T ? pos - t0 + 1 : T;
		for (int d = t; d < head_dim; d += T) {
			float a = acc[d] * corr;
			for (int jj = 0; jj < nk; jj++) a += p[jj] * V[off[jj] + d];
			acc[d] = a;
		}
		l = l * corr + sum;
		m = mn;
		__syncthreads(); /* p and off are rewritten by the next tile */
	}
	for (int d = t; d < head_dim; d += T) out[qrow + d] = acc[d] / l;
}

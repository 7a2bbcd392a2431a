/*
 * attention.cu: paged causal attention with grouped KV heads, Device.Attention,
 * for decode and prefill rows alike.
 *
 *   tk_attn_paged          one block per (query head, query row): decode,
 *                          and any rows (prefill too) with head_dim <= 256
 *   tk_attn_paged_prefill  one block per (query head, tile of up to
 *                          TK_PF_BQ consecutive rows of one sequence):
 *                          prefill, head_dim <= TK_PF_MAX_HEAD_DIM; every
 *                          key and value tile it loads into shared memory
 *                          serves all the tile's query rows
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
 * offset in shared memory; each thread reads its own key row, which is not
 * coalesced: correctness first, a tuned version would split a key's
 * head_dim across a warp); the block reduces the tile's maximum and the
 * sum of exp(s - m_new) through shared memory; every thread then rescales
 * its own output dimensions d = t, t+T, ... by exp(m_old - m_new) and adds
 * the tile's p_j * v_j[d] (consecutive threads read consecutive floats of
 * each value row: coalesced). out = acc / l at the end. Float32 throughout.
 *
 * tk_attn_paged launch: grid (heads, rows), 1-D block of a power of two
 * threads <= TK_MAX_THREADS; head_dim <= TK_ATTN_MAX_HEAD_DIM.
 *
 * tk_attn_paged_prefill: the same online softmax over tiles of TK_PF_BK
 * keys, for a tile of nq <= TK_PF_BQ query rows at consecutive positions
 * pos0 .. pos0+nq-1 of one sequence (rows tile_row[b] .. +tile_n[b]-1, the
 * positions and page table again from row_pos/row_ptab). Per key tile the
 * block loads K and V rows into shared memory (threads along head_dim:
 * coalesced), scores every (query, key) pair with the causal and window
 * masks of each query's own position, lets thread i % blockDim.x update
 * row i's running max and sum, and then rescales and accumulates the output
 * tile (threads over (row, dimension) pairs). No tree reductions: any 1-D
 * block of at most TK_MAX_THREADS threads. The host splits each
 * sequence's rows into tiles (grid (heads, tiles)).
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

	float m = -TK_INF, l = 0.0f;
	for (int t0 = lo; t0 <= pos; t0 += T) {
		const int j = t0 + t;
		float s = -TK_INF;
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

#define TK_PF_BQ 16
#define TK_PF_BK 16
#define TK_PF_MAX_HEAD_DIM 128

extern "C" __global__ void tk_attn_paged_prefill(float *out, const float *q, const float *K, const float *V,
						 const int *pages, const int *row_ptab, const int *row_pos,
						 const int *tile_row, const int *tile_n, int page_size, int kv_dim,
						 int heads, int kv_heads, int head_dim, float scale, int window,
						 float softcap) {
	SHARED_ARRAY(float, qs, TK_PF_BQ * TK_PF_MAX_HEAD_DIM);
	SHARED_ARRAY(float, acc, TK_PF_BQ * TK_PF_MAX_HEAD_DIM);
	SHARED_ARRAY(float, ks, TK_PF_BK * TK_PF_MAX_HEAD_DIM);
	SHARED_ARRAY(float, vs, TK_PF_BK * TK_PF_MAX_HEAD_DIM);
	SHARED_ARRAY(float, sc, TK_PF_BQ * TK_PF_BK);
	SHARED_ARRAY(float, m, TK_PF_BQ);
	SHARED_ARRAY(float, l, TK_PF_BQ);
	SHARED_ARRAY(float, corr, TK_PF_BQ);

	const int h = blockIdx.x, t = threadIdx.x, T = blockDim.x, hd = head_dim;
	const int row0 = tile_row[blockIdx.y], nq = tile_n[blockIdx.y];
	const int kvo = h / (heads / kv_heads) * hd;
	const int pos0 = row_pos[row0], last = pos0 + nq - 1;
	const int *pt = pages + row_ptab[row0];
	int lo = 0; /* the first row's window start: the smallest of the tile */
	if (window > 0 && pos0 - window + 1 > lo) lo = pos0 - window + 1;

	for (int k = t; k < nq * hd; k += T) {
		int i = k / hd, d = k % hd;
		qs[i * hd + d] = q[((long long)(row0 + i) * heads + h) * hd + d];
		acc[i * hd + d] = 0.0f;
	}
	for (int i = t; i < nq; i += T) {
		m[i] = -TK_INF;
		l[i] = 0.0f;
	}

	for (int k0 = lo; k0 <= last; k0 += TK_PF_BK) {
		const int nk = last - k0 + 1 < TK_PF_BK ? last - k0 + 1 : TK_PF_BK;
		for (int k = t; k < nk * hd; k += T) {
			int jj = k / hd, d = k % hd, j = k0 + jj;
			long long o = ((long long)pt[j / page_size] * page_size + j % page_size) * kv_dim + kvo + d;
			ks[jj * hd + d] = K[o];
			vs[jj * hd + d] = V[o];
		}
		__syncthreads(); /* the q tile (first pass), K and V tiles are in */

		for (int k = t; k < nq * TK_PF_BK; k += T) {
			int i = k / TK_PF_BK, jj = k % TK_PF_BK, j = k0 + jj, p = pos0 + i;
			float s = -TK_INF;
			if (jj < nk && j <= p && (window <= 0 || j > p - window)) {
				float dot = 0.0f;
				for (int d = 0; d < hd; d++) dot += qs[i * hd + d] * ks[jj * hd + d];
				s = dot * scale;
				if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
			}
			sc[i * TK_PF_BK + jj] = s;
		}
		__syncthreads();

		for (int i = t; i < nq; i += T) { /* thread i owns row i's statistics */
			float *row = sc + i * TK_PF_BK;
			float mt = -TK_INF;
			for (int jj = 0; jj < TK_PF_BK; jj++) mt = fmaxf(mt, row[jj]);
			const float mn = fmaxf(m[i], mt);
			if (mn == -TK_INF) { /* no key of this row seen yet */
				for (int jj = 0; jj < TK_PF_BK; jj++) row[jj] = 0.0f;
				corr[i] = 1.0f;
			} else {
				float sum = 0.0f;
				for (int jj = 0; jj < TK_PF_BK; jj++) {
					row[jj] = expf(row[jj] - mn); /* masked: exp(-inf) = 0 */
					sum += row[jj];
				}
				const float c = expf(m[i] - mn);
				corr[i] = c;
				l[i] = l[i] * c + sum;
				m[i] = mn;
			}
		}
		__syncthreads();

		for (int k = t; k < nq * hd; k += T) {
			int i = k / hd, d = k % hd;
			float a = acc[i * hd + d] * corr[i];
			for (int jj = 0; jj < nk; jj++) a += sc[i * TK_PF_BK + jj] * vs[jj * hd + d];
			acc[i * hd + d] = a;
		}
		__syncthreads(); /* the next tile overwrites ks, vs, sc and corr */
	}
	for (int k = t; k < nq * hd; k += T) {
		int i = k / hd, d = k % hd;
		out[((long long)(row0 + i) * heads + h) * hd + d] = acc[i * hd + d] / l[i];
	}
}

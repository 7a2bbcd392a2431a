/* The matmul of quantized weights: dst = x·Wᵀ with W in a ggml block
 * format. x is quantized once per call (tr_qa32 or tr_qak blocks, see
 * tr_impl.h), then every output is the dot product of a weight row with a
 * row of quantized activations (the kernel set's tr_qkernels).
 *
 * Decode (m < 16) streams W once: each thread owns a region of the output
 * rows (tr_regions, as the 16-bit decode matmul does) and walks it front to
 * back, each weight row dotted with up to 4 rows of x per pass (from L1 for
 * the later passes), with the rows a few KB ahead prefetched.
 * Weights of the types with blocks of 32 and Q4_K packed at load (tr_xp_pack: the packed group
 * layout of tr_impl.h) on the VNNI set run every call of 1-31 rows
 * through it instead, in the same regions: x is packed into tiles of 8
 * rows, and each group of 16 weight rows, already in the lane layout,
 * streams once per tile with no unpacking (from L1 after the first tile):
 * one vpdpbusd per 4 elements of 16 weight rows and one row of x.
 * Batches (TR_XL_MIN <= m < TR_QMM_DEQUANT) of other weights on a set with
 * the lane layout (tr_impl.h; AVX-512 VNNI) run it from their own blocks:
 * each 16 weight rows are unpacked once per call into a scratch buffer
 * that every tile then streams. The one-row kernels unpack each weight
 * block again for every 4 rows of x and spend most of a batch's time
 * there (BenchmarkQuantMatMul).
 * Small prefills (16 <= m < TR_QMM_DEQUANT) elsewhere take groups of
 * weight rows from a shared counter; a group (about 32 KB of weights)
 * stays in L1/L2 while every 4 rows of x pass over it, so W is read from
 * memory once per call, not once per row of x.
 * Larger prefills are compute-bound, where the f32 kernels (on the
 * avx512bf16 set the packed outer-product kernel, near the FMA peak) beat
 * integer dot products of 32 elements: the weights are dequantized to
 * float32 (the set's dequant, else tr_qdequant), all threads a slice of
 * rows each, in chunks of at most 4 MB
 * (one chunk when the whole matrix fits), and each chunk multiplied by x
 * unquantized. Those calls compute gpu/ref's MatMul semantics (x times the
 * dequantized weights) in float32. */
#include <stdatomic.h>
#include <string.h>

#include "tr_impl.h"

size_t tr_qact_bytes(int dtype, long k) {
	return tr_qblock_elems(dtype) == 256 ? (size_t)(k / 256) * sizeof(tr_qak) : (size_t)(k / 32) * sizeof(tr_qa32);
}

const char *tr_qkernels_name(tr_ctx *c, int dtype) {
	const tr_qkernels *q = tr_ctx_qkernels(c);
	(void)dtype;
	return q->name;
}

typedef struct {
	const tr_qkernels *q;
	void *dst;
	const float *x;
	long m, k;
	size_t xs;
	int dtype;
} qact_job;

static void qact_rows(const qact_job *j, long r0, long r1) {
	for (long r = r0; r < r1; r++) {
		uint8_t *o = (uint8_t *)j->dst + (size_t)r * j->xs;
		if (tr_qblock_elems(j->dtype) == 256)
			j->q->quantk(j->x + r * j->k, (tr_qak *)o, j->k);
		else
			j->q->quant32(j->x + r * j->k, (tr_qa32 *)o, j->k);
	}
}

static void qact_worker(void *p, int tid, int nth) {
	qact_job *j = p;
	long r0 = j->m * tid / nth, r1 = j->m * (tid + 1) / nth;
	qact_rows(j, r0, r1);
}

static void qact(tr_ctx *c, void *dst, const float *x, long m, long k, int dtype, int nth) {
	qact_job j = {.q = tr_ctx_qkernels(c), .dst = dst, .x = x, .m = m, .k = k,
		      .xs = tr_qact_bytes(dtype, k), .dtype = dtype};
	if (m < 4 || m * k < 65536)
		nth = 1;
	tr_run(c, qact_worker, &j, nth);
}

void tr_qact(tr_ctx *c, void *dst, const float *x, long m, long k, int dtype) {
	qact(c, dst, x, m, k, dtype, tr_nthreads(c));
}

typedef struct {
	tr_qdot_fn dot;
	tr_qdot2_fn dot2; /* NULL: rows one at a time */
	float *dst;
	const uint8_t *w, *xq;
	long m, n, nb;
	long rowb, xs;
	long group, ngroups;
	_Atomic long next;
} qmm_job;

/* Prefetch distance of the decode walk, in bytes of weights. */
#define QPF_BYTES 4096

/* Output rows r (and r+1 when two), x rows [i0, i0+nx). */
static inline void qmm_dot(const qmm_job *j, long r, int two, long i0, int nx) {
	const long N = j->n;
	const uint8_t *wr = j->w + r * j->rowb, *xq = j->xq + i0 * j->xs;
	float out[4], out1[4];
	if (two) {
		j->dot2(nx, wr, wr + j->rowb, xq, j->xs, j->nb, out, out1);
		for (int t = 0; t < nx; t++) {
			j->dst[(i0 + t) * N + r] = out[t];
			j->dst[(i0 + t) * N + r + 1] = out1[t];
		}
		return;
	}
	j->dot(nx, wr, xq, j->xs, j->nb, out);
	for (int t = 0; t < nx; t++)
		j->dst[(i0 + t) * N + r] = out[t];
}

/* Output rows [n0, n1), all m rows of x: a weight row (or two) at a time,
 * against up to 4 rows of x per pass. */
static void qmm_rows(void *p, long n0, long n1, int tid) {
	qmm_job *j = p;
	(void)tid;
	const long rowb = j->rowb, N = j->n;
	const uint8_t *end = j->w + N * rowb;
	for (long r = n0; r < n1;) {
		const int two = j->dot2 && r + 1 < n1;
		/* the bytes QPF_BYTES ahead of these rows, one line per 64 */
		const uint8_t *pf = j->w + r * rowb + QPF_BYTES;
		for (long o = 0; o < (two ? 2 : 1) * rowb && pf + o < end; o += 64)
			__builtin_prefetch(pf + o, 0, 0);
		for (long i0 = 0; i0 < j->m; i0 += 4)
			qmm_dot(j, r, two, i0, j->m - i0 < 4 ? (int)(j->m - i0) : 4);
		r += two ? 2 : 1;
	}
}

/* Prefill: groups of weight rows from the shared counter; for each group,
 * tiles of 4 rows of x over its rows. */
static void qmm_worker(void *p, int tid, int nth) {
	qmm_job *j = p;
	(void)tid;
	(void)nth;
	const long N = j->n;
	for (;;) {
		long g = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (g >= j->ngroups)
			return;
		long n0 = g * j->group, n1 = n0 + j->group < N ? n0 + j->group : N;
		for (long i0 = 0; i0 < j->m; i0 += 4) {
			int nx = j->m - i0 < 4 ? (int)(j->m - i0) : 4;
			for (long r = n0; r < n1;) {
				const int two = j->dot2 && r + 1 < n1;
				qmm_dot(j, r, two, i0, nx);
				r += two ? 2 : 1;
			}
		}
	}
}

typedef struct {
	int dtype;
	const uint8_t *w;
	long rowb, r0, r1, k;
	float *dst;
	void (*dequant)(int dt, const uint8_t *w, long rowb, long r0, long r1, long k, float *dst);
} deq_job;

static void deq_worker(void *p, int tid, int nth) {
	deq_job *j = p;
	long n = j->r1 - j->r0;
	long a = j->r0 + n * tid / nth, b = j->r0 + n * (tid + 1) / nth;
	if (a < b)
		j->dequant(j->dtype, j->w, j->rowb, a, b, j->k, j->dst + (a - j->r0) * j->k);
}

/* Bytes of dequantized weights per chunk of a large prefill. */
#define QDEQ_CHUNK (4L << 20)

static int qmm_dequant(tr_ctx *c, float *dst, const float *x, long m, const uint8_t *w, int dtype, long n, long k,
		       long rowb, int nth) {
	long rows = QDEQ_CHUNK / (k * 4);
	if (rows < 16)
		rows = 16;
	if (rows >= n || n * k * 4 <= 2 * QDEQ_CHUNK)
		rows = n;
	const tr_qkernels *q = tr_ctx_qkernels(c);
	float *wf = tr_ctx_buf(c, 1, (size_t)rows * (size_t)k * 4);
	float *tmp = rows < n ? tr_ctx_buf(c, 0, (size_t)m * (size_t)rows * 4) : dst;
	if (!wf || !tmp)
		return -1;
	for (long r0 = 0; r0 < n; r0 += rows) {
		long r1 = r0 + rows < n ? r0 + rows : n;
		deq_job dj = {.dtype = dtype, .w = w, .rowb = rowb, .r0 = r0, .r1 = r1, .k = k, .dst = wf,
			      .dequant = q->dequant ? q->dequant : tr_qdequant};
		tr_run(c, deq_worker, &dj, nth);
		tr_matmul(c, tmp, x, m, wf, TR_F32, r1 - r0, k);
		if (tmp != dst)
			for (long i = 0; i < m; i++)
				memcpy(dst + i * n + r0, tmp + i * (r1 - r0), (size_t)(r1 - r0) * 4);
	}
	return 0;
}

int tr_qmm_dequant_min(void) { return TR_QMM_DEQUANT; }

/* The quantized rows of x (xs bytes apart) into tiles of TR_XL_R rows in
 * the lane layout of tr_impl.h. */
static void xl_pack(int dt, const uint8_t *xq, size_t xs, long m, long k, uint8_t *tiles) {
	const long S = tr_xl_s(dt), XB = tr_xl_xb(dt), R = TR_XL_R, ns = k / S;
	const int MIN = tr_xl_min(dt), off = tr_xl_off(dt);
	const size_t tb = tr_xl_tile_bytes(dt, k);
	for (long t = 0; t * R < m; t++) {
		uint8_t *xu = tiles + t * tb;
		float *dx = (float *)(xu + R * k), *sums = dx + R * (k / XB);
		int32_t *xc = (int32_t *)(sums + (MIN ? R * ns : 0));
		const long read = tr_xl_rows_read(m - t * R < R ? m - t * R : R);
		for (long l = 0; l < read; l++) {
			const long i = t * R + l;
			if (i >= m) {
				for (long g = 0; g < k / 4; g++)
					memset(xu + g * 4 * R + 4 * l, 0, 4);
				for (long b = 0; b < k / XB; b++)
					dx[R * b + l] = 0;
				for (long u = 0; u < ns; u++) {
					if (MIN)
						sums[R * u + l] = 0;
					if (off)
						xc[R * u + l] = 0;
				}
				continue;
			}
			const uint8_t *row = xq + i * xs;
			for (long b = 0; b < k / XB; b++) {
				const int8_t *q;
				float d;
				int32_t sub[16];
				if (XB == 32) {
					const tr_qa32 *a = (const tr_qa32 *)row + b;
					q = a->q;
					d = a->d;
					sub[0] = a->sum;
				} else {
					const tr_qak *a = (const tr_qak *)row + b;
					q = a->q;
					d = a->d;
					for (int u = 0; u < 16; u++)
						sub[u] = S == 16 ? a->bsums[u] : u < 8 ? a->bsums[2 * u] + a->bsums[2 * u + 1] : 0;
				}
				dx[R * b + l] = d;
				for (long u = 0; u < XB / S; u++) {
					const long si = b * (XB / S) + u;
					if (MIN)
						sums[R * si + l] = d * (float)sub[u];
					if (off)
						xc[R * si + l] = -off * sub[u];
				}
				for (long g = 0; g < XB / 4; g++)
					memcpy(xu + (b * XB / 4 + g) * 4 * R + 4 * l, q + 4 * g, 4);
			}
		}
	}
}

typedef struct {
	tr_ctx *c;
	tr_xl_fn fn;
	int dtype;
	const uint8_t *w, *tiles;
	long rowb, m, k;
	float *dst;
	long ldd;
	size_t scratch;
} xl_job;

static void xl_rows(void *p, long n0, long n1, int tid) {
	xl_job *j = p;
	void *s = tr_ctx_scratch(j->c, tid, j->scratch);
	if (s)
		j->fn(j->dtype, j->w, j->rowb, n0, n1, j->k, j->tiles, j->m, j->dst, j->ldd, s);
}

/* Rows of x from which the lane layout runs (when the set has it): below,
 * the tile's lanes are mostly empty and the one-row kernels, which need no
 * unpacking, win. */
#define TR_XL_MIN 5

/* Multiply-adds below which a call runs on the calling thread. */
#define QMM_SERIAL 65536L

typedef struct {
	tr_xp_fn fn;
	int dtype;
	const uint8_t *xp, *tiles;
	long m, k;
	float *dst;
	long ldd;
} xp_job;

static void xp_rows(void *p, long n0, long n1, int tid) {
	(void)tid;
	xp_job *j = p;
	j->fn(j->dtype, j->xp, n0, n1, j->k, j->tiles, j->m, j->dst, j->ldd);
}

int tr_xp_supported(tr_ctx *c, int dtype) { return tr_xp_type(dtype) && tr_ctx_qkernels(c)->xp != NULL; }

size_t tr_xp_bytes(int dtype, long n, long k) {
	return (size_t)((n + TR_XL_L - 1) / TR_XL_L) * tr_xp_group_bytes(dtype, k);
}

/* Q4_K rows into the packed layout (tr_impl.h): the 6-bit scales and
 * minimums decoded as ggml's get_scale_min_k4 does. */
static void xp_pack_q4k(uint8_t *dst, const uint8_t *w, long n, long k) {
	const long nb = k / 256, ng = (n + TR_XL_L - 1) / TR_XL_L;
	const size_t BB = tr_xp_block_bytes(TR_Q4_K), rowb = (size_t)nb * 144;
	for (long g = 0; g < ng; g++)
		for (long b = 0; b < nb; b++) {
			uint8_t *o = dst + ((size_t)g * nb + b) * BB;
			for (int j = 0; j < TR_XL_L; j++) {
				const long row = g * TR_XL_L + j < n ? g * TR_XL_L + j : n - 1;
				const uint8_t *src = w + (size_t)row * rowb + (size_t)b * 144, *sc = src + 4, *qs = src + 16;
				for (int c = 0; c < 4; c++)
					for (int q = 0; q < 8; q++)
						memcpy(o + (8 * c + q) * 64 + 4 * j, qs + 32 * c + 4 * q, 4);
				for (int s = 0; s < 8; s++) {
					uint8_t a, m;
					if (s < 4) {
						a = sc[s] & 63;
						m = sc[s + 4] & 63;
					} else {
						a = (uint8_t)((sc[s + 4] & 0xF) | ((sc[s - 4] >> 6) << 4));
						m = (uint8_t)((sc[s + 4] >> 4) | ((sc[s] >> 6) << 4));
					}
					o[TR_XP_Q4K_SC + 16 * s + j] = a;
					o[TR_XP_Q4K_MN + 16 * s + j] = m;
				}
				memcpy(o + TR_XP_Q4K_D + 2 * j, src, 2);
				memcpy(o + TR_XP_Q4K_DMIN + 2 * j, src + 2, 2);
			}
		}
}

void tr_xp_pack(int dtype, uint8_t *dst, const uint8_t *w, long n, long k) {
	if (dtype == TR_Q4_K) {
		xp_pack_q4k(dst, w, n, k);
		return;
	}
	const long nb = k / 32, ng = (n + TR_XL_L - 1) / TR_XL_L;
	const size_t bb = tr_qblock_bytes(dtype), BB = tr_xp_block_bytes(dtype), rowb = (size_t)nb * bb;
	const int q8 = dtype == TR_Q8_0, nq = q8 ? 32 : 16;
	const int q5 = dtype == TR_Q5_0 || dtype == TR_Q5_1, mn = dtype == TR_Q4_1 || dtype == TR_Q5_1;
	/* where the block's fields sit in ggml's layout: d first, then m, qh, quants */
	const int sm = 2, sh = mn ? 4 : 2, sq = sh + (q5 ? 4 : 0);
	for (long g = 0; g < ng; g++)
		for (long b = 0; b < nb; b++) {
			uint8_t *o = dst + ((size_t)g * nb + b) * BB;
			for (int j = 0; j < TR_XL_L; j++) {
				const long row = g * TR_XL_L + j < n ? g * TR_XL_L + j : n - 1;
				const uint8_t *src = w + (size_t)row * rowb + (size_t)b * bb;
				for (int q = 0; q < nq; q++)
					o[(q / 4) * 64 + 4 * j + q % 4] = q8 ? (uint8_t)(src[2 + q] ^ 0x80) : src[sq + q];
				if (q5)
					memcpy(o + tr_xp_qh(dtype) + 4 * j, src + sh, 4);
				memcpy(o + tr_xp_d(dtype) + 2 * j, src, 2);
				if (mn)
					memcpy(o + tr_xp_m(dtype) + 2 * j, src + sm, 2);
			}
		}
}

int tr_qmatmul(tr_ctx *c, float *dst, const float *x, long m, const void *w, const void *xp, int dtype, long n,
	       long k) {
	if (dtype < TR_Q8_0 || dtype >= TR_NDTYPE || m <= 0 || n <= 0 || k <= 0 || k % tr_qblock_elems(dtype) != 0)
		return -1;
	const long rowb = k / tr_qblock_elems(dtype) * tr_qblock_bytes(dtype);
	if (m >= TR_QMM_DEQUANT)
		return qmm_dequant(c, dst, x, m, w, dtype, n, k, rowb, tr_nthreads(c));
	const tr_qkernels *q = tr_ctx_qkernels(c);
	tr_qdot_fn dot = q->dot[dtype];
	if (!dot)
		dot = tr_qk_portable.dot[dtype];
	const size_t xs = tr_qact_bytes(dtype, k);
	uint8_t *xq = tr_ctx_buf(c, 0, (size_t)m * xs);
	if (!xq)
		return -1;
	int nth = tr_nthreads(c);
	if (m * n * k < QMM_SERIAL)
		nth = 1;
	qact(c, xq, x, m, k, dtype, nth);
	if (xp && q->xp && tr_xp_type(dtype)) {
		const size_t tb = tr_xl_tile_bytes(dtype, k);
		uint8_t *tiles = tr_ctx_buf(c, 1, tb * (size_t)((m + TR_XL_R - 1) / TR_XL_R));
		if (!tiles)
			return -1;
		xl_pack(dtype, xq, xs, m, k, tiles);
		xp_job xj = {.fn = q->xp, .dtype = dtype, .xp = xp, .tiles = tiles, .m = m, .k = k, .dst = dst, .ldd = n};
		if (nth > 1)
			tr_regions(c, n, (long)(tr_xp_group_bytes(dtype, k) / TR_XL_L), xp_rows, &xj, nth);
		else
			xp_rows(&xj, 0, n, 0);
		return 0;
	}
	if (q->xl && m >= TR_XL_MIN) {
		const size_t tb = tr_xl_tile_bytes(dtype, k);
		uint8_t *tiles = tr_ctx_buf(c, 1, tb * (size_t)((m + TR_XL_R - 1) / TR_XL_R));
		if (!tiles)
			return -1;
		xl_pack(dtype, xq, xs, m, k, tiles);
		xl_job xj = {.c = c, .fn = q->xl, .dtype = dtype, .w = w, .tiles = tiles, .rowb = rowb, .m = m, .k = k,
			     .dst = dst, .ldd = n, .scratch = TR_XL_SCRATCH(dtype, k)};
		/* every thread's scratch now, while they idle: a failure is then
		 * this call's -1, not rows left unwritten */
		for (int t = 0; t < (nth > 1 ? nth : 1); t++)
			if (!tr_ctx_scratch(c, t, xj.scratch))
				return -1;
		if (nth > 1)
			tr_regions(c, n, rowb, xl_rows, &xj, nth);
		else
			xl_rows(&xj, 0, n, 0);
		return 0;
	}
	qmm_job j = {.dot = dot, .dot2 = q->dot[dtype] ? q->dot2[dtype] : NULL, .dst = dst, .w = w, .xq = xq, .m = m, .n = n, .nb = k / tr_qblock_elems(dtype),
		     .xs = (long)xs, .rowb = rowb};
	if (m < 16) {
		if (nth > 1)
			tr_regions(c, n, j.rowb, qmm_rows, &j, nth);
		else
			qmm_rows(&j, 0, n, 0);
		return 0;
	}
	/* groups of about 32 KB of weights, at least 4 rows, and at least 4
	 * groups per thread */
	long g = 32768 / j.rowb;
	g = g < 4 ? 4 : g;
	if (nth > 1 && (n + g - 1) / g < 4L * nth) {
		g = n / (4L * nth);
		g = g < 1 ? 1 : g;
	}
	j.group = g;
	j.ngroups = (n + g - 1) / g;
	atomic_store(&j.next, 0);
	tr_run(c, qmm_worker, &j, nth);
	return 0;
}

/* Panel layout of 16-bit weights and the thread driver of the panel matmul
 * (the kernel is in mm_panel_avx512.c). Compiled for the baseline target:
 * packing is plain C, done once per weight at load. */
#include <stdatomic.h>
#include <string.h>

#include "tr_impl.h"

int tr_panel_supported(tr_ctx *c) { return tr_ctx_kernels(c)->mmq != NULL; }

size_t tr_panel_bytes(long n, long k) { return (size_t)((n + 31) / 32) * (size_t)k * 64; }

typedef struct {
	const tr_kernels *ks;
	uint16_t *dst;
	const uint16_t *w;
	long n, k, panels;
	_Atomic long next;
} pack_job;

/* Panel p: row 32p+i goes to halfword 2i of each k's 32 (i < 16) or to
 * 2(i-16)+1 (i >= 16); rows past n stay zero. */
static void pack_panel(const pack_job *j, long p) {
	const long K = j->k;
	uint16_t *d = j->dst + (size_t)p * (size_t)K * 32;
	const uint16_t *w = j->w;
	if (j->ks->panel_pack) {
		j->ks->panel_pack((uint32_t *)d, w, j->n, K, p);
		return;
	}
	memset(d, 0, (size_t)K * 64);
	for (int i = 0; i < 32; i++) {
		long row = 32 * p + i;
		if (row >= j->n)
			break;
		const uint16_t *s = w + (size_t)row * (size_t)K;
		int slot = i < 16 ? 2 * i : 2 * (i - 16) + 1;
		for (long k = 0; k < K; k++)
			d[k * 32 + slot] = s[k];
	}
}

static void pack_worker(void *arg, int tid, int nth) {
	pack_job *j = arg;
	(void)tid;
	(void)nth;
	for (;;) {
		long p = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (p >= j->panels)
			return;
		pack_panel(j, p);
	}
}

void tr_panel_pack(tr_ctx *c, uint16_t *dst, const uint16_t *w, long n, long k) {
	pack_job j = {.ks = tr_ctx_kernels(c), .dst = dst, .w = w, .n = n, .k = k, .panels = (n + 31) / 32};
	atomic_store(&j.next, 0);
	tr_run(c, pack_worker, &j, j.panels > 1 ? tr_nthreads(c) : 1);
}

/* Work items are (block of strips of x rows, block of panels of one
 * segment), taken from a shared counter so that a descheduled thread leaves
 * its share to the others. Items of one panel block are consecutive: each
 * thread keeps the block's panels in its L2 while it walks strips. A call
 * may multiply x by several weights (segments, each with its own dst), so
 * that q, k and v take one pass of the threads. */
#define MAX_SEG 4
typedef struct {
	const tr_kernels *k;
	tr_mmq_args a[MAX_SEG];
	long first[MAX_SEG + 1]; /* first panel block of each segment */
	int nseg;
	long sb, pb; /* strips and panels per item */
	long nsb;    /* blocks of strips */
	_Atomic long next;
} mmq_job;

static void mmq_worker(void *arg, int tid, int nth) {
	mmq_job *j = arg;
	(void)tid;
	(void)nth;
	const long items = j->nsb * j->first[j->nseg], M = j->a[0].m;
	for (;;) {
		long it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (it >= items)
			return;
		long b = it / j->nsb, s0 = (it % j->nsb) * j->sb;
		int g = 0;
		while (b >= j->first[g + 1])
			g++;
		const long P = (j->a[g].n + 31) / 32, p0 = (b - j->first[g]) * j->pb;
		long m0 = s0 * TR_PANEL_MR, m1 = m0 + j->sb * TR_PANEL_MR < M ? m0 + j->sb * TR_PANEL_MR : M;
		long p1 = p0 + j->pb < P ? p0 + j->pb : P;
		j->k->mmq(&j->a[g], m0, m1, p0, p1);
	}
}

/* Bytes of panels an item aims to keep in L2. */
#define PANEL_ITEM_BYTES (256L * 1024)

void tr_matmul_panels(tr_ctx *c, const float *x, long m, long k, int nseg, const tr_panel_seg *seg) {
	if (nseg < 1 || nseg > MAX_SEG)
		return;
	mmq_job j = {.k = tr_ctx_kernels(c), .nseg = nseg};
	const int nth = tr_nthreads(c);
	const long S = (m + TR_PANEL_MR - 1) / TR_PANEL_MR;
	long ptot = 0, per = 0;
	for (int g = 0; g < nseg; g++) {
		const tr_panel_seg *q = &seg[g];
		j.a[g] = (tr_mmq_args){.dst = q->dst, .x = x, .w = q->w, .w2 = q->w2, .m = m, .n = q->n, .k = k,
				       .ldd = q->n, .ldx = k, .epi = q->epi};
		ptot += (q->n + 31) / 32;
		long b = k * 64 * (q->w2 ? 2 : 1);
		per = b > per ? b : per;
	}
	j.pb = PANEL_ITEM_BYTES / per;
	j.pb = j.pb < 1 ? 1 : j.pb > ptot ? ptot : j.pb;
	j.sb = S < 8 ? S : 8;
	/* Enough items that the threads finish together: halve the strips per
	 * item, then the panels, until there are 6 per thread. */
	for (;;) {
		j.nsb = (S + j.sb - 1) / j.sb;
		long npb = 0;
		for (int g = 0; g < nseg; g++) {
			j.first[g] = npb;
			npb += ((seg[g].n + 31) / 32 + j.pb - 1) / j.pb;
		}
		j.first[nseg] = npb;
		if (nth == 1 || j.nsb * npb >= 6L * nth || (j.sb == 1 && j.pb == 1))
			break;
		if (j.sb > 1)
			j.sb = (j.sb + 1) / 2;
		else
			j.pb = (j.pb + 1) / 2;
	}
	atomic_store(&j.next, 0);
	tr_run(c, mmq_worker, &j, nth);
}

void tr_matmul_panel(tr_ctx *c, float *dst, const float *x, long m, const uint16_t *w, const uint16_t *w2, long n,
		     long k, int epi) {
	tr_panel_seg s = {.dst = dst, .w = w, .w2 = w2, .n = n, .epi = epi};
	tr_matmul_panels(c, x, m, k, 1, &s);
}

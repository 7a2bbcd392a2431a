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

/* Work items are (block of strips of x rows, block of panels), taken from a
 * shared counter so that a descheduled thread leaves its share to the
 * others. Items of one panel block are consecutive: each thread keeps the
 * block's panels in its L2 while it walks strips. */
typedef struct {
	const tr_kernels *k;
	tr_mmq_args a;
	long sb, pb;   /* strips and panels per item */
	long nsb, npb; /* blocks of strips and of panels */
	_Atomic long next;
} mmq_job;

static void mmq_worker(void *arg, int tid, int nth) {
	mmq_job *j = arg;
	(void)tid;
	(void)nth;
	const long items = j->nsb * j->npb, P = (j->a.n + 31) / 32;
	for (;;) {
		long it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (it >= items)
			return;
		long s0 = (it % j->nsb) * j->sb, p0 = (it / j->nsb) * j->pb;
		long m0 = s0 * TR_PANEL_MR, m1 = m0 + j->sb * TR_PANEL_MR < j->a.m ? m0 + j->sb * TR_PANEL_MR : j->a.m;
		long p1 = p0 + j->pb < P ? p0 + j->pb : P;
		j->k->mmq(&j->a, m0, m1, p0, p1);
	}
}

/* Bytes of panels an item aims to keep in L2. */
#define PANEL_ITEM_BYTES (256L * 1024)

void tr_matmul_panel(tr_ctx *c, float *dst, const float *x, long m, const uint16_t *w, const uint16_t *w2, long n,
		     long k, int epi) {
	mmq_job j = {.k = tr_ctx_kernels(c)};
	j.a = (tr_mmq_args){.dst = dst, .x = x, .w = w, .w2 = w2, .m = m, .n = n, .k = k, .ldd = n, .ldx = k, .epi = epi};
	const int nth = tr_nthreads(c);
	const long P = (n + 31) / 32, S = (m + TR_PANEL_MR - 1) / TR_PANEL_MR;
	long per = k * 64 * (w2 ? 2 : 1);
	j.pb = PANEL_ITEM_BYTES / per;
	j.pb = j.pb < 1 ? 1 : j.pb > P ? P : j.pb;
	j.sb = S < 8 ? S : 8;
	/* Enough items that the threads finish together: halve the strips per
	 * item, then the panels, until there are 6 per thread. */
	for (;;) {
		j.nsb = (S + j.sb - 1) / j.sb;
		j.npb = (P + j.pb - 1) / j.pb;
		if (nth == 1 || j.nsb * j.npb >= 6L * nth || (j.sb == 1 && j.pb == 1))
			break;
		if (j.sb > 1)
			j.sb = (j.sb + 1) / 2;
		else
			j.pb = (j.pb + 1) / 2;
	}
	atomic_store(&j.next, 0);
	tr_run(c, mmq_worker, &j, nth);
}

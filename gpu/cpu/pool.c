/* Context, persistent worker pool and the thread-splitting drivers of the
 * gpu/cpu kernels. This file is compiled for the baseline target; the vector
 * kernels live in k_*.c and mm_avx512.c and are reached through tr_kernels. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#include "tr_impl.h"

#if defined(__x86_64__) || defined(__i386__)
static inline void cpu_relax(void) { __builtin_ia32_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax(void) { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax(void) {}
#endif

/* How long an idle worker spins before it sleeps on the condition variable. */
#define SPIN_NS 200000L
/* Pause instructions spun before a waiting thread starts to yield (~10-30 us). */
#define SPIN_PAUSES 1024

typedef void (*job_fn)(void *arg, int tid, int nth);

typedef struct {
	void *p;
	size_t n;
	char pad[48];
} scratch_t;


struct tr_ctx {
	const tr_kernels *k;
	const tr_qkernels *qk;
	/* Buffers of tr_ctx_buf (quantized activations). */
	void *buf[2];
	size_t bufn[2];
	int nth;
	int fast_bf16, mm_mode;
	int attn_mode; /* TR_ATTN_* */
	int mm_sched;  /* decode matmul scheduling: 0 regions per thread, 1 shared counter (benchmarks) */
	pthread_t *th;
	_Atomic uint32_t gen;
	_Atomic int pending;
	_Atomic int sleepers;
	_Atomic int stop;
	job_fn fn;
	void *arg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	scratch_t *scr;
	/* bf16 copies of the activations for the SPLIT/FAST matmul modes. */
	uint16_t *xb;
	size_t xbn;
	/* Activations packed for the TR_MM_PACK matmul. */
	float *xp;
	size_t xpn;
	/* Decode attention split across threads: partial results and, per
	 * (sequence, KV head), the count of parts done. */
	float *dpart;
	size_t dpartn;
	_Atomic int *dcnt;
	size_t dcntn;
};

typedef struct {
	tr_ctx *c;
	int tid;
} worker_arg;

static long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *worker(void *p) {
	worker_arg wa = *(worker_arg *)p;
	free(p);
	tr_ctx *c = wa.c;
	uint32_t seen = 0;
	for (;;) {
		uint32_t g;
		long t0 = 0;
		int spins = 0;
		while ((g = atomic_load_explicit(&c->gen, memory_order_acquire)) == seen) {
			if (atomic_load_explicit(&c->stop, memory_order_relaxed))
				return NULL;
			cpu_relax();
			/* Spin on pause only at first; then yield between checks so that
			 * a thread sharing this core on an oversubscribed machine (the
			 * caller, say) can run. */
			if (++spins < SPIN_PAUSES || (spins & 15) != 0)
				continue;
			sched_yield();
			long t = now_ns();
			if (t0 == 0) {
				t0 = t;
				continue;
			}
			if (t - t0 < SPIN_NS)
				continue;
			pthread_mutex_lock(&c->mu);
			atomic_fetch_add(&c->sleepers, 1);
			while (atomic_load(&c->gen) == seen && !atomic_load(&c->stop))
				pthread_cond_wait(&c->cv, &c->mu);
			atomic_fetch_sub(&c->sleepers, 1);
			pthread_mutex_unlock(&c->mu);
			t0 = 0;
		}
		seen = g;
		c->fn(c->arg, wa.tid, c->nth);
		atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
	}
}

/* run calls fn(arg, tid, nth) on every thread of the pool, the caller being
 * tid 0, and returns when all are done. */
static void run(tr_ctx *c, job_fn fn, void *arg, int nth) {
	if (nth <= 1 || c->nth <= 1) {
		fn(arg, 0, 1);
		return;
	}
	c->fn = fn;
	c->arg = arg;
	atomic_store(&c->pending, c->nth - 1);
	atomic_fetch_add(&c->gen, 1);
	if (atomic_load(&c->sleepers) > 0) {
		pthread_mutex_lock(&c->mu);
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	fn(arg, 0, c->nth);
	/* Spin briefly, then yield: on an oversubscribed machine a worker may be
	 * descheduled and spinning would only delay it. */
	for (int spins = 0; atomic_load_explicit(&c->pending, memory_order_acquire) > 0; spins++) {
		if (spins < SPIN_PAUSES || (spins & 15) != 15)
			cpu_relax();
		else
			sched_yield();
	}
}

void tr_run(tr_ctx *c, tr_job_fn fn, void *arg, int nth) { run(c, fn, arg, nth); }
int tr_nthreads(const tr_ctx *c) { return c->nth; }
const tr_kernels *tr_ctx_kernels(const tr_ctx *c) { return c->k; }

static void *scratch(tr_ctx *c, int tid, size_t bytes) {
	scratch_t *s = &c->scr[tid];
	if (s->n < bytes) {
		free(s->p);
		size_t n = bytes + bytes / 4 + 4096;
		n = (n + 63) & ~(size_t)63;
		s->p = aligned_alloc(64, n);
		s->n = s->p ? n : 0;
	}
	return s->p;
}

int tr_cpu_supports(int kset) {
	switch (kset) {
	case TR_K_PORTABLE:
		return 1;
#if defined(__x86_64__)
	case TR_K_AVX2:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	case TR_K_AVX512BF16:
		__builtin_cpu_init();
		return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
		       __builtin_cpu_supports("fma");
#endif
	}
	return 0;
}

tr_ctx *tr_new(int kset, int threads, int fast_bf16, int mm_mode) {
	if (!tr_cpu_supports(kset))
		return NULL;
	tr_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	switch (kset) {
#if defined(__x86_64__)
	case TR_K_AVX2:
		c->k = &tr_kernels_avx2;
		break;
	case TR_K_AVX512BF16:
		c->k = &tr_kernels_avx512;
		break;
#endif
	default:
		c->k = &tr_kernels_portable;
	}
	c->qk = &tr_qk_portable;
#if defined(__x86_64__)
	if (kset == TR_K_AVX2)
		c->qk = &tr_qk_avx2;
	/* Every CPU with AVX512_BF16 so far has AVX512_VNNI; where one does not,
	 * the AVX2 quantized kernels run. */
	if (kset == TR_K_AVX512BF16)
		c->qk = __builtin_cpu_supports("avx512vnni") ? &tr_qk_avx512 : &tr_qk_avx2;
#endif
	if (threads < 1)
		threads = 1;
	c->nth = threads;
	c->fast_bf16 = fast_bf16;
	c->mm_mode = mm_mode;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->scr = calloc((size_t)threads, sizeof *c->scr);
	c->th = calloc((size_t)threads, sizeof *c->th);
	for (int i = 1; i < threads; i++) {
		worker_arg *wa = malloc(sizeof *wa);
		wa->c = c;
		wa->tid = i;
		if (pthread_create(&c->th[i], NULL, worker, wa) != 0) {
			free(wa);
			c->nth = i; /* run with the threads we got */
			break;
		}
	}
	return c;
}

void tr_free(tr_ctx *c) {
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	atomic_store(&c->stop, 1);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	for (int i = 1; i < c->nth; i++)
		pthread_join(c->th[i], NULL);
	for (int i = 0; i < c->nth; i++)
		free(c->scr[i].p);
	free(c->scr);
	free(c->th);
	free(c->xb);
	free(c->xp);
	free(c->buf[0]);
	free(c->buf[1]);
	free(c->dpart);
	free((void *)c->dcnt);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

/* ---- matmul ---- */

typedef struct {
	tr_ctx *c;
	tr_mm_args a;
	long chunk; /* output rows per work item, a multiple of 16 */
	_Atomic long next;
} mm_job;

/* Threads take chunks of output rows from a shared counter, so a thread that
 * is descheduled (or slower) leaves its share to the others. */
static void mm_worker(void *p, int tid, int nth) {
	mm_job *j = p;
	(void)nth;
	size_t sb = j->c->k->mm_scratch ? j->c->k->mm_scratch(&j->a) : 0;
	void *s = sb ? scratch(j->c, tid, sb) : NULL;
	for (;;) {
		long n0 = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed) * j->chunk;
		if (n0 >= j->a.n)
			return;
		long n1 = n0 + j->chunk < j->a.n ? n0 + j->chunk : j->a.n;
		j->c->k->mm(&j->a, n0, n1, s);
	}
}

/* ---- decode matmul: one region of rows per thread, with stealing ----
 *
 * A decode matmul (m < 16) streams its weights from memory once. Each thread
 * owns a contiguous region of the output rows and walks it front to back in
 * chunks that shrink as the region empties, so that its weights are one
 * sequential stream (hardware and software prefetch run on across chunks);
 * a thread whose region is done takes chunks from the back of the fullest
 * other region, so a descheduled or slower thread does not hold up the call.
 * Regions are counted in units of MMR_UNIT rows; front and back of a region
 * share one atomic word. */
#define MMR_UNIT 16
#define MMR_MAXTH 64

typedef struct {
	_Atomic uint64_t fb; /* front | back << 32, in units */
	char pad[56];
} mm_region;

typedef struct {
	tr_ctx *c;
	tr_rows_fn fn;
	void *arg;
	long n;
	long minu, maxu; /* chunk bounds in units */
	int nreg;
	mm_region reg[MMR_MAXTH];
} mmr_job;

/* Claims a chunk of region r: from the front for its owner (a quarter of
 * what is left), else from the back (half of it). Returns 0 when empty. */
static int mmr_take(mmr_job *j, int r, int own, long *u0, long *u1) {
	uint64_t v = atomic_load_explicit(&j->reg[r].fb, memory_order_relaxed);
	for (;;) {
		long f = (long)(v & 0xffffffffu), b = (long)(v >> 32);
		if (f >= b)
			return 0;
		long c = (b - f) / (own ? 4 : 2);
		c = c < j->minu ? j->minu : c > j->maxu ? j->maxu : c;
		uint64_t nv;
		if (own) {
			*u0 = f;
			*u1 = f + c < b ? f + c : b;
			nv = (uint64_t)*u1 | (uint64_t)b << 32;
		} else {
			*u1 = b;
			*u0 = b - c > f ? b - c : f;
			nv = (uint64_t)f | (uint64_t)*u0 << 32;
		}
		if (atomic_compare_exchange_weak_explicit(&j->reg[r].fb, &v, nv, memory_order_relaxed,
							  memory_order_relaxed))
			return 1;
	}
}

static void mmr_worker(void *p, int tid, int nth) {
	mmr_job *j = p;
	(void)nth;
	long u0, u1;
	const long n = j->n;
	while (tid < j->nreg && mmr_take(j, tid, 1, &u0, &u1))
		j->fn(j->arg, u0 * MMR_UNIT, u1 * MMR_UNIT < n ? u1 * MMR_UNIT : n, tid);
	for (;;) {
		int best = -1;
		long most = 0;
		for (int r = 0; r < j->nreg; r++) {
			uint64_t v = atomic_load_explicit(&j->reg[r].fb, memory_order_relaxed);
			long left = (long)(v >> 32) - (long)(v & 0xffffffffu);
			if (left > most) {
				most = left;
				best = r;
			}
		}
		if (best < 0)
			return;
		if (mmr_take(j, best, 0, &u0, &u1))
			j->fn(j->arg, u0 * MMR_UNIT, u1 * MMR_UNIT < n ? u1 * MMR_UNIT : n, tid);
	}
}

void tr_regions(tr_ctx *c, long n, long rowb, tr_rows_fn fn, void *arg, int nth) {
	if (nth > MMR_MAXTH)
		nth = MMR_MAXTH;
	mmr_job j = {.c = c, .fn = fn, .arg = arg, .n = n, .nreg = nth};
	long units = (n + MMR_UNIT - 1) / MMR_UNIT;
	/* chunks of about 16 KB to 512 KB of weights */
	j.minu = (16384 / rowb + MMR_UNIT - 1) / MMR_UNIT;
	j.maxu = (524288 / rowb) / MMR_UNIT;
	if (j.minu < 1)
		j.minu = 1;
	if (j.maxu < j.minu)
		j.maxu = j.minu;
	for (int t = 0; t < nth; t++) {
		uint64_t f = (uint64_t)(units * t / nth), b = (uint64_t)(units * (t + 1) / nth);
		atomic_init(&j.reg[t].fb, f | b << 32);
	}
	run(c, mmr_worker, &j, nth);
}

typedef struct {
	tr_ctx *c;
	const tr_mm_args *a;
} mmr_arg;

static void mmr_rows(void *p, long n0, long n1, int tid) {
	mmr_arg *r = p;
	size_t sb = r->c->k->mm_scratch ? r->c->k->mm_scratch(r->a) : 0;
	void *s = sb ? scratch(r->c, tid, sb) : NULL;
	r->c->k->mm(r->a, n0, n1, s);
}

static void mm_regions(tr_ctx *c, const tr_mm_args *a, int nth) {
	mmr_arg r = {.c = c, .a = a};
	tr_regions(c, a->n, a->k * (a->dtype == TR_F32 ? 4 : 2), mmr_rows, &r, nth);
}

void *tr_ctx_buf(tr_ctx *c, int which, size_t bytes) {
	if (c->bufn[which] < bytes) {
		free(c->buf[which]);
		size_t n = (bytes + bytes / 4 + 4096 + 63) & ~(size_t)63;
		c->buf[which] = aligned_alloc(64, n);
		c->bufn[which] = c->buf[which] ? n : 0;
	}
	return c->buf[which];
}

const tr_qkernels *tr_ctx_qkernels(const tr_ctx *c) { return c->qk; }
void *tr_ctx_scratch(tr_ctx *c, int tid, size_t bytes) { return scratch(c, tid, bytes); }

static void xconv_worker(void *p, int tid, int nth) {
	mm_job *j = p;
	long per = (j->a.m + nth - 1) / nth;
	long m0 = (long)tid * per, m1 = m0 + per;
	if (m1 > j->a.m)
		m1 = j->a.m;
	if (m0 < m1)
		j->c->k->xconv(&j->a, m0, m1);
}

/* Packed matmul: work items are (M part, run of panels); the x strips are
 * packed by all threads first. */
typedef struct {
	tr_ctx *c;
	tr_mm_args a;
	long strips, mparts, mstrips; /* strips of x, M parts, strips per part */
	long panels, pchunk;           /* panels of outputs, panels per item */
	long nitems;
	_Atomic long next;
} mmp_job;

static void mmp_packa_worker(void *p, int tid, int nth) {
	mmp_job *j = p;
	long per = (j->strips + nth - 1) / nth;
	long s0 = (long)tid * per, s1 = s0 + per < j->strips ? s0 + per : j->strips;
	if (s0 < s1)
		j->c->k->mmp_packa(&j->a, j->c->xp, s0, s1);
}

static void mmp_worker(void *p, int tid, int nth) {
	mmp_job *j = p;
	(void)nth;
	const tr_kernels *k = j->c->k;
	void *s = scratch(j->c, tid, k->mmp_scratch(&j->a));
	const long MR = k->mmp_mr, NR = k->mmp_nr;
	for (;;) {
		long it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (it >= j->nitems)
			return;
		long mi = it % j->mparts, ni = it / j->mparts;
		long m0 = mi * j->mstrips * MR, m1 = m0 + j->mstrips * MR < j->a.m ? m0 + j->mstrips * MR : j->a.m;
		long n0 = ni * j->pchunk * NR, n1 = n0 + j->pchunk * NR < j->a.n ? n0 + j->pchunk * NR : j->a.n;
		if (m0 < m1 && n0 < n1)
			k->mmp(&j->a, j->c->xp, m0, m1, n0, n1, s);
	}
}

static void mm_packed(tr_ctx *c, const tr_mm_args *a, int nth) {
	mmp_job j = {.c = c, .a = *a};
	const long MR = c->k->mmp_mr, NR = c->k->mmp_nr;
	size_t need = c->k->mmp_abytes(a->m, a->k);
	if (c->xpn < need) {
		free(c->xp);
		size_t nn = (need + need / 4 + 4096 + 63) & ~(size_t)63;
		c->xp = aligned_alloc(64, nn);
		c->xpn = nn;
	}
	j.strips = (a->m + MR - 1) / MR;
	j.panels = (a->n + NR - 1) / NR;
	/* Items of whole panels (an item packs its panels of W once per M part,
	 * and every panel rereads the packed x anyway, so small items cost
	 * little); with few panels, split M too so that all threads get work. */
	j.pchunk = 1;
	if (j.panels > 32L * nth)
		j.pchunk = j.panels / (32L * nth);
	long nparts = (j.panels + j.pchunk - 1) / j.pchunk;
	j.mparts = 1;
	if (nth > 1 && nparts < 4L * nth) {
		j.mparts = (4L * nth + nparts - 1) / nparts;
		long maxp = j.strips / 4 > 1 ? j.strips / 4 : 1; /* at least 4 strips per part */
		if (j.mparts > maxp)
			j.mparts = maxp;
	}
	j.mstrips = (j.strips + j.mparts - 1) / j.mparts;
	j.mparts = (j.strips + j.mstrips - 1) / j.mstrips;
	j.nitems = j.mparts * nparts;
	run(c, mmp_packa_worker, &j, a->m * a->k >= 16384 ? nth : 1);
	atomic_store(&j.next, 0);
	run(c, mmp_worker, &j, nth);
}

/* Work below this many multiply-adds runs on the calling thread. */
#define MM_SERIAL 65536L

void tr_matmul(tr_ctx *c, float *dst, const float *x, long m, const void *w, int dtype, long n, long k) {
	mm_job j = {.c = c};
	j.a = (tr_mm_args){.dst = dst, .x = x, .w = w, .m = m, .n = n, .k = k, .dtype = dtype};
	int mode = TR_MM_WIDEN;
#if defined(__x86_64__)
	if (c->k == &tr_kernels_avx512 && dtype == TR_BF16) {
		if (c->fast_bf16)
			mode = TR_MM_FAST;
		else if (c->mm_mode != TR_MM_AUTO)
			mode = c->mm_mode;
		else
			/* Decode (small m) is memory-bound: widen in registers. Prefill
			 * is compute-bound: the packed outer-product kernel widens the
			 * weights while packing them and runs exact f32 FMAs near peak
			 * (faster than the converted block, CONV, and the hi/lo
			 * vdpbf16ps split, SPLIT, which are kept for benchmarks). */
			mode = m >= 16 ? TR_MM_PACK : TR_MM_WIDEN;
	} else if (c->k == &tr_kernels_avx512 && dtype == TR_F16) {
		mode = c->mm_mode == TR_MM_CONV || c->mm_mode == TR_MM_PACK ? c->mm_mode
		       : c->mm_mode == TR_MM_AUTO && m >= 16 ? TR_MM_PACK
							       : TR_MM_WIDEN;
	} else if (c->k == &tr_kernels_avx512 && dtype == TR_F32) {
		mode = c->mm_mode == TR_MM_PACK || (c->mm_mode == TR_MM_AUTO && m >= 16) ? TR_MM_PACK : TR_MM_WIDEN;
	}
#endif
	j.a.mode = mode;
	int nth = c->nth;
	if (m * n * k < MM_SERIAL)
		nth = 1;
	if (mode == TR_MM_PACK && c->k->mmp) {
		mm_packed(c, &j.a, nth);
		return;
	}
	if (mode == TR_MM_FAST || mode == TR_MM_SPLIT) {
		size_t need = (size_t)m * (size_t)k * (mode == TR_MM_SPLIT ? 2 : 1);
		if (c->xbn < need) {
			free(c->xb);
			size_t nn = (need + need / 4 + 1024 + 31) & ~(size_t)31;
			c->xb = aligned_alloc(64, nn * 2);
			c->xbn = nn;
		}
		j.a.xh = c->xb;
		j.a.xl = c->xb + (size_t)m * (size_t)k;
		run(c, xconv_worker, &j, m * k >= 16384 ? nth : 1);
	}
	if (m < 16 && nth > 1 && nth <= MMR_MAXTH && c->mm_sched == 0 && n / MMR_UNIT < 0xffffffffL) {
		mm_regions(c, &j.a, nth);
		return;
	}
	long chunk = n;
	if (nth > 1) {
		chunk = (n + 8L * nth - 1) / (8L * nth);
		chunk = (chunk + 15) & ~15L;
	}
	j.chunk = chunk;
	atomic_store(&j.next, 0);
	run(c, mm_worker, &j, nth);
}

void tr_embed(float *dst, const void *w, int dtype, long cols, const int32_t *ids, long nids) {
	for (long i = 0; i < nids; i++) {
		size_t r = (size_t)ids[i] * (size_t)cols;
		float *d = dst + i * cols;
		switch (dtype) {
		case TR_F32:
			memcpy(d, (const float *)w + r, (size_t)cols * 4);
			break;
		case TR_BF16: {
			const uint16_t *s = (const uint16_t *)w + r;
			for (long j = 0; j < cols; j++) {
				uint32_t b = (uint32_t)s[j] << 16;
				memcpy(&d[j], &b, 4);
			}
			break;
		}
		case TR_F16: {
			const uint16_t *s = (const uint16_t *)w + r;
			for (long j = 0; j < cols; j++)
				d[j] = tr_half(s[j]);
			break;
		}
		}
	}
}

/* ---- elementwise ---- */

/* Elementwise work below this many elements stays on the calling thread. */
#define EW_SERIAL 16384L

typedef struct {
	tr_ctx *c;
	int op;
	float *d, *x;
	const float *a, *b;
	long n, bn;
	float s;
} ew_job;

enum { EW_SILU, EW_GELU, EW_SOFTCAP, EW_SCALE, EW_ADD, EW_BIAS };

static void ew_range(ew_job *j, long i0, long i1) {
	const tr_kernels *k = j->c->k;
	long len = i1 - i0;
	switch (j->op) {
	case EW_SILU:
		k->silu(j->d + i0, j->a + i0, j->b + i0, len);
		break;
	case EW_GELU:
		k->gelu(j->d + i0, j->a + i0, j->b + i0, len);
		break;
	case EW_SOFTCAP:
		k->softcap(j->x + i0, len, j->s);
		break;
	case EW_SCALE:
		k->scale(j->x + i0, len, j->s);
		break;
	case EW_ADD:
		k->add(j->d + i0, j->a + i0, j->b + i0, len);
		break;
	case EW_BIAS:
		k->add_bias(j->x + i0, len, j->b, j->bn, i0);
		break;
	}
}

static void ew_worker(void *p, int tid, int nth) {
	ew_job *j = p;
	long per = (j->n + nth - 1) / nth;
	per = (per + 63) & ~63L;
	long i0 = (long)tid * per, i1 = i0 + per;
	if (i1 > j->n)
		i1 = j->n;
	if (i0 < i1)
		ew_range(j, i0, i1);
}

static void ew(ew_job *j) {
	if (j->n <= 0)
		return;
	if (j->n < EW_SERIAL || j->c->nth == 1) {
		ew_range(j, 0, j->n);
		return;
	}
	run(j->c, ew_worker, j, j->c->nth);
}

void tr_silu_mul(tr_ctx *c, float *dst, const float *g, const float *u, long n) {
	ew_job j = {.c = c, .op = EW_SILU, .d = dst, .a = g, .b = u, .n = n};
	ew(&j);
}
void tr_gelu_mul(tr_ctx *c, float *dst, const float *g, const float *u, long n) {
	ew_job j = {.c = c, .op = EW_GELU, .d = dst, .a = g, .b = u, .n = n};
	ew(&j);
}
void tr_softcap(tr_ctx *c, float *x, long n, float cap) {
	ew_job j = {.c = c, .op = EW_SOFTCAP, .x = x, .n = n, .s = cap};
	ew(&j);
}
void tr_scale(tr_ctx *c, float *x, long n, float s) {
	ew_job j = {.c = c, .op = EW_SCALE, .x = x, .n = n, .s = s};
	ew(&j);
}
void tr_add(tr_ctx *c, float *dst, const float *a, const float *b, long n) {
	ew_job j = {.c = c, .op = EW_ADD, .d = dst, .a = a, .b = b, .n = n};
	ew(&j);
}
void tr_add_bias(tr_ctx *c, float *x, long len, const float *b, long n) {
	ew_job j = {.c = c, .op = EW_BIAS, .x = x, .b = b, .n = len, .bn = n};
	ew(&j);
}

/* ---- row operations ---- */

typedef struct {
	tr_ctx *c;
	int op;
	float *d, *x;
	const float *w, *cs, *sn;
	long rows, n, heads, hd, half;
	float eps;
	int unit;
} row_job;

static void row_range(row_job *j, long r0, long r1) {
	if (j->op == 0)
		j->c->k->rmsnorm(j->d + r0 * j->n, j->x + r0 * j->n, j->w, r1 - r0, j->n, j->eps, j->unit);
	else
		j->c->k->rope(j->x + r0 * j->heads * j->hd, r1 - r0, j->heads, j->hd, j->cs + r0 * j->half,
			      j->sn + r0 * j->half, j->half);
}

static void row_worker(void *p, int tid, int nth) {
	row_job *j = p;
	long per = (j->rows + nth - 1) / nth;
	long r0 = (long)tid * per, r1 = r0 + per;
	if (r1 > j->rows)
		r1 = j->rows;
	if (r0 < r1)
		row_range(j, r0, r1);
}

static void rows_run(row_job *j, long elems) {
	if (j->rows <= 0)
		return;
	if (elems < EW_SERIAL || j->rows < 2 || j->c->nth == 1) {
		row_range(j, 0, j->rows);
		return;
	}
	run(j->c, row_worker, j, j->c->nth);
}

void tr_rmsnorm(tr_ctx *c, float *dst, const float *x, const float *w, long rows, long n, float eps, int unit) {
	row_job j = {.c = c, .op = 0, .d = dst, .x = (float *)x, .w = w, .rows = rows, .n = n, .eps = eps, .unit = unit};
	rows_run(&j, rows * n);
}

void tr_rope(tr_ctx *c, float *x, long rows, long heads, long hd, const float *cs, const float *sn, long half) {
	row_job j = {.c = c, .op = 1, .x = x, .cs = cs, .sn = sn, .rows = rows, .heads = heads, .hd = hd, .half = half};
	rows_run(&j, rows * heads * half);
}

/* ---- attention ---- */

/* How one sequence of an attention call is split into work items. */
typedef struct {
	long seq;   /* index in the call's seqs */
	long start; /* first work item */
	long qb;    /* query rows per item */
	long nqb;   /* query blocks */
	int flash;  /* tiled kernel: items are (query block, KV head, head sub-group) */
	int gs, ngs; /* flash: heads per item, sub-groups per KV group */
	int dec;     /* decode kernel: items are parts of the keys, all heads */
	long splits; /* dec: parts of the keys */
	long pbase;  /* dec with splits > 1: first partial result, and its counter */
	long cbase;
} attn_plan;

typedef struct {
	tr_ctx *c;
	tr_attn_args a;
	attn_plan *plan; /* in the order items are handed out */
	long nitems;
	size_t sbytes;
	_Atomic long next;
} attn_job;

/* Decode attention of one sequence from its parts: per head, the parts'
 * sums of exp(s - m_p) V rescaled to the largest m_p. */
static void dec_merge(const tr_attn_args *a, const tr_seq *s, const float *part, long splits) {
	const long hd = a->hd, H = a->heads, stride = H * (hd + 2);
	float *out = a->out + s->row * H * hd;
	for (long h = 0; h < H; h++) {
		const float *p0 = part + h * (hd + 2);
		float m = p0[0];
		for (long p = 1; p < splits; p++)
			m = p0[p * stride] > m ? p0[p * stride] : m;
		float l = 0;
		float *o = out + h * hd;
		for (long d = 0; d < hd; d++)
			o[d] = 0;
		for (long p = 0; p < splits; p++) {
			const float *pp = p0 + p * stride;
			const float wt = expf(pp[0] - m);
			l += wt * pp[1];
			for (long d = 0; d < hd; d++)
				o[d] += wt * pp[2 + d];
		}
		const float inv = 1.0f / l;
		for (long d = 0; d < hd; d++)
			o[d] *= inv;
	}
}

static void attn_item(attn_job *j, long it, int tid) {
	long lo = 0, hi = j->a.nseq - 1;
	while (lo < hi) {
		long mid = (lo + hi + 1) / 2;
		if (j->plan[mid].start <= it)
			lo = mid;
		else
			hi = mid - 1;
	}
	const attn_plan *pl = &j->plan[lo];
	const tr_seq *s = &j->a.seqs[pl->seq];
	long local = it - pl->start;
	void *scr = scratch(j->c, tid, j->sbytes);
	if (pl->dec) {
		long pos = s->pos, lo = 0;
		if (j->a.window > 0 && pos - j->a.window + 1 > lo)
			lo = pos - j->a.window + 1;
		const long cnt = pos + 1 - lo, sp = pl->splits;
		if (sp == 1) {
			j->c->k->attn_dec(&j->a, s, lo, pos + 1, NULL, scr);
			return;
		}
		const long stride = (long)j->a.heads * (j->a.hd + 2);
		float *pb = j->c->dpart + pl->pbase * stride;
		j->c->k->attn_dec(&j->a, s, lo + cnt * local / sp, lo + cnt * (local + 1) / sp, pb + local * stride, scr);
		if (atomic_fetch_add_explicit(&j->c->dcnt[pl->cbase], 1, memory_order_acq_rel) == sp - 1)
			dec_merge(&j->a, s, pb, sp);
		return;
	}
	if (pl->flash) {
		long per = (long)j->a.kvheads * pl->ngs;
		long b = pl->nqb - 1 - local / per; /* largest blocks first */
		long rem = local % per;
		int kvh = (int)(rem / pl->ngs), g0 = (int)(rem % pl->ngs) * pl->gs;
		int G = j->a.heads / j->a.kvheads, g1 = g0 + pl->gs < G ? g0 + pl->gs : G;
		long r0 = b * pl->qb, r1 = r0 + pl->qb < s->n ? r0 + pl->qb : s->n;
		j->c->k->attn_flash(&j->a, s, r0, r1, kvh, g0, g1, scr);
		return;
	}
	int h = (int)(local % j->a.heads);
	long b = pl->nqb - 1 - local / j->a.heads;
	long r0 = b * pl->qb, r1 = r0 + pl->qb < s->n ? r0 + pl->qb : s->n;
	j->c->k->attn(&j->a, s, r0, r1, h, scr);
}

static void attn_worker(void *p, int tid, int nth) {
	attn_job *j = p;
	(void)nth;
	for (;;) {
		long it = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
		if (it >= j->nitems)
			return;
		attn_item(j, it, tid);
	}
}

void tr_set_attn_mode(tr_ctx *c, int mode) { c->attn_mode = mode; }
void tr_set_mm_sched(tr_ctx *c, int sched) { c->mm_sched = sched; }

/* Query rows (positions x heads of a KV group) from which the tiled kernel
 * beats the per-head one. It reads K and V once per group where the per-head
 * kernel reads them once per head, but spends a whole query vector on a
 * decode step: measured on Zen 5 (decode, 512 keys), group 1 is 1.7x slower
 * tiled, 2 about even, 3 1.3x and 4 2x faster. */
#define FLASH_MIN_ROWS 3

/* Fewest keys per part when a decode sequence's keys are split across
 * threads, and most (which bounds the per-thread scratch of scores). */
#define DEC_MIN_KEYS 128
#define DEC_MAX_KEYS 4096

/* Numbers the work items of every sequence of j (kernels already chosen),
 * splitting decode sequences into up to dsplit parts; returns the item count
 * and sets the partial results and counters the splits need and the
 * per-thread scratch. */
static long attn_layout(attn_job *j, long dsplit, long *nparts, long *ncnt, size_t *sb) {
	const tr_attn_args *a = &j->a;
	const int G = a->heads / a->kvheads;
	long total = 0;
	*nparts = *ncnt = 0;
	*sb = 0;
	for (long i = 0; i < a->nseq; i++) {
		attn_plan *pl = &j->plan[i];
		const tr_seq *s = &a->seqs[pl->seq];
		long ctx = s->pos + s->n;
		pl->start = total;
		size_t need;
		if (pl->dec) {
			long keys = a->window > 0 && a->window < ctx ? a->window : ctx;
			long sp = keys / DEC_MIN_KEYS < dsplit ? keys / DEC_MIN_KEYS : dsplit;
			if (sp < (keys + DEC_MAX_KEYS - 1) / DEC_MAX_KEYS)
				sp = (keys + DEC_MAX_KEYS - 1) / DEC_MAX_KEYS;
			pl->splits = sp > 1 ? sp : 1;
			total += pl->splits;
			if (pl->splits > 1) {
				pl->pbase = *nparts;
				pl->cbase = (*ncnt)++;
				*nparts += pl->splits;
			}
			need = TR_DEC_SCRATCH(a->heads, a->kvheads, (keys + pl->splits - 1) / pl->splits, a->hd);
		} else if (pl->flash) {
			pl->gs = G < TR_FLASH_M ? G : TR_FLASH_M;
			pl->ngs = (G + pl->gs - 1) / pl->gs;
			pl->qb = TR_FLASH_M / pl->gs;
			pl->nqb = (s->n + pl->qb - 1) / pl->qb;
			total += pl->nqb * a->kvheads * pl->ngs;
			long m = pl->qb < s->n ? pl->qb : s->n;
			need = TR_FLASH_SCRATCH(m * pl->gs, a->hd);
		} else {
			pl->qb = TR_ATTN_QB;
			pl->nqb = (s->n + TR_ATTN_QB - 1) / TR_ATTN_QB;
			total += pl->nqb * a->heads;
			need = TR_ATTN_SCRATCH(ctx, a->hd);
		}
		if (need > *sb)
			*sb = need;
	}
	return total;
}

/* Grows the context's buffers for decode parts; false when out of memory. */
static int dec_buffers(tr_ctx *c, size_t floats, size_t counters) {
	if (c->dpartn < floats) {
		free(c->dpart);
		c->dpart = malloc(floats * 4);
		c->dpartn = c->dpart ? floats : 0;
	}
	if (c->dcntn < counters) {
		free((void *)c->dcnt);
		c->dcnt = malloc(counters * sizeof *c->dcnt);
		c->dcntn = c->dcnt ? counters : 0;
	}
	return c->dpart && c->dcnt;
}

void tr_attention(tr_ctx *c, float *out, const float *q, const float *K, const float *V, long page_size, long dim,
		  const tr_seq *seqs, long nseq, const int32_t *pages, int heads, int kvheads, int hd, float scale,
		  int window, float softcap) {
	if (nseq <= 0)
		return;
	attn_job j = {.c = c};
	j.a = (tr_attn_args){.out = out, .q = q, .K = K, .V = V, .ps = page_size, .dim = dim, .seqs = seqs,
			     .nseq = nseq, .pages = pages, .heads = heads, .kvheads = kvheads, .hd = hd,
			     .scale = scale, .window = window, .softcap = softcap};
	attn_plan planbuf[32];
	j.plan = nseq <= 32 ? planbuf : malloc((size_t)nseq * sizeof(attn_plan));
	/* Sequences with the most keys per query first (insertion sort: batches
	 * are small, and mostly sorted already). */
	for (long i = 0; i < nseq; i++) {
		long ctx = seqs[i].pos + seqs[i].n, k = i;
		while (k > 0 && seqs[j.plan[k - 1].seq].pos + seqs[j.plan[k - 1].seq].n < ctx) {
			j.plan[k] = j.plan[k - 1];
			k--;
		}
		j.plan[k].seq = i;
	}
	const int G = heads / kvheads;
	/* Kernel per sequence, and the work of the call (query rows x keys). */
	long work = 0, ndec = 0, nother = 0;
	for (long i = 0; i < nseq; i++) {
		attn_plan *pl = &j.plan[i];
		const tr_seq *s = &seqs[pl->seq];
		pl->dec = c->attn_mode == TR_ATTN_AUTO && s->n == 1 && c->k->attn_dec && hd % c->k->vw == 0;
		pl->flash = !pl->dec && (c->attn_mode == TR_ATTN_FLASH ||
					 (c->attn_mode == TR_ATTN_AUTO && s->n * G >= FLASH_MIN_ROWS));
		pl->splits = 1;
		work += s->n * (s->pos + s->n);
		if (pl->dec)
			ndec++;
		else
			nother += s->n;
	}
	int nth = c->nth;
	if (work * heads * hd < 32768)
		nth = 1;
	/* Decode sequences split their keys into parts when the call has too
	 * few items to keep the threads busy (one sequence on 2 threads): 2 items
	 * per thread, parts of at least DEC_MIN_KEYS. */
	long dsplit = 1;
	if (nth > 1 && ndec > 0 && ndec + nother < 2L * nth)
		dsplit = (2L * nth + ndec - 1) / ndec;
	long nparts = 0, ncnt = 0;
	size_t sb = 0;
	long total = attn_layout(&j, dsplit, &nparts, &ncnt, &sb);
	if (nparts > 0 && !dec_buffers(c, (size_t)nparts * (size_t)heads * (size_t)(hd + 2), (size_t)ncnt))
		total = attn_layout(&j, 1, &nparts, &ncnt, &sb); /* no memory for parts: no splits */
	for (long i = 0; i < ncnt; i++)
		atomic_store_explicit(&c->dcnt[i], 0, memory_order_relaxed);
	j.nitems = total;
	j.sbytes = sb;
	atomic_store(&j.next, 0);
	if (total < 2)
		nth = 1;
	run(c, attn_worker, &j, nth);
	if (j.plan != planbuf)
		free(j.plan);
}

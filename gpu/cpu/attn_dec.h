/* Decode attention (one query position of a sequence), part of the kernel
 * template: included by generic_impl.h, so VW, FN, vf and the helpers there
 * are in scope.
 *
 * One call handles every head over the keys [j0, j1) (the whole visible
 * range, or a part of it when the range is split across threads), so that
 * it reads whole K and V rows (all KV heads of a position are contiguous in
 * the cache) rather than one head's slice of each. Two passes with an exact
 * softmax over the part:
 *
 *   - scores, a block of DEC_KB keys at a time, then per KV head and head of
 *     its group VW keys at a time: for each key a vector of hd/VW partial
 *     products (no horizontal sum per key), then one reduction that turns
 *     the VW vectors into a vector of VW scores (log2(VW) rounds of two
 *     shuffles and an add per pair of vectors);
 *   - P·V with up to DEC_GT heads x DEC_VT vectors of outputs in registers,
 *     each V row slice loaded once per tile and used by every head of the
 *     tile (a GQA group reads its K and V once, not once per head).
 *
 * The result is either the normalised output (part == NULL) or, for a part
 * of the range, per head the max score m, the sum l of exp(s - m) and the
 * unnormalised sum of exp(s - m) V, merged by the caller. */

#if VW == 16
#define DEC_GT 4
#define DEC_VT 4
#else
#define DEC_GT 2
#define DEC_VT 4
#endif

/* Shuffle masks of a round of dec_reduce with segments of S lanes: lane l
 * takes the first (A) or second (B) half of its segment of the first vector
 * (first half of the lanes of the segment) or of the second one. */
#define DEC_MA(S, l) ((l) % (S) < (S) / 2 ? (l) : VW + (l) - (S) / 2)
#define DEC_MB(S, l) ((l) % (S) < (S) / 2 ? (l) + (S) / 2 : VW + (l))
#if VW == 16
#define DEC_M(M, S)                                                                                                    \
	(vi){M(S, 0), M(S, 1), M(S, 2),  M(S, 3),  M(S, 4),  M(S, 5),  M(S, 6),  M(S, 7),                           \
	     M(S, 8), M(S, 9), M(S, 10), M(S, 11), M(S, 12), M(S, 13), M(S, 14), M(S, 15)}
#elif VW == 8
#define DEC_M(M, S) (vi){M(S, 0), M(S, 1), M(S, 2), M(S, 3), M(S, 4), M(S, 5), M(S, 6), M(S, 7)}
#else
#define DEC_M(M, S) (vi){M(S, 0), M(S, 1), M(S, 2), M(S, 3)}
#endif

/* One round: the n vectors of v (segments of n lanes) into n/2. */
#define DEC_ROUND(n)                                                                                                   \
	do {                                                                                                           \
		const vi ma = DEC_M(DEC_MA, n), mb = DEC_M(DEC_MB, n);                                                 \
		_Pragma("GCC unroll 16") for (int i = 0; i < (n) / 2; i++) v[i] =                                     \
		    __builtin_shuffle(v[i], v[i + (n) / 2], ma) + __builtin_shuffle(v[i], v[i + (n) / 2], mb);         \
	} while (0)

/* Lane k of the result is the sum of the lanes of v[k]: log2(VW) rounds,
 * each pairing vector i with vector i + n/2 so that every lane keeps adding
 * partial sums of one input vector. */
INL vf FN(dec_reduce)(vf *v) {
#if VW >= 16
	DEC_ROUND(16);
#endif
#if VW >= 8
	DEC_ROUND(8);
#endif
	DEC_ROUND(4);
	DEC_ROUND(2);
	return v[0];
}
#undef DEC_ROUND

/* o[g][c] += sum over keys j < n of p[g][j] * V[j][voff + c*VW ...] for GT
 * heads and VT vectors. */
INL void FN(dec_pv)(const int GT, const int VT, const float *const *vp, long voff, long n, const float *p, long ldp,
		    float *o, long ldo) {
	vf acc[DEC_GT][DEC_VT];
	for (int g = 0; g < GT; g++)
		for (int c = 0; c < VT; c++)
			acc[g][c] = LD(o + g * ldo + c * VW);
	for (long j = 0; j < n; j++) {
		vf v[DEC_VT];
		for (int c = 0; c < VT; c++)
			v[c] = LD(vp[j] + voff + c * VW);
		for (int g = 0; g < GT; g++) {
			vf w = SPLAT(p[g * ldp + j]);
			for (int c = 0; c < VT; c++)
				acc[g][c] += w * v[c];
		}
	}
	for (int g = 0; g < GT; g++)
		for (int c = 0; c < VT; c++)
			ST(o + g * ldo + c * VW, acc[g][c]);
}

FUN void FN(dec_pvtile)(int gt, int vt, const float *const *vp, long voff, long n, const float *p, long ldp, float *o,
			long ldo) {
#define DEC_PV(G_, V_) FN(dec_pv)(G_, V_, vp, voff, n, p, ldp, o, ldo)
#define DEC_PVG(G_)                                                                                                    \
	switch (vt) {                                                                                                  \
	case 1: DEC_PV(G_, 1); break;                                                                                  \
	case 2: DEC_PV(G_, 2); break;                                                                                  \
	case 3: DEC_PV(G_, 3); break;                                                                                  \
	default: DEC_PV(G_, 4); break;                                                                                 \
	}
	switch (gt) {
	case 1: DEC_PVG(1) break;
#if DEC_GT >= 2
	case 2: DEC_PVG(2) break;
#endif
#if DEC_GT >= 4
	case 3: DEC_PVG(3) break;
	case 4: DEC_PVG(4) break;
#endif
	}
#undef DEC_PVG
#undef DEC_PV
}

/* Keys per block of the scores and P·V passes (their row pointers). */
#define DEC_KB 64

/* Row pointers (at KV head 0) of the keys [b0, b0+kn) of the part starting
 * at j0, in base (a->K or a->V). */
INL void FN(dec_rows)(const tr_attn_args *a, const int32_t *pages, const float *base, long pos0, long kn,
		      const float **rp) {
	const long ps = a->ps, dim = a->dim;
	for (long j = 0; j < kn;) {
		long pos = pos0 + j, pg = pos / ps, sl = pos % ps;
		long off = ((long)pages[pg] * ps + sl) * dim;
		for (; j < kn && sl < ps; j++, sl++, off += dim)
			rp[j] = base + off;
	}
}

/* Software prefetch of the rows of the next block, spread over the work on
 * the current one: the rows of a block lie in pages scattered over the
 * cache (16 positions each, typically), where the hardware prefetchers
 * lose the stream at every page. */
typedef struct {
	const float *const *rows;
	long nrows, rowb; /* rows, bytes per row */
	long r, o;        /* next line: row, byte offset */
} FN(dec_pf);

INL void FN(dec_pf_step)(FN(dec_pf) * c, long lines) {
	for (; lines > 0 && c->r < c->nrows; lines--) {
		__builtin_prefetch((const char *)c->rows[c->r] + c->o, 0, 3);
		c->o += 64;
		if (c->o >= c->rowb) {
			c->o = 0;
			c->r++;
		}
	}
}

FUN void FN(attn_dec)(const tr_attn_args *a, const tr_seq *s, long j0, long j1, float *part, void *scr) {
	const long hd = a->hd, H = a->heads, KVH = a->kvheads, G = H / KVH, qdim = H * hd;
	const long NV = hd / VW, n = j1 - j0, np = (n + VW - 1) / VW * VW;
	const int32_t *pages = a->pages + s->page_off;
	const float *q = a->q + s->row * qdim;
	/* scratch: see TR_DEC_SCRATCH */
	float *S = (float *)scr;          /* scores, then probabilities: H x np */
	float *O = S + TR_AL16(H * np);   /* outputs: H x hd */
	float *zero = O + TR_AL16(H * hd); /* a zero K row, for the padding keys */
	float *linv = zero + TR_AL16(KVH * hd);
	memset(zero, 0, (size_t)(KVH * hd) * 4);
	memset(O, 0, (size_t)(H * hd) * 4);

	/* rows of the block's keys (K or V) at KV head 0, and of the next
	 * block (the first V block after the last K block) */
	const float *rows[2][DEC_KB];
	const long rowb = (KVH * hd * 4 + 63) / 64 * 64;
	const long nb = (n + DEC_KB - 1) / DEC_KB; /* blocks per pass */
	FN(dec_rows)(a, pages, a->K, j0, n < DEC_KB ? n : DEC_KB, rows[0]);
	for (long b = 0; b < nb; b++) {
		const float **rp = rows[b & 1], **nx = rows[(b + 1) & 1];
		const long b0 = b * DEC_KB, kn = n - b0 < DEC_KB ? n - b0 : DEC_KB;
		const long nb0 = b + 1 < nb ? b0 + DEC_KB : 0, nkn = n - nb0 < DEC_KB ? n - nb0 : DEC_KB;
		FN(dec_rows)(a, pages, b + 1 < nb ? a->K : a->V, j0 + nb0, nkn, nx);
		const long knp = (kn + VW - 1) / VW * VW;
		for (long j = kn; j < knp; j++)
			rp[j] = zero;
		FN(dec_pf) pf = {nx, nkn, rowb, 0, 0};
		const long iters = H * (knp / VW), per = (nkn * (rowb / 64) + iters - 1) / iters;
		for (long kvh = 0; kvh < KVH; kvh++) {
			for (long g = 0; g < G; g++) {
				const long h = kvh * G + g;
				const float *qh = q + h * hd;
				for (long k0 = 0; k0 < knp; k0 += VW) {
					FN(dec_pf_step)(&pf, per);
					vf t[VW];
					const float *const *kr = rp + k0;
					const long off = kvh * hd;
					vf qv = LD(qh);
#pragma GCC unroll 16
					for (int k = 0; k < VW; k++)
						t[k] = qv * LD(kr[k] + off);
					for (long c = 1; c < NV; c++) {
						qv = LD(qh + c * VW);
#pragma GCC unroll 16
						for (int k = 0; k < VW; k++)
							t[k] += qv * LD(kr[k] + off + c * VW);
					}
					ST(S + h * np + b0 + k0, FN(dec_reduce)(t) * a->scale);
				}
			}
		}
	}
	for (long h = 0; h < H; h++) {
		float *sh = S + h * np;
		if (a->softcap > 0)
			FN(softcap)(sh, n, a->softcap);
		for (long j = n; j < np; j++)
			sh[j] = -INFINITY;
		vf vm = LD(sh);
		for (long j = VW; j < np; j += VW)
			vm = VMAX(vm, LD(sh + j));
		const float mx = HMAX(vm);
		vf vs = SPLAT(0);
		for (long j = 0; j < np; j += VW) {
			vf x = LD(sh + j);
			vf e = SEL(x > SPLAT(-INFINITY), VEXP(x - mx), SPLAT(0));
			ST(sh + j, e);
			vs += e;
		}
		if (part) {
			part[h * (hd + 2)] = mx;
			part[h * (hd + 2) + 1] = HSUM(vs);
		} else
			linv[h] = 1.0f / HSUM(vs);
	}
	/* the first V block's rows are in rows[nb & 1] */
	for (long b = 0; b < nb; b++) {
		const float **rp = rows[(nb + b) & 1], **nx = rows[(nb + b + 1) & 1];
		const long b0 = b * DEC_KB, kn = n - b0 < DEC_KB ? n - b0 : DEC_KB;
		const long nb0 = b0 + DEC_KB, nkn = b + 1 < nb ? (n - nb0 < DEC_KB ? n - nb0 : DEC_KB) : 0;
		if (nkn > 0)
			FN(dec_rows)(a, pages, a->V, j0 + nb0, nkn, nx);
		FN(dec_pf) pf = {nx, nkn, rowb, 0, 0};
		/* prefetch steps: every 16 keys of every tile */
		const long steps = KVH * ((G + DEC_GT - 1) / DEC_GT) * ((NV + DEC_VT - 1) / DEC_VT) * ((kn + 15) / 16);
		const long per = (nkn * (rowb / 64) + steps - 1) / steps;
		for (long kvh = 0; kvh < KVH; kvh++)
			for (long g0 = 0; g0 < G; g0 += DEC_GT) {
				const int gt = G - g0 < DEC_GT ? (int)(G - g0) : DEC_GT;
				const long h = kvh * G + g0;
				for (long c0 = 0; c0 < NV; c0 += DEC_VT) {
					const int vt = NV - c0 < DEC_VT ? (int)(NV - c0) : DEC_VT;
					for (long k0 = 0; k0 < kn; k0 += 16) {
						FN(dec_pf_step)(&pf, per);
						FN(dec_pvtile)(gt, vt, rp + k0, kvh * hd + c0 * VW, kn - k0 < 16 ? kn - k0 : 16,
							       S + h * np + b0 + k0, np, O + h * hd + c0 * VW, hd);
					}
				}
			}
	}
	for (long h = 0; h < H; h++) {
		if (part) {
			memcpy(part + h * (hd + 2) + 2, O + h * hd, (size_t)hd * 4);
			continue;
		}
		const float inv = linv[h];
		float *o = a->out + s->row * qdim + h * hd;
		for (long d = 0; d < hd; d++)
			o[d] = O[h * hd + d] * inv;
	}
}

#undef DEC_KB
#undef DEC_GT
#undef DEC_VT
#undef DEC_M
#undef DEC_MA
#undef DEC_MB

/* Decode attention (one query position of a sequence), part of the kernel
 * template: included by generic_impl.h, so VW, FN, vf and the helpers there
 * are in scope.
 *
 * One call handles all G heads of the group of KV head kvh over the keys
 * [j0, j1) (a part of the visible range when the range is split across
 * threads). Two passes with an exact softmax over the part:
 *
 *   - scores, VW keys at a time and one head at a time: for each key a
 *     vector of hd/VW partial products (no horizontal sum per key), then one
 *     reduction that turns the VW vectors into a vector of VW scores
 *     (log2(VW) rounds of two shuffles and an add per pair of vectors);
 *   - P·V with the G x hd outputs of up to DEC_GT heads x DEC_VT vectors in
 *     registers, each V row loaded once per tile and used by every head of
 *     the tile (a GQA group reads its K and V once, not once per head).
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

/* acc[g][c] += sum over keys j in [ja, jb) of p[g][j] * V[j] (vectors c0..c0+VT). */
INL void FN(dec_pv)(const int GT, const int VT, const float *const *vp, long c0, long n, const float *p, long ldp,
		    float *o, long ldo) {
	vf acc[DEC_GT][DEC_VT];
	for (int g = 0; g < GT; g++)
		for (int c = 0; c < VT; c++)
			acc[g][c] = LD(o + g * ldo + (c0 + c) * VW);
	for (long j = 0; j < n; j++) {
		vf v[DEC_VT];
		for (int c = 0; c < VT; c++)
			v[c] = LD(vp[j] + (c0 + c) * VW);
		for (int g = 0; g < GT; g++) {
			vf w = SPLAT(p[g * ldp + j]);
			for (int c = 0; c < VT; c++)
				acc[g][c] += w * v[c];
		}
	}
	for (int g = 0; g < GT; g++)
		for (int c = 0; c < VT; c++)
			ST(o + g * ldo + (c0 + c) * VW, acc[g][c]);
}

FUN void FN(dec_pvtile)(int gt, int vt, const float *const *vp, long c0, long n, const float *p, long ldp, float *o,
			long ldo) {
#define DEC_PV(G_, V_) FN(dec_pv)(G_, V_, vp, c0, n, p, ldp, o, ldo)
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

FUN void FN(attn_dec)(const tr_attn_args *a, const tr_seq *s, int kvh, long j0, long j1, float *part, void *scr) {
	const long hd = a->hd, qdim = (long)a->heads * hd, G = a->heads / a->kvheads;
	const long NV = hd / VW, n = j1 - j0, np = (n + VW - 1) / VW * VW;
	const long kvoff = (long)kvh * hd, ps = a->ps, dim = a->dim;
	const int32_t *pages = a->pages + s->page_off;
	const float *q = a->q + s->row * qdim + kvoff * G; /* heads kvh*G .. kvh*G+G-1 */
	/* scratch: see TR_DEC_SCRATCH */
	float *S = (float *)scr;
	float *O = S + TR_AL16(G * np);
	float *zero = O + TR_AL16(G * hd);
	float *linv = zero + TR_AL16(hd);
	memset(zero, 0, (size_t)hd * 4);
	memset(O, 0, (size_t)(G * hd) * 4);

	const float *kp[DEC_KB], *vp[DEC_KB];
	for (long b0 = 0; b0 < n; b0 += DEC_KB) {
		const long kn = n - b0 < DEC_KB ? n - b0 : DEC_KB;
		for (long j = 0; j < kn;) {
			long pos = j0 + b0 + j, pg = pos / ps, sl = pos % ps;
			long off = ((long)pages[pg] * ps + sl) * dim + kvoff;
			for (; j < kn && sl < ps; j++, sl++, off += dim)
				kp[j] = a->K + off;
		}
		const long knp = (kn + VW - 1) / VW * VW;
		for (long j = kn; j < knp; j++)
			kp[j] = zero;
		for (long g = 0; g < G; g++) {
			const float *qg = q + g * hd;
			for (long k0 = 0; k0 < knp; k0 += VW) {
				vf t[VW];
				const float *const *kr = kp + k0;
				vf qv = LD(qg);
#pragma GCC unroll 16
				for (int k = 0; k < VW; k++)
					t[k] = qv * LD(kr[k]);
				for (long c = 1; c < NV; c++) {
					qv = LD(qg + c * VW);
#pragma GCC unroll 16
					for (int k = 0; k < VW; k++)
						t[k] += qv * LD(kr[k] + c * VW);
				}
				ST(S + g * np + b0 + k0, FN(dec_reduce)(t) * a->scale);
			}
		}
	}
	for (long g = 0; g < G; g++) {
		float *sg = S + g * np;
		if (a->softcap > 0)
			FN(softcap)(sg, n, a->softcap);
		for (long j = n; j < np; j++)
			sg[j] = -INFINITY;
		vf vm = LD(sg);
		for (long j = VW; j < np; j += VW)
			vm = VMAX(vm, LD(sg + j));
		const float mx = HMAX(vm);
		vf vs = SPLAT(0);
		for (long j = 0; j < np; j += VW) {
			vf x = LD(sg + j);
			vf e = SEL(x > SPLAT(-INFINITY), VEXP(x - mx), SPLAT(0));
			ST(sg + j, e);
			vs += e;
		}
		if (part) {
			part[g * (hd + 2)] = mx;
			part[g * (hd + 2) + 1] = HSUM(vs);
		} else
			linv[g] = 1.0f / HSUM(vs);
	}
	for (long b0 = 0; b0 < n; b0 += DEC_KB) {
		const long kn = n - b0 < DEC_KB ? n - b0 : DEC_KB;
		for (long j = 0; j < kn;) {
			long pos = j0 + b0 + j, pg = pos / ps, sl = pos % ps;
			long off = ((long)pages[pg] * ps + sl) * dim + kvoff;
			for (; j < kn && sl < ps; j++, sl++, off += dim)
				vp[j] = a->V + off;
		}
		for (long g0 = 0; g0 < G; g0 += DEC_GT) {
			int gt = G - g0 < DEC_GT ? (int)(G - g0) : DEC_GT;
			for (long c0 = 0; c0 < NV; c0 += DEC_VT) {
				int vt = NV - c0 < DEC_VT ? (int)(NV - c0) : DEC_VT;
				FN(dec_pvtile)(gt, vt, vp, c0, kn, S + g0 * np + b0, np, O + g0 * hd, hd);
			}
		}
	}
	for (long g = 0; g < G; g++) {
		if (part) {
			memcpy(part + g * (hd + 2) + 2, O + g * hd, (size_t)hd * 4);
			continue;
		}
		float inv = linv[g];
		float *o = a->out + s->row * qdim + (kvoff * G) + g * hd;
		for (long d = 0; d < hd; d++)
			o[d] = O[g * hd + d] * inv;
	}
}

#undef DEC_KB
#undef DEC_GT
#undef DEC_VT
#undef DEC_M
#undef DEC_MA
#undef DEC_MB

/* AVX-512 elementwise and attention kernels: the template with 16-lane
 * vectors. The matmul of this kernel set is in mm_avx512.c. */
#if defined(__x86_64__)
#include <immintrin.h>
#define VW 16
#define FN(x) x##_avx512
#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c")))
#define NO_GENERIC_MM 1
#include "generic_impl.h"

void tr_mm_avx512(const tr_mm_args *a, long n0, long n1, void *scratch);
size_t tr_mm_scratch_avx512(const tr_mm_args *a);
void tr_xconv_avx512(const tr_mm_args *a, long m0, long m1);
void tr_mmp_packa_avx512(const tr_mm_args *a, float *ap, long s0, long s1);
void tr_mmp_avx512(const tr_mm_args *a, const float *ap, long m0, long m1, long n0, long n1, void *scratch);
size_t tr_mmp_scratch_avx512(const tr_mm_args *a);
size_t tr_mmp_abytes_avx512(long m, long k);
void tr_mmq_avx512(const tr_mmq_args *a, long m0, long m1, long p0, long p1);
void tr_panel_pack_avx512(uint32_t *dst, const uint16_t *w, long n, long k, long p);

const tr_kernels tr_kernels_avx512 = {
	.mm = tr_mm_avx512,
	.mm_scratch = tr_mm_scratch_avx512,
	.xconv = tr_xconv_avx512,
	.mmp_packa = tr_mmp_packa_avx512,
	.mmp = tr_mmp_avx512,
	.mmp_scratch = tr_mmp_scratch_avx512,
	.mmp_abytes = tr_mmp_abytes_avx512,
	.mmp_mr = TR_MMP_MR,
	.mmp_nr = TR_MMP_NR,
	.mmq = tr_mmq_avx512,
	.panel_pack = tr_panel_pack_avx512,
	.silu = silu_avx512,
	.gelu = gelu_avx512,
	.softcap = softcap_avx512,
	.scale = scale_avx512,
	.add = add_avx512,
	.add_bias = add_bias_avx512,
	.rmsnorm = rmsnorm_avx512,
	.rope = rope_avx512,
	.attn = attn_avx512,
	.attn_flash = attn_flash_avx512,
	.attn_dec = attn_dec_avx512,
	.vw = VW,
};
#endif

/* AVX2 + FMA + F16C kernels: the template with 8-lane vectors. */
#if defined(__x86_64__)
#include <immintrin.h>
#define VW 8
#define FN(x) x##_avx2
#define TGT __attribute__((target("avx2,fma,f16c")))
#define HAVE_F16C 1
#include "generic_impl.h"

const tr_kernels tr_kernels_avx2 = {
	.mm = mm_avx2,
	.mm_scratch = mm_scratch_avx2,
	.silu = silu_avx2,
	.gelu = gelu_avx2,
	.softcap = softcap_avx2,
	.scale = scale_avx2,
	.add = add_avx2,
	.add_bias = add_bias_avx2,
	.rmsnorm = rmsnorm_avx2,
	.rope = rope_avx2,
	.attn = attn_avx2,
	.attn_flash = attn_flash_avx2,
	.attn_dec = attn_dec_avx2,
	.vw = VW,
};
#endif

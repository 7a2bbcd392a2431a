/* Portable C kernels (any architecture): the template with 4-lane vectors. */
#define VW 4
#define FN(x) x##_portable
#define TGT
#include "generic_impl.h"

const tr_kernels tr_kernels_portable = {
	.mm = mm_portable,
	.mm_scratch = mm_scratch_portable,
	.silu = silu_portable,
	.gelu = gelu_portable,
	.softcap = softcap_portable,
	.scale = scale_portable,
	.add = add_portable,
	.add_bias = add_bias_portable,
	.rmsnorm = rmsnorm_portable,
	.rope = rope_portable,
	.attn = attn_portable,
	.attn_flash = attn_flash_portable,
	.attn_dec = attn_dec_portable,
	.vw = VW,
};

#include "tr_impl.h"
#if defined(__x86_64__)
const tr_qkernels tr_qk_avx2 = {.name = "avx2-tmp", .quant32=0};
const tr_qkernels tr_qk_avx512 = {.name = "avx512-tmp"};
#endif

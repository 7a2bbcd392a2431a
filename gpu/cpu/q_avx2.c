/* Quantized-weight kernels for the avx2 set: q_impl.h with vpmaddubsw. */
#if defined(__x86_64__)
#define QFN(x) x##_qavx2
#define QTGT __attribute__((target("avx2,fma,f16c")))
#define QVNNI 0
#include "q_impl.h"

const tr_qkernels tr_qk_avx2 = QTABLE("avx2");
#endif

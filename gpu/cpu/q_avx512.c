/* Quantized-weight kernels for the avx512bf16 set: q_impl.h with AVX-512
 * VNNI (vpdpbusd) on 256-bit vectors, chosen at run time when the CPU has
 * avx512vnni (pool.c). */
#if defined(__x86_64__)
#define QFN(x) x##_qavx512
#define QTGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define QVNNI 1
#include "q_impl.h"

const tr_qkernels tr_qk_avx512 = QTABLE("avx512vnni");
#endif

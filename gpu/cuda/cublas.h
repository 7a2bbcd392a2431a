//go:build cuda

/*
 * cublas.h: cuBLAS loaded at run time (dlopen), so that one binary runs
 * with whichever cuBLAS the host has (13, 12 or 11) and none is a link-time
 * dependency. Only entry points whose signatures are the same in the three
 * are used; the types are declared here as cuBLAS's headers define them
 * (the headers are not needed to build).
 */
#ifndef TROUPE_CUBLAS_H
#define TROUPE_CUBLAS_H

#include <stddef.h>
#include <stdint.h>

/* Values of cuBLAS's and CUDA's enums, stable since CUDA 11. */
enum {
	TC_OP_N = 0,           /* CUBLAS_OP_N */
	TC_OP_T = 1,           /* CUBLAS_OP_T */
	TC_R_32F = 0,          /* CUDA_R_32F */
	TC_R_16F = 2,          /* CUDA_R_16F */
	TC_R_16BF = 14,        /* CUDA_R_16BF */
	TC_COMPUTE_32F = 68,   /* CUBLAS_COMPUTE_32F */
	TC_GEMM_DEFAULT = -1,  /* CUBLAS_GEMM_DEFAULT */
};

/* tc_blas is one loaded cuBLAS and one handle of it. */
typedef struct tc_blas {
	void *lib;
	void *handle;
	int major; /* the soname's version: 13, 12 or 11 */
	int (*create)(void **);
	int (*destroy)(void *);
	int (*set_stream)(void *, void *);
	int (*get_version)(void *, int *);
	int (*sgemm)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int, const float *,
		     float *, int);
	int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
		       const void *, void *, int, int, int, int);
} tc_blas;

/* Matrices are device pointers, passed as integers (CUdeviceptr).
 *
 * tc_blas_open loads the newest cuBLAS the host has and creates a handle.
 * It returns 0, or -1 with a message in err. */
int tc_blas_open(tc_blas *b, char *err, size_t errlen);
/* tc_blas_close destroys the handle and unloads the library. */
void tc_blas_close(tc_blas *b);
int tc_blas_set_stream(tc_blas *b, void *stream);
int tc_blas_version(tc_blas *b, int *v);
int tc_blas_sgemm(tc_blas *b, int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int lda, uintptr_t B,
		  int ldb, float beta, uintptr_t C, int ldc);
int tc_blas_gemm_ex(tc_blas *b, int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int atype, int lda,
		    uintptr_t B, int btype, int ldb, float beta, uintptr_t C, int ctype, int ldc);

#endif

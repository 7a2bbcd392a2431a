//go:build cuda

#include "cublas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static void *sym(tc_blas *b, const char *name, char *err, size_t errlen) {
	void *p = dlsym(b->lib, name);
	if (p == NULL && err[0] == 0) snprintf(err, errlen, "cuBLAS %d has no %s", b->major, name);
	return p;
}

int tc_blas_open(tc_blas *b, char *err, size_t errlen) {
	static const struct {
		const char *name;
		int major;
	} libs[] = {{"libcublas.so.13", 13}, {"libcublas.so.12", 12}, {"libcublas.so.11", 11}};
	memset(b, 0, sizeof *b);
	err[0] = 0;
	char tried[512] = "";
	for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
		b->lib = dlopen(libs[i].name, RTLD_NOW | RTLD_LOCAL);
		if (b->lib != NULL) {
			b->major = libs[i].major;
			break;
		}
		const char *e = dlerror();
		size_t n = strlen(tried);
		snprintf(tried + n, sizeof tried - n, "%s%s", n ? "; " : "", e ? e : libs[i].name);
	}
	if (b->lib == NULL) {
		snprintf(err, errlen, "no cuBLAS found (libcublas.so.13, .12 or .11): %s", tried);
		return -1;
	}
	b->create = (int (*)(void **))sym(b, "cublasCreate_v2", err, errlen);
	b->destroy = (int (*)(void *))sym(b, "cublasDestroy_v2", err, errlen);
	b->set_stream = (int (*)(void *, void *))sym(b, "cublasSetStream_v2", err, errlen);
	b->get_version = (int (*)(void *, int *))sym(b, "cublasGetVersion_v2", err, errlen);
	b->sgemm = (int (*)(void *, int, int, int, int, int, const float *, const float *, int, const float *, int,
			    const float *, float *, int))sym(b, "cublasSgemm_v2", err, errlen);
	b->gemm_ex = (int (*)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
			      const void *, void *, int, int, int, int))sym(b, "cublasGemmEx", err, errlen);
	if (err[0] != 0) {
		dlclose(b->lib);
		b->lib = NULL;
		return -1;
	}
	int st = b->create(&b->handle);
	if (st != 0) {
		snprintf(err, errlen, "cublasCreate_v2 (cuBLAS %d): status %d", b->major, st);
		dlclose(b->lib);
		b->lib = NULL;
		b->handle = NULL;
		return -1;
	}
	return 0;
}

void tc_blas_close(tc_blas *b) {
	if (b->handle != NULL) b->destroy(b->handle);
	if (b->lib != NULL) dlclose(b->lib);
	memset(b, 0, sizeof *b);
}

int tc_blas_set_stream(tc_blas *b, void *stream) { return b->set_stream(b->handle, stream); }

int tc_blas_version(tc_blas *b, int *v) { return b->get_version(b->handle, v); }

int tc_blas_sgemm(tc_blas *b, int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int lda, uintptr_t B,
		  int ldb, float beta, uintptr_t C, int ldc) {
	return b->sgemm(b->handle, ta, tb, m, n, k, &alpha, (const float *)A, lda, (const float *)B, ldb, &beta,
			(float *)C, ldc);
}

int tc_blas_gemm_ex(tc_blas *b, int ta, int tb, int m, int n, int k, float alpha, uintptr_t A, int atype, int lda,
		    uintptr_t B, int btype, int ldb, float beta, uintptr_t C, int ctype, int ldc) {
	return b->gemm_ex(b->handle, ta, tb, m, n, k, &alpha, (const void *)A, atype, lda, (const void *)B, btype, ldb,
			  &beta, (void *)C, ctype, ldc,
			  TC_COMPUTE_32F, TC_GEMM_DEFAULT);
}

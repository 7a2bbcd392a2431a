//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cublas.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// blas is a cuBLAS handle of the newest cuBLAS the host has (13, 12 or 11),
// loaded with dlopen: it belongs to one Device, whose stream it runs on.
type blas struct {
	b *C.tc_blas // C memory: the library, the handle and its entry points
}

// openBLAS loads cuBLAS, creates a handle in the current context and binds
// it to stream (a CUstream). It fails with a clear error when the host has
// no cuBLAS 11, 12 or 13.
func openBLAS(stream unsafe.Pointer) (*blas, error) {
	b := (*C.tc_blas)(C.calloc(1, C.size_t(unsafe.Sizeof(C.tc_blas{}))))
	if b == nil {
		return nil, errors.New("gpu/cuda: cuBLAS: out of memory")
	}
	var msg [512]C.char
	if C.tc_blas_open(b, &msg[0], C.size_t(len(msg))) != 0 {
		C.free(unsafe.Pointer(b))
		return nil, fmt.Errorf("gpu/cuda: %s", C.GoString(&msg[0]))
	}
	bl := &blas{b: b}
	if st := C.tc_blas_set_stream(b, stream); st != 0 {
		bl.close()
		return nil, fmt.Errorf("gpu/cuda: cublasSetStream_v2: status %d", int(st))
	}
	return bl, nil
}

// version is cuBLAS's version number (e.g. 120400 for 12.4.0), or its
// soname's major version when it cannot tell.
func (bl *blas) version() int {
	var v C.int
	if C.tc_blas_version(bl.b, &v) != 0 {
		return int(bl.b.major)
	}
	return int(v)
}

// close destroys the handle and unloads the library.
func (bl *blas) close() {
	if bl == nil || bl.b == nil {
		return
	}
	C.tc_blas_close(bl.b)
	C.free(unsafe.Pointer(bl.b))
	bl.b = nil
}

// cuBLAS's data types (cudaDataType).
const (
	blasF32  C.int = C.TC_R_32F
	blasF16  C.int = C.TC_R_16F
	blasBF16 C.int = C.TC_R_16BF
)

// matMulT computes, in row-major terms, dst (m x n, float32) = x (m x k) ·
// wᵀ with w n x k, all device pointers: in cuBLAS's column-major terms
// dstᵀ = w · xᵀ, an (n x k)ᵀ-transposed GEMM. wType and xType are the
// elements' types (both float32, or both one 16-bit type); accumulation is
// in float32.
func (bl *blas) matMulT(dst, x, w uintptr, m, n, k int, wType, xType C.int) error {
	var st C.int
	if wType == blasF32 && xType == blasF32 {
		st = C.tc_blas_sgemm(bl.b, C.TC_OP_T, C.TC_OP_N, C.int(n), C.int(m), C.int(k), 1,
			C.uintptr_t(w), C.int(k), C.uintptr_t(x), C.int(k), 0, C.uintptr_t(dst), C.int(n))
		if st != 0 {
			return fmt.Errorf("cublasSgemm_v2 %dx%dx%d: status %d", m, n, k, int(st))
		}
		return nil
	}
	st = C.tc_blas_gemm_ex(bl.b, C.TC_OP_T, C.TC_OP_N, C.int(n), C.int(m), C.int(k), 1,
		C.uintptr_t(w), wType, C.int(k), C.uintptr_t(x), xType, C.int(k), 0, C.uintptr_t(dst), blasF32, C.int(n))
	if st != 0 {
		return fmt.Errorf("cublasGemmEx %dx%dx%d (types %d, %d): status %d", m, n, k, int(wType), int(xType), int(st))
	}
	return nil
}

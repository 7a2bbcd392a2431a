// Package kernels holds the CUDA C kernels of the CUDA backend (the .cu
// files, compiled to PTX by nvcc elsewhere) and runs the very same source on
// the CPU in its tests.
package kernels

import "embed"

// Sources holds the kernel sources: the .cu files, common.cuh and the host
// shim cuhost.h. Embedding them also makes the go command's build cache
// depend on them, so that editing a kernel rebuilds the host build the tests
// run (cgo itself only tracks the .cc and .h files it compiles).
//
//go:embed *.cu common.cuh cuhost.h
var Sources embed.FS

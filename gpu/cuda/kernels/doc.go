// Package kernels holds the CUDA C kernels of the CUDA backend and runs the
// very same source on the CPU in its tests.
//
// # One source, two compilers
//
// The .cu files are plain CUDA C: extern "C" __global__ functions (no
// templates, no CUDA libraries, no warp intrinsics), each file opening with
// what it computes, its launch shape and the gpu.Device operation it
// implements. The CUDA backend compiles them to PTX with nvcc
// (-arch=compute_80) and launches them by name. The same files also compile
// as ordinary C++20: common.cuh, which every kernel file includes, pulls in
// the host shim cuhost.h when __CUDACC__ is not defined, and host.cc
// includes the kernel files and wraps each launch in a C function for cgo.
// Only this package's tests call those wrappers; they run in the default,
// tag-free `go test ./...`, and need no CUDA header, library or GPU.
//
// # The host shim
//
// launch(kernel, grid, block, args...) runs the grid's blocks one after the
// other on a team of blockDim real host threads (std::thread), with
// threadIdx, blockIdx, blockDim and gridDim as thread-locals. __syncthreads
// is a barrier over the block's live threads (threads that return leave the
// block, as on sm_70+); a barrier whose threads arrive from different source
// lines (divergent __syncthreads) aborts. Shared memory is declared with
// SHARED_ARRAY(type, name, count): on the device a __shared__ array, on the
// host a reference into a 48 KiB arena (the device's static limit) owned by
// the launcher and shared by the block's threads; every thread bumps its own
// offset through the same declarations in the same order, so all of a
// block's threads see the same bytes, and the arena is poisoned with NaNs
// before each block, so a read of shared memory no thread of the block wrote
// shows up in the results. Reductions go through shared memory, which the
// shim runs exactly as written; the math functions are libm's.
//
// # What the host run proves, and what it cannot
//
// It checks, against gpu/ref on random shapes (ragged sizes, block sizes
// that do not divide the work, GQA ratios, windows, soft-capping, prefill
// chunks at nonzero positions, partial rotary, several sequences on
// shuffled non-contiguous pages whose unused slots hold NaN): the indexing,
// the masking, the grid-stride and block-stride loops, the shared-memory
// reductions and the barriers that order them, the online softmax, and the
// paged-KV addressing. Real threads run each block, so a missing barrier
// between a shared write and another thread's read usually shows up too.
//
// It cannot see what only the hardware does: warp scheduling and lockstep
// execution (and so warp-synchronous code, which the kernels avoid), memory
// coalescing, bank conflicts, occupancy and speed, concurrency between
// blocks (the shim runs them one at a time), races the host's memory model
// and timing happen to hide, nvcc's floating-point contraction (FMA) and
// its fast-math intrinsics, and whether nvcc accepts the source at all:
// that needs the device build and the backend's own GPU tests.
package kernels

import "embed"

// Sources holds the kernel sources: the .cu files, common.cuh and the host
// shim cuhost.h. Embedding them also makes the go command's build cache
// depend on them, so that editing a kernel rebuilds the host build the tests
// run (cgo itself only tracks the .cc and .h files it compiles).
//
//go:embed *.cu common.cuh cuhost.h
var Sources embed.FS

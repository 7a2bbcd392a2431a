// Package cuda is the NVIDIA GPU backend of gpu.Device, on CUDA's driver API
// through gorgonia.org/cu, with matrix products in cuBLAS.
//
// # Build tag
//
// Everything that touches CUDA builds only with the build tag cuda
// (go build -tags cuda): gorgonia.org/cu's package initialiser calls cuInit
// and exits the process on a machine without a GPU, and linking it makes
// libcuda.so.1 a needed library, so the default build never imports it. The
// tagged build needs CUDA's cuda.h and a libcuda.so to link against (the
// driver's, or the toolkit's stub), found through cgo's environment:
//
//	CGO_CFLAGS="-I/usr/local/cuda/include" \
//	CGO_LDFLAGS="-L/usr/local/cuda/lib64/stubs" go build -tags cuda ./cmd/troupe
//
// (or the same folders in the C compiler's CPATH and LIBRARY_PATH; .ci/run
// takes the two files of CUDA 11.8 from Debian's non-free nvidia-cuda-dev
// package). The tests of the tagged build need a GPU (without one cu's
// initialiser ends the test binary); the untagged tests need none. cuBLAS is not linked: a Device loads
// libcublas.so.13, .12 or .11, whichever the host has, when it is created,
// so one binary runs with any of them.
//
// Without the tag the package holds only what needs no CUDA: the kernel
// table (KernelNames), the embedded PTX (PTX), the check that the PTX was
// generated from the current kernel sources, and the arithmetic of the
// load-time memory check (CheckFit, UploadBytes).
//
// # Memory
//
// Before the weights go up, the loader calls Device.CheckMemory, which
// compares the GPU's free memory with the weights as the Device uploads
// them, the KV pool the KV budget gives and ScratchMargin, and fails with
// all the figures when they do not fit. Device.MemoryUse reports what the
// Device holds (gpu.MemoryReporter; troupe_device_memory_bytes).
//
// # Device check
//
// scripts/gpu-check.sh runs the tests tagged cuda (this package's, and the
// model parity tests with a CUDA backend) and the CUDA benchmarks on a
// machine with a GPU, from test binaries task gpu:build-check builds.
//
// # Kernels
//
// The kernels are CUDA C in gpu/cuda/kernels/*.cu, compiled by nvcc 11.8 to
// PTX for compute capability 8.0 (genptx.sh), committed as ptx/kernels.ptx
// and embedded; the driver compiles the PTX for the GPU at hand when a
// Device loads it. The first line of the PTX records the SHA-256 of the
// sources it was generated from, and a test fails when the sources have
// changed since: rerun genptx.sh. The kernels' names and argument lists are
// declared once, in kernels.go; an operation whose kernel the PTX does not
// hold yet runs the reference implementation (gpu/ref) on the host, and the
// Device logs that once per operation.
package cuda

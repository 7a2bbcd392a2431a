// Package kernels holds the CUDA C kernels of the CUDA backend (the .cu
// files, compiled to PTX by nvcc elsewhere) and runs the very same source on
// the CPU in its tests.
package kernels

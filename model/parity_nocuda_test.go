//go:build !cuda

package model_test

import "testing"

// gpuBackends is empty in a build without the CUDA backend (see
// parity_cuda_test.go).
func gpuBackends(*testing.T) []backend { return nil }

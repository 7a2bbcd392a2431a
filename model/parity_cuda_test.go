//go:build cuda

package model_test

import (
	"testing"

	"github.com/troupe-ai/troupe/gpu/cuda"
)

// gpuBackends is the CUDA device 0 (float32 weights on the GPU: the
// parity tolerance holds), closed when t ends. Without a GPU the test
// binary does not get here: cu's initialiser ends it first.
func gpuBackends(t *testing.T) []backend {
	t.Helper()
	d, err := cuda.New(cuda.Options{Ordinal: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fb := d.Fallbacks(); len(fb) > 0 {
			t.Logf("cuda: operations on the host: %v", fb)
		}
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return []backend{{"cuda", d, false}}
}

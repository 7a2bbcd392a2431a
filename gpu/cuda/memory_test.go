//go:build cuda

package cuda

import (
	"errors"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// TestMemory: MemoryUse counts the weights the Device uploads and the
// scratch it grows, and reports the GPU's size; CheckMemory passes a small
// model and refuses, with ErrOutOfMemory, a KV pool as large as the GPU.
func TestMemory(t *testing.T) {
	d := newDevice(t, Options{})
	u := d.MemoryUse()
	if u.Total <= 0 || u.Weights != 0 || u.KV != 0 {
		t.Fatalf("before any operation: %+v", u)
	}
	const n, k = 64, 128
	w := &gpu.Weight{DType: gpu.F32, Rows: n, Cols: k, Data: make([]byte, 4*n*k)}
	d.MatMul(make([]float32, n), make([]float32, k), 1, w)
	u = d.MemoryUse()
	if u.Weights != 4*n*k || u.Weights != d.WeightBytes() || u.Scratch <= 0 || u.KV != 0 {
		t.Errorf("after one f32 %dx%d MatMul: %+v (WeightBytes %d)", n, k, u, d.WeightBytes())
	}
	if err := d.CheckMemory(map[gpu.DType]int64{gpu.BF16: 1 << 20, gpu.F32: 1 << 10}, 1<<20); err != nil {
		t.Errorf("a 5 MiB model with 1 MiB of KV: %v", err)
	}
	err := d.CheckMemory(map[gpu.DType]int64{gpu.F32: 1}, u.Total)
	if !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("a KV pool the size of the GPU: %v, want ErrOutOfMemory", err)
	}
	t.Logf("%v", err)
}

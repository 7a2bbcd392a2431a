package cpu

import (
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

// The state-space operations run the reference implementation for now: they
// are a small share of a hybrid model's time next to its matmuls. C kernels
// replace them when the recurrent families are optimised.

// CausalConv1D implements gpu.Device.
func (d *Device) CausalConv1D(out, x []float32, p gpu.ConvParams, seqs []gpu.RecSeq) {
	ref.Device{}.CausalConv1D(out, x, p, seqs)
}

// SelectiveScan implements gpu.Device.
func (d *Device) SelectiveScan(y, x, dt, B, C []float32, p gpu.ScanParams, seqs []gpu.RecSeq) {
	ref.Device{}.SelectiveScan(y, x, dt, B, C, p, seqs)
}

// RMSNormGated implements gpu.Device.
func (d *Device) RMSNormGated(dst, x, gate, w []float32, n, group int, eps float32) {
	ref.Device{}.RMSNormGated(dst, x, gate, w, n, group, eps)
}

// Softplus implements gpu.Device.
func (d *Device) Softplus(x []float32) { ref.Device{}.Softplus(x) }

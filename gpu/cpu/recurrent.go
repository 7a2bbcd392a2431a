package cpu

/*
#include <stdint.h>
void tr_causal_conv(float *out, const float *x, long row, long n, long C, long K,
		    const float *w, const float *bias, int silu, float *state, long c0, long c1);
void tr_scan(float *y, const float *x, const float *dt, const float *B, const float *Cm,
	     long row, long n, long H, long P, long N, long G, const float *A, const float *D,
	     float *state, long h0, long h1);
void tr_softplus(float *x, long n);
void tr_rmsnorm_gated(float *dst, const float *x, const float *gate, const float *w,
		      long rows, long n, long g, float eps);
*/
import "C"

import (
	"sync"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

// State-space operations: C kernels in ssm.c, split over channels (heads)
// or rows across the device's threads when the work is large enough to pay
// for it.

// Limits of the C kernels' stack buffers; larger shapes use the reference.
const (
	maxConvWidth = 16
	maxStateDim  = 256
	// below this many state updates a call stays on one thread
	parallelMin = 1 << 15
)

// split runs f over [0, n) in up to d.threads contiguous ranges.
func (d *Device) split(n, work int, f func(lo, hi int)) {
	t := d.threads
	if work < parallelMin || t <= 1 || n < 2 {
		f(0, n)
		return
	}
	t = min(t, n)
	var wg sync.WaitGroup
	for i := 0; i < t; i++ {
		lo, hi := n*i/t, n*(i+1)/t
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// CausalConv1D implements gpu.Device.
func (d *Device) CausalConv1D(out, x []float32, p gpu.ConvParams, seqs []gpu.RecSeq) {
	if p.Width > maxConvWidth || p.Width < 1 {
		ref.Device{}.CausalConv1D(out, x, p, seqs)
		return
	}
	silu := C.int(0)
	if p.SiLU {
		silu = 1
	}
	var bias *C.float
	if p.Bias != nil {
		bias = fp(p.Bias)
	}
	for _, s := range seqs {
		state := s.State[p.StateOffset:]
		d.split(p.Channels, s.N*p.Channels*p.Width, func(lo, hi int) {
			C.tr_causal_conv(fp(out), fp(x), C.long(s.Row), C.long(s.N), C.long(p.Channels), C.long(p.Width),
				fp(p.Weight), bias, silu, fp(state), C.long(lo), C.long(hi))
		})
	}
}

// SelectiveScan implements gpu.Device.
func (d *Device) SelectiveScan(y, x, dt, B, Cm []float32, p gpu.ScanParams, seqs []gpu.RecSeq) {
	if p.StateDim > maxStateDim {
		ref.Device{}.SelectiveScan(y, x, dt, B, Cm, p, seqs)
		return
	}
	for _, s := range seqs {
		state := s.State[p.StateOffset:]
		d.split(p.Heads, s.N*p.Heads*p.HeadDim*p.StateDim, func(lo, hi int) {
			C.tr_scan(fp(y), fp(x), fp(dt), fp(B), fp(Cm), C.long(s.Row), C.long(s.N),
				C.long(p.Heads), C.long(p.HeadDim), C.long(p.StateDim), C.long(p.Groups),
				fp(p.A), fp(p.D), fp(state), C.long(lo), C.long(hi))
		})
	}
}

// RMSNormGated implements gpu.Device.
func (d *Device) RMSNormGated(dst, x, gate, w []float32, n, group int, eps float32) {
	rows := len(x) / n
	if rows == 0 {
		return
	}
	d.split(rows, len(x)*4, func(lo, hi int) {
		C.tr_rmsnorm_gated(fp(dst[lo*n:]), fp(x[lo*n:]), fp(gate[lo*n:]), fp(w), C.long(hi-lo), C.long(n), C.long(group), C.float(eps))
	})
}

// Softplus implements gpu.Device.
func (d *Device) Softplus(x []float32) {
	if len(x) == 0 {
		return
	}
	d.split(len(x), len(x)*4, func(lo, hi int) { C.tr_softplus(fp(x[lo:]), C.long(hi-lo)) })
}

//go:build cuda

// These tests need a GPU: gorgonia.org/cu's initialiser exits the test
// binary on a host without one. Run them there with
// go test -tags cuda ./gpu/cuda (with cgo's flags as doc.go shows).

package cuda

import (
	"math"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/gputest"
	"github.com/troupe-ai/troupe/gpu/ref"
)

func newDevice(t *testing.T, opts Options) *Device {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Skipf("no usable CUDA device: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%s", d.Name())
	return d
}

func randF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func weightOf(t *testing.T, dt gpu.DType, rows, cols int, vals []float32) *gpu.Weight {
	t.Helper()
	w, err := gputest.Weight(dt, rows, cols, vals)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// close reports the first element where got and want differ by more than
// tol relative to max(1, |want|).
func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*math.Max(1, math.Abs(float64(want[i]))) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: element %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		name    string
		dt      gpu.DType
		half16  bool
		m, n, k int
		tol     float64
	}{
		{"F32 decode", gpu.F32, false, 1, 96, 64, 1e-4},
		{"F32 prefill", gpu.F32, false, 17, 130, 256, 1e-4},
		{"BF16 widened", gpu.BF16, false, 5, 64, 128, 1e-4},
		{"F16 widened", gpu.F16, false, 5, 64, 128, 1e-4},
		{"BF16 GemmEx", gpu.BF16, true, 5, 64, 128, 5e-2},
		{"F16 GemmEx", gpu.F16, true, 5, 64, 128, 5e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDevice(t, Options{Half16: tc.half16})
			w := weightOf(t, tc.dt, tc.n, tc.k, randF32(r, tc.n*tc.k))
			x := randF32(r, tc.m*tc.k)
			got, want := make([]float32, tc.m*tc.n), make([]float32, tc.m*tc.n)
			d.MatMul(got, x, tc.m, w)
			ref.Device{}.MatMul(want, x, tc.m, w)
			closeTo(t, "MatMul", got, want, tc.tol)
			d.MatMul(got, x, tc.m, w) // the cached upload
			closeTo(t, "MatMul again", got, want, tc.tol)
		})
	}
	t.Run("Q8_0 dequantized at upload", func(t *testing.T) {
		d := newDevice(t, Options{})
		w := gputest.RandQuantWeight(r, gputest.QuantTypes()[0], 32, 64)
		x := randF32(r, 3*64)
		got, want := make([]float32, 3*32), make([]float32, 3*32)
		d.MatMul(got, x, 3, w)
		ref.Device{}.MatMul(want, x, 3, w)
		closeTo(t, "MatMul", got, want, 1e-4)
		if _, ok := d.Fallbacks()["MatMul Q8_0 weights"]; !ok {
			t.Errorf("the dequantizing upload is not reported: %v", d.Fallbacks())
		}
	})
}

// TestOps runs every other operation against gpu/ref, on the GPU where the
// PTX has its kernel and on the host otherwise.
func TestOps(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	d := newDevice(t, Options{})
	var rf ref.Device
	const rows, n = 3, 96
	x, y, w := randF32(r, rows*n), randF32(r, rows*n), randF32(r, n)
	for _, tc := range []struct {
		name string
		run  func(dev gpu.Device, out []float32)
	}{
		{"Add", func(dev gpu.Device, out []float32) { dev.Add(out, x, y) }},
		{"SiLUMul", func(dev gpu.Device, out []float32) { dev.SiLUMul(out, x, y) }},
		{"GELUTanhMul", func(dev gpu.Device, out []float32) { dev.GELUTanhMul(out, x, y) }},
		{"Scale", func(dev gpu.Device, out []float32) { copy(out, x); dev.Scale(out, 0.5) }},
		{"Softcap", func(dev gpu.Device, out []float32) { copy(out, x); dev.Softcap(out, 1.5) }},
		{"Softplus", func(dev gpu.Device, out []float32) { copy(out, x); dev.Softplus(out) }},
		{"AddBias", func(dev gpu.Device, out []float32) { copy(out, x); dev.AddBias(out, w) }},
		{"RMSNorm", func(dev gpu.Device, out []float32) { dev.RMSNorm(out, x, w, n, 1e-6, false) }},
		{"RMSNorm unit offset", func(dev gpu.Device, out []float32) { dev.RMSNorm(out, x, w, n, 1e-6, true) }},
		{"RMSNormGated", func(dev gpu.Device, out []float32) { dev.RMSNormGated(out, x, y, w, n, 32, 1e-6) }},
		{"RoPE", func(dev gpu.Device, out []float32) {
			copy(out, x)
			cos, sin := make([]float32, rows*8), make([]float32, rows*8)
			for i := range cos {
				a := float64(i) * 0.1
				cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			dev.RoPE(out, 3, 32, cos, sin) // heads 3 x 32, 16 rotary dims
		}},
		{"Embed", func(dev gpu.Device, out []float32) {
			e := weightOf(t, gpu.BF16, 10, n, randF32(rand.New(rand.NewSource(3)), 10*n))
			dev.Embed(out, e, []int32{7, 0, 9})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, want := make([]float32, rows*n), make([]float32, rows*n)
			tc.run(d, got)
			tc.run(rf, want)
			closeTo(t, tc.name, got, want, 1e-4)
		})
	}
	t.Logf("on the host: %v", d.Fallbacks())
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	d := newDevice(t, Options{})
	p := gpu.AttnParams{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125, Softcap: 0}
	kv := &gpu.KVLayer{PageSize: 16, Dim: p.KVHeads * p.HeadDim}
	kv.K, kv.V = randF32(r, 8*16*kv.Dim), randF32(r, 8*16*kv.Dim)
	seqs := []gpu.AttnSeq{
		{Row: 0, N: 5, Pos: 0, Pages: []int32{3}},        // prefill
		{Row: 5, N: 1, Pos: 40, Pages: []int32{6, 1, 4}}, // decode over three pages
	}
	qdim := p.Heads * p.HeadDim
	q := randF32(r, 6*qdim)
	for _, window := range []int{0, 7} {
		p.Window = window
		got, want := make([]float32, 6*qdim), make([]float32, 6*qdim)
		d.Attention(got, q, kv, seqs, p)
		ref.Device{}.Attention(want, q, kv, seqs, p)
		closeTo(t, "Attention", got, want, 1e-4)
	}
}

package ref

import (
	"math"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/gputest"
)

// quantTypes are the quantized dtypes (gputest.QuantTypes).
var quantTypes = gputest.QuantTypes()

// randQuantWeight is gputest.RandQuantWeight.
func randQuantWeight(r *rand.Rand, dt gpu.DType, scales []int, rows, cols int) *gpu.Weight {
	return gputest.RandQuantWeight(r, gputest.QuantType{DType: dt, Scales: scales}, rows, cols)
}

// TestQuantMatMulBound checks the quantized-activation reference against
// the exact product with the dequantized weights: they differ by at most the
// activations' rounding, half an activation step per element:
// sum_k |w_k| * d_x(k) / 2.
func TestQuantMatMulBound(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, qt := range quantTypes {
		t.Run(qt.DType.String(), func(t *testing.T) {
			const m, n = 3, 7
			k := 2 * qt.DType.BlockSize()
			w := randQuantWeight(r, qt.DType, qt.Scales, n, k)
			x := make([]float32, m*k)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			x[5] = 0
			for i := 0; i < qt.DType.BlockSize(); i++ { // an all-zero block
				x[k+i] = 0
			}
			got := make([]float32, m*n)
			mag := make([]float32, m*n)
			if err := QuantMatMul(got, x, m, w, mag); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, m*n)
			Device{}.MatMul(want, x, m, w)
			wf := w.Float32s()
			bs := ActBlockSize(qt.DType)
			for i := 0; i < m; i++ {
				act := QuantizeAct(x[i*k:(i+1)*k], bs)
				for j := 0; j < n; j++ {
					var bound, scale float64
					for c := 0; c < k; c++ {
						wv := math.Abs(float64(wf[j*k+c]))
						bound += wv * float64(act[c/bs].D) / 2
						scale += wv * math.Abs(float64(x[i*k+c]))
					}
					e := math.Abs(float64(got[i*n+j]) - float64(want[i*n+j]))
					if e > bound*1.001+1e-6*scale {
						t.Errorf("[%d][%d]: quantized %g, exact %g: error %g > bound %g", i, j, got[i*n+j], want[i*n+j], e, bound)
					}
					if mag[i*n+j] <= 0 || float64(mag[i*n+j]) < math.Abs(float64(got[i*n+j]))*0.999 {
						t.Errorf("[%d][%d]: magnitude %g below |result| %g", i, j, mag[i*n+j], got[i*n+j])
					}
				}
			}
		})
	}
}

// TestQuantizeAct pins the activation quantization: the scale, exact quants
// at the block's extremes, round-half-to-even, and the sums.
func TestQuantizeAct(t *testing.T) {
	x := make([]float32, 256)
	x[0] = -2.54 // amax: d = 0.02, q = -127
	x[1] = 0.01  // 0.01 * 127/2.54 = 0.5: rounds to even, 0
	x[2] = 0.03  // 1.5: rounds to 2
	x[17] = 1.27 // 63.5 -> 64
	for _, bs := range []int{32, 256} {
		b := QuantizeAct(x, bs)[0]
		if b.D != float32(2.54)/127 {
			t.Errorf("bs %d: d = %g", bs, b.D)
		}
		if b.Q[0] != -127 || b.Q[1] != 0 || b.Q[2] != 2 || b.Q[17] != 64 {
			t.Errorf("bs %d: quants %v", bs, b.Q[:18])
		}
		if bs == 32 && (len(b.Sums) != 1 || b.Sums[0] != -127+2+64) {
			t.Errorf("bs 32: sums %v", b.Sums)
		}
		if bs == 256 && (len(b.Sums) != 16 || b.Sums[0] != -125 || b.Sums[1] != 64) {
			t.Errorf("bs 256: sums %v", b.Sums)
		}
	}
	z := QuantizeAct(make([]float32, 32), 32)[0]
	if z.D != 0 || z.Sums[0] != 0 {
		t.Errorf("zero block: %+v", z)
	}
}

// TestQuantWeightAPI: row sizes by block, the error for a width that is not
// a whole number of blocks, At and RowSlice on quantized weights.
func TestQuantWeightAPI(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, qt := range quantTypes {
		bs := qt.DType.BlockSize()
		if rb, err := qt.DType.RowBytes(2 * bs); err != nil || rb != 2*qt.DType.BlockBytes() {
			t.Errorf("%v: RowBytes(%d) = %d, %v", qt.DType, 2*bs, rb, err)
		}
		if _, err := gpu.NewWeight(qt.DType, 1, bs+1, make([]byte, 4096)); err == nil {
			t.Errorf("%v: width %d accepted", qt.DType, bs+1)
		}
		g, ok := qt.DType.GGML()
		if d, ok2 := gpu.DTypeOf(g); !ok || !ok2 || d != qt.DType || g.String() != qt.DType.String() {
			t.Errorf("%v: ggml type %v (%v), back %v", qt.DType, g, ok, d)
		}
		w := randQuantWeight(r, qt.DType, qt.Scales, 3, 2*bs)
		all := w.Float32s()
		s := w.RowSlice(1, 3)
		for _, rc := range [][2]int{{0, 0}, {1, bs + 5}, {2, 2*bs - 1}} {
			if got := w.At(rc[0], rc[1]); got != all[rc[0]*w.Cols+rc[1]] {
				t.Errorf("%v: At%v = %g, Float32s %g", qt.DType, rc, got, all[rc[0]*w.Cols+rc[1]])
			}
		}
		if s.Rows != 2 || s.At(1, 7) != w.At(2, 7) {
			t.Errorf("%v: RowSlice", qt.DType)
		}
		deq, err := Dequantize(g, w.Data, 3*2*bs)
		if err != nil {
			t.Fatal(err)
		}
		for i := range deq {
			if deq[i] != all[i] && !(math.IsNaN(float64(deq[i])) && math.IsNaN(float64(all[i]))) {
				t.Fatalf("%v: Float32s[%d] = %g, Dequantize %g", qt.DType, i, all[i], deq[i])
			}
		}
	}
}

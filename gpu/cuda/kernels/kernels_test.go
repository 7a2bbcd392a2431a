//go:build cgo

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = (2*r.Float32() - 1) * scale
	}
	return x
}

// check fails t at the first element where |got-want| exceeds tol(i), and
// logs the largest error relative to its tolerance.
func check(t *testing.T, what string, got, want []float32, tol func(i int) float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		tl := tol(i)
		if !(d <= tl) { // NaN fails too
			t.Fatalf("%s[%d] = %g, want %g (|diff| %.3g > tolerance %.3g)", what, i, got[i], want[i], d, tl)
		}
		if tl > 0 {
			worst = math.Max(worst, d/tl)
		}
	}
	t.Logf("%s: largest error %.2f of its tolerance", what, worst)
}

func exact(int) float64 { return 0 }

// launches are the (grid, block) shapes the elementwise kernels run under:
// single thread, ragged blocks, grids smaller and larger than needed.
var launches = []struct{ grid, block int }{{1, 1}, {3, 7}, {2, 32}, {9, 128}}

func TestElementwise(t *testing.T) {
	type op struct {
		name string
		// run applies the op through the kernel (k) or the reference (r)
		// to fresh copies of the inputs; tol is per element.
		run func(kernel bool, x, y []float32, grid, block int) []float32
		tol func(x, y, want []float32, i int) float64
	}
	var dev ref.Device
	rel := func(r float64) func(x, y, want []float32, i int) float64 {
		return func(_, _, want []float32, i int) float64 { return r * math.Abs(float64(want[i])) }
	}
	ops := []op{
		// f32 add and multiply are correctly rounded on both sides: exact.
		{"Add", func(k bool, x, y []float32, g, b int) []float32 {
			dst := make([]float32, len(x))
			if k {
				hostAdd(dst, x, y, g, b)
			} else {
				dev.Add(dst, x, y)
			}
			return dst
		}, func([]float32, []float32, []float32, int) float64 { return 0 }},
		{"AddBias", func(k bool, x, y []float32, g, b int) []float32 {
			x = append([]float32(nil), x...)
			nb := 1
			for _, d := range []int{13, 10, 7} {
				if len(x)%d == 0 {
					nb = d
					break
				}
			}
			bias := y[:nb]
			if k {
				hostAddBias(x, bias, g, b)
			} else {
				dev.AddBias(x, bias)
			}
			return x
		}, func([]float32, []float32, []float32, int) float64 { return 0 }},
		{"Scale", func(k bool, x, _ []float32, g, b int) []float32 {
			x = append([]float32(nil), x...)
			if k {
				hostScale(x, 0.37, g, b)
			} else {
				dev.Scale(x, 0.37)
			}
			return x
		}, func([]float32, []float32, []float32, int) float64 { return 0 }},
		// expf/tanhf/log1pf are within 1-2 ulp, and the float32 products
		// and quotients round once each: a few ulp relative in all, 4e-6
		// leaves room.
		{"SiLUMul", func(k bool, x, y []float32, g, b int) []float32 {
			dst := make([]float32, len(x))
			if k {
				hostSiLUMul(dst, x, y, g, b)
			} else {
				dev.SiLUMul(dst, x, y)
			}
			return dst
		}, rel(4e-6)},
		// gelu_tanh cancels in 1+tanh(.) for negative gates: the error is
		// absolute there, a few ulp of 0.5*|gate*up|.
		{"GELUTanhMul", func(k bool, x, y []float32, g, b int) []float32 {
			dst := make([]float32, len(x))
			if k {
				hostGELUTanhMul(dst, x, y, g, b)
			} else {
				dev.GELUTanhMul(dst, x, y)
			}
			return dst
		}, func(x, y, want []float32, i int) float64 {
			return 4e-6*math.Abs(float64(want[i])) + 3e-7*math.Abs(float64(x[i]*y[i]))
		}},
		{"Softcap", func(k bool, x, _ []float32, g, b int) []float32 {
			x = append([]float32(nil), x...)
			if k {
				hostSoftcap(x, 3.5, g, b)
			} else {
				dev.Softcap(x, 3.5)
			}
			return x
		}, rel(4e-6)},
		{"Softplus", func(k bool, x, _ []float32, g, b int) []float32 {
			x = append([]float32(nil), x...)
			for i := range x {
				x[i] *= 4 // cross the threshold at 20 and reach the far negative tail
			}
			if k {
				hostSoftplus(x, g, b)
			} else {
				dev.Softplus(x)
			}
			return x
		}, rel(4e-6)},
	}
	r := rand.New(rand.NewSource(1))
	for _, o := range ops {
		for _, n := range []int{1, 7, 130, 4100} {
			for _, l := range launches {
				t.Run(fmt.Sprintf("%s/n=%d/grid=%d/block=%d", o.name, n, l.grid, l.block), func(t *testing.T) {
					x, y := randSlice(r, n, 8), randSlice(r, n, 3)
					got := o.run(true, x, y, l.grid, l.block)
					want := o.run(false, x, y, l.grid, l.block)
					check(t, o.name, got, want, func(i int) float64 { return o.tol(x, y, want, i) })
				})
			}
		}
	}
}

func TestEmbed(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
		for _, c := range []struct{ vocab, cols, block int }{{5, 1, 1}, {17, 33, 8}, {64, 300, 128}} {
			t.Run(fmt.Sprintf("%v/%dx%d/block=%d", dt, c.vocab, c.cols, c.block), func(t *testing.T) {
				// Random bits: every pattern, subnormals, infinities and
				// NaNs included (widening is exact, so compare bits).
				data := make([]byte, c.vocab*c.cols*dt.Size())
				r.Read(data)
				if dt == gpu.F32 {
					for i := 0; i < len(data); i += 4 {
						binary.LittleEndian.PutUint32(data[i:], math.Float32bits(r.Float32()-0.5))
					}
				}
				w, err := gpu.NewWeight(dt, c.vocab, c.cols, data)
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]int32, 11)
				for i := range ids {
					ids[i] = int32(r.Intn(c.vocab))
				}
				got := make([]float32, len(ids)*c.cols)
				want := make([]float32, len(ids)*c.cols)
				hostEmbed(got, w, ids, c.block)
				ref.Device{}.Embed(want, w, ids)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("[%d] = %#x, want %#x", i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, c := range []struct {
		rows, n, block int
		unit, alias    bool
	}{
		{1, 1, 1, false, false},
		{3, 7, 4, true, false},
		{5, 96, 32, false, true},
		{2, 1000, 64, true, true},
		{4, 3000, 256, false, false},
	} {
		t.Run(fmt.Sprintf("%dx%d/block=%d/unit=%v/alias=%v", c.rows, c.n, c.block, c.unit, c.alias), func(t *testing.T) {
			x := randSlice(r, c.rows*c.n, 4)
			w := randSlice(r, c.n, 1)
			want := make([]float32, len(x))
			ref.Device{}.RMSNorm(want, x, w, c.n, 1e-6, c.unit)
			got := make([]float32, len(x))
			if c.alias {
				copy(got, x)
				hostRMSNorm(got, got, w, c.n, 1e-6, c.unit, c.block)
			} else {
				hostRMSNorm(got, x, w, c.n, 1e-6, c.unit, c.block)
			}
			// The float32 sum of n squares (per-thread strided sums, then a
			// tree) is off by at most about (n/block + log2 block) ulp
			// relative, the rsqrt and products by a few ulp: 1e-5 relative
			// covers n = 3000 with room.
			check(t, "RMSNorm", got, want, func(i int) float64 { return 1e-5 * math.Abs(float64(want[i])) })
		})
	}
}

func TestRMSNormGated(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, c := range []struct{ rows, n, group, block int }{{1, 8, 8, 1}, {3, 96, 32, 16}, {2, 512, 128, 64}} {
		t.Run(fmt.Sprintf("%dx%d/group=%d/block=%d", c.rows, c.n, c.group, c.block), func(t *testing.T) {
			x, gate := randSlice(r, c.rows*c.n, 3), randSlice(r, c.rows*c.n, 3)
			w := randSlice(r, c.n, 1)
			want := make([]float32, len(x))
			got := make([]float32, len(x))
			ref.Device{}.RMSNormGated(want, x, gate, w, c.n, c.group, 1e-5)
			hostRMSNormGated(got, x, gate, w, c.n, c.group, 1e-5, c.block)
			// As RMSNorm, plus a few ulp from silu.
			check(t, "RMSNormGated", got, want, func(i int) float64 { return 1e-5 * math.Abs(float64(want[i])) })
		})
	}
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, c := range []struct{ rows, heads, headDim, rot, block int }{
		{1, 1, 2, 2, 1},
		{3, 4, 16, 16, 8},
		{5, 3, 64, 32, 32},  // partial rotary: half the head
		{2, 2, 80, 20, 128}, // partial, more threads than pairs
	} {
		t.Run(fmt.Sprintf("rows=%d/heads=%d/hd=%d/rot=%d/block=%d", c.rows, c.heads, c.headDim, c.rot, c.block), func(t *testing.T) {
			half := c.rot / 2
			x := randSlice(r, c.rows*c.heads*c.headDim, 5)
			cos, sin := make([]float32, c.rows*half), make([]float32, c.rows*half)
			for i := range cos {
				a := r.Float64() * 2 * math.Pi
				cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			want := append([]float32(nil), x...)
			got := append([]float32(nil), x...)
			ref.Device{}.RoPE(want, c.heads, c.headDim, cos, sin)
			hostRoPE(got, c.heads, c.headDim, cos, sin, c.block)
			// a*c - b*s in float32 can cancel: the error is absolute, a few
			// ulp of |a|+|b| of the pair (|c|, |s| <= 1); untouched
			// dimensions must be bit-identical.
			check(t, "RoPE", got, want, func(i int) float64 {
				d := i % c.headDim
				if d >= c.rot {
					return 0
				}
				lo := i - d + d%half
				return 3e-7 * (math.Abs(float64(x[lo])) + math.Abs(float64(x[lo+half])))
			})
		})
	}
}

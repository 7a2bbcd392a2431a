package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

func ssmRand(r *rand.Rand, n int, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64() * scale)
	}
	return s
}

func ssmRelErr(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		num = math.Max(num, math.Abs(float64(got[i]-want[i])))
		den = math.Max(den, math.Abs(float64(want[i])))
	}
	return num / (den + 1e-30)
}

// TestStateSpaceOps: the C convolution and scan against the reference, for
// Mamba (one channel per head) and Mamba2 shapes, several sequences of
// different lengths continuing from random states, large enough to run
// multi-threaded.
func TestStateSpaceOps(t *testing.T) {
	d, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tests := []struct {
		name                 string
		heads, headDim, n, g int
		width                int
		lens                 []int
	}{
		{"mamba", 96, 1, 16, 1, 4, []int{1, 7, 40}},
		{"mamba2", 8, 16, 16, 1, 4, []int{33, 1}},
		{"mamba2 groups", 8, 8, 32, 2, 3, []int{5, 64}},
		{"large", 256, 1, 16, 1, 4, []int{300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			D := tc.heads * tc.headDim
			T := 0
			for _, n := range tc.lens {
				T += n
			}
			conv := gpu.ConvParams{Channels: D, Width: tc.width, Weight: ssmRand(r, D*tc.width, 0.5), Bias: ssmRand(r, D, 0.1), SiLU: true}
			scan := gpu.ScanParams{Heads: tc.heads, HeadDim: tc.headDim, StateDim: tc.n, Groups: tc.g,
				A: ssmRand(r, tc.heads*tc.n, 1), D: ssmRand(r, tc.heads, 1),
				StateOffset: (tc.width - 1) * D}
			for i := range scan.A {
				scan.A[i] = -float32(math.Abs(float64(scan.A[i])))
			}
			stateSize := scan.StateOffset + D*tc.n
			mkSeqs := func(states [][]float32) []gpu.RecSeq {
				var seqs []gpu.RecSeq
				row := 0
				for i, n := range tc.lens {
					seqs = append(seqs, gpu.RecSeq{Row: row, N: n, State: states[i]})
					row += n
				}
				return seqs
			}
			var init [][]float32
			for range tc.lens {
				init = append(init, ssmRand(r, stateSize, 0.5))
			}
			clone := func() [][]float32 {
				var out [][]float32
				for _, s := range init {
					out = append(out, slices.Clone(s))
				}
				return out
			}
			x := ssmRand(r, T*D, 1)
			dt := ssmRand(r, T*tc.heads, 0.5)
			for i := range dt {
				dt[i] = float32(math.Abs(float64(dt[i])))
			}
			B, C := ssmRand(r, T*tc.g*tc.n, 1), ssmRand(r, T*tc.g*tc.n, 1)

			type result struct{ conv, y []float32 }
			run := func(dev gpu.Device, states [][]float32) result {
				seqs := mkSeqs(states)
				res := result{conv: make([]float32, T*D), y: make([]float32, T*D)}
				dev.CausalConv1D(res.conv, x, conv, seqs)
				dev.SelectiveScan(res.y, res.conv, dt, B, C, scan, seqs)
				return res
			}
			refStates, cpuStates := clone(), clone()
			want, got := run(ref.Device{}, refStates), run(d, cpuStates)
			if e := ssmRelErr(got.conv, want.conv); e > 1e-5 {
				t.Errorf("conv relative error %.3g", e)
			}
			if e := ssmRelErr(got.y, want.y); e > 1e-5 {
				t.Errorf("scan relative error %.3g", e)
			}
			for i := range refStates {
				if e := ssmRelErr(cpuStates[i], refStates[i]); e > 1e-5 {
					t.Errorf("sequence %d: state relative error %.3g", i, e)
				}
			}
		})
	}
}

func TestSoftplusAndGatedNorm(t *testing.T) {
	d, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 17, 100000} {
		x := ssmRand(r, n, 8)
		x[0] = 25 // above torch's threshold: passes through
		want, got := slices.Clone(x), slices.Clone(x)
		ref.Device{}.Softplus(want)
		d.Softplus(got)
		for i := range got {
			if e := math.Abs(float64(got[i]-want[i])) / math.Max(math.Abs(float64(want[i])), 1e-30); e > 2e-6 {
				t.Fatalf("softplus(%g) = %g, want %g", x[i], got[i], want[i])
			}
		}
	}
	for _, tc := range []struct{ rows, n, group int }{{1, 16, 16}, {3, 64, 16}, {300, 128, 128}} {
		x, gate, w := ssmRand(r, tc.rows*tc.n, 1), ssmRand(r, tc.rows*tc.n, 1), ssmRand(r, tc.n, 1)
		want, got := make([]float32, len(x)), slices.Clone(x)
		ref.Device{}.RMSNormGated(want, x, gate, w, tc.n, tc.group, 1e-5)
		d.RMSNormGated(got, got, gate, w, tc.n, tc.group, 1e-5) // in place
		if e := ssmRelErr(got, want); e > 1e-5 {
			t.Errorf("%+v: gated norm relative error %.3g", tc, e)
		}
	}
}

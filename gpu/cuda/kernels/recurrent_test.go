//go:build cgo

package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

func abs32(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Abs(float64(v)))
	}
	return out
}

// recStates lays out one state slot of slot floats per sequence of ns (row
// counts, consecutive rows) in one buffer, filled with random values, and
// returns the kernels' view (offsets) and the reference's (gpu.RecSeq slices
// of a copy, built by view).
func recStates(r *rand.Rand, ns []int, slot int) (states []float32, seqs []recSeq, view func([]float32) []gpu.RecSeq, rows int) {
	states = randSlice(r, len(ns)*slot, 1)
	for k, n := range ns {
		seqs = append(seqs, recSeq{Row: rows, N: n, Off: k * slot})
		rows += n
	}
	view = func(buf []float32) []gpu.RecSeq {
		out := make([]gpu.RecSeq, len(seqs))
		for k, s := range seqs {
			out[k] = gpu.RecSeq{Row: s.Row, N: s.N, State: buf[s.Off : s.Off+slot]}
		}
		return out
	}
	return states, seqs, view, rows
}

func TestCausalConv1D(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, c := range []struct {
		channels, width, stateOffset int
		ns                           []int
		bias, silu                   bool
		block                        int
	}{
		{1, 1, 0, []int{3}, false, false, 1},
		{5, 2, 0, []int{1, 4, 1}, true, true, 4},
		{37, 4, 3, []int{7, 1, 0, 2}, true, true, 16}, // a sequence shorter than K-1, an empty one
		{130, 4, 0, []int{1, 1, 1}, false, true, 64},  // decode
		{64, 5, 10, []int{9}, true, false, 128},       // more threads than channels in a block
	} {
		t.Run(fmt.Sprintf("C=%d/K=%d/seqs=%v/bias=%v/silu=%v/block=%d", c.channels, c.width, c.ns, c.bias, c.silu, c.block), func(t *testing.T) {
			p := gpu.ConvParams{Channels: c.channels, Width: c.width, Weight: randSlice(r, c.channels*c.width, 1), SiLU: c.silu, StateOffset: c.stateOffset}
			if c.bias {
				p.Bias = randSlice(r, c.channels, 1)
			}
			slot := c.stateOffset + (c.width-1)*c.channels + 2
			states, seqs, view, rows := recStates(r, c.ns, slot)
			x := randSlice(r, rows*c.channels, 2)

			want := make([]float32, len(x))
			wantStates := append([]float32(nil), states...)
			ref.Device{}.CausalConv1D(want, x, p, view(wantStates))
			// mag is sum_j |w||in| + |bias| per output: the reference on
			// absolute values, without silu.
			pa := p
			pa.Weight, pa.SiLU = abs32(p.Weight), false
			if p.Bias != nil {
				pa.Bias = abs32(p.Bias)
			}
			mag := make([]float32, len(x))
			ref.Device{}.CausalConv1D(mag, abs32(x), pa, view(abs32(states)))

			got := make([]float32, len(x))
			hostCausalConv1D(got, x, p, states, seqs, c.block)
			// A float32 sum of K+1 products: within (K+1) ulp of the sum of
			// the absolute terms; silu's slope is at most 1.1, and its own
			// rounding adds a few ulp of the result.
			check(t, "out", got, want, func(i int) float64 {
				return 1e-6*float64(c.width+1)*float64(mag[i]) + 4e-7*math.Abs(float64(want[i]))
			})
			// The new state is a copy of inputs: exact.
			check(t, "state", states, wantStates, exact)
		})
	}
}

func TestSelectiveScan(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	for _, c := range []struct {
		heads, headDim, stateDim, groups, stateOffset int
		ns                                            []int
		block                                         int
	}{
		{1, 1, 1, 1, 0, []int{5}, 1},
		{16, 1, 16, 1, 0, []int{12, 1}, 8},      // Mamba v1: channels as heads
		{4, 8, 16, 2, 5, []int{3, 0, 1, 9}, 16}, // Mamba2 with groups, an empty sequence
		{6, 16, 32, 3, 0, []int{1, 1, 1}, 32},   // decode
		{2, 5, 7, 1, 3, []int{20}, 4},           // ragged sizes
	} {
		t.Run(fmt.Sprintf("H=%d/P=%d/N=%d/G=%d/seqs=%v/block=%d", c.heads, c.headDim, c.stateDim, c.groups, c.ns, c.block), func(t *testing.T) {
			H, P, N, G := c.heads, c.headDim, c.stateDim, c.groups
			p := gpu.ScanParams{Heads: H, HeadDim: P, StateDim: N, Groups: G, StateOffset: c.stateOffset,
				A: make([]float32, H*N), D: randSlice(r, H, 1)}
			for i := range p.A {
				p.A[i] = -float32(math.Exp(2*r.Float64() - 1.5))
			}
			slot := c.stateOffset + H*P*N + 1
			states, seqs, view, rows := recStates(r, c.ns, slot)
			x := randSlice(r, rows*H*P, 2)
			dt := make([]float32, rows*H)
			for i := range dt {
				dt[i] = 0.01 + 0.5*r.Float32()
			}
			B, Cm := randSlice(r, rows*G*N, 1), randSlice(r, rows*G*N, 1)

			want := make([]float32, len(x))
			wantStates := append([]float32(nil), states...)
			ref.Device{}.SelectiveScan(want, x, dt, B, Cm, p, view(wantStates))
			// The same recurrence on absolute values (the decays exp(dt*A)
			// are positive already) bounds every term of every sum.
			pa := p
			pa.D = abs32(p.D)
			mag := make([]float32, len(x))
			magStates := abs32(states)
			ref.Device{}.SelectiveScan(mag, abs32(x), dt, abs32(B), abs32(Cm), pa, view(magStates))

			got := make([]float32, len(x))
			hostSelectiveScan(got, x, dt, B, Cm, p, states, seqs, c.block)
			// Each state step rounds a few times (expf, two products, a
			// sum): a few ulp of its absolute magnitude per step, and the
			// errors of earlier steps decay but, with dt*A near 0, add up
			// over the (<= 20) steps; y adds a sum of N products. 1e-5
			// relative to the absolute magnitude covers both.
			check(t, "y", got, want, func(i int) float64 { return 1e-5 * float64(mag[i]) })
			check(t, "state", states, wantStates, func(i int) float64 { return 1e-5 * float64(magStates[i]) })
		})
	}
}

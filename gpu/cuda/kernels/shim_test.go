//go:build cgo

package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestShim checks the host shim itself: shared memory is one array per
// block, seen by all its threads and private to it; __syncthreads orders
// writes before other threads' reads; threads that return leave the block
// without deadlocking later barriers; unwritten shared memory reads as NaN.
func TestShim(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, c := range []struct{ blocks, block, active int }{{1, 1, 1}, {3, 8, 8}, {5, 64, 40}, {2, 128, 1}} {
		t.Run(fmt.Sprintf("blocks=%d/block=%d/active=%d", c.blocks, c.block, c.active), func(t *testing.T) {
			in := randSlice(r, c.blocks*c.block, 1)
			out := make([]float32, len(in))
			hostSelftestReverse(out, in, c.block, c.active)
			for b := 0; b < c.blocks; b++ {
				for i := 0; i < c.block; i++ {
					want := in[b*c.block+c.block-1-i] + in[b*c.block]
					if got := out[b*c.block+i]; got != want {
						t.Fatalf("block %d thread %d: %g, want %g", b, i, got, want)
					}
				}
			}
		})
	}
	for i, v := range hostSelftestUninit() {
		if !math.IsNaN(float64(v)) {
			t.Errorf("unwritten shared float %d = %g, want the NaN poison", i, v)
		}
	}
}

// TestShimDivergentBarrier checks that the shim aborts when the threads of
// a block reach __syncthreads from different lines (undefined behaviour in
// CUDA), in a child process since the abort ends it.
func TestShimDivergentBarrier(t *testing.T) {
	if os.Getenv("TK_SHIM_DIVERGE") == "1" {
		hostSelftestDiverge()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestShimDivergentBarrier$")
	cmd.Env = append(os.Environ(), "TK_SHIM_DIVERGE=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "divergent barrier") {
		t.Fatalf("divergent __syncthreads: err %v, output %q; want an abort naming it", err, out)
	}
}

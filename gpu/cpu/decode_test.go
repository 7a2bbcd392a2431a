package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// TestMatMulDecodeSplit covers how decode matmuls (m < 16) share their
// output rows among threads: regions of 16-row units per thread with
// stealing (and the older shared counter), with more threads than units,
// row counts that are not a multiple of 16, and weights large enough for
// chunks to shrink as the regions empty.
func TestMatMulDecodeSplit(t *testing.T) {
	type shape struct{ m, n, k int }
	shapes := []shape{
		{1, 20, 4096}, {1, 40, 2000}, {3, 57, 1536}, {1, 960, 576}, {2, 4099, 577}, {15, 1000, 100}, {1, 9000, 576},
	}
	r := rand.New(rand.NewSource(3))
	var devs []*Device
	var names []string
	for _, k := range Supported() {
		for _, th := range []int{2, 3, 5} {
			for _, sched := range []int{0, 1} {
				d, err := New(Options{Kernels: k, Threads: th, mmSched: sched})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(d.Close)
				devs = append(devs, d)
				names = append(names, fmt.Sprintf("%s/t%d/sched%d", k, th, sched))
			}
		}
	}
	for _, dt := range []gpu.DType{gpu.BF16, gpu.F32} {
		for _, s := range shapes {
			c := newMatMulCase(r, dt, s.m, s.n, s.k)
			for i, d := range devs {
				t.Run(fmt.Sprintf("%s/%v/m%d_n%d_k%d", names[i], dt, s.m, s.n, s.k), func(t *testing.T) {
					for range 3 {
						c.check(t, d, 1e-5)
					}
				})
			}
		}
	}
}

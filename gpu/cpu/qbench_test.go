package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// quantScales returns the offsets of dt's F16 scale fields (quantTypes).
func quantScales(dt gpu.DType) []int {
	for _, q := range quantTypes {
		if q.DType == dt {
			return q.Scales
		}
	}
	return nil
}

// fallbackType is the type llama-quantize writes for a matrix whose width is
// not a multiple of 256 when asked for a K type (llama.cpp's
// convert_incompatible_tensor): SmolLM2-135M's hidden size, 576, is 2.25
// super-blocks, so of its layer matrices only ffn_down (width 1536) holds
// the K type itself.
func fallbackType(dt gpu.DType, cols int) gpu.DType {
	if cols%256 == 0 {
		return dt
	}
	switch dt {
	case gpu.Q2_K, gpu.Q3_K, gpu.Q4_K:
		return gpu.Q5_0
	case gpu.Q5_K:
		return gpu.Q5_1
	case gpu.Q6_K:
		return gpu.Q8_0
	}
	return dt
}

// benchWeightOf makes an n x k weight of dt (plain: random values; quantized:
// random blocks).
func benchWeightOf(dt gpu.DType, n, k int) *gpu.Weight {
	r := rand.New(rand.NewSource(int64(n*7 + k)))
	if dt.Quantized() {
		return randQuantWeight(r, dt, quantScales(dt), n, k)
	}
	return makeWeight(r, dt, n, k)
}

var quantBenchTypes = []gpu.DType{gpu.BF16, gpu.Q8_0, gpu.Q6_K, gpu.Q5_K, gpu.Q4_K, gpu.Q5_0, gpu.Q4_0}

// BenchmarkQuantMatMul: one matmul per SmolLM2-135M shape and type (K types
// at width 1536 only, the width where they occur), decode (M1), a batch of 8
// and prefill (M512), on the best kernel set with all threads. GB/s counts
// the weight bytes, read once per call.
func BenchmarkQuantMatMul(b *testing.B) {
	d, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for _, dt := range quantBenchTypes {
		for _, s := range benchShapes[:4] {
			if fallbackType(dt, s.k) != dt {
				continue
			}
			w := benchWeightOf(dt, s.n, s.k)
			for _, m := range []int{1, 8, 512} {
				x := randSlice(rand.New(rand.NewSource(1)), m*s.k, 1)
				dst := make([]float32, m*s.n)
				b.Run(fmt.Sprintf("%v/%s/M%d", dt, s.name, m), func(b *testing.B) {
					for b.Loop() {
						d.MatMul(dst, x, m, w)
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(2*float64(m*s.n*s.k)/sec/1e9, "GFLOP/s")
					b.ReportMetric(float64(len(w.Data))/sec/1e9, "GB/s")
				})
			}
		}
	}
}

// BenchmarkQuantLayers runs the 7 matrices of each of the 30 layers of
// SmolLM2-135M (q, k, v, o, gate, up, down; no lm_head), each with its own
// weights, for one token (M1) and a batch of 8 (M8), per weight type as
// llama-quantize lays out a file of that type (fallbackType for width 576),
// in their own layout and, where the kernel set has one, packed at load
// (PackWeights), and reports µs per token step and the GB/s of weights
// streamed.
func BenchmarkQuantLayers(b *testing.B) {
	d, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	shapes := [][2]int{{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}}
	for _, dt := range quantBenchTypes {
		var ws []*gpu.Weight
		bytes := 0
		for l := 0; l < 30; l++ {
			for _, s := range shapes {
				w := benchWeightOf(fallbackType(dt, s[1]), s[0], s[1])
				ws = append(ws, w)
				bytes += len(w.Data)
			}
		}
		for _, packed := range []bool{false, true} {
			name := "own"
			if packed {
				// as serve packs them: the types with blocks of 32 and Q4_K get the packed
				// group layout on the VNNI set
				n, err := d.PackWeights(ws)
				if err != nil {
					b.Fatal(err)
				}
				if n == 0 {
					continue
				}
				name = "packed"
			}
			for _, m := range []int{1, 8} {
				x := randSlice(rand.New(rand.NewSource(1)), m*1536, 1)
				dst := make([]float32, m*1536)
				b.Run(fmt.Sprintf("%v/%s/M%d", dt, name, m), func(b *testing.B) {
					for b.Loop() {
						for _, w := range ws {
							d.MatMul(dst, x, m, w)
						}
					}
					sec := b.Elapsed().Seconds() / float64(b.N)
					b.ReportMetric(sec*1e6, "µs/step")
					b.ReportMetric(float64(m)/sec, "tok/s")
					b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
					b.ReportMetric(float64(bytes)/1e6, "MB")
				})
			}
		}
	}
}

// BenchmarkQuantKernel measures the kernels alone: one thread, m = 1 to 16,
// weights in their own layout and packed (where the set packs the type), a
// 128 x 1536 matrix that stays in L2 between calls, so GB/s is the rate at
// which a core can consume weights of each type when memory is not the
// limit (decode is memory-bound only while this is well above a thread's
// share of the memory bandwidth).
func BenchmarkQuantKernel(b *testing.B) {
	for _, ks := range Supported() {
		d, err := New(Options{Threads: 1, Kernels: ks})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for _, dt := range append([]gpu.DType{gpu.Q4_1, gpu.Q5_1, gpu.Q2_K, gpu.Q3_K}, quantBenchTypes...) {
			w := benchWeightOf(dt, 128, 1536)
			for _, packed := range []bool{false, true} {
				name := dt.String()
				if packed {
					if n, err := d.PackWeights([]*gpu.Weight{w}); err != nil {
						b.Fatal(err)
					} else if n == 0 {
						continue
					}
					name += "-packed"
				}
				for _, m := range []int{1, 4, 8, 16} {
					x := randSlice(rand.New(rand.NewSource(1)), m*1536, 1)
					dst := make([]float32, m*128)
					b.Run(fmt.Sprintf("%s/%s/M%d", ks, name, m), func(b *testing.B) {
						for b.Loop() {
							d.MatMul(dst, x, m, w)
						}
						sec := b.Elapsed().Seconds() / float64(b.N)
						b.ReportMetric(float64(len(w.Data))/sec/1e9, "GB/s")
						b.ReportMetric(float64(m*128*1536)/sec/1e9, "Gmac/s")
					})
				}
			}
		}
	}
}

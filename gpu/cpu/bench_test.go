package cpu

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// Shapes of a 135M Llama (SmolLM-135M): hidden 576, 9 heads of 64, 3 KV
// heads, MLP 1536, vocabulary 49152.
var benchShapes = []struct {
	name string
	n, k int
}{
	{"q576x576", 576, 576},
	{"kv192x576", 192, 576},
	{"up1536x576", 1536, 576},
	{"down576x1536", 576, 1536},
	{"lmhead49152x576", 49152, 576},
}

func benchWeight(dt gpu.DType, n, k int) *gpu.Weight {
	r := rand.New(rand.NewSource(int64(n*7 + k)))
	return makeWeight(r, dt, n, k)
}

func BenchmarkMatMul(b *testing.B) {
	modes := []struct {
		name string
		dt   gpu.DType
		opts Options
		pack bool // weights packed at load (PackWeights)
	}{
		{"bf16packed", gpu.BF16, Options{}, true},
		{"f32", gpu.F32, Options{}, false},
		{"f32widen", gpu.F32, Options{mmMode: 1}, false},
		{"bf16", gpu.BF16, Options{}, false},
		{"bf16widen", gpu.BF16, Options{mmMode: 1}, false},
		{"bf16conv", gpu.BF16, Options{mmMode: 2}, false},
		{"bf16split", gpu.BF16, Options{mmMode: 3}, false},
		{"bf16fast", gpu.BF16, Options{FastBF16: true}, false},
		{"f16", gpu.F16, Options{}, false},
	}
	for _, md := range modes {
		d, err := New(md.opts)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for _, s := range benchShapes {
			w := benchWeight(md.dt, s.n, s.k)
			if md.pack {
				if _, err := d.PackWeights([]*gpu.Weight{w}); err != nil {
					b.Fatal(err)
				}
			}
			for _, m := range []int{1, 8, 512} {
				x := randSlice(rand.New(rand.NewSource(1)), m*s.k, 1)
				dst := make([]float32, m*s.n)
				b.Run(fmt.Sprintf("%s/%s/M%d", md.name, s.name, m), func(b *testing.B) {
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

// BenchmarkModelMatMuls runs every matmul of one token (M=1) or of an
// 8-token batch through the 30 layers and the lm_head of the 135M model, each
// with its own weights (~270 MB of bf16), and reports tokens/s.
func BenchmarkModelMatMuls(b *testing.B) {
	for _, dt := range []gpu.DType{gpu.BF16, gpu.F32} {
		var ws []*gpu.Weight
		var bytes int
		for l := 0; l < 30; l++ {
			for _, s := range [][2]int{{576, 576}, {192, 576}, {192, 576}, {576, 576}, {1536, 576}, {1536, 576}, {576, 1536}} {
				data := make([]byte, s[0]*s[1]*dt.Size())
				for i := range data {
					data[i] = byte(i * 31)
					if i%dt.Size() == dt.Size()-1 {
						data[i] = 0x3c | byte(i>>4)&0x83 // normal numbers of magnitude ~0.01-2
					}
				}
				w, _ := gpu.NewWeight(dt, s[0], s[1], data)
				ws = append(ws, w)
				bytes += len(data)
			}
		}
		lm := benchWeight(dt, 49152, 576)
		ws = append(ws, lm)
		bytes += len(lm.Data)
		d, err := New(Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for _, m := range []int{1, 8} {
			x := randSlice(rand.New(rand.NewSource(1)), m*1536, 1)
			dst := make([]float32, m*49152)
			b.Run(fmt.Sprintf("%v/M%d", dt, m), func(b *testing.B) {
				for b.Loop() {
					for _, w := range ws {
						d.MatMul(dst, x, m, w)
					}
				}
				sec := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(m)/sec, "tok/s")
				b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
			})
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	const heads, kvh, hd, ps, ctx = 9, 3, 64, 16, 512
	r := rand.New(rand.NewSource(1))
	dim := kvh * hd
	kv := &gpu.KVLayer{PageSize: ps, Dim: dim, K: randSlice(r, ctx*dim, 1), V: randSlice(r, ctx*dim, 1)}
	pages := make([]int32, ctx/ps)
	for i, p := range r.Perm(len(pages)) {
		pages[i] = int32(p)
	}
	p := gpu.AttnParams{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: 0.125}
	// mode 0 is what New picks; the others force a kernel (TR_ATTN_*) for
	// comparison within one run.
	var devs [3]*Device
	for mode := range devs {
		d, err := New(Options{attnMode: mode})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		devs[mode] = d
	}
	for _, c := range []struct {
		name string
		mode int
		seq  gpu.AttnSeq
	}{
		{"prefill512", 0, gpu.AttnSeq{N: ctx, Pages: pages}},
		{"decode512", 0, gpu.AttnSeq{N: 1, Pos: ctx - 1, Pages: pages}},
		{"prefill512-head", 1, gpu.AttnSeq{N: ctx, Pages: pages}},
		{"decode512-flash", 2, gpu.AttnSeq{N: 1, Pos: ctx - 1, Pages: pages}},
		{"decode512-head", 1, gpu.AttnSeq{N: 1, Pos: ctx - 1, Pages: pages}},
		{"chunk64at448", 0, gpu.AttnSeq{N: 64, Pos: ctx - 64, Pages: pages}},
		{"chunk64at448-head", 1, gpu.AttnSeq{N: 64, Pos: ctx - 64, Pages: pages}},
	} {
		d := devs[c.mode]
		q := randSlice(r, c.seq.N*heads*hd, 1)
		out := make([]float32, len(q))
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				d.Attention(out, q, kv, []gpu.AttnSeq{c.seq}, p)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			keys := 0
			for i := 0; i < c.seq.N; i++ {
				keys += c.seq.Pos + i + 1
			}
			b.ReportMetric(4*float64(keys*heads*hd)/sec/1e9, "GFLOP/s")
		})
	}
}

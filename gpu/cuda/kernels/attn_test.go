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

// seqShape is one sequence of an attention batch: n query rows from
// position pos.
type seqShape struct{ pos, n int }

// pagedKV builds a KV layer for seqs and their AttnSeqs: every sequence
// gets random, non-contiguous pages from a shared pool (interleaved with the
// other sequences' pages), and K/V hold random values at the positions the
// sequences cover and NaN everywhere else, so a kernel that reads a slot it
// must not (past the sequence, outside the window, another sequence's page)
// turns its output to NaN.
func pagedKV(r *rand.Rand, pageSize, kvHeads, headDim int, shapes []seqShape) (*gpu.KVLayer, []gpu.AttnSeq, int) {
	need := 0
	for _, s := range shapes {
		need += (s.pos + s.n + pageSize - 1) / pageSize
	}
	total := 2*need + 3 // spare pages stay NaN
	kv := &gpu.KVLayer{PageSize: pageSize, Dim: kvHeads * headDim}
	kv.K = make([]float32, total*pageSize*kv.Dim)
	kv.V = make([]float32, total*pageSize*kv.Dim)
	nan := float32(math.NaN())
	for i := range kv.K {
		kv.K[i], kv.V[i] = nan, nan
	}
	pool := r.Perm(total)
	seqs := make([]gpu.AttnSeq, len(shapes))
	row := 0
	for i, s := range shapes {
		np := (s.pos + s.n + pageSize - 1) / pageSize
		pages := make([]int32, np)
		for j := range pages {
			pages[j] = int32(pool[0])
			pool = pool[1:]
		}
		seqs[i] = gpu.AttnSeq{Row: row, N: s.n, Pos: s.pos, Pages: pages}
		row += s.n
		for p := 0; p < s.pos+s.n; p++ {
			o := kv.Slot(pages, p)
			for d := 0; d < kv.Dim; d++ {
				kv.K[o+d] = 2*r.Float32() - 1
				kv.V[o+d] = 2*r.Float32() - 1
			}
		}
	}
	return kv, seqs, row
}

func TestAttention(t *testing.T) {
	cases := []struct {
		name                    string
		heads, kvHeads, headDim int
		pageSize                int
		window                  int
		softcap, scale          float32 // scale 0: 1/sqrt(headDim)
		shapes                  []seqShape
		block                   int
	}{
		{name: "decode", heads: 4, kvHeads: 2, headDim: 16, pageSize: 4, shapes: []seqShape{{0, 1}, {17, 1}, {100, 1}}, block: 32},
		{name: "prefill", heads: 2, kvHeads: 2, headDim: 8, pageSize: 4, shapes: []seqShape{{0, 23}}, block: 8},
		{name: "chunk+decode/MQA", heads: 4, kvHeads: 1, headDim: 64, pageSize: 16, shapes: []seqShape{{37, 9}, {5, 1}, {0, 3}}, block: 64},
		{name: "window+softcap", heads: 6, kvHeads: 3, headDim: 32, pageSize: 8, window: 8, softcap: 30, shapes: []seqShape{{50, 12}, {3, 2}}, block: 16},
		{name: "window>pos", heads: 2, kvHeads: 1, headDim: 16, pageSize: 4, window: 100, shapes: []seqShape{{10, 5}}, block: 4},
		{name: "window=1", heads: 2, kvHeads: 2, headDim: 16, pageSize: 2, window: 1, shapes: []seqShape{{9, 4}}, block: 2},
		{name: "one-thread", heads: 2, kvHeads: 1, headDim: 128, pageSize: 8, shapes: []seqShape{{20, 3}}, block: 1},
		{name: "ragged-hd/softcap", heads: 3, kvHeads: 1, headDim: 7, pageSize: 3, softcap: 5, scale: 1, shapes: []seqShape{{13, 6}, {2, 1}}, block: 4},
		{name: "hd256/peaky", heads: 2, kvHeads: 2, headDim: 256, pageSize: 32, scale: 1, shapes: []seqShape{{150, 2}}, block: 128},
		{name: "GQA4/window/multi-page", heads: 8, kvHeads: 2, headDim: 32, pageSize: 5, window: 13, shapes: []seqShape{{40, 7}, {0, 1}, {61, 1}}, block: 32},
		{name: "long-prefill", heads: 4, kvHeads: 2, headDim: 32, pageSize: 8, shapes: []seqShape{{5, 40}, {0, 17}}, block: 16},
		{name: "long-prefill/window+softcap", heads: 2, kvHeads: 1, headDim: 24, pageSize: 4, window: 11, softcap: 20, shapes: []seqShape{{30, 35}}, block: 32},
	}
	// The row kernel takes power-of-two blocks (tree reductions); the
	// prefill kernel any block, so it runs under a ragged one.
	kernels := []struct {
		name       string
		run        func(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams, block int)
		maxHeadDim int
		blockExtra int
	}{
		{"row", hostAttention, 256, 0},
		{"prefill", hostAttentionPrefill, 128, 3},
	}
	r := rand.New(rand.NewSource(6))
	for _, c := range cases {
		for _, k := range kernels {
			if c.headDim > k.maxHeadDim {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s/block=%d", k.name, c.name, c.block+k.blockExtra), func(t *testing.T) {
				kv, seqs, rows := pagedKV(r, c.pageSize, c.kvHeads, c.headDim, c.shapes)
				p := gpu.AttnParams{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.headDim, Scale: c.scale, Window: c.window, Softcap: c.softcap}
				if p.Scale == 0 {
					p.Scale = float32(1 / math.Sqrt(float64(c.headDim)))
				}
				q := randSlice(r, rows*c.heads*c.headDim, 1)
				want := make([]float32, len(q))
				got := make([]float32, len(q))
				ref.Device{}.Attention(want, q, kv, seqs, p)
				k.run(got, q, kv, seqs, p, c.block+k.blockExtra)
				// The output is a convex combination of value rows in [-1, 1].
				// Float32 dot products of headDim terms, exp and the online
				// rescaling put each weight within a few 1e-6 relative of the
				// float64 reference's (scores are O(1..10) here), so the output
				// is within 1e-5 absolute.
				check(t, "Attention", got, want, func(int) float64 { return 1e-5 })
			})
		}
	}
}

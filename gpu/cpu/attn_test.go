package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
)

type attnSeqSpec struct{ pos, n int }

// attnProblem is one attention call: the KV storage holds NaN in every slot
// no query may read (past each sequence's last position, and unused pages),
// so that a kernel that touches them fails.
type attnProblem struct {
	kv   *gpu.KVLayer
	q    []float32
	seqs []gpu.AttnSeq
	p    gpu.AttnParams
	want []float32
}

func newAttnProblem(r *rand.Rand, heads, kvh, hd, ps, window int, softcap float32, specs []attnSeqSpec) *attnProblem {
	dim := kvh * hd
	total := 0
	for _, s := range specs {
		total += (s.pos + s.n + ps - 1) / ps
	}
	spare := 3
	slots := (total + spare) * ps
	nan := float32(math.NaN())
	kv := &gpu.KVLayer{PageSize: ps, Dim: dim, K: make([]float32, slots*dim), V: make([]float32, slots*dim)}
	for i := range kv.K {
		kv.K[i], kv.V[i] = nan, nan
	}
	perm := r.Perm(total + spare)
	var seqs []gpu.AttnSeq
	row, pi := 0, 0
	for _, s := range specs {
		np := (s.pos + s.n + ps - 1) / ps
		pages := make([]int32, np)
		for i := range pages {
			pages[i] = int32(perm[pi])
			pi++
		}
		sq := gpu.AttnSeq{Row: row, N: s.n, Pos: s.pos, Pages: pages}
		for j := 0; j < s.pos+s.n; j++ {
			o := kv.Slot(pages, j)
			for d := 0; d < dim; d++ {
				kv.K[o+d] = float32(r.NormFloat64())
				kv.V[o+d] = float32(r.NormFloat64())
			}
		}
		seqs = append(seqs, sq)
		row += s.n
	}
	// Scores of a few units, as after RoPE and a learned scale: large enough
	// that the softmax is peaked and its max matters.
	q := randSlice(r, row*heads*hd, 2)
	p := gpu.AttnParams{Heads: heads, KVHeads: kvh, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))),
		Window: window, Softcap: softcap}
	want := make([]float32, len(q))
	ref.Device{}.Attention(want, q, kv, seqs, p)
	return &attnProblem{kv: kv, q: q, seqs: seqs, p: p, want: want}
}

func (pr *attnProblem) check(t *testing.T, d *Device) {
	t.Helper()
	got := make([]float32, len(pr.q)+1)
	got[len(pr.q)] = 12345
	d.Attention(got, pr.q, pr.kv, pr.seqs, pr.p)
	if got[len(pr.q)] != 12345 {
		t.Fatal("Attention wrote past the last row")
	}
	var maxr, maxe float64
	worst := 0
	for i := range pr.want {
		maxr = math.Max(maxr, math.Abs(float64(pr.want[i])))
		e := math.Abs(float64(got[i] - pr.want[i]))
		if e > maxe || math.IsNaN(e) {
			maxe, worst = e, i
			if math.IsNaN(e) {
				maxe = math.Inf(1)
			}
		}
	}
	t.Logf("max error %.3g of max |ref| %.3g (%.2g)", maxe, maxr, maxe/maxr)
	if maxe > 1e-5*maxr {
		qdim := pr.p.Heads * pr.p.HeadDim
		t.Fatalf("max error %.3g of max |ref| %.3g at row %d head %d dim %d: got %g want %g", maxe, maxr,
			worst/qdim, worst%qdim/pr.p.HeadDim, worst%pr.p.HeadDim, got[worst], pr.want[worst])
	}
}

// TestAttentionTiled covers the tiling edge cases of both attention kernels
// on every kernel set: query blocks straddling pages and key blocks, windows
// cutting blocks, GQA groups of 1 to 64 (sub-groups past TR_FLASH_M), odd
// head dims, and batches of sequences at different positions.
func TestAttentionTiled(t *testing.T) {
	type tc struct {
		heads, kvh, hd, ps, window int
		softcap                    float32
		seqs                       []attnSeqSpec
	}
	cases := []tc{
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{0, 150}}},
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{70, 83}, {0, 1}, {200, 1}, {5, 17}}},
		{8, 8, 32, 7, 0, 0, []attnSeqSpec{{0, 130}, {13, 49}}},                  // G = 1
		{8, 1, 16, 5, 0, 0, []attnSeqSpec{{3, 61}, {100, 2}}},                   // G = 8
		{64, 1, 8, 16, 0, 0, []attnSeqSpec{{0, 9}, {40, 3}}},                    // G = 64: sub-groups
		{6, 2, 17, 3, 0, 0, []attnSeqSpec{{1, 40}}},                             // hd not a multiple of any vector
		{4, 2, 80, 16, 0, 0, []attnSeqSpec{{0, 70}, {64, 64}}},                  // hd = 5 vectors of 16
		{2, 1, 256, 32, 0, 0, []attnSeqSpec{{0, 100}}},                          // hd 256
		{9, 3, 64, 16, 40, 0, []attnSeqSpec{{0, 150}, {300, 20}}},               // window inside blocks
		{9, 3, 64, 16, 1, 0, []attnSeqSpec{{0, 37}}},                            // window 1: only itself
		{4, 2, 24, 1, 64, 30, []attnSeqSpec{{10, 100}}},                         // page size 1, window = block
		{3, 3, 40, 64, 17, 20, []attnSeqSpec{{0, 200}, {250, 5}}},               // softcap and window
		{12, 4, 64, 16, 0, 50, []attnSeqSpec{{0, 1}, {0, 2}, {7, 3}, {0, 260}}}, // softcap
		{5, 5, 12, 9, 0, 0, []attnSeqSpec{{0, 3}, {1, 5}, {2, 7}}},
	}
	r := rand.New(rand.NewSource(11))
	type dev struct {
		name string
		d    *Device
	}
	var devs []dev
	for i, k := range Supported() {
		for _, mode := range []int{0, 1, 2} {
			ths := []int{2}
			if i == 0 && mode != 1 {
				ths = []int{1, 2, 3}
			}
			for _, th := range ths {
				d, err := New(Options{Kernels: k, Threads: th, attnMode: mode})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(d.Close)
				devs = append(devs, dev{fmt.Sprintf("%s/t%d/mode%d", k, th, mode), d})
			}
		}
	}
	for ci, c := range cases {
		pr := newAttnProblem(r, c.heads, c.kvh, c.hd, c.ps, c.window, c.softcap, c.seqs)
		for _, dv := range devs {
			t.Run(fmt.Sprintf("%s/case%d", dv.name, ci), func(t *testing.T) { pr.check(t, dv.d) })
		}
	}
}

// TestAttentionDecode covers the decode kernel (one query position per
// sequence) on every kernel set, against the float64 reference: long
// contexts whose keys are split across threads and merged (1 to 3 threads,
// so 1, 4 or 6 parts; beyond 4096 keys even on one thread), windows, soft-capping, GQA groups of 1 to 8, head
// dims that are and are not a whole number of vectors (the latter fall back
// to the older kernels), and batches mixing decode rows with prefill chunks.
func TestAttentionDecode(t *testing.T) {
	type tc struct {
		heads, kvh, hd, ps, window int
		softcap                    float32
		seqs                       []attnSeqSpec
	}
	cases := []tc{
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{1000, 1}}},                           // SmolLM2: split into parts
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{0, 1}}},                              // first token
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{127, 1}, {128, 1}, {255, 1}}},        // parts of DEC_MIN_KEYS
		{9, 3, 64, 7, 300, 0, []attnSeqSpec{{1000, 1}}},                          // window: parts of the window
		{9, 3, 64, 16, 0, 30, []attnSeqSpec{{700, 1}, {40, 1}}},                  // softcap
		{8, 8, 32, 16, 0, 0, []attnSeqSpec{{600, 1}}},                            // G = 1
		{8, 1, 128, 16, 0, 0, []attnSeqSpec{{517, 1}}},                           // G = 8, hd 128
		{4, 2, 80, 5, 0, 0, []attnSeqSpec{{333, 1}, {2, 1}}},                     // hd = 5 vectors of 16
		{2, 1, 256, 32, 0, 0, []attnSeqSpec{{400, 1}}},                           // hd 256
		{6, 2, 24, 16, 0, 0, []attnSeqSpec{{300, 1}}},                            // hd 24: older kernels on avx512
		{9, 3, 64, 16, 0, 0, []attnSeqSpec{{900, 1}, {0, 40}, {500, 1}, {7, 3}}}, // decode rows and chunks
		{4, 2, 64, 16, 0, 0, []attnSeqSpec{{5000, 1}}},                           // more keys than one part holds
	}
	r := rand.New(rand.NewSource(5))
	type dev struct {
		name string
		d    *Device
	}
	var devs []dev
	for _, k := range Supported() {
		for _, th := range []int{1, 2, 3} {
			d, err := New(Options{Kernels: k, Threads: th})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			devs = append(devs, dev{fmt.Sprintf("%s/t%d", k, th), d})
		}
	}
	for ci, c := range cases {
		pr := newAttnProblem(r, c.heads, c.kvh, c.hd, c.ps, c.window, c.softcap, c.seqs)
		for _, dv := range devs {
			t.Run(fmt.Sprintf("%s/case%d", dv.name, ci), func(t *testing.T) {
				// twice: the second call reuses the buffers of the parts
				pr.check(t, dv.d)
				pr.check(t, dv.d)
			})
		}
	}
}

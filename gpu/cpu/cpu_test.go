package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/gputest"
	"github.com/troupe-ai/troupe/gpu/ref"
)

// devices returns one device per supported kernel set and thread count.
func devices(t testing.TB, threads ...int) []*Device {
	t.Helper()
	var ds []*Device
	for _, k := range Supported() {
		for _, th := range threads {
			d, err := New(Options{Kernels: k, Threads: th})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close)
			ds = append(ds, d)
		}
	}
	return ds
}

func randSlice(r *rand.Rand, n int, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64() * scale)
	}
	return s
}

func makeWeight(r *rand.Rand, dt gpu.DType, rows, cols int) *gpu.Weight {
	w, err := gputest.Weight(dt, rows, cols, randSlice(r, rows*cols, 1))
	if err != nil {
		panic(err)
	}
	return w
}

// matmulCase is one reference problem: inputs, the reference result and, per
// output element, sum_k |x_k||w_k|.
type matmulCase struct {
	m    int
	w    *gpu.Weight
	x    []float32
	want []float64
	mag  []float64
}

func newMatMulCase(r *rand.Rand, dt gpu.DType, m, n, k int) *matmulCase {
	c := &matmulCase{m: m, w: makeWeight(r, dt, n, k), x: randSlice(r, m*k, 1)}
	wf := c.w.Float32s()
	c.want = make([]float64, m*n)
	c.mag = make([]float64, m*n)
	for i := 0; i < m; i++ {
		xi := c.x[i*k : (i+1)*k]
		for j := 0; j < n; j++ {
			wj := wf[j*k : (j+1)*k]
			var s, a float64
			for t, v := range xi {
				p := float64(v) * float64(wj[t])
				s += p
				a += math.Abs(p)
			}
			c.want[i*n+j], c.mag[i*n+j] = s, a
		}
	}
	return c
}

// check runs d.MatMul and compares with the reference element by element.
// The error of a dot product computed in floating point is bounded by a
// multiple of sum_k |x_k||w_k| (not of |result|, which may cancel to ~0), so
// each element is allowed tol * sum_k |x_k||w_k|: with tol = 1e-5 this is the
// brief's relative accuracy, measured against the natural scale of the sum.
func (c *matmulCase) check(t *testing.T, d *Device, tol float64) {
	t.Helper()
	n := c.w.Rows
	got := make([]float32, c.m*n+1)
	got[c.m*n] = 12345 // guard
	d.MatMul(got, c.x, c.m, c.w)
	if got[c.m*n] != 12345 {
		t.Fatal("MatMul wrote past m*n")
	}
	for i := range c.want {
		e := math.Abs(float64(got[i])-c.want[i]) / (c.mag[i] + 1e-30)
		if e > tol || math.IsNaN(float64(got[i])) {
			t.Fatalf("dst[%d][%d] = %g, want %g (error %.3g of sum|x||w| > %g)", i/n, i%n, got[i], c.want[i], e, tol)
		}
	}
}

// TestMatMulRef checks the float64 reference of the matmul tests against
// gpu/ref itself.
func TestMatMulRef(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
		c := newMatMulCase(r, dt, 3, 5, 17)
		got := make([]float32, 15)
		ref.Device{}.MatMul(got, c.x, c.m, c.w)
		for i, w := range c.want {
			if got[i] != float32(w) {
				t.Fatalf("%v: [%d] = %g, ref %g", dt, i, w, got[i])
			}
		}
	}
}

type mmConfig struct {
	name string
	dev  *Device
	tol  float64 // for bf16 weights
}

func mmConfigs(t *testing.T) []mmConfig {
	var cs []mmConfig
	add := func(name string, o Options, tol float64) {
		d, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		cs = append(cs, mmConfig{name, d, tol})
	}
	for i, k := range Supported() {
		ths := []int{2}
		if i == 0 {
			ths = []int{1, 2, 3}
		}
		for _, th := range ths {
			add(fmt.Sprintf("%s/t%d", k, th), Options{Kernels: k, Threads: th}, 1e-5)
		}
		if k == "avx512bf16" {
			add(k+"/widen", Options{Kernels: k, Threads: 2, mmMode: 1}, 1e-5)
			add(k+"/conv", Options{Kernels: k, Threads: 2, mmMode: 2}, 1e-5)
			add(k+"/split", Options{Kernels: k, Threads: 2, mmMode: 3}, 1e-5)
			add(k+"/pack", Options{Kernels: k, Threads: 2, mmMode: 5}, 1e-5)
			// FastBF16 rounds x to bf16 (relative error 2^-9 per element).
			add(k+"/fast", Options{Kernels: k, Threads: 2, FastBF16: true}, 1e-2)
		}
	}
	return cs
}

func TestMatMul(t *testing.T) {
	type shape struct{ m, n, k int }
	shapes := []shape{
		{1, 1, 1}, {1, 3, 17}, {2, 5, 1}, {5, 3, 577}, {33, 17, 17}, {1, 64, 64}, {2, 7, 33},
		{5, 64, 577}, {33, 70, 100}, {1, 200, 577}, {8, 192, 576}, {33, 130, 577}, {4, 9, 1536},
		{9, 1536, 576}, // threaded, several cache blocks
	}
	r := rand.New(rand.NewSource(1))
	cfgs := mmConfigs(t)
	for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
		for _, s := range shapes {
			c := newMatMulCase(r, dt, s.m, s.n, s.k)
			for _, cfg := range cfgs {
				tol := 1e-5
				if dt == gpu.BF16 {
					tol = cfg.tol
				}
				t.Run(fmt.Sprintf("%s/%v/m%d_n%d_k%d", cfg.name, dt, s.m, s.n, s.k), func(t *testing.T) {
					c.check(t, cfg.dev, tol)
				})
			}
		}
	}
}

// TestMatMulPrefill covers the tile edges of the prefill (m >= 16) kernels:
// strips of x rows, panels of outputs, k blocks, and their tails.
func TestMatMulPrefill(t *testing.T) {
	ms := []int{16, 17, 31, 33, 100, 512}
	ns := []int{1, 31, 33, 192, 576, 1536}
	ks := []int{1, 15, 17, 300, 577, 1536}
	if testing.Short() {
		ms, ns, ks = []int{17, 33}, []int{1, 33, 192}, []int{1, 17, 577}
	}
	r := rand.New(rand.NewSource(5))
	var cfgs []mmConfig
	for _, c := range mmConfigs(t) {
		// The prefill kernels of each set with 1-3 threads (plus FastBF16).
		if c.name == "avx512bf16/t1" || c.name == "avx512bf16/t2" || c.name == "avx512bf16/t3" ||
			c.name == "avx512bf16/fast" || c.name == "avx2/t2" || c.name == "portable/t2" {
			cfgs = append(cfgs, c)
		}
	}
	for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
		for _, m := range ms {
			for _, n := range ns {
				for _, k := range ks {
					// Keep the float64 reference affordable: skip the
					// largest combinations except a few representative ones.
					if m*n*k > 8_000_000 && !(m == 512 && (n == 576 || n == 192) && (k == 17 || k == 577)) {
						continue
					}
					c := newMatMulCase(r, dt, m, n, k)
					for _, cfg := range cfgs {
						tol := 1e-5
						if dt == gpu.BF16 {
							tol = cfg.tol
						}
						t.Run(fmt.Sprintf("%s/%v/m%d_n%d_k%d", cfg.name, dt, m, n, k), func(t *testing.T) {
							c.check(t, cfg.dev, tol)
						})
					}
				}
			}
		}
	}
}

func TestEmbed(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var rd ref.Device
	for _, d := range devices(t, 1) {
		for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
			w := makeWeight(r, dt, 50, 37)
			// include f16 subnormals and specials
			if dt == gpu.F16 {
				binary.LittleEndian.PutUint16(w.Data[0:], 0x0001)
				binary.LittleEndian.PutUint16(w.Data[2:], 0x8203)
				binary.LittleEndian.PutUint16(w.Data[4:], 0x7c00)
				binary.LittleEndian.PutUint16(w.Data[6:], 0x8000)
			}
			ids := []int32{0, 49, 3, 3, 17}
			want := make([]float32, len(ids)*37)
			got := make([]float32, len(ids)*37)
			rd.Embed(want, w, ids)
			d.Embed(got, w, ids)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %v: [%d] = %g, want %g", d.Name(), dt, i, got[i], want[i])
				}
			}
		}
	}
}

// closeRel reports whether a is within rel of b, with an absolute floor atol.
func checkClose(t *testing.T, what string, got, want []float32, rel, atol float64) {
	t.Helper()
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(g-w) > rel*math.Abs(w)+atol {
			t.Fatalf("%s: [%d] = %.9g, want %.9g (rel err %.3g)", what, i, g, w, math.Abs(g-w)/math.Abs(w))
		}
	}
}

func TestElementwise(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	var rd ref.Device
	sizes := []int{1, 7, 16, 100, 1000, 20000, 40001}
	for _, d := range devices(t, 1, 2) {
		for _, n := range sizes {
			name := fmt.Sprintf("%s/n%d", d.Name(), n)
			g := randSlice(r, n, 4)
			u := randSlice(r, n, 1)
			if n > 10 {
				copy(g, []float32{0, -100, 100, 1e-20, -1e-20, 20, -20, -8, 0.3, -0.39})
			}
			t.Run(name+"/SiLUMul", func(t *testing.T) {
				want, got := make([]float32, n), make([]float32, n)
				rd.SiLUMul(want, g, u)
				d.SiLUMul(got, g, u)
				checkClose(t, "SiLUMul", got, want, 1e-6, 1e-30)
			})
			t.Run(name+"/GELUTanhMul", func(t *testing.T) {
				want, got := make([]float32, n), make([]float32, n)
				rd.GELUTanhMul(want, g, u)
				d.GELUTanhMul(got, g, u)
				// The reference's 1 + tanh(a) cancels for gate << 0 (float64
				// tanh rounds to -1 below about -19), so allow 1e-12 absolute.
				// For gate < 0 the result is g * exp(-2a) with |2a| up to ~20
				// computed in f32: exp amplifies the ~1 ulp error of 2a by |2a|,
				// hence 3e-6 relative rather than 1e-6.
				checkClose(t, "GELUTanhMul", got, want, 3e-6, 1e-12)
			})
			t.Run(name+"/Softcap", func(t *testing.T) {
				for _, c := range []float32{30, 1, 50} {
					want := append([]float32(nil), g...)
					for i := range want {
						want[i] *= 8
					}
					got := append([]float32(nil), want...)
					rd.Softcap(want, c)
					d.Softcap(got, c)
					checkClose(t, "Softcap", got, want, 1e-6, 1e-30)
				}
			})
			t.Run(name+"/Scale", func(t *testing.T) {
				want := append([]float32(nil), g...)
				got := append([]float32(nil), g...)
				rd.Scale(want, 0.125)
				d.Scale(got, 0.125)
				checkClose(t, "Scale", got, want, 0, 0)
			})
			t.Run(name+"/Add", func(t *testing.T) {
				want, got := make([]float32, n), append([]float32(nil), g...)
				rd.Add(want, g, u)
				d.Add(got, got, u) // aliasing dst and a
				checkClose(t, "Add", got, want, 0, 0)
			})
			t.Run(name+"/AddBias", func(t *testing.T) {
				for _, bn := range []int{1, 3, 16, 17, 100} {
					if n%bn != 0 {
						continue
					}
					b := randSlice(r, bn, 1)
					want := append([]float32(nil), g...)
					got := append([]float32(nil), g...)
					rd.AddBias(want, b)
					d.AddBias(got, b)
					checkClose(t, "AddBias", got, want, 0, 0)
				}
			})
		}
	}
}

// TestTanhExp sweeps the vector tanh through Softcap with c = 1 and exp
// through SiLU over a wide range against float64.
func TestTanhExp(t *testing.T) {
	n := 200001
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(-20 + 40*float64(i)/float64(n-1))
	}
	x[n/2] = 1e-30
	one := make([]float32, n)
	for i := range one {
		one[i] = 1
	}
	for _, d := range devices(t, 2) {
		got := append([]float32(nil), x...)
		d.Softcap(got, 1)
		var worst float64
		for i, v := range x {
			w := math.Tanh(float64(v))
			e := math.Abs(float64(got[i])-w) / math.Abs(w)
			worst = math.Max(worst, e)
		}
		if worst > 3e-7 {
			t.Errorf("%s: tanh max relative error %.3g", d.Name(), worst)
		}
		d.SiLUMul(got, x, one)
		worst = 0
		for i, v := range x {
			g := float64(v)
			w := g / (1 + math.Exp(-g))
			e := math.Abs(float64(got[i])-w) / math.Abs(w)
			worst = math.Max(worst, e)
		}
		if worst > 5e-7 {
			t.Errorf("%s: silu max relative error %.3g", d.Name(), worst)
		}
		t.Logf("%s: tanh/silu ok", d.Name())
	}
}

func TestRMSNorm(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var rd ref.Device
	for _, d := range devices(t, 1, 2) {
		for _, n := range []int{1, 17, 64, 576} {
			for _, rows := range []int{1, 3, 40} {
				for _, unit := range []bool{false, true} {
					x := randSlice(r, rows*n, 3)
					w := randSlice(r, n, 1)
					want := make([]float32, rows*n)
					rd.RMSNorm(want, x, w, n, 1e-6, unit)
					got := append([]float32(nil), x...)
					d.RMSNorm(got, got, w, n, 1e-6, unit) // in place
					t.Run(fmt.Sprintf("%s/n%d/r%d/%v", d.Name(), n, rows, unit), func(t *testing.T) {
						checkClose(t, "RMSNorm", got, want, 2e-6, 1e-30)
					})
				}
			}
		}
	}
}

func TestRoPE(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	var rd ref.Device
	for _, d := range devices(t, 1, 2) {
		for _, c := range []struct{ rows, heads, hd, rot int }{
			{1, 1, 8, 8}, {3, 4, 64, 64}, {5, 2, 64, 32}, {64, 9, 64, 64}, {2, 3, 80, 40}, {7, 2, 256, 256},
		} {
			x := randSlice(r, c.rows*c.heads*c.hd, 1)
			cs := make([]float32, c.rows*c.rot/2)
			sn := make([]float32, c.rows*c.rot/2)
			for i := range cs {
				a := r.Float64() * 100
				cs[i], sn[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			want := append([]float32(nil), x...)
			got := append([]float32(nil), x...)
			rd.RoPE(want, c.heads, c.hd, cs, sn)
			d.RoPE(got, c.heads, c.hd, cs, sn)
			t.Run(fmt.Sprintf("%s/%v", d.Name(), c), func(t *testing.T) {
				checkClose(t, "RoPE", got, want, 1e-6, 1e-6)
			})
		}
	}
}

type attnCase struct {
	heads, kv, hd, ps int
	window            int
	softcap           float32
	seqs              []struct{ pos, n int }
}

func TestAttention(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	var rd ref.Device
	cases := []attnCase{
		{4, 2, 8, 16, 0, 0, []struct{ pos, n int }{{0, 5}}},
		{9, 3, 64, 16, 0, 0, []struct{ pos, n int }{{0, 37}, {20, 1}, {100, 3}}},
		{3, 3, 80, 7, 0, 30, []struct{ pos, n int }{{10, 20}, {0, 1}}},
		{4, 1, 256, 16, 8, 0, []struct{ pos, n int }{{30, 9}, {5, 2}}},
		{2, 2, 17, 5, 4, 50, []struct{ pos, n int }{{0, 19}}},
		{8, 2, 128, 32, 0, 0, []struct{ pos, n int }{{0, 70}, {150, 1}}},
	}
	for _, d := range devices(t, 1, 2) {
		for ci, c := range cases {
			dim := c.kv * c.hd
			// page tables: a random permutation of pages, shared storage
			var total int
			for _, s := range c.seqs {
				total += (s.pos + s.n + c.ps - 1) / c.ps
			}
			perm := r.Perm(total + 3)
			kv := &gpu.KVLayer{PageSize: c.ps, Dim: dim,
				K: randSlice(r, (total+3)*c.ps*dim, 1), V: randSlice(r, (total+3)*c.ps*dim, 1)}
			var seqs []gpu.AttnSeq
			row, pi := 0, 0
			for _, s := range c.seqs {
				np := (s.pos + s.n + c.ps - 1) / c.ps
				pages := make([]int32, np)
				for i := range pages {
					pages[i] = int32(perm[pi])
					pi++
				}
				seqs = append(seqs, gpu.AttnSeq{Row: row, N: s.n, Pos: s.pos, Pages: pages})
				row += s.n
			}
			q := randSlice(r, row*c.heads*c.hd, 1)
			p := gpu.AttnParams{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
				Window: c.window, Softcap: c.softcap}
			want := make([]float32, len(q))
			got := make([]float32, len(q))
			rd.Attention(want, q, kv, seqs, p)
			d.Attention(got, q, kv, seqs, p)
			t.Run(fmt.Sprintf("%s/case%d", d.Name(), ci), func(t *testing.T) {
				var maxr, maxe float64
				for i := range want {
					maxr = math.Max(maxr, math.Abs(float64(want[i])))
					maxe = math.Max(maxe, math.Abs(float64(got[i]-want[i])))
				}
				if maxe > 1e-5*maxr {
					t.Fatalf("max error %.3g of max |ref| %.3g", maxe, maxr)
				}
			})
		}
	}
}

func TestOptions(t *testing.T) {
	if _, err := New(Options{Kernels: "sse9"}); err == nil {
		t.Fatal("unknown kernel set accepted")
	}
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Kernels() != Supported()[0] {
		t.Fatalf("auto picked %s, best is %s", d.Kernels(), Supported()[0])
	}
	t.Log(d.Name())
}

// TestKernelCallsYield: a run of kernel calls passes through the Go
// scheduler once yieldInterval has gone by since it last did, and not
// before (doc.go, "The calling goroutine").
func TestKernelCallsYield(t *testing.T) {
	d, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	x := make([]float32, 16)
	calls := func(n int) {
		for range n {
			d.Add(x, x, x)
		}
	}
	// well inside the interval: no yield
	d.lastYield.Store(int64(time.Since(d.epoch)))
	before := d.lastYield.Load()
	calls(yieldCheck)
	if got := d.lastYield.Load(); got != before {
		t.Fatalf("yielded %v after the last yield, interval %v", time.Duration(got-before), yieldInterval)
	}
	// the interval has passed: the next check yields and records it
	d.lastYield.Store(int64(time.Since(d.epoch) - yieldInterval))
	before = d.lastYield.Load()
	calls(yieldCheck)
	if got := d.lastYield.Load(); got-before < int64(yieldInterval) {
		t.Fatalf("no yield after %v of calls: last yield moved by %v", yieldInterval, time.Duration(got-before))
	}
}

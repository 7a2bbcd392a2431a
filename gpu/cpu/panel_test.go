package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// panelDevices returns avx512bf16 devices with 1, 2 and 3 threads, or skips
// when the CPU has no such kernels (the only set with a panel kernel).
func panelDevices(t *testing.T) []*Device {
	t.Helper()
	if !slices.Contains(Supported(), "avx512bf16") {
		t.Skip("no avx512bf16 kernels on this CPU")
	}
	var ds []*Device
	for _, th := range []int{1, 2, 3} {
		d, err := New(Options{Kernels: "avx512bf16", Threads: th})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		ds = append(ds, d)
	}
	return ds
}

// pack packs ws on d, failing the test on an error.
func pack(t testing.TB, d *Device, ws ...*gpu.Weight) int64 {
	t.Helper()
	n, err := d.PackWeights(ws)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPackWeights(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	if slices.Contains(Supported(), "avx512bf16") {
		d, err := New(Options{Kernels: "avx512bf16", FastBF16: true})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if n := pack(t, d, makeWeight(r, gpu.BF16, 33, 17)); n != 0 {
			t.Errorf("a FastBF16 device packed %d bytes it would never read", n)
		}
	}
	for _, k := range Supported() {
		d, err := New(Options{Kernels: k, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		for _, dt := range []gpu.DType{gpu.F32, gpu.BF16, gpu.F16} {
			w := makeWeight(r, dt, 33, 17)
			got := pack(t, d, w)
			want := int64(0)
			if k == "avx512bf16" && dt == gpu.BF16 {
				want = 2 * 17 * 64 // two panels of 32 rows, 64 bytes per k
			}
			if got != want || (w.Packed() != nil) != (want > 0) {
				t.Fatalf("%s %v: PackWeights added %d bytes (packed %v), want %d", k, dt, got, w.Packed() != nil, want)
			}
			if want > 0 {
				checkPanelLayout(t, w)
			}
			if again := pack(t, d, w); again != 0 {
				t.Fatalf("%s %v: packing twice added %d bytes", k, dt, again)
			}
		}
		// quantized weights: the packed group layout for the types with
		// blocks of 32 and Q4_K where the quantized kernels are the VNNI
		// ones, nothing else
		for _, qt := range quantTypes {
			w := randQuantWeight(r, qt.DType, qt.Scales, 33, 256)
			got := pack(t, d, w)
			want := int64(0)
			if d.QuantKernels() == "avx512vnni" && (qt.DType.BlockSize() == 32 || qt.DType == gpu.Q4_K) {
				want = int64(xpBytes(w)+63) &^ 63
			}
			if got != want || (w.Packed() != nil) != (want > 0) {
				t.Fatalf("%s %v: PackWeights added %d bytes (packed %v), want %d", k, qt.DType, got, w.Packed() != nil, want)
			}
			if again := pack(t, d, w); again != 0 {
				t.Fatalf("%s %v: packing twice added %d bytes", k, qt.DType, again)
			}
		}
	}
}

// checkPanelLayout checks w's packed bytes against the layout of
// mm_panel_avx512.c: per panel of 32 rows and per k, 32 bf16 with row
// 32p+i at halfword 2i (i < 16) or 2(i-16)+1, rows past the end zero.
func checkPanelLayout(t *testing.T, w *gpu.Weight) {
	t.Helper()
	data := w.Packed().Data
	K := w.Cols
	for p := 0; p < (w.Rows+31)/32; p++ {
		for k := 0; k < K; k++ {
			for i := 0; i < 32; i++ {
				slot := 2 * i
				if i >= 16 {
					slot = 2*(i-16) + 1
				}
				off := ((p*K+k)*32 + slot) * 2
				got := uint16(data[off]) | uint16(data[off+1])<<8
				var want uint16
				if r := 32*p + i; r < w.Rows {
					want = uint16(w.Data[2*(r*K+k)]) | uint16(w.Data[2*(r*K+k)+1])<<8
				}
				if got != want {
					t.Fatalf("panel %d, k %d, row %d: %#04x, want %#04x", p, k, 32*p+i, got, want)
				}
			}
		}
	}
}

// TestMatMulPanels checks the prefill matmul on packed weights against the
// float64 reference, over the edges of its tiles (strips of 12 rows, panels
// of 32 outputs, work items) and the thread counts.
func TestMatMulPanels(t *testing.T) {
	ds := panelDevices(t)
	ms := []int{16, 17, 31, 100, 512}
	ns := []int{1, 31, 33, 192, 576}
	ks := []int{1, 17, 577, 1536}
	if testing.Short() {
		ms, ns, ks = []int{17, 100}, []int{1, 33, 192}, []int{17, 577}
	}
	r := rand.New(rand.NewSource(12))
	for _, m := range ms {
		for _, n := range ns {
			for _, k := range ks {
				if m*n*k > 8_000_000 && !(m == 512 && n == 192 && k == 577) {
					continue
				}
				c := newMatMulCase(r, gpu.BF16, m, n, k)
				pack(t, ds[0], c.w)
				for _, d := range ds {
					t.Run(fmt.Sprintf("t%d/m%d_n%d_k%d", d.Threads(), m, n, k), func(t *testing.T) {
						c.check(t, d, 1e-5)
					})
				}
			}
		}
	}
}

// TestMatMulPanelsSameAsPerCall: the panel kernel runs the same f32 FMA
// chain per output as the kernel that packs per call, so for k within one of
// that kernel's k blocks (576) both give the same bits.
func TestMatMulPanelsSameAsPerCall(t *testing.T) {
	ds := panelDevices(t)
	old, err := New(Options{Kernels: "avx512bf16", Threads: 2, noPanels: true})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	r := rand.New(rand.NewSource(13))
	for _, s := range [][3]int{{16, 33, 17}, {100, 192, 576}, {512, 576, 576}, {37, 1536, 300}} {
		m, n, k := s[0], s[1], s[2]
		w := makeWeight(r, gpu.BF16, n, k)
		x := randSlice(r, m*k, 1)
		want := make([]float32, m*n)
		old.MatMul(want, x, m, w)
		pack(t, ds[1], w)
		got := make([]float32, m*n)
		ds[1].MatMul(got, x, m, w)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("m%d n%d k%d: [%d] = %g, per-call kernel %g", m, n, k, i, got[i], want[i])
			}
		}
	}
}

func TestMatMulAdd(t *testing.T) {
	ds := panelDevices(t)
	r := rand.New(rand.NewSource(14))
	for _, s := range [][3]int{{16, 33, 17}, {100, 576, 577}, {33, 31, 1536}} {
		m, n, k := s[0], s[1], s[2]
		c := newMatMulCase(r, gpu.BF16, m, n, k)
		base := randSlice(r, m*n, 10)
		if ds[0].MatMulAdd(make([]float32, m*n), c.x, m, c.w) {
			t.Fatal("MatMulAdd ran without packed weights")
		}
		pack(t, ds[0], c.w)
		for _, d := range ds {
			t.Run(fmt.Sprintf("t%d/m%d_n%d_k%d", d.Threads(), m, n, k), func(t *testing.T) {
				got := slices.Clone(base)
				if !d.MatMulAdd(got, c.x, m, c.w) {
					t.Fatal("MatMulAdd refused packed weights")
				}
				for i := range got {
					want := float64(base[i]) + c.want[i]
					// One more rounding: the add, relative to the sum.
					tol := 1e-5*c.mag[i] + 1e-7*math.Abs(want)
					if math.Abs(float64(got[i])-want) > tol {
						t.Fatalf("[%d] = %g, want %g", i, got[i], want)
					}
				}
				if d.MatMulAdd(got[:(m-1)*n], c.x, 15, c.w) {
					t.Fatal("MatMulAdd ran for 15 rows (decode sizes are not fused)")
				}
			})
		}
	}
}

// TestMatMulGated: the fused gate/up kernel gives the same bits as the two
// matmuls and SiLUMul (or GELUTanhMul) it replaces, which the other tests
// hold to the reference.
func TestMatMulGated(t *testing.T) {
	ds := panelDevices(t)
	r := rand.New(rand.NewSource(15))
	for _, s := range [][3]int{{16, 33, 17}, {100, 1536, 576}, {45, 31, 1537}} {
		m, n, k := s[0], s[1], s[2]
		gate, up := makeWeight(r, gpu.BF16, n, k), makeWeight(r, gpu.BF16, n, k)
		x := randSlice(r, m*k, 1)
		if ds[0].MatMulGated(make([]float32, m*n), x, m, gate, up, false) {
			t.Fatal("MatMulGated ran without packed weights")
		}
		pack(t, ds[0], gate)
		if ds[0].MatMulGated(make([]float32, m*n), x, m, gate, up, false) {
			t.Fatal("MatMulGated ran with only the gate packed")
		}
		pack(t, ds[0], up)
		for _, d := range ds {
			for _, gelu := range []bool{false, true} {
				t.Run(fmt.Sprintf("t%d/m%d_n%d_k%d/gelu=%v", d.Threads(), m, n, k, gelu), func(t *testing.T) {
					got := make([]float32, m*n)
					if !d.MatMulGated(got, x, m, gate, up, gelu) {
						t.Fatal("MatMulGated refused packed weights")
					}
					g, u, want := make([]float32, m*n), make([]float32, m*n), make([]float32, m*n)
					d.MatMul(g, x, m, gate)
					d.MatMul(u, x, m, up)
					if gelu {
						d.GELUTanhMul(want, g, u)
					} else {
						d.SiLUMul(want, g, u)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("[%d] = %g, unfused %g", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// TestPackedMemoryLivesWithTheWeight: the packed copies live in memory of
// their own that is released when it becomes unreachable; while the weight
// is in use, collections must not take it away.
func TestPackedMemoryLivesWithTheWeight(t *testing.T) {
	ds := panelDevices(t)
	r := rand.New(rand.NewSource(16))
	c := newMatMulCase(r, gpu.BF16, 40, 100, 300)
	pack(t, ds[1], c.w)
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	c.check(t, ds[1], 1e-5)
	// Packs of weights dropped at once are released by the collector's
	// cleanups, running meanwhile: the live weight's copy must not be.
	for i := 0; i < 8; i++ {
		pack(t, ds[1], makeWeight(r, gpu.BF16, 1024, 1024))
		runtime.GC()
	}
	c.check(t, ds[1], 1e-5)
}

// TestMatMulMulti: one pass over several packed weights gives each dst the
// same bits as its own MatMul.
func TestMatMulMulti(t *testing.T) {
	ds := panelDevices(t)
	r := rand.New(rand.NewSource(17))
	for _, s := range [][]int{{16, 17, 33, 5}, {100, 576, 576, 192, 192}, {45, 300, 31, 1, 64, 33}} {
		m, k, ns := s[0], s[1], s[2:]
		x := randSlice(r, m*k, 1)
		var ws []*gpu.Weight
		for _, n := range ns {
			ws = append(ws, makeWeight(r, gpu.BF16, n, k))
		}
		dsts := make([][]float32, len(ws))
		for i, w := range ws {
			dsts[i] = make([]float32, m*w.Rows)
		}
		if ds[0].MatMulMulti(dsts, x, m, ws) {
			t.Fatal("MatMulMulti ran without packed weights")
		}
		pack(t, ds[0], ws...)
		for _, d := range ds {
			t.Run(fmt.Sprintf("t%d/m%d_k%d_%v", d.Threads(), m, k, ns), func(t *testing.T) {
				if !d.MatMulMulti(dsts, x, m, ws) {
					t.Fatal("MatMulMulti refused packed weights")
				}
				for i, w := range ws {
					want := make([]float32, m*w.Rows)
					d.MatMul(want, x, m, w)
					for e := range want {
						if math.Float32bits(dsts[i][e]) != math.Float32bits(want[e]) {
							t.Fatalf("weight %d: [%d] = %g, MatMul %g", i, e, dsts[i][e], want[e])
						}
					}
				}
			})
		}
		if ds[0].MatMulMulti(dsts[:1], x, m, ws) {
			t.Error("MatMulMulti ran with fewer dsts than weights")
		}
	}
	other := makeWeight(r, gpu.BF16, 8, 40)
	w := makeWeight(r, gpu.BF16, 8, 41)
	pack(t, ds[0], other, w)
	if ds[0].MatMulMulti([][]float32{make([]float32, 16*8), make([]float32, 16*8)}, randSlice(r, 16*41, 1), 16, []*gpu.Weight{w, other}) {
		t.Error("MatMulMulti ran weights of different widths")
	}
}

// TestMatMulDoesNotAllocate: the checks on every call (decode makes hundreds
// a step) allocate nothing.
func TestMatMulDoesNotAllocate(t *testing.T) {
	d, err := New(Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := rand.New(rand.NewSource(18))
	w := makeWeight(r, gpu.BF16, 64, 64)
	x, dst := randSlice(r, 64, 1), make([]float32, 64)
	if n := testing.AllocsPerRun(100, func() { d.MatMul(dst, x, 1, w) }); n != 0 {
		t.Errorf("MatMul allocates %v times a call", n)
	}
}

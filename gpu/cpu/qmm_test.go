package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/gputest"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// quantTypes are the quantized dtypes (gputest.QuantTypes).
var quantTypes = gputest.QuantTypes()

// randQuantWeight is gputest.RandQuantWeight.
func randQuantWeight(r *rand.Rand, dt gpu.DType, scales []int, rows, cols int) *gpu.Weight {
	return gputest.RandQuantWeight(r, gputest.QuantType{DType: dt, Scales: scales}, rows, cols)
}

// qcheck runs d.MatMul on w and x and compares every output with
// gpu/ref.QuantMatMul (what the kernels compute: within 2e-5 of the sum of
// the absolute values of its float terms) and with the exact product on the
// dequantized weights (within the activations' rounding, half a step of
// each block's scale times |w|). From quantDequantMin rows of x on, where
// the weights are dequantized and x is not quantized, it compares with the
// exact product within 1e-5 of sum |x||w| instead.
func qcheck(t *testing.T, d *Device, w *gpu.Weight, x []float32, m int, exact bool) {
	t.Helper()
	n, k := w.Rows, w.Cols
	got := make([]float32, m*n+1)
	got[m*n] = 12345
	d.MatMul(got, x, m, w)
	if got[m*n] != 12345 {
		t.Fatal("MatMul wrote past m*n")
	}
	if m >= quantDequantMin {
		want := make([]float32, m*n)
		ref.Device{}.MatMul(want, x, m, w)
		wf := w.Float32s()
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var scale float64
				for c := 0; c < k; c++ {
					scale += math.Abs(float64(x[i*k+c]) * float64(wf[j*k+c]))
				}
				e := math.Abs(float64(got[i*n+j]) - float64(want[i*n+j]))
				if e > 1e-5*scale+1e-30 || math.IsNaN(float64(got[i*n+j])) {
					t.Fatalf("%s %v m=%d n=%d k=%d: dst[%d][%d] = %g, reference %g (error %.3g of sum|x||w| %g)",
						d.Name(), w.DType, m, n, k, i, j, got[i*n+j], want[i*n+j], e/scale, scale)
				}
			}
		}
		return
	}
	want := make([]float32, m*n)
	mag := make([]float32, m*n)
	if err := ref.QuantMatMul(want, x, m, w, mag); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		e := math.Abs(float64(got[i]) - float64(want[i]))
		if e > 2e-5*float64(mag[i])+1e-30 || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s %v m=%d n=%d k=%d: dst[%d][%d] = %g, quantized reference %g (error %.3g of magnitude %g)",
				d.Name(), w.DType, m, n, k, i/n, i%n, got[i], want[i], e/float64(mag[i]), mag[i])
		}
	}
	if !exact {
		return
	}
	deq := make([]float32, m*n)
	ref.Device{}.MatMul(deq, x, m, w)
	wf := w.Float32s()
	bs := ref.ActBlockSize(w.DType)
	for i := 0; i < m; i++ {
		act := ref.QuantizeAct(x[i*k:(i+1)*k], bs)
		for j := 0; j < n; j++ {
			var bound, scale float64
			for c := 0; c < k; c++ {
				wv := math.Abs(float64(wf[j*k+c]))
				bound += wv * float64(act[c/bs].D) / 2
				scale += wv * math.Abs(float64(x[i*k+c]))
			}
			e := math.Abs(float64(got[i*n+j]) - float64(deq[i*n+j]))
			if e > bound*1.001+1e-5*scale {
				t.Fatalf("%s %v: dst[%d][%d] = %g, dequantized reference %g: error %g > bound %g",
					d.Name(), w.DType, i, j, got[i*n+j], deq[i*n+j], e, bound)
			}
		}
	}
}

// qdevices returns a device per supported kernel set, with 1 and 2 threads,
// and checks which quantized kernels each set runs.
func qdevices(t *testing.T) []*Device {
	ds := devices(t, 1, 2)
	for _, d := range ds {
		want := map[string][]string{"avx512bf16": {"avx512vnni", "avx2"}, "avx2": {"avx2"}, "portable": {"portable"}}[d.Kernels()]
		if q := d.QuantKernels(); q != want[0] && (len(want) < 2 || q != want[1]) {
			t.Fatalf("%s runs quantized kernels %q, want %q", d.Name(), q, want)
		}
	}
	return ds
}

// TestQuantMatMul runs every quantized dtype on every kernel set: decode
// (m = 1, 3), a batch (m = 8: one tile of the lane layout on the VNNI set),
// prefill (m = 17, 31: odd, past the tile of 4 rows of x, ragged tiles of 8;
// 33, 40: dequantized); output counts that are not a multiple of a tile,
// of a pair of weight rows or of a chunk; the smallest width (one block)
// and several blocks.
func TestQuantMatMul(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	shapes := []struct{ m, n, blocks int }{
		{1, 5, 1}, {1, 67, 3}, {3, 33, 2}, {8, 19, 1}, {17, 35, 2}, {31, 9, 1}, {33, 9, 1}, {40, 37, 2},
	}
	for _, qt := range quantTypes {
		t.Run(qt.DType.String(), func(t *testing.T) {
			for _, d := range qdevices(t) {
				for si, s := range shapes {
					k := s.blocks * qt.DType.BlockSize()
					w := randQuantWeight(r, qt.DType, qt.Scales, s.n, k)
					x := randSlice(r, s.m*k, 1)
					if si == 2 {
						for i := 0; i < qt.DType.BlockSize(); i++ { // an all-zero block
							x[k+i] = 0
						}
					}
					qcheck(t, d, w, x, s.m, si < 3)
				}
			}
		})
	}
}

// TestQuantMatMulThreads: a matrix large enough for the threads to split
// it (decode regions and prefill groups), on the best kernel set.
func TestQuantMatMulThreads(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	d, err := New(Options{Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, qt := range []int{0, 7, 9} { // Q8_0, Q4_K, Q6_K
		q := quantTypes[qt]
		k := 1024
		w := randQuantWeight(r, q.DType, q.Scales, 300, k)
		for _, m := range []int{1, 5, 20} {
			qcheck(t, d, w, randSlice(r, m*k, 1), m, false)
		}
	}
	// a large prefill: the dequantized weights (9 MB) go in chunks
	q := quantTypes[0]
	w := randQuantWeight(r, q.DType, q.Scales, 1500, 1536)
	qcheck(t, d, w, randSlice(r, quantDequantMin*1536, 1), quantDequantMin, false)
}

// TestQuantActivations: the C quantization of activations gives
// gpu/ref.QuantizeAct's scales, quants and sums bit for bit, on every
// kernel set, including values at rounding ties.
func TestQuantActivations(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	const k = 512
	x := randSlice(r, 2*k, 3)
	// ties: x * 127/amax lands on .5 for amax = 127
	x[0] = 127
	for i := 1; i < 40; i++ {
		x[i] = float32(i) + 0.5
	}
	x[40] = -127
	for i := 2 * 32; i < 3*32; i++ { // an all-zero block of 32
		x[i] = 0
	}
	for _, d := range devices(t, 1) {
		for _, dt := range []gpu.DType{gpu.Q8_0, gpu.Q4_K} {
			bs := ref.ActBlockSize(dt)
			got := d.quantizeAct(x, 2, k, dt)
			for row := 0; row < 2; row++ {
				want := ref.QuantizeAct(x[row*k:(row+1)*k], bs)
				for b, wb := range want {
					gb := got[row*k/bs+b]
					if gb.D != wb.D || fmt.Sprint(gb.Q) != fmt.Sprint(wb.Q) || fmt.Sprint(gb.Sums) != fmt.Sprint(wb.Sums) {
						t.Fatalf("%s %v row %d block %d:\n got %v %v %v\nwant %v %v %v", d.Name(), dt, row, b,
							gb.D, gb.Q, gb.Sums, wb.D, wb.Q, wb.Sums)
					}
				}
			}
		}
	}
}

// TestQuantEmbed: Embed of quantized weights gives gpu/ref's rows bit for bit.
func TestQuantEmbed(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	d, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, qt := range quantTypes {
		w := randQuantWeight(r, qt.DType, qt.Scales, 9, 2*qt.DType.BlockSize())
		ids := []int32{8, 0, 3, 3}
		got := make([]float32, len(ids)*w.Cols)
		want := make([]float32, len(ids)*w.Cols)
		d.Embed(got, w, ids)
		ref.Device{}.Embed(want, w, ids)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: [%d] = %g, ref %g", qt.DType, i, got[i], want[i])
			}
		}
	}
}

// TestQuantMatMulFixtures runs, for every quantized matrix of the llama
// GGUF fixtures written by llama-quantize (Q4_K_M, Q6_K, Q8_0 and the other
// types), our matmul with a random x (decode and prefill) against
// gpu/ref.QuantMatMul on every kernel set.
func TestQuantMatMulFixtures(t *testing.T) {
	dir := fixtures.Path(t, "gguf", "llama")
	files := []string{"llama-q4_k_m.gguf", "llama-q6_k.gguf", "llama-q8_0.gguf", "llama-q5_k_m.gguf",
		"llama-q3_k_m.gguf", "llama-q2_k.gguf", "llama-q4_0.gguf", "llama-q4_1.gguf", "llama-q5_0.gguf", "llama-q5_1.gguf"}
	r := rand.New(rand.NewSource(11))
	devs := devices(t, 2)
	seen := map[gpu.DType]int{}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, name))
			if err != nil {
				if name == files[0] || name == files[1] || name == files[2] {
					t.Fatal(err)
				}
				t.Skip(err)
			}
			defer f.Close()
			n := 0
			perFile := map[gpu.DType]int{}
			for _, ti := range f.Tensors() {
				dt, ok := gpu.DTypeOf(ti.Type)
				if !ok || !dt.Quantized() || len(ti.Dims) != 2 {
					continue
				}
				// Under the race detector: two matrices of each type per
				// file (every type and kernel set still runs).
				if raceDetector && perFile[dt] >= 2 {
					continue
				}
				perFile[dt]++
				data, err := f.TensorData(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				w, err := gpu.NewWeight(dt, int(ti.Rows()), int(ti.RowLen()), data)
				if err != nil {
					t.Fatalf("%s: %v", ti.Name, err)
				}
				if w.Rows > 256 {
					w = w.RowSlice(0, 256)
				}
				for _, d := range devs {
					for _, m := range []int{1, 19, 40} {
						qcheck(t, d, w, randSlice(r, m*w.Cols, 1), m, false)
					}
				}
				seen[dt]++
				n++
			}
			if n == 0 {
				t.Fatalf("%s: no quantized matrices", name)
			}
		})
	}
	for _, dt := range []gpu.DType{gpu.Q4_K, gpu.Q6_K, gpu.Q8_0} {
		if seen[dt] == 0 {
			t.Errorf("no %v matrix in the fixtures", dt)
		}
	}
	t.Logf("matrices per type: %v", seen)
}

// TestQuantPrefillDequant: a prefill with x the identity (k rows, at least
// quantDequantMin) returns the weights the C dequantization produced, which
// must be the block dequantizers' values bit for bit (up to the sign of 0).
func TestQuantPrefillDequant(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	for _, d := range devices(t, 2) {
		for _, qt := range quantTypes {
			k := qt.DType.BlockSize()
			w := randQuantWeight(r, qt.DType, qt.Scales, 7, k)
			x := make([]float32, k*k)
			for i := 0; i < k; i++ {
				x[i*k+i] = 1
			}
			got := make([]float32, k*w.Rows)
			d.MatMul(got, x, k, w)
			wf := w.Float32s()
			for i := 0; i < k; i++ {
				for j := 0; j < w.Rows; j++ {
					if got[i*w.Rows+j] != wf[j*k+i] {
						t.Fatalf("%s %v: element (%d, %d) = %g, dequantized %g", d.Name(), qt.DType, j, i, got[i*w.Rows+j], wf[j*k+i])
					}
				}
			}
		}
	}
}

// TestQuantFusedFallback: the fused matmuls decline quantized weights (the
// caller then runs MatMul and the separate operation), and MatMul rejects a
// weight whose width is not a whole number of blocks.
func TestQuantFusedFallback(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	d, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	q := quantTypes[7] // Q4_K
	w := randQuantWeight(r, q.DType, q.Scales, 64, 256)
	if _, err := d.PackWeights([]*gpu.Weight{w}); err != nil {
		t.Fatal(err)
	}
	const m = 64
	x := randSlice(r, m*256, 1)
	dst := make([]float32, m*64)
	if d.MatMulAdd(dst, x, m, w) || d.MatMulGated(dst, x, m, w, w, false) ||
		d.MatMulMulti([][]float32{dst}, x, m, []*gpu.Weight{w}) {
		t.Fatal("a fused matmul accepted quantized weights")
	}
	bad := &gpu.Weight{DType: gpu.Q4_K, Rows: 1, Cols: 200, Data: make([]byte, 144)}
	defer func() {
		if recover() == nil {
			t.Fatal("MatMul accepted a Q4_K weight 200 wide")
		}
	}()
	d.MatMul(make([]float32, 1), make([]float32, 200), 1, bad)
}

// xpDevice returns a device with the packed group layout for the types
// with blocks of 32 (the VNNI kernels) with threads threads, or skips.
func xpDevice(t *testing.T, threads int) *Device {
	t.Helper()
	d, err := New(Options{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if d.QuantKernels() != "avx512vnni" {
		t.Skipf("no packed group layout on %s (quantized kernels %s)", d.Name(), d.QuantKernels())
	}
	return d
}

// TestQuantPackedMatMul: weights of the types with blocks of 32 (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1) and Q4_K packed at load (the packed group
// layout) give the same products as the kernels hold the unpacked
// ones to, for every row count that uses them (1-31: one row, partial
// tiles of 8, several tiles), output counts that are not a multiple of a
// group of 16, one block and several, and with 1 and 3 threads (the
// threads' regions split the groups).
func TestQuantPackedMatMul(t *testing.T) {
	r := rand.New(rand.NewSource(23))
	shapes := []struct{ m, n, blocks int }{
		{1, 5, 1}, {1, 67, 3}, {2, 16, 2}, {3, 33, 2}, {4, 17, 1}, {5, 40, 2}, {8, 19, 1}, {9, 64, 4}, {17, 35, 2},
		{31, 9, 1}, {8, 700, 18},
	}
	for _, threads := range []int{1, 3} {
		d := xpDevice(t, threads)
		for _, qt := range quantTypes {
			if qt.DType.BlockSize() != 32 && qt.DType != gpu.Q4_K {
				continue
			}
			for _, s := range shapes {
				blocks := s.blocks
				if qt.DType == gpu.Q4_K {
					blocks = min(blocks, 3)
				}
				k := blocks * qt.DType.BlockSize()
				w := randQuantWeight(r, qt.DType, qt.Scales, s.n, k)
				if n := pack(t, d, w); n != int64(xpBytes(w)+63)&^63 || w.Packed() == nil {
					t.Fatalf("%v %dx%d: PackWeights added %d bytes, want the packed copy's %d", qt.DType, s.n, k, n, xpBytes(w))
				}
				x := randSlice(r, s.m*k, 1)
				qcheck(t, d, w, x, s.m, true)
			}
		}
	}
}

// TestPackedGroupLayout checks the packed bytes of the types with blocks of
// 32 against the layout of tr_impl.h: per group of 16 rows and per block,
// the quants as 64-byte vectors whose lane j holds 4 bytes of row j (Q8_0:
// the quants plus 128, 4 elements per vector; the others: the stored
// nibble bytes), then for Q5_0 and Q5_1 the rows' 32 fifth bits, then the
// 16 rows' f16 scales and, for Q4_1 and Q5_1, minimums; rows past the end
// repeat the last.
func TestPackedGroupLayout(t *testing.T) {
	d := xpDevice(t, 1)
	r := rand.New(rand.NewSource(5))
	// ggml's block fields: offsets of the minimum, the fifth bits and the
	// quants after the f16 scale at 0 (-1: none)
	fields := map[gpu.DType]struct{ m, qh, qs int }{
		gpu.Q8_0: {-1, -1, 2}, gpu.Q4_0: {-1, -1, 2}, gpu.Q4_1: {2, -1, 4}, gpu.Q5_0: {-1, 2, 6}, gpu.Q5_1: {2, 4, 8},
	}
	for _, qt := range quantTypes {
		f, ok := fields[qt.DType]
		if !ok {
			continue
		}
		const n, k = 21, 96
		w := randQuantWeight(r, qt.DType, qt.Scales, n, k)
		pack(t, d, w)
		data := w.Packed().Data
		blk := qt.DType.BlockBytes()
		bb, nq := 16*blk, 16
		q8 := qt.DType == gpu.Q8_0
		if q8 {
			nq = 32
		}
		qh := nq * 16 // the quants' vectors come first
		dOff := qh
		if f.qh >= 0 {
			dOff += 64
		}
		nb := k / 32
		if len(data) != 2*nb*bb {
			t.Fatalf("%v: packed %d bytes, want %d", qt.DType, len(data), 2*nb*bb)
		}
		for g := 0; g < 2; g++ {
			for b := 0; b < nb; b++ {
				out := data[(g*nb+b)*bb:]
				for j := 0; j < 16; j++ {
					row := min(16*g+j, n-1)
					src := w.Data[row*nb*blk+b*blk:]
					for q := 0; q < nq; q++ {
						want := src[f.qs+q]
						if q8 {
							want ^= 0x80
						}
						if got := out[(q/4)*64+4*j+q%4]; got != want {
							t.Fatalf("%v group %d block %d row %d quant byte %d: %#x, want %#x", qt.DType, g, b, j, q, got, want)
						}
					}
					check := func(what string, at, from, size int) {
						if got, want := out[at:at+size], src[from:from+size]; string(got) != string(want) {
							t.Fatalf("%v group %d block %d row %d: %s bytes %x, want %x", qt.DType, g, b, j, what, got, want)
						}
					}
					if f.qh >= 0 {
						check("fifth-bit", qh+4*j, f.qh, 4)
					}
					check("scale", dOff+2*j, 0, 2)
					if f.m >= 0 {
						check("minimum", dOff+32+2*j, f.m, 2)
					}
				}
			}
		}
	}
}

package engine_test

import (
	"fmt"
	"runtime"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// timedDevice wraps a device and adds the wall time of each call to a
// per-operation (and per matmul shape) total.
type timedDevice struct {
	gpu.Device
	t       map[string]time.Duration
	cpuTime bool
}

// clock is the calling thread's CPU time with one kernel thread (robust to
// other load on the machine), else wall time.
func (d *timedDevice) clock() time.Duration {
	if !d.cpuTime {
		return time.Duration(time.Now().UnixNano())
	}
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (d *timedDevice) add(name string, t0 time.Duration) { d.t[name] += d.clock() - t0 }

func (d *timedDevice) MatMul(dst, x []float32, m int, w *gpu.Weight) {
	defer d.add(fmt.Sprintf("matmul %dx%d m%d", w.Rows, w.Cols, m), d.clock())
	d.Device.MatMul(dst, x, m, w)
}
func (d *timedDevice) MatMulAdd(dst, x []float32, m int, w *gpu.Weight) bool {
	defer d.add(fmt.Sprintf("matmul+add %dx%d m%d", w.Rows, w.Cols, m), d.clock())
	f, ok := d.Device.(gpu.FusedMatMul)
	return ok && f.MatMulAdd(dst, x, m, w)
}
func (d *timedDevice) MatMulGated(dst, x []float32, m int, g, u *gpu.Weight, gelu bool) bool {
	defer d.add(fmt.Sprintf("matmul gated 2x%dx%d m%d", g.Rows, g.Cols, m), d.clock())
	f, ok := d.Device.(gpu.FusedMatMul)
	return ok && f.MatMulGated(dst, x, m, g, u, gelu)
}
func (d *timedDevice) MatMulMulti(dsts [][]float32, x []float32, m int, ws []*gpu.Weight) bool {
	defer d.add(fmt.Sprintf("matmul multi %d weights x%d m%d", len(ws), ws[0].Cols, m), d.clock())
	f, ok := d.Device.(gpu.FusedMatMul)
	return ok && f.MatMulMulti(dsts, x, m, ws)
}

var _ gpu.FusedMatMul = (*timedDevice)(nil)

// report logs the time per forward of each operation (most first) and
// outside them, and reports tokens per second for total over b.N forwards
// of tokens tokens each.
func (d *timedDevice) report(b *testing.B, total time.Duration, tokens int) {
	var names []string
	var ops time.Duration
	for k, v := range d.t {
		names = append(names, k)
		ops += v
	}
	sort.Slice(names, func(i, j int) bool { return d.t[names[i]] > d.t[names[j]] })
	perForward := func(t time.Duration) float64 { return float64(t.Microseconds()) / 1e3 / float64(b.N) }
	for _, k := range names {
		b.Logf("%-36s %8.3f ms", k, perForward(d.t[k]))
	}
	b.Logf("%-36s %8.3f ms", "outside ops", perForward(total-ops))
	b.ReportMetric(float64(tokens*b.N)/total.Seconds(), "tok/s")
}

// packedDevice is a CPU device of th threads with m's weights packed for
// it, as troupe generate and serve pack them.
func packedDevice(b *testing.B, m model.Model, th int) gpu.Device {
	dev, err := cpu.New(cpu.Options{Threads: th})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(dev.Close)
	if _, err := model.PackWeights(m, dev); err != nil {
		b.Fatal(err)
	}
	return dev
}

func (d *timedDevice) Embed(dst []float32, w *gpu.Weight, ids []int32) {
	defer d.add("embed", d.clock())
	d.Device.Embed(dst, w, ids)
}
func (d *timedDevice) RMSNorm(dst, x, w []float32, n int, eps float32, u bool) {
	defer d.add("rmsnorm", d.clock())
	d.Device.RMSNorm(dst, x, w, n, eps, u)
}
func (d *timedDevice) RoPE(x []float32, heads, hd int, cos, sin []float32) {
	defer d.add("rope", d.clock())
	d.Device.RoPE(x, heads, hd, cos, sin)
}
func (d *timedDevice) Add(dst, a, b []float32) {
	defer d.add("add", d.clock())
	d.Device.Add(dst, a, b)
}
func (d *timedDevice) SiLUMul(dst, g, u []float32) {
	defer d.add("silumul", d.clock())
	d.Device.SiLUMul(dst, g, u)
}
func (d *timedDevice) Attention(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams) {
	defer d.add("attention", d.clock())
	d.Device.Attention(out, q, kv, seqs, p)
}

// BenchmarkPrefillOps runs 512-token and 92-token (a second turn's new
// text) prefill forwards of smollm2-135m (bf16,
// weights packed as troupe generate and serve pack them) and logs the time
// per forward of each device operation, to show where a prefill step spends
// its time: CPU time of the calling thread with one thread (robust to other
// load on the machine), wall time with two.
func BenchmarkPrefillOps(b *testing.B) {
	m := benchModel(b, gpu.BF16)
	pool := benchPool(b, m)
	for _, th := range []int{1, 2} {
		dev := packedDevice(b, m, th)
		for _, n := range []int{512, 92} {
			td := &timedDevice{Device: dev, t: map[string]time.Duration{}, cpuTime: th == 1}
			b.Run("threads"+strconv.Itoa(th)+"/pp"+strconv.Itoa(n), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var total time.Duration
				for b.Loop() {
					var seq kvcache.Seq
					if err := pool.Reserve(&seq, n); err != nil {
						b.Fatal(err)
					}
					t0 := td.clock()
					if _, err := m.Forward(td, pool, []model.Seq{{Tokens: prompt(n), Pages: seq.Pages, Logits: model.LastLogits}}); err != nil {
						b.Fatal(err)
					}
					total += td.clock() - t0
					pool.Free(&seq)
				}
				td.report(b, total, n)
			})
		}
	}
}

// BenchmarkDecodeOps runs decode forwards of smollm2-135m (Q8_0 and Q4_0,
// packed as serve packs them) for 1 and 8 sequences 128 positions deep and logs the time
// per forward of each device operation: with one thread the calling thread's
// CPU time, with two wall time. It shows what a batch-8 step pays beyond
// eight times the matmuls' weight traffic.
func BenchmarkDecodeOps(b *testing.B) {
	for _, dt := range []gpu.DType{gpu.Q8_0, gpu.Q4_0} {
		m := benchModel(b, dt)
		pool := benchPool(b, m)
		for _, th := range []int{1, 2} {
			dev := packedDevice(b, m, th)
			for _, batch := range []int{1, 8} {
				decodeOps(b, m, pool, dev, dt.String()+"/threads"+strconv.Itoa(th)+"/batch"+strconv.Itoa(batch), th, batch)
			}
		}
	}
}

// decodeOps is one sub-benchmark of BenchmarkDecodeOps: batch sequences
// depth positions deep, one decode forward per iteration.
func decodeOps(b *testing.B, m model.Model, pool *kvcache.Pool, dev gpu.Device, name string, th, batch int) {
	const depth = 128
	td := &timedDevice{Device: dev, t: map[string]time.Duration{}, cpuTime: th == 1}
	b.Run(name, func(b *testing.B) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		seqs := make([]kvcache.Seq, batch)
		for i := range seqs {
			if err := pool.Reserve(&seqs[i], depth+1); err != nil {
				b.Fatal(err)
			}
		}
		defer func() {
			for i := range seqs {
				pool.Free(&seqs[i])
			}
		}()
		fw := make([]model.Seq, batch)
		for i := range fw {
			fw[i] = model.Seq{Tokens: []int32{int32(7 + i)}, Pos: depth, Pages: seqs[i].Pages, Logits: model.LastLogits}
		}
		var total time.Duration
		for b.Loop() {
			t0 := td.clock()
			if _, err := m.Forward(td, pool, fw); err != nil {
				b.Fatal(err)
			}
			total += td.clock() - t0
		}
		td.report(b, total, batch)
	})
}

package cpu

/*
#cgo CFLAGS: -O3 -std=gnu11
#cgo LDFLAGS: -lm -lpthread
#include "tr.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
)

// Options configures a CPU device.
type Options struct {
	// Threads is the number of threads the kernels use, the calling thread
	// included; 0 means runtime.NumCPU().
	Threads int
	// Kernels forces a kernel set: "avx512bf16", "avx2" or "portable".
	// Empty picks the best one this CPU supports. New fails when the forced
	// set is not supported.
	Kernels string
	// FastBF16 lets matmuls with BF16 weights round the activations to bf16
	// once and use one vdpbf16ps per pair of products: about twice the
	// compute throughput at about 3 significant digits (relative error
	// around 1e-3 to 1e-2 of sum |x||w|). Only the avx512bf16 kernels use it.
	FastBF16 bool

	// mmMode forces a bf16 matmul strategy (TR_MM_*); tests and benchmarks only.
	mmMode int
	// attnMode forces an attention kernel (TR_ATTN_*); tests and benchmarks only.
	attnMode int
	// noPanels ignores packed weights (the per-call packing kernel runs
	// instead); tests and benchmarks only.
	noPanels bool
	// mmSched picks how decode matmuls (m < 16) split their rows across
	// threads: 0 one region per thread with stealing, 1 chunks from one
	// shared counter; tests and benchmarks only.
	mmSched int
}

// Kernel set names accepted by Options.Kernels, best first.
var kernelSets = []struct {
	name string
	id   C.int
}{
	{"avx512bf16", C.TR_K_AVX512BF16},
	{"avx2", C.TR_K_AVX2},
	{"portable", C.TR_K_PORTABLE},
}

// Supported reports the kernel sets this CPU can run, best first.
func Supported() []string {
	var out []string
	for _, k := range kernelSets {
		if C.tr_cpu_supports(k.id) != 0 {
			out = append(out, k.name)
		}
	}
	return out
}

// Device is the CPU backend of gpu.Device. Its methods may be called from
// several goroutines; calls are serialised. Close it to stop its threads.
type Device struct {
	mu      sync.Mutex
	ctx     *C.tr_ctx
	name    string
	kernels string
	threads int
	fast    bool

	noPanels bool

	seqs  []C.tr_seq
	pages []int32

	// calls counts kernel calls; every yieldCheck-th one reads the clock
	// and yields when lastYield (time since epoch) is yieldInterval old.
	calls     atomic.Uint32
	epoch     time.Time
	lastYield atomic.Int64
}

// The calling goroutine passes through the scheduler (runtime.Gosched) at
// least every yieldInterval of kernel calls, long before Go's 10 ms
// preemption mark (doc.go, "The calling goroutine"). A Gosched can cost tens
// of microseconds on a paravirtualised guest, so not more often; the clock
// is read every yieldCheck calls.
const (
	yieldInterval = 4 * time.Millisecond
	yieldCheck    = 16
)

var _ gpu.Device = (*Device)(nil)

// New starts a CPU device with its worker threads.
func New(opts Options) (*Device, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if threads > 1024 {
		return nil, fmt.Errorf("gpu/cpu: %d threads is too many", threads)
	}
	var id C.int = -1
	name := ""
	for _, k := range kernelSets {
		if opts.Kernels == "" && C.tr_cpu_supports(k.id) != 0 || opts.Kernels == k.name {
			id, name = k.id, k.name
			break
		}
	}
	if id < 0 {
		return nil, fmt.Errorf("gpu/cpu: unknown kernel set %q (have avx512bf16, avx2, portable)", opts.Kernels)
	}
	if C.tr_cpu_supports(id) == 0 {
		return nil, fmt.Errorf("gpu/cpu: kernel set %q is not supported by this CPU", name)
	}
	fast := 0
	if opts.FastBF16 {
		fast = 1
	}
	ctx := C.tr_new(id, C.int(threads), C.int(fast), C.int(opts.mmMode))
	if ctx == nil {
		return nil, fmt.Errorf("gpu/cpu: cannot start kernel set %q", name)
	}
	C.tr_set_attn_mode(ctx, C.int(opts.attnMode))
	C.tr_set_mm_sched(ctx, C.int(opts.mmSched))
	return &Device{ctx: ctx, epoch: time.Now(), kernels: name, threads: threads, fast: opts.FastBF16 && name == "avx512bf16",
		noPanels: opts.noPanels, name: fmt.Sprintf("cpu/%s x%d threads", name, threads)}, nil
}

// Close stops the worker threads. The device must not be used afterwards.
func (d *Device) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ctx != nil {
		C.tr_free(d.ctx)
		d.ctx = nil
	}
}

// QuantKernels names the kernels that run matmuls of quantized weights:
// "avx512vnni" on the avx512bf16 set (AVX-512 VNNI on 256-bit vectors),
// "avx2" or "portable".
func (d *Device) QuantKernels() string {
	d.lock()
	defer d.mu.Unlock()
	return C.GoString(C.tr_qkernels_name(d.ctx, C.int(gpu.Q8_0)))
}

// Kernels returns the kernel set in use ("avx512bf16", "avx2" or "portable").
func (d *Device) Kernels() string { return d.kernels }

// Threads returns the number of threads the kernels use.
func (d *Device) Threads() int { return d.threads }

// Name implements gpu.Device, e.g. "cpu/avx512bf16 x2 threads".
func (d *Device) Name() string {
	if d.fast {
		return d.name + " fastbf16"
	}
	return d.name
}

func (d *Device) yield() {
	now, last := int64(time.Since(d.epoch)), d.lastYield.Load()
	if now-last >= int64(yieldInterval) && d.lastYield.CompareAndSwap(last, now) {
		runtime.Gosched()
	}
}

func fp(s []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(s))) }

// lock takes the device for one kernel call, first letting the Go
// scheduler run when yieldInterval has passed since it last did.
func (d *Device) lock() {
	if d.calls.Add(1)%yieldCheck == 0 {
		d.yield()
	}
	d.mu.Lock()
	if d.ctx == nil {
		d.mu.Unlock()
		panic("gpu/cpu: device used after Close")
	}
}

func need(name string, have, want int) {
	if have < want {
		panic(fmt.Sprintf("gpu/cpu: %s: slice has %d elements, need %d", name, have, want))
	}
}

// MatMul implements gpu.Device.
func (d *Device) MatMul(dst, x []float32, m int, w *gpu.Weight) {
	if m <= 0 {
		return
	}
	n, k := w.Rows, w.Cols
	d.checkMatMul("MatMul", dst, x, m, w)
	if p := d.panels(w, m); p != nil {
		d.matMulPanel(dst, x, m, w, nil, p, nil, C.TR_EPI_STORE)
		return
	}
	if w.DType.Quantized() {
		d.lock()
		rc := C.tr_qmatmul(d.ctx, fp(dst), fp(x), C.long(m), unsafe.Pointer(unsafe.SliceData(w.Data)),
			d.quantPacked(w, m), C.int(w.DType), C.long(n), C.long(k))
		d.mu.Unlock()
		runtime.KeepAlive(w)
		if rc != 0 {
			panic(fmt.Sprintf("gpu/cpu: MatMul: %v weight %dx%d: no kernel or out of memory", w.DType, n, k))
		}
		return
	}
	d.lock()
	C.tr_matmul(d.ctx, fp(dst), fp(x), C.long(m), unsafe.Pointer(unsafe.SliceData(w.Data)), C.int(w.DType),
		C.long(n), C.long(k))
	d.mu.Unlock()
	runtime.KeepAlive(w)
}

// Embed implements gpu.Device.
func (d *Device) Embed(dst []float32, w *gpu.Weight, ids []int32) {
	if len(ids) == 0 {
		return
	}
	need("Embed dst", len(dst), len(ids)*w.Cols)
	for _, id := range ids {
		if id < 0 || int(id) >= w.Rows {
			panic(fmt.Sprintf("gpu/cpu: Embed: id %d out of range [0, %d)", id, w.Rows))
		}
	}
	if rb := w.RowBytes(); rb == 0 || len(w.Data) < w.Rows*rb {
		panic("gpu/cpu: Embed: bad weight")
	}
	if w.DType.Quantized() {
		// A few rows per token: dequantized in Go by the block dequantizers
		// that define the values (bit-exact with gpu/ref).
		for i, id := range ids {
			w.Row(dst[i*w.Cols:(i+1)*w.Cols], int(id))
		}
		return
	}
	C.tr_embed(fp(dst), unsafe.Pointer(unsafe.SliceData(w.Data)), C.int(w.DType), C.long(w.Cols),
		(*C.int32_t)(unsafe.Pointer(unsafe.SliceData(ids))), C.long(len(ids)))
	runtime.KeepAlive(w)
}

// RMSNorm implements gpu.Device.
func (d *Device) RMSNorm(dst, x, w []float32, n int, eps float32, unitOffset bool) {
	if len(x) == 0 || n <= 0 {
		return
	}
	rows := len(x) / n
	need("RMSNorm dst", len(dst), rows*n)
	need("RMSNorm w", len(w), n)
	u := 0
	if unitOffset {
		u = 1
	}
	d.lock()
	C.tr_rmsnorm(d.ctx, fp(dst), fp(x), fp(w), C.long(rows), C.long(n), C.float(eps), C.int(u))
	d.mu.Unlock()
}

// RoPE implements gpu.Device.
func (d *Device) RoPE(x []float32, heads, headDim int, cos, sin []float32) {
	rows, half, err := gpu.RoPEShape(x, heads, headDim, cos, sin)
	if err != nil {
		panic("gpu/cpu: " + err.Error())
	}
	if rows == 0 || half == 0 {
		return
	}
	d.lock()
	C.tr_rope(d.ctx, fp(x), C.long(rows), C.long(heads), C.long(headDim), fp(cos), fp(sin), C.long(half))
	d.mu.Unlock()
}

// AddBias implements gpu.Device.
func (d *Device) AddBias(x, bias []float32) {
	if len(x) == 0 || len(bias) == 0 {
		return
	}
	d.lock()
	C.tr_add_bias(d.ctx, fp(x), C.long(len(x)), fp(bias), C.long(len(bias)))
	d.mu.Unlock()
}

// Add implements gpu.Device.
func (d *Device) Add(dst, a, b []float32) {
	if len(dst) == 0 {
		return
	}
	need("Add a", len(a), len(dst))
	need("Add b", len(b), len(dst))
	d.lock()
	C.tr_add(d.ctx, fp(dst), fp(a), fp(b), C.long(len(dst)))
	d.mu.Unlock()
}

// SiLUMul implements gpu.Device.
func (d *Device) SiLUMul(dst, gate, up []float32) {
	if len(dst) == 0 {
		return
	}
	need("SiLUMul gate", len(gate), len(dst))
	need("SiLUMul up", len(up), len(dst))
	d.lock()
	C.tr_silu_mul(d.ctx, fp(dst), fp(gate), fp(up), C.long(len(dst)))
	d.mu.Unlock()
}

// GELUTanhMul implements gpu.Device.
func (d *Device) GELUTanhMul(dst, gate, up []float32) {
	if len(dst) == 0 {
		return
	}
	need("GELUTanhMul gate", len(gate), len(dst))
	need("GELUTanhMul up", len(up), len(dst))
	d.lock()
	C.tr_gelu_mul(d.ctx, fp(dst), fp(gate), fp(up), C.long(len(dst)))
	d.mu.Unlock()
}

// Softcap implements gpu.Device.
func (d *Device) Softcap(x []float32, c float32) {
	if len(x) == 0 {
		return
	}
	d.lock()
	C.tr_softcap(d.ctx, fp(x), C.long(len(x)), C.float(c))
	d.mu.Unlock()
}

// Scale implements gpu.Device.
func (d *Device) Scale(x []float32, s float32) {
	if len(x) == 0 {
		return
	}
	d.lock()
	C.tr_scale(d.ctx, fp(x), C.long(len(x)), C.float(s))
	d.mu.Unlock()
}

// Attention implements gpu.Device.
func (d *Device) Attention(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams) {
	if len(seqs) == 0 {
		return
	}
	if p.Heads <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.Heads%p.KVHeads != 0 {
		panic(fmt.Sprintf("gpu/cpu: Attention: bad heads %d/%d, head dim %d", p.Heads, p.KVHeads, p.HeadDim))
	}
	if kv.PageSize <= 0 || kv.Dim < p.KVHeads*p.HeadDim {
		panic(fmt.Sprintf("gpu/cpu: Attention: KV page size %d, dim %d for %d kv heads of %d",
			kv.PageSize, kv.Dim, p.KVHeads, p.HeadDim))
	}
	qdim := p.Heads * p.HeadDim
	slots := len(kv.K) / kv.Dim
	if len(kv.V) < slots*kv.Dim {
		slots = len(kv.V) / kv.Dim
	}
	d.lock()
	defer d.mu.Unlock()
	d.seqs = d.seqs[:0]
	d.pages = d.pages[:0]
	n := 0
	for _, s := range seqs {
		if s.N <= 0 {
			continue
		}
		if s.Row < 0 || s.Pos < 0 {
			panic("gpu/cpu: Attention: negative row or position")
		}
		need("Attention q", len(q), (s.Row+s.N)*qdim)
		need("Attention out", len(out), (s.Row+s.N)*qdim)
		np := (s.Pos + s.N + kv.PageSize - 1) / kv.PageSize
		need("Attention page table", len(s.Pages), np)
		for _, pg := range s.Pages[:np] {
			if pg < 0 || (int(pg)+1)*kv.PageSize > slots {
				panic(fmt.Sprintf("gpu/cpu: Attention: page %d outside the KV storage", pg))
			}
		}
		d.seqs = append(d.seqs, C.tr_seq{row: C.int64_t(s.Row), n: C.int64_t(s.N), pos: C.int64_t(s.Pos),
			page_off: C.int64_t(len(d.pages)), npages: C.int64_t(np)})
		d.pages = append(d.pages, s.Pages[:np]...)
		n++
	}
	if n == 0 {
		return
	}
	var pages *C.int32_t
	if len(d.pages) > 0 {
		pages = (*C.int32_t)(unsafe.Pointer(&d.pages[0]))
	}
	C.tr_attention(d.ctx, fp(out), fp(q), fp(kv.K), fp(kv.V), C.long(kv.PageSize), C.long(kv.Dim),
		&d.seqs[0], C.long(n), pages, C.int(p.Heads), C.int(p.KVHeads), C.int(p.HeadDim),
		C.float(p.Scale), C.int(p.Window), C.float(p.Softcap))
}

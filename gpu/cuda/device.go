//go:build cuda

package cuda

/*
#include <cuda.h>

static CUresult tc_host_alloc(void **p, size_t n) { return cuMemAllocHost(p, n); }
static CUresult tc_host_free(void *p) { return cuMemFreeHost(p); }
*/
import "C"

import (
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"gorgonia.org/cu"
)

// Options configures a CUDA device.
type Options struct {
	// Ordinal is the CUDA device to run on (cuda:N), 0 the first.
	Ordinal int
	// Logger receives the device's notes (an operation running on the host
	// for want of its kernel, ...); nil means slog.Default().
	Logger *slog.Logger
	// Half16 keeps BF16 and F16 weight matrices in their 16-bit type on the
	// GPU and multiplies them with cublasGemmEx, rounding the activations to
	// the same type (float32 accumulation): half the memory, about 3
	// significant digits. Without it they are widened to float32 when they
	// are uploaded and multiplied exactly with cublasSgemm.
	Half16 bool
}

// numSlots is the number of scratch buffers one operation may use.
const numSlots = 8

// devBuf is a device allocation that grows as needed.
type devBuf struct {
	ptr   cu.DevicePtr
	bytes int64
}

// hostBuf is pinned (page-locked) host memory that grows as needed: the
// staging area of asynchronous copies.
type hostBuf struct {
	ptr   unsafe.Pointer
	bytes int64
}

// devWeight is a weight matrix uploaded to the device, in dtype (F32, BF16
// or F16).
type devWeight struct {
	ptr   cu.DevicePtr
	dtype gpu.DType
	bytes int64
}

// opTime is the GPU time spent in one operation.
type opTime struct {
	calls int64
	total time.Duration
}

// Device is the CUDA backend of gpu.Device: one context on one GPU, one
// stream that every operation runs on, the kernels of the embedded PTX and
// a cuBLAS handle for the matrix products.
//
// The gpu.Device interface passes activations as host slices, so each
// operation copies its inputs to the GPU through pinned staging buffers,
// runs, and copies its outputs back before it returns (the stream is
// synchronised: calls complete in order). Weight matrices are uploaded once,
// on first use, and kept on the GPU for the Device's life, keyed by their
// *gpu.Weight. An operation whose kernel is missing from the PTX runs the
// reference implementation (gpu/ref) on the host copies instead; the Device
// logs that once per operation (see Fallbacks).
//
// Its methods may be called from several goroutines; calls are serialised.
// As gpu.Device's methods return no errors, a CUDA failure during an
// operation panics with an error naming the operation; New and Close
// return theirs. Close it to free the GPU memory.
type Device struct {
	mu     sync.Mutex
	closed bool
	log    *slog.Logger
	opts   Options
	name   string

	ctx    cu.CUContext
	stream cu.Stream
	start  cu.Event
	stop   cu.Event
	mod    cu.Module
	loaded bool // mod holds the PTX

	table [numKernels]kernelSpec
	fns   [numKernels]cu.Function
	has   [numKernels]bool

	blas *blas

	weights map[*gpu.Weight]*devWeight
	total   int64 // the GPU's memory, bytes
	dev     [numSlots]devBuf
	host    [numSlots]hostBuf
	args    []uint64
	params  []unsafe.Pointer

	fellBack map[string]string // operation -> why it runs on the host
	times    map[string]*opTime
	ref      ref.Device
}

var (
	_ gpu.Device         = (*Device)(nil)
	_ gpu.MemoryReporter = (*Device)(nil)
)

// New creates a context on CUDA device opts.Ordinal with its stream, loads
// the kernels' PTX and cuBLAS. It fails, with nothing left allocated, when
// the device does not exist, its compute capability is below 8.0 (the PTX
// targets compute_80), or the host has no cuBLAS 11, 12 or 13.
func New(opts Options) (*Device, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("gpu/cuda: counting CUDA devices: %w", err)
	}
	if opts.Ordinal < 0 || opts.Ordinal >= n {
		return nil, fmt.Errorf("gpu/cuda: no CUDA device %d: this host has %d", opts.Ordinal, n)
	}
	dev, err := cu.GetDevice(opts.Ordinal)
	if err != nil {
		return nil, fmt.Errorf("gpu/cuda: device %d: %w", opts.Ordinal, err)
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, fmt.Errorf("gpu/cuda: device %d: compute capability: %w", opts.Ordinal, err)
	}
	if major < 8 {
		return nil, fmt.Errorf("gpu/cuda: device %d has compute capability %d.%d; the kernels need 8.0 or later", opts.Ordinal, major, minor)
	}
	gpuName, err := dev.Name()
	if err != nil {
		return nil, fmt.Errorf("gpu/cuda: device %d: name: %w", opts.Ordinal, err)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := dev.MakeContext(cu.SchedAuto)
	if err != nil {
		return nil, fmt.Errorf("gpu/cuda: device %d: creating a context: %w", opts.Ordinal, err)
	}
	d := &Device{log: opts.Logger, opts: opts, ctx: ctx, table: kernels(),
		weights: map[*gpu.Weight]*devWeight{}, fellBack: map[string]string{}, times: map[string]*opTime{}}
	if err := d.setUp(); err != nil {
		d.release()
		return nil, fmt.Errorf("gpu/cuda: device %d (%s): %w", opts.Ordinal, gpuName, err)
	}
	if _, d.total, err = cu.MemInfo(); err != nil {
		d.release()
		return nil, fmt.Errorf("gpu/cuda: device %d (%s): reading its memory size: %w", opts.Ordinal, gpuName, err)
	}
	if _, err := cu.PopCurrentCtx(); err != nil {
		d.release()
		return nil, fmt.Errorf("gpu/cuda: device %d: %w", opts.Ordinal, err)
	}
	var missing []string
	for i, k := range d.table {
		if !d.has[i] {
			missing = append(missing, k.name)
		}
	}
	if len(missing) > 0 {
		d.log.Warn("gpu/cuda: kernels missing from the PTX; their operations run on the host (gpu/ref) until gpu/cuda/kernels defines them",
			"missing", strings.Join(missing, ","))
	}
	d.name = fmt.Sprintf("cuda:%d %s sm_%d%d cuBLAS %d", opts.Ordinal, gpuName, major, minor, d.blas.version())
	return d, nil
}

// setUp creates the stream, the events, the module and the cuBLAS handle in
// the current context.
func (d *Device) setUp() error {
	var err error
	if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("creating a stream: %w", err)
	}
	if d.start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return fmt.Errorf("creating an event: %w", err)
	}
	if d.stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
		return fmt.Errorf("creating an event: %w", err)
	}
	if len(ptxEntries(PTX())) > 0 {
		if d.mod, err = cu.LoadData(PTX()); err != nil {
			return fmt.Errorf("loading the kernels' PTX: %w", err)
		}
		d.loaded = true
		for i, k := range d.table {
			if fn, err := d.mod.Function(k.name); err == nil {
				d.fns[i], d.has[i] = fn, true
			}
		}
	}
	if d.blas, err = openBLAS(unsafe.Pointer(d.stream.C())); err != nil {
		return err
	}
	return nil
}

// release frees what New or the operations allocated; the context must be
// current on the calling thread, which must be locked to it.
func (d *Device) release() {
	for w, dw := range d.weights {
		_ = cu.MemFree(dw.ptr)
		delete(d.weights, w)
	}
	for i := range d.dev {
		if d.dev[i].ptr != 0 {
			_ = cu.MemFree(d.dev[i].ptr)
		}
		if d.host[i].ptr != nil {
			C.tc_host_free(d.host[i].ptr)
		}
		d.dev[i], d.host[i] = devBuf{}, hostBuf{}
	}
	d.blas.close()
	d.blas = nil
	if d.loaded {
		_ = d.mod.Unload()
		d.loaded = false
	}
	var zeroEvent cu.Event
	if d.start != zeroEvent {
		_ = cu.DestroyEvent(&d.start)
	}
	if d.stop != zeroEvent {
		_ = cu.DestroyEvent(&d.stop)
	}
	var zeroStream cu.Stream
	if d.stream != zeroStream {
		_ = d.stream.Destroy()
	}
	_ = d.ctx.Destroy()
}

// Close frees the device's GPU memory, its stream, module and cuBLAS handle,
// and destroys its context. The device must not be used afterwards.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("gpu/cuda: Close: %w", err)
	}
	syncErr := d.stream.Synchronize()
	d.release()
	if syncErr != nil {
		return fmt.Errorf("gpu/cuda: Close: %w", syncErr)
	}
	return nil
}

// Name implements gpu.Device, e.g. "cuda:0 NVIDIA H100 sm_90 cuBLAS 120400".
func (d *Device) Name() string { return d.name }

// Fallbacks returns the operations that have run on the host so far, each
// with the reason.
func (d *Device) Fallbacks() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.fellBack))
	for k, v := range d.fellBack {
		out[k] = v
	}
	return out
}

// GPUTimes returns, per operation, the GPU time (copies included, timed
// with CUDA events on the stream) of the calls that ran on the GPU so far.
func (d *Device) GPUTimes() map[string]time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]time.Duration, len(d.times))
	for k, v := range d.times {
		out[k] = v.total
	}
	return out
}

// run runs one operation: gpuOp on the stream when every kernel it needs is
// loaded, else hostOp (logged once per operation). It holds the device, binds
// its context to the calling thread, times gpuOp with the events and
// synchronises the stream; a failure of gpuOp panics.
func (d *Device) run(op string, need []kernelID, gpuOp func() error, hostOp func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		panic("gpu/cuda: " + op + ": device used after Close")
	}
	for _, k := range need {
		if !d.has[k] {
			d.fallBack(op, "kernel "+d.table[k].name+" is not in the PTX")
			hostOp()
			return
		}
	}
	if err := d.onStream(op, gpuOp); err != nil {
		panic(fmt.Errorf("gpu/cuda: %s: %w", op, err))
	}
}

// fallBack notes, and logs the first time, that op runs on the host.
func (d *Device) fallBack(op, why string) {
	if _, ok := d.fellBack[op]; !ok {
		d.fellBack[op] = why
		d.log.Warn("gpu/cuda: operation runs on the host (gpu/ref)", "op", op, "why", why)
	}
}

func (d *Device) onStream(op string, gpuOp func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("binding the context: %w", err)
	}
	if err := d.start.Record(d.stream); err != nil {
		return fmt.Errorf("recording an event: %w", err)
	}
	if err := gpuOp(); err != nil {
		_ = d.stream.Synchronize()
		return err
	}
	if err := d.stop.Record(d.stream); err != nil {
		return fmt.Errorf("recording an event: %w", err)
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("synchronising the stream: %w", err)
	}
	if ms, err := d.start.Elapsed(d.stop); err == nil {
		t := d.times[op]
		if t == nil {
			t = &opTime{}
			d.times[op] = t
		}
		t.calls++
		t.total += time.Duration(ms * float64(time.Millisecond))
	}
	return nil
}

// grow makes scratch slot i hold at least n bytes on the device and in
// pinned host memory (rounded up to a power of two, at least 64 KiB). The
// stream must be idle: growing frees the old buffers.
func (d *Device) grow(i int, n int64) error {
	if n <= d.dev[i].bytes && n <= d.host[i].bytes {
		return nil
	}
	size := max(int64(64<<10), int64(1)<<(64-bits.LeadingZeros64(uint64(n-1))))
	if d.dev[i].ptr != 0 {
		if err := cu.MemFree(d.dev[i].ptr); err != nil {
			return fmt.Errorf("freeing scratch: %w", err)
		}
		d.dev[i] = devBuf{}
	}
	ptr, err := cu.MemAlloc(size)
	if err != nil {
		return fmt.Errorf("allocating %d bytes of scratch: %w", size, err)
	}
	d.dev[i] = devBuf{ptr: ptr, bytes: size}
	if d.host[i].ptr != nil {
		if r := C.tc_host_free(d.host[i].ptr); r != C.CUDA_SUCCESS {
			return fmt.Errorf("freeing pinned memory: CUresult %d", int(r))
		}
		d.host[i] = hostBuf{}
	}
	var p unsafe.Pointer
	if r := C.tc_host_alloc(&p, C.size_t(size)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("allocating %d bytes of pinned memory: CUresult %d", size, int(r))
	}
	d.host[i] = hostBuf{ptr: p, bytes: size}
	return nil
}

// put copies src (n bytes of host memory) to scratch slot i through its
// pinned buffer and returns the slot's device pointer.
func (d *Device) put(i int, src unsafe.Pointer, n int64) (cu.DevicePtr, error) {
	if err := d.grow(i, n); err != nil {
		return 0, err
	}
	if n == 0 {
		return d.dev[i].ptr, nil
	}
	copy(unsafe.Slice((*byte)(d.host[i].ptr), n), unsafe.Slice((*byte)(src), n))
	if err := cu.MemcpyHtoDAsync(d.dev[i].ptr, d.host[i].ptr, n, d.stream); err != nil {
		return 0, fmt.Errorf("copying %d bytes to the GPU: %w", n, err)
	}
	return d.dev[i].ptr, nil
}

func (d *Device) putF32(i int, x []float32) (cu.DevicePtr, error) {
	return d.put(i, unsafe.Pointer(unsafe.SliceData(x)), int64(4*len(x)))
}

func (d *Device) putI32(i int, x []int32) (cu.DevicePtr, error) {
	return d.put(i, unsafe.Pointer(unsafe.SliceData(x)), int64(4*len(x)))
}

// scratch returns slot i's device pointer, sized for n bytes.
func (d *Device) scratch(i int, n int64) (cu.DevicePtr, error) {
	if err := d.grow(i, n); err != nil {
		return 0, err
	}
	return d.dev[i].ptr, nil
}

// get copies len(dst) floats of slot i back into dst, through its pinned
// buffer, and waits for them.
func (d *Device) get(dst []float32, i int) error {
	n := int64(4 * len(dst))
	if n == 0 {
		return nil
	}
	if err := cu.MemcpyDtoHAsync(d.host[i].ptr, d.dev[i].ptr, n, d.stream); err != nil {
		return fmt.Errorf("copying %d bytes from the GPU: %w", n, err)
	}
	if err := d.stream.Synchronize(); err != nil {
		return fmt.Errorf("synchronising the stream: %w", err)
	}
	copy(dst, unsafe.Slice((*float32)(d.host[i].ptr), len(dst)))
	return nil
}

// launch runs kernel k on the stream with the arguments, which must match
// the kernel table: cu.DevicePtr for a pointer, int32, int64, float32.
func (d *Device) launch(k kernelID, grid, block [3]int, args ...any) error {
	spec := d.table[k]
	if len(args) != len(spec.args) {
		return fmt.Errorf("kernel %s takes %d arguments, got %d", spec.name, len(spec.args), len(args))
	}
	// cu.Function.Launch reads 8 bytes through each parameter pointer, so
	// every argument gets an 8-byte slot.
	d.args = slices.Grow(d.args[:0], len(args))[:len(args)]
	d.params = slices.Grow(d.params[:0], len(args))[:len(args)]
	for i, a := range args {
		var v uint64
		var kind argKind
		switch a := a.(type) {
		case cu.DevicePtr:
			v, kind = uint64(a), argPtr
		case int32:
			v, kind = uint64(uint32(a)), argI32
		case int64:
			v, kind = uint64(a), argI64
		case float32:
			v, kind = uint64(math.Float32bits(a)), argF32
		default:
			return fmt.Errorf("kernel %s: argument %d has unsupported type %T", spec.name, i, a)
		}
		if kind != spec.args[i] {
			return fmt.Errorf("kernel %s: argument %d is %v, the table says %v", spec.name, i, kind, spec.args[i])
		}
		d.args[i] = v
		d.params[i] = unsafe.Pointer(&d.args[i])
	}
	if err := d.fns[k].Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, d.stream, d.params); err != nil {
		return fmt.Errorf("launching %s: %w", spec.name, err)
	}
	return nil
}

// elementwise launch geometry: grid-stride kernels.
const ewBlock = 256

func ewGrid(n int) [3]int { return [3]int{min((n+ewBlock-1)/ewBlock, 1<<16), 1, 1} }

// pow2Block is a power-of-two block of at least 32 and at most 1024
// threads, about n.
func pow2Block(n int) int {
	b := 32
	for b < n && b < 1024 {
		b *= 2
	}
	return b
}

func need(op string, what string, have, want int) {
	if have < want {
		panic(fmt.Sprintf("gpu/cuda: %s: %s has %d elements, need %d", op, what, have, want))
	}
}

// weight returns w on the device, uploading it the first time: F32 as it
// is; BF16 and F16 as they are with Options.Half16, else widened to
// float32; quantized dtypes dequantized to float32 (gpu.Weight.Row). The
// stream must be idle.
func (d *Device) weight(w *gpu.Weight) (*devWeight, error) {
	if dw := d.weights[w]; dw != nil {
		return dw, nil
	}
	if rb := w.RowBytes(); rb == 0 || len(w.Data) < w.Rows*rb {
		return nil, fmt.Errorf("bad %v weight %dx%d", w.DType, w.Rows, w.Cols)
	}
	var src unsafe.Pointer
	var n int64
	dt := w.DType
	switch {
	case dt == gpu.F32 || (dt == gpu.BF16 || dt == gpu.F16) && d.opts.Half16:
		src, n = unsafe.Pointer(unsafe.SliceData(w.Data)), int64(w.Rows*w.RowBytes())
	default:
		if dt.Quantized() {
			d.fallBack("MatMul "+dt.String()+" weights", "no quantized kernels yet: dequantized to float32 once, at upload")
		}
		f := w.Float32s()
		src, n, dt = unsafe.Pointer(unsafe.SliceData(f)), int64(4*len(f)), gpu.F32
		defer runtime.KeepAlive(f)
	}
	ptr, err := cu.MemAlloc(n)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes for a %v weight %dx%d: %w", n, w.DType, w.Rows, w.Cols, err)
	}
	if err := cu.MemcpyHtoD(ptr, src, n); err != nil {
		_ = cu.MemFree(ptr)
		return nil, fmt.Errorf("uploading a %v weight %dx%d: %w", w.DType, w.Rows, w.Cols, err)
	}
	runtime.KeepAlive(w)
	dw := &devWeight{ptr: ptr, dtype: dt, bytes: n}
	d.weights[w] = dw
	return dw, nil
}

// WeightBytes is the GPU memory the uploaded weights take.
func (d *Device) WeightBytes() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var n int64
	for _, dw := range d.weights {
		n += dw.bytes
	}
	return n
}

// CheckMemory checks, before the weights are uploaded, that the model fits
// in the GPU's free memory (cuMemGetInfo): weights of the given parameter
// counts by dtype (model.Info.DTypeParams) as this Device uploads them
// (UploadBytes under Options.Half16), kvBytes of KV (the pool the KV
// budget gives) and ScratchMargin. The error names the three figures and
// the free and total memory, and wraps ErrOutOfMemory (CheckFit).
func (d *Device) CheckMemory(params map[gpu.DType]int64, kvBytes int64) error {
	need := MemoryNeed{Weights: UploadBytes(params, d.opts.Half16), KV: kvBytes, Scratch: ScratchMargin}
	d.mu.Lock()
	defer d.mu.Unlock()
	name := fmt.Sprintf("cuda:%d", d.opts.Ordinal)
	if d.closed {
		return fmt.Errorf("gpu/cuda: %s: CheckMemory after Close", name)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("gpu/cuda: %s: binding the context: %w", name, err)
	}
	free, total, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("gpu/cuda: %s: reading free memory: %w", name, err)
	}
	if err := CheckFit(name, need, free, total); err != nil {
		return fmt.Errorf("gpu/cuda: %w", err)
	}
	d.log.Info("gpu/cuda: the model fits", "device", name, "needs", need.String(),
		"free", kvcache.FormatBytes(free), "total", kvcache.FormatBytes(total))
	return nil
}

// MemoryUse implements gpu.MemoryReporter from the Device's own
// allocations: the weights uploaded so far, the scratch slots (device side;
// they also stage the KV pages Attention reaches, as the KV pool is host
// memory for now, so KV is 0) and the GPU's total memory.
func (d *Device) MemoryUse() gpu.MemoryUse {
	d.mu.Lock()
	defer d.mu.Unlock()
	u := gpu.MemoryUse{Total: d.total}
	for _, dw := range d.weights {
		u.Weights += dw.bytes
	}
	for _, b := range d.dev {
		u.Scratch += b.bytes
	}
	return u
}

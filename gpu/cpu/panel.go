package cpu

/*
#include "tr.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
)

// panelLayout names the packed layout of the prefill matmul: BF16 weights
// in panels of 32 outputs, 32 bf16 per k (see mm_panel_avx512.c).
const panelLayout = "cpu/panel32-bf16"

// panelMinRows is the smallest matmul (in rows of x) that uses the panels;
// smaller ones (decode) stream the weights in their own layout.
const panelMinRows = 16

var (
	_ gpu.Packer      = (*Device)(nil)
	_ gpu.FusedMatMul = (*Device)(nil)
)

// xpLayout names the packed group layout of weights of the types with
// blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) and Q4_K (tr_impl.h): the
// lane layout of the quantized batch matmul, made once.
func xpLayout(dt gpu.DType) string { return "cpu/xl16-" + dt.String() }

// PackWeights implements gpu.Packer. It gives weights a second, packed copy
// where a kernel set has a layout that reads faster than the weight's own;
// the copies of one call share one mapping, advised for 2 MiB pages, and
// the sum of their sizes is returned.
//
//   - On the avx512bf16 kernels each BF16 weight gets a copy in the panel
//     layout of the prefill matmul (the same bytes as the weight, rounded
//     up to whole panels of 32 rows), so that prefill matmuls read it as it
//     is instead of transposing and widening every panel on every call. Not
//     on a FastBF16 device (its prefill kernel reads the weights as they
//     are).
//   - With AVX-512 VNNI each weight of a type with blocks of 32 (Q8_0,
//     Q4_0, Q4_1, Q5_0, Q5_1) or Q4_K gets a copy in the packed group
//     layout (the same bytes, rearranged, Q4_K's scales as bytes: 3% more;
//     the last group of 16 rows padded), which
//     decode and batches of up to 31 rows stream with no unpacking (see
//     doc.go).
//
// Other weights and kernel sets are left alone.
func (d *Device) PackWeights(ws []*gpu.Weight) (int64, error) {
	if d.noPanels {
		return 0, nil
	}
	d.lock()
	defer d.mu.Unlock()
	panels := !d.fast && C.tr_panel_supported(d.ctx) != 0
	type copyOf struct {
		w      *gpu.Weight
		layout string
		n      int
	}
	var todo []copyOf
	total := 0
	for _, w := range ws {
		if w == nil || w.Rows <= 0 || w.Cols <= 0 || slices.ContainsFunc(todo, func(c copyOf) bool { return c.w == w }) {
			continue
		}
		var c copyOf
		switch {
		case panels && w.DType == gpu.BF16 && len(w.Data) >= w.Rows*w.Cols*2:
			c = copyOf{w, panelLayout, panelBytes(w)}
		case w.DType.Quantized() && C.tr_xp_supported(d.ctx, C.int(w.DType)) != 0 && w.Cols%w.DType.BlockSize() == 0 &&
			len(w.Data) >= w.Rows*w.RowBytes():
			c = copyOf{w, xpLayout(w.DType), xpBytes(w)}
		default:
			continue
		}
		if p := w.Packed(); p != nil && p.Layout == c.layout {
			continue
		}
		todo = append(todo, c)
		total += (c.n + 63) &^ 63 // each copy 64-byte aligned
	}
	if total == 0 {
		return 0, nil
	}
	arena, err := newPanelArena(total)
	if err != nil {
		return 0, err
	}
	off := 0
	for _, c := range todo {
		buf := arena.buf[off : off+c.n : off+c.n]
		off += (c.n + 63) &^ 63
		w := c.w
		if c.layout == panelLayout {
			C.tr_panel_pack(d.ctx, (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(buf))),
				(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(w.Data))), C.long(w.Rows), C.long(w.Cols))
		} else {
			C.tr_xp_pack(C.int(w.DType), (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(buf))),
				(*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(w.Data))), C.long(w.Rows), C.long(w.Cols))
		}
		runtime.KeepAlive(w)
		w.SetPacked(&gpu.Packed{Layout: c.layout, Data: buf, Owner: arena})
	}
	return int64(total), nil
}

// xpBytes is the size of w's packed group copy.
func xpBytes(w *gpu.Weight) int {
	return int(C.tr_xp_bytes(C.int(w.DType), C.long(w.Rows), C.long(w.Cols)))
}

// quantPacked returns w's packed group copy when a quantized matmul of m
// rows should use it (1-31 rows: larger ones dequantize the weights in
// their own layout), else nil.
func (d *Device) quantPacked(w *gpu.Weight, m int) unsafe.Pointer {
	if m >= quantDequantMin || d.noPanels {
		return nil
	}
	p := w.Packed()
	if p == nil || p.Layout != xpLayout(w.DType) || len(p.Data) != xpBytes(w) {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(p.Data))
}

// panelBytes is the size of w's panel copy: whole panels, each 64 bytes per
// k (a multiple of 64, so that the copies of a batch stay aligned).
func panelBytes(w *gpu.Weight) int { return int(C.tr_panel_bytes(C.long(w.Rows), C.long(w.Cols))) }

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// panels returns w's panel copy when a matmul of m rows should use it.
func (d *Device) panels(w *gpu.Weight, m int) unsafe.Pointer {
	if w == nil || m < panelMinRows || d.fast || d.noPanels || w.DType != gpu.BF16 {
		return nil
	}
	p := w.Packed()
	if p == nil || p.Layout != panelLayout || len(p.Data) != panelBytes(w) {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(p.Data))
}

func (d *Device) checkMatMul(op string, dst, x []float32, m int, w *gpu.Weight) {
	n, k := w.Rows, w.Cols
	if len(x) < m*k {
		need(op+" x", len(x), m*k)
	}
	if len(dst) < m*n {
		need(op+" dst", len(dst), m*n)
	}
	if rb := w.RowBytes(); n <= 0 || k <= 0 || rb == 0 || len(w.Data) < n*rb {
		panic(fmt.Sprintf("gpu/cpu: %s: bad weight %v %dx%d with %d bytes", op, w.DType, n, k, len(w.Data)))
	}
}

// matMulPanel runs the panel kernel with epilogue epi; w2 is the up weight
// of a gated pair.
func (d *Device) matMulPanel(dst, x []float32, m int, w, w2 *gpu.Weight, p, p2 unsafe.Pointer, epi C.int) {
	d.lock()
	C.tr_matmul_panel(d.ctx, fp(dst), fp(x), C.long(m), (*C.uint16_t)(p), (*C.uint16_t)(p2), C.long(w.Rows),
		C.long(w.Cols), epi)
	d.mu.Unlock()
	runtime.KeepAlive(w)
	runtime.KeepAlive(w2)
}

// MatMulAdd implements gpu.FusedMatMul: with packed weights and at least 16
// rows, the residual add is the matmul's epilogue.
func (d *Device) MatMulAdd(dst, x []float32, m int, w *gpu.Weight) bool {
	p := d.panels(w, m)
	if p == nil {
		return false
	}
	d.checkMatMul("MatMulAdd", dst, x, m, w)
	d.matMulPanel(dst, x, m, w, nil, p, nil, C.TR_EPI_ADD)
	return true
}

// MatMulMulti implements gpu.FusedMatMul: with packed weights (up to 4) and
// at least 16 rows, the threads share out the panels of all of them in one
// pass.
func (d *Device) MatMulMulti(dsts [][]float32, x []float32, m int, ws []*gpu.Weight) bool {
	if len(ws) == 0 || len(ws) > 4 || len(dsts) != len(ws) {
		return false
	}
	var segs [4]C.tr_panel_seg
	for i, w := range ws {
		p := d.panels(w, m)
		if p == nil || w.Cols != ws[0].Cols {
			return false
		}
		d.checkMatMul("MatMulMulti", dsts[i], x, m, w)
		segs[i] = C.tr_panel_seg{dst: fp(dsts[i]), w: (*C.uint16_t)(p), n: C.long(w.Rows), epi: C.TR_EPI_STORE}
	}
	// segs holds Go pointers (the dsts) that C reads: they must be pinned.
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, dst := range dsts {
		pin.Pin(unsafe.SliceData(dst))
	}
	d.lock()
	C.tr_matmul_panels(d.ctx, fp(x), C.long(m), C.long(ws[0].Cols), C.int(len(ws)), &segs[0])
	d.mu.Unlock()
	runtime.KeepAlive(ws)
	return true
}

// MatMulGated implements gpu.FusedMatMul: with packed gate and up weights
// and at least 16 rows, each work item computes a tile of both and writes
// the activated product, so neither projection is stored.
func (d *Device) MatMulGated(dst, x []float32, m int, gate, up *gpu.Weight, gelu bool) bool {
	pg, pu := d.panels(gate, m), d.panels(up, m)
	if pg == nil || pu == nil || gate.Rows != up.Rows || gate.Cols != up.Cols {
		return false
	}
	d.checkMatMul("MatMulGated", dst, x, m, gate)
	epi := C.int(C.TR_EPI_SILU)
	if gelu {
		epi = C.TR_EPI_GELU
	}
	d.matMulPanel(dst, x, m, gate, up, pg, pu, epi)
	return true
}

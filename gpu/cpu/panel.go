package cpu

/*
#include "tr.h"
*/
import "C"

import (
	"fmt"
	"runtime"
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

// PackWeight implements gpu.Packer. On the avx512bf16 kernels it gives a
// BF16 weight a copy in the panel layout of the prefill matmul (the same
// bytes as the weight, rounded up to whole panels of 32 rows), so that
// prefill matmuls read it as it is instead of transposing and widening
// every panel on every call. Other weights and kernel sets are left alone,
// and so are all weights on a FastBF16 device (its prefill kernel reads them
// as they are).
func (d *Device) PackWeight(w *gpu.Weight) int64 {
	if d.fast || d.noPanels || w.DType != gpu.BF16 || w.Rows <= 0 || w.Cols <= 0 || len(w.Data) < w.Rows*w.Cols*2 {
		return 0
	}
	if p := w.Packed(); p != nil && p.Layout == panelLayout {
		return 0
	}
	d.lock()
	defer d.mu.Unlock()
	if C.tr_panel_supported(d.ctx) == 0 {
		return 0
	}
	n := int(C.tr_panel_bytes(C.long(w.Rows), C.long(w.Cols)))
	// Aligned to a cache line: the kernel loads 64 bytes per k.
	buf := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & 63)
	buf = buf[off : off+n : off+n]
	C.tr_panel_pack(d.ctx, (*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(buf))),
		(*C.uint16_t)(unsafe.Pointer(unsafe.SliceData(w.Data))), C.long(w.Rows), C.long(w.Cols))
	runtime.KeepAlive(w)
	w.SetPacked(&gpu.Packed{Layout: panelLayout, Data: buf})
	return int64(n)
}

// panels returns w's panel copy when a matmul of m rows should use it.
func (d *Device) panels(w *gpu.Weight, m int) unsafe.Pointer {
	if m < panelMinRows || d.fast || d.noPanels || w.DType != gpu.BF16 {
		return nil
	}
	p := w.Packed()
	if p == nil || p.Layout != panelLayout || len(p.Data) != int(C.tr_panel_bytes(C.long(w.Rows), C.long(w.Cols))) {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(p.Data))
}

func (d *Device) checkMatMul(op string, dst, x []float32, m int, w *gpu.Weight) {
	n, k := w.Rows, w.Cols
	need(op+" x", len(x), m*k)
	need(op+" dst", len(dst), m*n)
	if n <= 0 || k <= 0 || len(w.Data) < n*k*w.DType.Size() || w.DType.Size() == 0 {
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

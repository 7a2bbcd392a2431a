//go:build cgo

package kernels

/*
#cgo CXXFLAGS: -std=c++20 -O2
#cgo LDFLAGS: -lstdc++ -lpthread -lm
#include "host.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
)

// The functions below launch the kernels on the host (cuhost.h) for the
// tests: the same argument layout the CUDA backend passes to cuLaunchKernel.
// grid and block are the launch shape; the kernels' comments say which
// shapes each accepts.

func fp(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

func ip(x []int32) *C.int {
	if len(x) == 0 {
		return nil
	}
	return (*C.int)(unsafe.Pointer(&x[0]))
}

// hostSelftestReverse runs host.cc's shim check: every block of block
// threads reverses its part of in through shared memory and adds its first
// element; threads at or past active leave the block early.
func hostSelftestReverse(out, in []float32, block, active int) {
	C.tkh_selftest_reverse(fp(out), fp(in), C.int(len(in)/block), C.int(block), C.int(active))
}

// hostSelftestUninit returns 4 floats of shared memory no thread wrote.
func hostSelftestUninit() []float32 {
	out := make([]float32, 4)
	C.tkh_selftest_uninit(fp(out))
	return out
}

// hostSelftestDiverge launches a kernel with a divergent __syncthreads:
// the shim aborts the process.
func hostSelftestDiverge() {
	out := make([]float32, 4)
	C.tkh_selftest_diverge(fp(out))
}

func hostAdd(dst, a, b []float32, grid, block int) {
	C.tkh_add(fp(dst), fp(a), fp(b), C.longlong(len(dst)), C.int(grid), C.int(block))
}

func hostAddBias(x, bias []float32, grid, block int) {
	C.tkh_add_bias(fp(x), fp(bias), C.longlong(len(x)), C.int(len(bias)), C.int(grid), C.int(block))
}

func hostSiLUMul(dst, gate, up []float32, grid, block int) {
	C.tkh_silu_mul(fp(dst), fp(gate), fp(up), C.longlong(len(dst)), C.int(grid), C.int(block))
}

func hostGELUTanhMul(dst, gate, up []float32, grid, block int) {
	C.tkh_gelu_mul(fp(dst), fp(gate), fp(up), C.longlong(len(dst)), C.int(grid), C.int(block))
}

func hostSoftcap(x []float32, c float32, grid, block int) {
	C.tkh_softcap(fp(x), C.longlong(len(x)), C.float(c), C.int(grid), C.int(block))
}

func hostScale(x []float32, s float32, grid, block int) {
	C.tkh_scale(fp(x), C.longlong(len(x)), C.float(s), C.int(grid), C.int(block))
}

func hostSoftplus(x []float32, grid, block int) {
	C.tkh_softplus(fp(x), C.longlong(len(x)), C.int(grid), C.int(block))
}

// hostEmbed gathers rows of a F32, BF16 or F16 weight.
func hostEmbed(dst []float32, w *gpu.Weight, ids []int32, block int) {
	var dt C.int
	switch w.DType {
	case gpu.F32:
		dt = 0
	case gpu.BF16:
		dt = 1
	case gpu.F16:
		dt = 2
	default:
		panic(fmt.Sprintf("kernels: embed of %v", w.DType))
	}
	C.tkh_embed(fp(dst), unsafe.Pointer(&w.Data[0]), dt, ip(ids), C.int(len(ids)), C.int(w.Cols), C.int(block))
}

func hostRMSNorm(dst, x, w []float32, n int, eps float32, unitOffset bool, block int) {
	u := C.int(0)
	if unitOffset {
		u = 1
	}
	C.tkh_rmsnorm(fp(dst), fp(x), fp(w), C.int(len(x)/n), C.int(n), C.float(eps), u, C.int(block))
}

func hostRMSNormGated(dst, x, gate, w []float32, n, group int, eps float32, block int) {
	C.tkh_rmsnorm_gated(fp(dst), fp(x), fp(gate), fp(w), C.int(len(x)/n), C.int(n), C.int(group), C.float(eps), C.int(block))
}

func hostRoPE(x []float32, heads, headDim int, cos, sin []float32, block int) {
	rows := len(x) / (heads * headDim)
	C.tkh_rope(fp(x), fp(cos), fp(sin), C.int(rows), C.int(heads), C.int(headDim), C.int(len(cos)/rows), C.int(block))
}

// attnRows flattens seqs into what tk_attn_paged reads: the concatenated
// page tables, and per query row the offset of its sequence's table and its
// position.
func attnRows(seqs []gpu.AttnSeq, rows int) (pages, ptab, pos []int32) {
	ptab = make([]int32, rows)
	pos = make([]int32, rows)
	for _, s := range seqs {
		off := int32(len(pages))
		pages = append(pages, s.Pages...)
		for r := 0; r < s.N; r++ {
			ptab[s.Row+r] = off
			pos[s.Row+r] = int32(s.Pos + r)
		}
	}
	return pages, ptab, pos
}

// hostAttention is Device.Attention through tk_attn_paged; seqs must cover
// rows [0, rows) of q.
func hostAttention(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams, block int) {
	rows := len(q) / (p.Heads * p.HeadDim)
	pages, ptab, pos := attnRows(seqs, rows)
	C.tkh_attn_paged(fp(out), fp(q), fp(kv.K), fp(kv.V), ip(pages), ip(ptab), ip(pos), C.int(rows),
		C.int(kv.PageSize), C.int(kv.Dim), C.int(p.Heads), C.int(p.KVHeads), C.int(p.HeadDim),
		C.float(p.Scale), C.int(p.Window), C.float(p.Softcap), C.int(block))
}

// prefillTileRows is the query tile of tk_attn_paged_prefill (TK_PF_BQ).
const prefillTileRows = 16

// hostAttentionPrefill is Device.Attention through tk_attn_paged_prefill:
// each sequence's rows split into tiles of up to prefillTileRows.
func hostAttentionPrefill(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams, block int) {
	rows := len(q) / (p.Heads * p.HeadDim)
	pages, ptab, pos := attnRows(seqs, rows)
	var tileRow, tileN []int32
	for _, s := range seqs {
		for r := 0; r < s.N; r += prefillTileRows {
			tileRow = append(tileRow, int32(s.Row+r))
			tileN = append(tileN, int32(min(prefillTileRows, s.N-r)))
		}
	}
	C.tkh_attn_paged_prefill(fp(out), fp(q), fp(kv.K), fp(kv.V), ip(pages), ip(ptab), ip(pos), ip(tileRow), ip(tileN),
		C.int(len(tileRow)), C.int(kv.PageSize), C.int(kv.Dim), C.int(p.Heads), C.int(p.KVHeads), C.int(p.HeadDim),
		C.float(p.Scale), C.int(p.Window), C.float(p.Softcap), C.int(block))
}

// recSeq is a gpu.RecSeq whose state lives at states[Off:] of one buffer
// shared by the call's sequences (the device keeps all state slots in one
// allocation, so the kernels take offsets).
type recSeq struct{ Row, N, Off int }

func recArrays(seqs []recSeq, stateOffset int) (row, n []int32, off []int64) {
	for _, s := range seqs {
		row = append(row, int32(s.Row))
		n = append(n, int32(s.N))
		off = append(off, int64(s.Off+stateOffset))
	}
	return row, n, off
}

func hostCausalConv1D(out, x []float32, p gpu.ConvParams, states []float32, seqs []recSeq, block int) {
	row, n, off := recArrays(seqs, p.StateOffset)
	silu := C.int(0)
	if p.SiLU {
		silu = 1
	}
	C.tkh_causal_conv1d(fp(out), fp(x), fp(p.Weight), fp(p.Bias), fp(states), (*C.longlong)(unsafe.Pointer(&off[0])),
		ip(row), ip(n), C.int(len(seqs)), C.int(p.Channels), C.int(p.Width), silu, C.int(block))
}

func hostSelectiveScan(y, x, dt, B, Cm []float32, p gpu.ScanParams, states []float32, seqs []recSeq, block int) {
	row, n, off := recArrays(seqs, p.StateOffset)
	C.tkh_selective_scan(fp(y), fp(x), fp(dt), fp(B), fp(Cm), fp(p.A), fp(p.D), fp(states), (*C.longlong)(unsafe.Pointer(&off[0])),
		ip(row), ip(n), C.int(len(seqs)), C.int(p.Heads), C.int(p.HeadDim), C.int(p.StateDim), C.int(p.Groups), C.int(block))
}

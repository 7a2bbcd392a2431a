//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
	"gorgonia.org/cu"
)

// MatMul implements gpu.Device with cuBLAS: cublasSgemm_v2 on float32
// weights (F32, and the others widened at upload), cublasGemmEx on 16-bit
// ones under Options.Half16 (the activations rounded to the weights' type).
func (d *Device) MatMul(dst, x []float32, m int, w *gpu.Weight) {
	if m <= 0 {
		return
	}
	n, k := w.Rows, w.Cols
	need("MatMul", "x", len(x), m*k)
	need("MatMul", "dst", len(dst), m*n)
	d.run("MatMul", nil, func() error {
		dw, err := d.weight(w)
		if err != nil {
			return err
		}
		var xp cu.DevicePtr
		xType := blasF32
		switch dw.dtype {
		case gpu.F32:
			xp, err = d.putF32(0, x[:m*k])
		case gpu.BF16, gpu.F16:
			h := make([]uint16, m*k)
			conv, t := gpu.F32ToBF16, blasBF16
			if dw.dtype == gpu.F16 {
				conv, t = gpu.F32ToF16, blasF16
			}
			for i, v := range x[:m*k] {
				h[i] = conv(v)
			}
			xType = t
			xp, err = d.put(0, unsafe.Pointer(unsafe.SliceData(h)), int64(2*len(h)))
		default:
			return fmt.Errorf("weights stored as %v", dw.dtype)
		}
		if err != nil {
			return err
		}
		out, err := d.scratch(1, int64(4*m*n))
		if err != nil {
			return err
		}
		wType := blasF32
		switch dw.dtype {
		case gpu.BF16:
			wType = blasBF16
		case gpu.F16:
			wType = blasF16
		}
		if err := d.blas.matMulT(uintptr(out), uintptr(xp), uintptr(dw.ptr), m, n, k, wType, xType); err != nil {
			return err
		}
		return d.get(dst[:m*n], 1)
	}, nil)
}

// Embed implements gpu.Device: the tk_embed kernels on the uploaded
// weights; quantized weights are dequantized row by row on the host (as
// the CPU backend does: a few rows per token).
func (d *Device) Embed(dst []float32, w *gpu.Weight, ids []int32) {
	if len(ids) == 0 {
		return
	}
	need("Embed", "dst", len(dst), len(ids)*w.Cols)
	for _, id := range ids {
		if id < 0 || int(id) >= w.Rows {
			panic(fmt.Sprintf("gpu/cuda: Embed: id %d out of range [0, %d)", id, w.Rows))
		}
	}
	if w.DType.Quantized() {
		for i, id := range ids {
			w.Row(dst[i*w.Cols:(i+1)*w.Cols], int(id))
		}
		return
	}
	k := kEmbedF32
	switch {
	case w.DType == gpu.BF16 && d.opts.Half16:
		k = kEmbedBF16
	case w.DType == gpu.F16 && d.opts.Half16:
		k = kEmbedF16
	}
	d.run("Embed", []kernelID{k}, func() error {
		dw, err := d.weight(w)
		if err != nil {
			return err
		}
		idp, err := d.putI32(0, ids)
		if err != nil {
			return err
		}
		out, err := d.scratch(1, int64(4*len(ids)*w.Cols))
		if err != nil {
			return err
		}
		if err := d.launch(k, [3]int{len(ids), 1, 1}, [3]int{256, 1, 1}, out, dw.ptr, idp, int32(w.Cols)); err != nil {
			return err
		}
		return d.get(dst[:len(ids)*w.Cols], 1)
	}, func() { d.ref.Embed(dst, w, ids) })
}

// RMSNorm implements gpu.Device (tk_rmsnorm).
func (d *Device) RMSNorm(dst, x, w []float32, n int, eps float32, unitOffset bool) {
	if len(x) == 0 || n <= 0 {
		return
	}
	rows := len(x) / n
	need("RMSNorm", "dst", len(dst), rows*n)
	need("RMSNorm", "w", len(w), n)
	u := int32(0)
	if unitOffset {
		u = 1
	}
	d.run("RMSNorm", []kernelID{kRMSNorm}, func() error {
		xp, err := d.putF32(0, x[:rows*n])
		if err != nil {
			return err
		}
		wp, err := d.putF32(1, w[:n])
		if err != nil {
			return err
		}
		out, err := d.scratch(2, int64(4*rows*n))
		if err != nil {
			return err
		}
		if err := d.launch(kRMSNorm, [3]int{rows, 1, 1}, [3]int{pow2Block(n), 1, 1}, out, xp, wp, int32(n), eps, u); err != nil {
			return err
		}
		return d.get(dst[:rows*n], 2)
	}, func() { d.ref.RMSNorm(dst, x, w, n, eps, unitOffset) })
}

// RoPE implements gpu.Device (tk_rope).
func (d *Device) RoPE(x []float32, heads, headDim int, cos, sin []float32) {
	rows, half, err := gpu.RoPEShape(x, heads, headDim, cos, sin)
	if err != nil {
		panic("gpu/cuda: " + err.Error())
	}
	if rows == 0 || half == 0 {
		return
	}
	d.run("RoPE", []kernelID{kRoPE}, func() error {
		xp, err := d.putF32(0, x[:rows*heads*headDim])
		if err != nil {
			return err
		}
		cp, err := d.putF32(1, cos[:rows*half])
		if err != nil {
			return err
		}
		sp, err := d.putF32(2, sin[:rows*half])
		if err != nil {
			return err
		}
		if err := d.launch(kRoPE, [3]int{rows, 1, 1}, [3]int{pow2Block(heads * half), 1, 1},
			xp, cp, sp, int32(heads), int32(headDim), int32(half)); err != nil {
			return err
		}
		return d.get(x[:rows*heads*headDim], 0)
	}, func() { d.ref.RoPE(x, heads, headDim, cos, sin) })
}

// AddBias implements gpu.Device (tk_add_bias).
func (d *Device) AddBias(x, bias []float32) {
	if len(x) == 0 || len(bias) == 0 {
		return
	}
	d.run("AddBias", []kernelID{kAddBias}, func() error {
		xp, err := d.putF32(0, x)
		if err != nil {
			return err
		}
		bp, err := d.putF32(1, bias)
		if err != nil {
			return err
		}
		if err := d.launch(kAddBias, ewGrid(len(x)), [3]int{ewBlock, 1, 1}, xp, bp, int64(len(x)), int32(len(bias))); err != nil {
			return err
		}
		return d.get(x, 0)
	}, func() { d.ref.AddBias(x, bias) })
}

// binary runs a kernel (dst, a, b, n) over len(dst) elements.
func (d *Device) binary(op string, k kernelID, dst, a, b []float32, host func()) {
	if len(dst) == 0 {
		return
	}
	n := len(dst)
	need(op, "a", len(a), n)
	need(op, "b", len(b), n)
	d.run(op, []kernelID{k}, func() error {
		ap, err := d.putF32(0, a[:n])
		if err != nil {
			return err
		}
		bp, err := d.putF32(1, b[:n])
		if err != nil {
			return err
		}
		out, err := d.scratch(2, int64(4*n))
		if err != nil {
			return err
		}
		if err := d.launch(k, ewGrid(n), [3]int{ewBlock, 1, 1}, out, ap, bp, int64(n)); err != nil {
			return err
		}
		return d.get(dst[:n], 2)
	}, host)
}

// Add implements gpu.Device (tk_add).
func (d *Device) Add(dst, a, b []float32) {
	d.binary("Add", kAdd, dst, a, b, func() { d.ref.Add(dst, a, b) })
}

// SiLUMul implements gpu.Device (tk_silu_mul).
func (d *Device) SiLUMul(dst, gate, up []float32) {
	d.binary("SiLUMul", kSiLUMul, dst, gate, up, func() { d.ref.SiLUMul(dst, gate, up) })
}

// GELUTanhMul implements gpu.Device (tk_gelu_mul).
func (d *Device) GELUTanhMul(dst, gate, up []float32) {
	d.binary("GELUTanhMul", kGELUMul, dst, gate, up, func() { d.ref.GELUTanhMul(dst, gate, up) })
}

// unary runs a kernel (x, n[, c]) in place over x.
func (d *Device) unary(op string, k kernelID, x []float32, c *float32, host func()) {
	if len(x) == 0 {
		return
	}
	d.run(op, []kernelID{k}, func() error {
		xp, err := d.putF32(0, x)
		if err != nil {
			return err
		}
		args := []any{xp, int64(len(x))}
		if c != nil {
			args = append(args, *c)
		}
		if err := d.launch(k, ewGrid(len(x)), [3]int{ewBlock, 1, 1}, args...); err != nil {
			return err
		}
		return d.get(x, 0)
	}, host)
}

// Softcap implements gpu.Device (tk_softcap).
func (d *Device) Softcap(x []float32, c float32) {
	d.unary("Softcap", kSoftcap, x, &c, func() { d.ref.Softcap(x, c) })
}

// Scale implements gpu.Device (tk_scale).
func (d *Device) Scale(x []float32, s float32) {
	d.unary("Scale", kScale, x, &s, func() { d.ref.Scale(x, s) })
}

// Softplus implements gpu.Device (tk_softplus).
func (d *Device) Softplus(x []float32) {
	d.unary("Softplus", kSoftplus, x, nil, func() { d.ref.Softplus(x) })
}

// RMSNormGated implements gpu.Device (tk_rmsnorm_gated).
func (d *Device) RMSNormGated(dst, x, gate, w []float32, n, group int, eps float32) {
	if len(x) == 0 || n <= 0 || group <= 0 {
		return
	}
	if n%group != 0 {
		panic(fmt.Sprintf("gpu/cuda: RMSNormGated: row of %d is not a whole number of groups of %d", n, group))
	}
	rows := len(x) / n
	need("RMSNormGated", "dst", len(dst), rows*n)
	need("RMSNormGated", "gate", len(gate), rows*n)
	need("RMSNormGated", "w", len(w), n)
	d.run("RMSNormGated", []kernelID{kRMSNormGated}, func() error {
		xp, err := d.putF32(0, x[:rows*n])
		if err != nil {
			return err
		}
		gp, err := d.putF32(1, gate[:rows*n])
		if err != nil {
			return err
		}
		wp, err := d.putF32(2, w[:n])
		if err != nil {
			return err
		}
		out, err := d.scratch(3, int64(4*rows*n))
		if err != nil {
			return err
		}
		if err := d.launch(kRMSNormGated, [3]int{rows, n / group, 1}, [3]int{pow2Block(group), 1, 1},
			out, xp, gp, wp, int32(n), int32(group), eps); err != nil {
			return err
		}
		return d.get(dst[:rows*n], 3)
	}, func() { d.ref.RMSNormGated(dst, x, gate, w, n, group, eps) })
}

// attnMaxHeadDim is the largest head the attention kernel takes.
const attnMaxHeadDim = 256

// Attention implements gpu.Device (tk_attn_paged). The KV pages are host
// memory (gpu.KVLayer), so each call uploads the part of K and V that the
// sequences' page tables reach; heads wider than the kernel's limit run on
// the host.
func (d *Device) Attention(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams) {
	if len(seqs) == 0 {
		return
	}
	if p.Heads <= 0 || p.KVHeads <= 0 || p.HeadDim <= 0 || p.Heads%p.KVHeads != 0 {
		panic(fmt.Sprintf("gpu/cuda: Attention: bad heads %d/%d, head dim %d", p.Heads, p.KVHeads, p.HeadDim))
	}
	if kv.PageSize <= 0 || kv.Dim < p.KVHeads*p.HeadDim {
		panic(fmt.Sprintf("gpu/cuda: Attention: KV page size %d, dim %d for %d kv heads of %d", kv.PageSize, kv.Dim, p.KVHeads, p.HeadDim))
	}
	qdim := p.Heads * p.HeadDim
	slots := min(len(kv.K), len(kv.V)) / kv.Dim
	rows, maxPage := 0, -1
	var pages []int32
	rowPos, rowTab := []int32(nil), []int32(nil)
	for _, s := range seqs {
		if s.N <= 0 {
			continue
		}
		if s.Row < 0 || s.Pos < 0 {
			panic("gpu/cuda: Attention: negative row or position")
		}
		need("Attention", "q", len(q), (s.Row+s.N)*qdim)
		need("Attention", "out", len(out), (s.Row+s.N)*qdim)
		np := (s.Pos + s.N + kv.PageSize - 1) / kv.PageSize
		need("Attention", "page table", len(s.Pages), np)
		for _, pg := range s.Pages[:np] {
			if pg < 0 || (int(pg)+1)*kv.PageSize > slots {
				panic(fmt.Sprintf("gpu/cuda: Attention: page %d outside the KV storage", pg))
			}
			maxPage = max(maxPage, int(pg))
		}
		if end := s.Row + s.N; end > rows {
			rowPos = append(rowPos, make([]int32, end-rows)...)
			rowTab = append(rowTab, make([]int32, end-rows)...)
			for i := rows; i < end; i++ {
				rowPos[i] = -1 // a row no sequence covers attends to nothing; it is not copied back
			}
			rows = end
		}
		for r := 0; r < s.N; r++ {
			rowPos[s.Row+r] = int32(s.Pos + r)
			rowTab[s.Row+r] = int32(len(pages))
		}
		pages = append(pages, s.Pages[:np]...)
	}
	if rows == 0 {
		return
	}
	if p.HeadDim > attnMaxHeadDim {
		d.hostOnly("Attention", fmt.Sprintf("head dim %d exceeds the kernel's %d", p.HeadDim, attnMaxHeadDim),
			func() { d.ref.Attention(out, q, kv, seqs, p) })
		return
	}
	d.run("Attention", []kernelID{kAttnPaged}, func() error {
		kvLen := (maxPage + 1) * kv.PageSize * kv.Dim
		qp, err := d.putF32(0, q[:rows*qdim])
		if err != nil {
			return err
		}
		kp, err := d.putF32(1, kv.K[:kvLen])
		if err != nil {
			return err
		}
		vp, err := d.putF32(2, kv.V[:kvLen])
		if err != nil {
			return err
		}
		pp, err := d.putI32(3, pages)
		if err != nil {
			return err
		}
		tp, err := d.putI32(4, rowTab)
		if err != nil {
			return err
		}
		rp, err := d.putI32(5, rowPos)
		if err != nil {
			return err
		}
		op, err := d.scratch(6, int64(4*rows*qdim))
		if err != nil {
			return err
		}
		if err := d.launch(kAttnPaged, [3]int{p.Heads, rows, 1}, [3]int{128, 1, 1}, op, qp, kp, vp, pp, tp, rp,
			int32(kv.PageSize), int32(kv.Dim), int32(p.Heads), int32(p.KVHeads), int32(p.HeadDim), p.Scale,
			int32(p.Window), p.Softcap); err != nil {
			return err
		}
		res := make([]float32, rows*qdim)
		if err := d.get(res, 6); err != nil {
			return err
		}
		for r, pos := range rowPos {
			if pos >= 0 {
				copy(out[r*qdim:(r+1)*qdim], res[r*qdim:(r+1)*qdim])
			}
		}
		return nil
	}, func() { d.ref.Attention(out, q, kv, seqs, p) })
}

// noKernel is why the recurrent operations run on the host.
const noKernel = "its kernel (tk_causal_conv1d, tk_selective_scan) is not wired into the device yet"

// CausalConv1D implements gpu.Device on the host (gpu/ref): there is no
// kernel for it yet.
func (d *Device) CausalConv1D(out, x []float32, p gpu.ConvParams, seqs []gpu.RecSeq) {
	d.hostOnly("CausalConv1D", noKernel, func() { d.ref.CausalConv1D(out, x, p, seqs) })
}

// SelectiveScan implements gpu.Device on the host (gpu/ref): there is no
// kernel for it yet.
func (d *Device) SelectiveScan(y, x, dt, B, C []float32, p gpu.ScanParams, seqs []gpu.RecSeq) {
	d.hostOnly("SelectiveScan", noKernel, func() { d.ref.SelectiveScan(y, x, dt, B, C, p, seqs) })
}

// hostOnly runs op on the host (gpu/ref) for the reason why, logged once.
func (d *Device) hostOnly(op, why string, host func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		panic("gpu/cuda: " + op + ": device used after Close")
	}
	d.fallBack(op, why)
	host()
}

package model

import (
	"fmt"
	"slices"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
)

// This file holds the pieces every family's forward pass is built from: the
// per-step workspace, attention over the paged KV cache, the gated MLP and the
// output head. Families differ in how they arrange them (see transformer.go
// for the dense decoders, hybrid.go for the state-space ones).

// workspace holds the activations of one step, grown as needed and reused.
type workspace struct {
	T                  int // rows (tokens) in the step
	ids                []int32
	x, h, o            []float32
	q, k, v, att       []float32
	gate, up           []float32
	rows, logits       []float32
	ropes              []ropeTable
	attn               []gpu.AttnSeq
	rec                []gpu.RecSeq
	conv, xz, dt, b, c []float32 // state-space layers
	router             []float32
	moeIn, moeOut      []float32
	moeRows            []int32
	fused              []float32 // output of a joined projection before the split
	dsts               [][]float32
}

type ropeTable struct {
	rope     *Rope
	cos, sin []float32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// begin checks a step's sequences against the pool and the vocabulary and
// lays out its rows; it returns the number of logit rows asked for.
func (ws *workspace) begin(pool *kvcache.Pool, seqs []Seq, vocab int, needPages, needSlot bool) (int, error) {
	T, R := 0, 0
	ws.ids, ws.attn = ws.ids[:0], ws.attn[:0]
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return 0, fmt.Errorf("model: sequence %d has no tokens", i)
		}
		end := s.Pos + len(s.Tokens)
		if needPages && len(s.Pages)*pool.PageSize() < end {
			return 0, fmt.Errorf("model: sequence %d needs %d positions, its page table covers %d", i, end, len(s.Pages)*pool.PageSize())
		}
		if needSlot && s.Slot == 0 {
			return 0, fmt.Errorf("model: sequence %d has no recurrent state slot", i)
		}
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= vocab {
				return 0, fmt.Errorf("model: token id %d out of range [0, %d)", id, vocab)
			}
		}
		ws.ids = append(ws.ids, s.Tokens...)
		ws.attn = append(ws.attn, gpu.AttnSeq{Row: T, N: len(s.Tokens), Pos: s.Pos, Pages: s.Pages})
		T += len(s.Tokens)
		switch s.Logits {
		case LastLogits:
			R++
		case AllLogits:
			R += len(s.Tokens)
		}
	}
	ws.T = T
	return R, nil
}

// buildRopes fills one cos/sin table per distinct Rope for the step's
// positions.
func (ws *workspace) buildRopes(ropes []*Rope, seqs []Seq) {
	ws.ropes = ws.ropes[:0]
	for _, r := range ropes {
		if r == nil || ws.ropeFor(r) != nil {
			continue
		}
		half := r.Dim / 2
		rt := ropeTable{rope: r, cos: make([]float32, ws.T*half), sin: make([]float32, ws.T*half)}
		row := 0
		for _, s := range seqs {
			inv := r.freqs(s.Pos + len(s.Tokens))
			for i := range s.Tokens {
				r.fill(rt.cos[row*half:(row+1)*half], rt.sin[row*half:(row+1)*half], inv, s.Pos+i)
				row++
			}
		}
		ws.ropes = append(ws.ropes, rt)
	}
}

func (ws *workspace) ropeFor(r *Rope) *ropeTable {
	for i := range ws.ropes {
		if ws.ropes[i].rope == r {
			return &ws.ropes[i]
		}
	}
	return nil
}

// head computes the logits of the rows that asked for them: final norm, the
// output projection and optional soft-capping.
type head struct {
	norm     []float32
	eps      float32
	unitNorm bool
	lmHead   *gpu.Weight
	softcap  float32
}

func (hd *head) logits(dev gpu.Device, ws *workspace, seqs []Seq, x []float32, R, H int) []float32 {
	if R == 0 {
		return nil
	}
	ws.rows = grow(ws.rows, R*H)
	r := 0
	for i, s := range seqs {
		a := ws.attn[i]
		switch s.Logits {
		case LastLogits:
			copy(ws.rows[r*H:(r+1)*H], x[(a.Row+a.N-1)*H:])
			r++
		case AllLogits:
			copy(ws.rows[r*H:(r+a.N)*H], x[a.Row*H:])
			r += a.N
		}
	}
	dev.RMSNorm(ws.rows, ws.rows, hd.norm, H, hd.eps, hd.unitNorm)
	ws.logits = grow(ws.logits, R*hd.lmHead.Rows)
	dev.MatMul(ws.logits, ws.rows, R, hd.lmHead)
	if hd.softcap > 0 {
		dev.Softcap(ws.logits, hd.softcap)
	}
	return ws.logits
}

// fuseRows is the largest step (in rows) that runs the q/k/v and gate/up
// projections as one matmul each: decode steps are bound by dispatch and
// weight streaming, so one call over the concatenated weights beats three;
// large prefill chunks skip the split copy and use views of the same memory.
const fuseRows = 64

// concatRows joins weights of one dtype and width, as returned by
// w.mapped, into one matrix in the weight memory (rows in order) and
// returns it with views of the parts. Weights of mixed dtypes are returned
// unjoined (nil), each in the weight memory.
func concatRows(w *Weights, parts ...*gpu.Weight) (*gpu.Weight, []*gpu.Weight) {
	rows, size := 0, 0
	for _, p := range parts {
		if p == nil || p.DType != parts[0].DType || p.Cols != parts[0].Cols {
			for i := range parts {
				parts[i] = w.own(parts[i])
			}
			return nil, parts
		}
		rows += p.Rows
		size += len(p.Data)
	}
	data := w.alloc(size)
	if data == nil {
		return nil, make([]*gpu.Weight, len(parts))
	}
	data = data[:0]
	for _, p := range parts {
		data = append(data, p.Data...)
		if w.arena != nil {
			w.drop(p.Data)
		}
	}
	joined := &gpu.Weight{DType: parts[0].DType, Rows: rows, Cols: parts[0].Cols, Data: data}
	views := make([]*gpu.Weight, len(parts))
	r := 0
	for i, p := range parts {
		views[i] = joined.RowSlice(r, r+p.Rows)
		r += p.Rows
	}
	return joined, views
}

// splitRows copies the column blocks of each of rows rows of src (widths
// summing to src's width) into dsts.
func splitRows(src []float32, rows int, dsts [][]float32, widths []int) {
	n := 0
	for _, w := range widths {
		n += w
	}
	for r := 0; r < rows; r++ {
		off := r * n
		for i, d := range dsts {
			copy(d[r*widths[i]:(r+1)*widths[i]], src[off:off+widths[i]])
			off += widths[i]
		}
	}
}

// attention is one multi-head attention block with grouped KV heads.
type attention struct {
	wqkv                    *gpu.Weight // q, k and v rows joined (views below share it)
	wq, wk, wv, wo          *gpu.Weight
	qkv                     []*gpu.Weight // wq, wk, wv
	bq, bk, bv, bo          []float32
	qNorm, kNorm            []float32 // per-head RMSNorm before RoPE (Qwen3, Gemma 3)
	heads, kvHeads, headDim int
	scale, softcap          float32
	window                  int
	rope                    *Rope // nil: no positional encoding (Jamba)
	eps                     float32
	unitNorm                bool
}

// loadAttention reads q/k/v/o projections under prefix (e.g.
// "model.layers.3.self_attn."), fused as Phi-3's qkv_proj when fused is set.
func loadAttention(w *Weights, prefix string, a attention, hidden int, fused, qkvBias, oBias, qkNorm bool) attention {
	Q, KV := a.heads*a.headDim, a.kvHeads*a.headDim
	if fused {
		a.wqkv = w.Matrix(prefix+"qkv_proj.weight", Q+2*KV, hidden)
		if a.wqkv != nil {
			a.wq, a.wk, a.wv = a.wqkv.RowSlice(0, Q), a.wqkv.RowSlice(Q, Q+KV), a.wqkv.RowSlice(Q+KV, Q+2*KV)
		}
	} else {
		var views []*gpu.Weight
		a.wqkv, views = concatRows(w, w.mapped(prefix+"q_proj.weight", Q, hidden),
			w.mapped(prefix+"k_proj.weight", KV, hidden), w.mapped(prefix+"v_proj.weight", KV, hidden))
		a.wq, a.wk, a.wv = views[0], views[1], views[2]
	}
	a.qkv = []*gpu.Weight{a.wq, a.wk, a.wv}
	a.wo = w.Matrix(prefix+"o_proj.weight", hidden, Q)
	if qkvBias {
		a.bq = w.Vector(prefix+"q_proj.bias", Q)
		a.bk = w.Vector(prefix+"k_proj.bias", KV)
		a.bv = w.Vector(prefix+"v_proj.bias", KV)
	}
	if oBias {
		a.bo = w.Vector(prefix+"o_proj.bias", hidden)
	}
	if qkNorm {
		a.qNorm = w.Vector(prefix+"q_norm.weight", a.headDim)
		a.kNorm = w.Vector(prefix+"k_norm.weight", a.headDim)
	}
	return a
}

func (a *attention) cache() LayerCache {
	kind := FullAttention
	if a.window > 0 {
		kind = WindowedAttention
	}
	return LayerCache{Kind: kind, KVHeads: a.kvHeads, HeadDim: a.headDim, Window: a.window}
}

// forward: out = o_proj(attention(q, k, v)) for the normalised rows in; the
// step's keys and values are stored into kv first.
func (a *attention) forward(dev gpu.Device, ws *workspace, kv *gpu.KVLayer, in, out []float32) {
	a.attend(dev, ws, kv, in)
	dev.MatMul(out, ws.att, ws.T, a.wo)
	if a.bo != nil {
		dev.AddBias(out, a.bo)
	}
}

// forwardAdd is forward with the result added to x (the residual stream):
// x += o_proj(attention(...)), in the matmul's epilogue where the device
// fuses it.
func (a *attention) forwardAdd(dev gpu.Device, ws *workspace, kv *gpu.KVLayer, in, x []float32) {
	a.attend(dev, ws, kv, in)
	projectAdd(dev, ws, x, ws.att, ws.T, a.wo, a.bo)
}

// projectAdd: x += in·Wᵀ + b.
func projectAdd(dev gpu.Device, ws *workspace, x, in []float32, rows int, w *gpu.Weight, b []float32) {
	if f, ok := dev.(gpu.FusedMatMul); ok && b == nil && f.MatMulAdd(x, in, rows, w) {
		return
	}
	ws.o = grow(ws.o, rows*w.Rows)
	dev.MatMul(ws.o, in, rows, w)
	if b != nil {
		dev.AddBias(ws.o, b)
	}
	dev.Add(x, x, ws.o)
}

// attend computes attention(q, k, v) for the normalised rows in into ws.att;
// the step's keys and values are stored into kv first.
func (a *attention) attend(dev gpu.Device, ws *workspace, kv *gpu.KVLayer, in []float32) {
	T, D := ws.T, a.headDim
	Q, KV := a.heads*D, a.kvHeads*D
	ws.q, ws.att = grow(ws.q, T*Q), grow(ws.att, T*Q)
	ws.k, ws.v = grow(ws.k, T*KV), grow(ws.v, T*KV)
	ws.dsts = append(ws.dsts[:0], ws.q, ws.k, ws.v)
	if f, ok := dev.(gpu.FusedMatMul); ok && f.MatMulMulti(ws.dsts, in, T, a.qkv) {
		// one pass over the three projections
	} else if a.wqkv != nil && T <= fuseRows {
		ws.fused = grow(ws.fused, T*(Q+2*KV))
		dev.MatMul(ws.fused, in, T, a.wqkv)
		splitRows(ws.fused, T, [][]float32{ws.q, ws.k, ws.v}, []int{Q, KV, KV})
	} else {
		dev.MatMul(ws.q, in, T, a.wq)
		dev.MatMul(ws.k, in, T, a.wk)
		dev.MatMul(ws.v, in, T, a.wv)
	}
	if a.bq != nil {
		dev.AddBias(ws.q, a.bq)
		dev.AddBias(ws.k, a.bk)
		dev.AddBias(ws.v, a.bv)
	}
	if a.qNorm != nil {
		dev.RMSNorm(ws.q, ws.q, a.qNorm, D, a.eps, a.unitNorm)
		dev.RMSNorm(ws.k, ws.k, a.kNorm, D, a.eps, a.unitNorm)
	}
	if a.rope != nil {
		rt := ws.ropeFor(a.rope)
		dev.RoPE(ws.q, a.heads, D, rt.cos, rt.sin)
		dev.RoPE(ws.k, a.kvHeads, D, rt.cos, rt.sin)
	}
	storeKV(kv, ws.k, ws.v, ws.attn)
	dev.Attention(ws.att, ws.q, kv, ws.attn, gpu.AttnParams{
		Heads: a.heads, KVHeads: a.kvHeads, HeadDim: D, Scale: a.scale, Window: a.window, Softcap: a.softcap,
	})
}

// storeKV writes each row's key and value into its sequence's page slot.
func storeKV(kv *gpu.KVLayer, k, v []float32, seqs []gpu.AttnSeq) {
	dim := kv.Dim
	for _, s := range seqs {
		for r := 0; r < s.N; r++ {
			slot := kv.Slot(s.Pages, s.Pos+r)
			src := (s.Row + r) * dim
			copy(kv.K[slot:slot+dim], k[src:src+dim])
			copy(kv.V[slot:slot+dim], v[src:src+dim])
		}
	}
}

// mlp is the gated feed-forward block: down(act(gate(x)) * up(x)).
type mlp struct {
	gateUp            *gpu.Weight // gate and up rows joined (views below share it)
	gate, up, down    *gpu.Weight
	bGate, bUp, bDown []float32
	gelu              bool // gelu_pytorch_tanh instead of SiLU
}

// loadMLP reads gate/up/down projections under prefix (e.g.
// "model.layers.3.mlp."), fused as Phi-3's gate_up_proj when fused is set.
func loadMLP(w *Weights, prefix string, hidden, inter int, fused, bias, gelu bool) mlp {
	m := mlp{gelu: gelu}
	if fused {
		m.gateUp = w.Matrix(prefix+"gate_up_proj.weight", 2*inter, hidden)
		if m.gateUp != nil {
			m.gate, m.up = m.gateUp.RowSlice(0, inter), m.gateUp.RowSlice(inter, 2*inter)
		}
	} else {
		var views []*gpu.Weight
		m.gateUp, views = concatRows(w, w.mapped(prefix+"gate_proj.weight", inter, hidden), w.mapped(prefix+"up_proj.weight", inter, hidden))
		m.gate, m.up = views[0], views[1]
	}
	m.down = w.Matrix(prefix+"down_proj.weight", hidden, inter)
	if bias {
		m.bGate = w.Vector(prefix+"gate_proj.bias", inter)
		m.bUp = w.Vector(prefix+"up_proj.bias", inter)
		m.bDown = w.Vector(prefix+"down_proj.bias", hidden)
	}
	return m
}

// forward computes out = mlp(in) for rows rows.
func (m *mlp) forward(dev gpu.Device, ws *workspace, in, out []float32, rows int) {
	m.activate(dev, ws, in, rows)
	dev.MatMul(out, ws.gate, rows, m.down)
	if m.bDown != nil {
		dev.AddBias(out, m.bDown)
	}
}

// forwardAdd is forward with the result added to x (the residual stream).
func (m *mlp) forwardAdd(dev gpu.Device, ws *workspace, in, x []float32, rows int) {
	m.activate(dev, ws, in, rows)
	projectAdd(dev, ws, x, ws.gate, rows, m.down, m.bDown)
}

// activate computes act(gate(in)) * up(in) into ws.gate, in one fused
// kernel where the device has one.
func (m *mlp) activate(dev gpu.Device, ws *workspace, in []float32, rows int) {
	I := m.gate.Rows
	ws.gate = grow(ws.gate, rows*I)
	if f, ok := dev.(gpu.FusedMatMul); ok && m.bGate == nil && f.MatMulGated(ws.gate, in, rows, m.gate, m.up, m.gelu) {
		return
	}
	ws.up = grow(ws.up, rows*I)
	if m.gateUp != nil && rows <= fuseRows {
		ws.fused = grow(ws.fused, rows*2*I)
		dev.MatMul(ws.fused, in, rows, m.gateUp)
		splitRows(ws.fused, rows, [][]float32{ws.gate, ws.up}, []int{I, I})
	} else {
		dev.MatMul(ws.gate, in, rows, m.gate)
		dev.MatMul(ws.up, in, rows, m.up)
	}
	if m.bGate != nil {
		dev.AddBias(ws.gate, m.bGate)
		dev.AddBias(ws.up, m.bUp)
	}
	if m.gelu {
		dev.GELUTanhMul(ws.gate, ws.gate, ws.up)
	} else {
		dev.SiLUMul(ws.gate, ws.gate, ws.up)
	}
}

// ropesOf lists the distinct RoPEs of the attention blocks.
func ropesOf(blocks []*attention) []*Rope {
	var out []*Rope
	for _, a := range blocks {
		if a != nil && a.rope != nil && !slices.Contains(out, a.rope) {
			out = append(out, a.rope)
		}
	}
	return out
}

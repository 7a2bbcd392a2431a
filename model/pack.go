package model

import (
	"fmt"

	"github.com/troupe-ai/troupe/gpu"
)

// packWeights is implemented by models that can list the weights worth
// packing ahead of time.
type packWeights interface {
	packWeights() []*gpu.Weight
}

// PackWeights has p pack, ahead of time, the weights m multiplies many rows
// by, so that matmuls stop rearranging them on every call. It returns the
// bytes the packed copies add. Weights already packed are left alone, so it
// may be called more than once; models without such a list are left as
// they are.
//
// Which weights: 16-bit layer projections as prefill multiplies them (q, k
// and v apart, gate and up apart: the embedding and output head see one row
// per prompt); quantized ones as decode and batches multiply them (q, k and
// v joined, gate and up joined, as steps of up to fuseRows rows run them),
// and a quantized output head too, which a batch of sequences multiplies
// once per sequence every step.
func PackWeights(m Model, p gpu.Packer) (int64, error) {
	pw, ok := m.(packWeights)
	if !ok {
		return 0, nil
	}
	n, err := p.PackWeights(pw.packWeights())
	if err != nil {
		return 0, fmt.Errorf("model: packing weights: %w", err)
	}
	return n, nil
}

func (d *decoder) packWeights() []*gpu.Weight {
	quantized := func(w *gpu.Weight) bool { return w != nil && w.DType.Quantized() }
	var out []*gpu.Weight
	for i := range d.layers {
		a, f := &d.layers[i].attn, &d.layers[i].mlp
		if quantized(a.wqkv) {
			out = append(out, a.wqkv)
		} else {
			out = append(out, a.wq, a.wk, a.wv)
		}
		out = append(out, a.wo)
		if quantized(f.gateUp) {
			out = append(out, f.gateUp)
		} else {
			out = append(out, f.gate, f.up)
		}
		out = append(out, f.down)
	}
	if quantized(d.head.lmHead) {
		out = append(out, d.head.lmHead)
	}
	return out
}

// reserver is implemented by models that can size their step buffers ahead
// of time.
type reserver interface {
	reserve(rows int)
}

// Reserve sizes m's step buffers for steps of up to rows tokens and writes
// them once, so that the system commits their memory now rather than in the
// first step (troupe generate reserves its one prefill step before timing
// it). Models that grow their buffers otherwise are left as they are.
func Reserve(m Model, rows int) {
	if r, ok := m.(reserver); ok && rows > 0 {
		r.reserve(rows)
	}
}

func (d *decoder) reserve(rows int) {
	c, ws := &d.cfg, &d.ws
	Q, KV := c.heads*c.headDim, c.kvHeads*c.headDim
	for _, b := range []struct {
		s *[]float32
		n int
	}{
		{&ws.x, c.hidden}, {&ws.h, c.hidden}, {&ws.o, c.hidden}, {&ws.q, Q}, {&ws.att, Q},
		{&ws.k, KV}, {&ws.v, KV}, {&ws.gate, c.inter}, {&ws.up, c.inter},
	} {
		*b.s = grow(*b.s, rows*b.n)
		clear(*b.s)
	}
}

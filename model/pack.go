package model

import (
	"fmt"

	"github.com/troupe-ai/troupe/gpu"
)

// prefillWeights is implemented by models that can list the weights they
// multiply whole prompts by.
type prefillWeights interface {
	prefillWeights() []*gpu.Weight
}

// PackWeights has p pack, ahead of time, the weights m multiplies every row
// of a prompt by (the attention and MLP projections of every layer; not the
// embedding or output head, which a prefill step uses for one row only), so
// that prefill matmuls stop rearranging them on every call. It returns the
// bytes the packed copies add. Weights already packed are left alone, so it
// may be called more than once; models without such a list are left as
// they are.
func PackWeights(m Model, p gpu.Packer) (int64, error) {
	pw, ok := m.(prefillWeights)
	if !ok {
		return 0, nil
	}
	n, err := p.PackWeights(pw.prefillWeights())
	if err != nil {
		return 0, fmt.Errorf("model: packing weights: %w", err)
	}
	return n, nil
}

func (d *decoder) prefillWeights() []*gpu.Weight {
	var out []*gpu.Weight
	for i := range d.layers {
		a, f := &d.layers[i].attn, &d.layers[i].mlp
		out = append(out, a.wq, a.wk, a.wv, a.wo, f.gate, f.up, f.down)
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

package model

import "github.com/troupe-ai/troupe/gpu"

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
func PackWeights(m Model, p gpu.Packer) int64 {
	pw, ok := m.(prefillWeights)
	if !ok {
		return 0
	}
	var n int64
	for _, w := range pw.prefillWeights() {
		if w != nil {
			n += p.PackWeight(w)
		}
	}
	return n
}

func (d *decoder) prefillWeights() []*gpu.Weight {
	var out []*gpu.Weight
	for i := range d.layers {
		a, f := &d.layers[i].attn, &d.layers[i].mlp
		out = append(out, a.wq, a.wk, a.wv, a.wo, f.gate, f.up, f.down)
	}
	return out
}

package model_test

import (
	"context"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model"
)

// recordPacker records the weights PackWeights is given.
type recordPacker struct{ ws []*gpu.Weight }

func (p *recordPacker) PackWeights(ws []*gpu.Weight) (int64, error) {
	p.ws = append(p.ws, ws...)
	return 0, nil
}

// TestPackWeightsList: model.PackWeights hands the device the layer
// matrices as each kind of weight is multiplied: 16-bit ones as prefill
// runs them (q, k, v and gate, up apart; no output head), quantized ones
// as decode and batches run them (q/k/v joined, gate/up joined) plus the
// output head, which a batch multiplies once per sequence each step.
func TestPackWeightsList(t *testing.T) {
	dir := tinyHF(t, "qwen3", nil)
	for _, q := range []gpu.DType{0, gpu.Q8_0} {
		m, err := model.LoadWith(context.Background(), dir, model.LoadOptions{Quantize: q})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		info := m.Info()
		var p recordPacker
		if _, err := model.PackWeights(m, &p); err != nil {
			t.Fatal(err)
		}
		perLayer, head := 7, 0
		if q != 0 {
			perLayer, head = 4, 1 // qkv, o, gate_up, down
		}
		if len(p.ws) != info.Layers*perLayer+head {
			t.Fatalf("%v: %d weights to pack, want %d per layer of %d and %d head", q, len(p.ws), perLayer, info.Layers, head)
		}
		heads := 0
		for _, w := range p.ws {
			if w == nil {
				t.Fatalf("%v: a nil weight to pack", q)
			}
			if w.Rows == info.Vocab {
				heads++
			}
			if q != 0 && !w.DType.Quantized() {
				t.Errorf("%v: a %v weight %dx%d among the quantized ones", q, w.DType, w.Rows, w.Cols)
			}
		}
		if heads != head {
			t.Errorf("%v: %d output heads to pack, want %d", q, heads, head)
		}
	}
}

package model

import (
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
)

// hybrid is a stack of pre-norm residual blocks whose mixer is either a Mamba
// mixer or attention, each optionally followed by a feed-forward block (an
// MLP or a mixture of experts): Mamba and Mamba2 (mixers only), Jamba and
// Bamba (both mixers, each followed by a feed-forward block).
type hybrid struct {
	info    Info
	weights *Weights
	hidden  int
	eps     float32
	embed   *gpu.Weight
	layers  []hybridLayer
	head    head
	ropes   []*Rope
	ws      workspace
}

type hybridLayer struct {
	norm    []float32 // before the mixer
	ssm     *ssm
	attn    *attention
	ffnNorm []float32 // before the feed-forward block; nil when there is none
	mlp     *mlp
	moe     *moe
}

// finishHybrid fills in Info and the output head once the layers are loaded.
func finishHybrid(c *Config, w *Weights, h *hybrid, arch, finalNorm string, vocab int, tied bool) (*hybrid, error) {
	h.head = head{norm: w.Vector(finalNorm, h.hidden), eps: h.eps, lmHead: h.embed}
	if !tied {
		h.head.lmHead = w.Matrix("lm_head.weight", vocab, h.hidden)
	}
	var blocks []*attention
	for i := range h.layers {
		blocks = append(blocks, h.layers[i].attn)
	}
	h.ropes = ropesOf(blocks)
	maxPos, err := c.Int("max_position_embeddings", 0)
	if err != nil {
		return nil, err
	}
	if h.info, err = readInfo(c, w, arch, vocab, h.hidden, len(h.layers), maxPos, h.embed); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *hybrid) Info() Info   { return h.info }
func (h *hybrid) Close() error { return h.weights.Close() }

func (h *hybrid) Cache() []LayerCache {
	out := make([]LayerCache, len(h.layers))
	for i, l := range h.layers {
		if l.ssm != nil {
			out[i] = l.ssm.cache()
		} else {
			out[i] = l.attn.cache()
		}
	}
	return out
}

// Forward implements Model.
func (h *hybrid) Forward(dev gpu.Device, pool *kvcache.Pool, seqs []Seq) ([]float32, error) {
	ws := &h.ws
	kv := pool.Layers()
	if len(kv) != len(h.layers) || !pool.HasState() {
		return nil, fmt.Errorf("model: the pool's layout does not match this %s model", h.info.ModelType)
	}
	R, err := ws.begin(pool, seqs, h.info.Vocab, len(h.ropes) > 0 || h.hasAttention(), true)
	if err != nil {
		return nil, err
	}
	T, H := ws.T, h.hidden
	ws.x, ws.o = grow(ws.x, T*H), grow(ws.o, T*H)
	norm := make([]float32, T*H)
	ws.buildRopes(h.ropes, seqs)
	x := ws.x
	dev.Embed(x, h.embed, ws.ids)
	for li := range h.layers {
		l := &h.layers[li]
		dev.RMSNorm(norm, x, l.norm, H, h.eps, false)
		if l.ssm != nil {
			ws.rec = ws.rec[:0]
			for i, s := range seqs {
				a := ws.attn[i]
				ws.rec = append(ws.rec, gpu.RecSeq{Row: a.Row, N: a.N, State: pool.State(li, s.Slot)})
			}
			l.ssm.forward(dev, ws, ws.rec, norm, ws.o)
		} else {
			l.attn.forward(dev, ws, &kv[li], norm, ws.o)
		}
		dev.Add(x, x, ws.o)
		if l.ffnNorm == nil {
			continue
		}
		dev.RMSNorm(norm, x, l.ffnNorm, H, h.eps, false)
		if l.moe != nil {
			l.moe.forward(dev, ws, norm, ws.o, H)
		} else {
			l.mlp.forward(dev, ws, norm, ws.o, T)
		}
		dev.Add(x, x, ws.o)
	}
	return h.head.logits(dev, ws, seqs, x, R, H), nil
}

func (h *hybrid) hasAttention() bool {
	for _, l := range h.layers {
		if l.attn != nil {
			return true
		}
	}
	return false
}

// moe is Jamba's sparse mixture of experts: a softmax router whose top-k
// probabilities (not renormalised) weight the chosen experts' MLP outputs.
type moe struct {
	router  *gpu.Weight
	experts []mlp
	topK    int
}

func (m *moe) forward(dev gpu.Device, ws *workspace, in, out []float32, H int) {
	T, E := ws.T, len(m.experts)
	ws.router = grow(ws.router, T*E)
	dev.MatMul(ws.router, in, T, m.router)
	// Per row: softmax over experts, then the top-k (ties to the lower index).
	weights := make([]float32, T*E) // 0 where the expert is not chosen
	for t := 0; t < T; t++ {
		r := ws.router[t*E : (t+1)*E]
		mx := r[0]
		for _, v := range r {
			mx = max(mx, v)
		}
		var sum float64
		p := make([]float64, E)
		for e, v := range r {
			p[e] = math.Exp(float64(v - mx))
			sum += p[e]
		}
		for k := 0; k < m.topK; k++ {
			best := -1
			for e := range p {
				if weights[t*E+e] == 0 && (best < 0 || p[e] > p[best]) {
					best = e
				}
			}
			weights[t*E+best] = float32(p[best] / sum)
		}
	}
	clear(out[:T*H])
	for e := range m.experts {
		ws.moeRows = ws.moeRows[:0]
		for t := 0; t < T; t++ {
			if weights[t*E+e] != 0 {
				ws.moeRows = append(ws.moeRows, int32(t))
			}
		}
		n := len(ws.moeRows)
		if n == 0 {
			continue
		}
		ws.moeIn, ws.moeOut = grow(ws.moeIn, n*H), grow(ws.moeOut, n*H)
		for i, t := range ws.moeRows {
			copy(ws.moeIn[i*H:(i+1)*H], in[int(t)*H:])
		}
		m.experts[e].forward(dev, ws, ws.moeIn, ws.moeOut, n)
		for i, t := range ws.moeRows {
			wgt := weights[int(t)*E+e]
			o := out[int(t)*H : int(t+1)*H]
			for j, v := range ws.moeOut[i*H : (i+1)*H] {
				o[j] += v * wgt
			}
		}
	}
}

// Snapshot implements Model.
func (h *hybrid) Snapshot(pool *kvcache.Pool, seq *kvcache.Seq, tokens []int32) (*Snapshot, error) {
	return TakeSnapshot(pool, h.Cache(), seq, tokens)
}

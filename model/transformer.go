package model

import (
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
)

// decoderConfig is everything that distinguishes the dense decoder-only
// families from one another. Each family file fills one in from config.json;
// the forward pass below is shared.
type decoderConfig struct {
	vocab, hidden, inter, layers, heads, kvHeads, headDim int
	maxPos                                                int
	eps                                                   float32
	tied                                                  bool
	unitNorm                                              bool    // RMSNorm scales by (1 + w) (Gemma)
	sandwich                                              bool    // extra norms after attention and around the MLP (Gemma 2/3)
	qkNorm                                                bool    // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
	gelu                                                  bool    // gelu_pytorch_tanh gate instead of SiLU
	embedScale                                            float32 // multiply embeddings by this (0 = no scaling)
	attnScale                                             float32
	attnSoftcap, finalSoftcap                             float32
	qkvBias, oBias, mlpBias                               bool
	fusedQKV, fusedGateUp                                 bool  // Phi-3 layouts
	window                                                []int // per layer: sliding window, 0 = full attention
	rope                                                  []*Rope
}

type layer struct {
	attnNorm, ffnNorm         []float32 // before attention, before the MLP
	postAttnNorm, postFFNNorm []float32 // Gemma's sandwich norms
	wq, wk, wv, wo            *gpu.Weight
	bq, bk, bv, bo            []float32
	qNorm, kNorm              []float32
	gate, up, down            *gpu.Weight
	bGate, bUp, bDown         []float32
	window                    int
	rope                      *Rope
}

// decoder is a dense decoder-only transformer: Llama and its relatives.
type decoder struct {
	cfg       decoderConfig
	info      Info
	weights   *Weights
	embed     *gpu.Weight
	layers    []layer
	finalNorm []float32
	lmHead    *gpu.Weight
	ws        workspace
}

// loadDecoder reads the Llama-layout tensor names (model.layers.N.self_attn.*,
// model.layers.N.mlp.*), with the family's variations described by cfg.
func loadDecoder(c *Config, w *Weights, cfg decoderConfig, arch string) (*decoder, error) {
	if cfg.heads <= 0 || cfg.kvHeads <= 0 || cfg.heads%cfg.kvHeads != 0 {
		return nil, fmt.Errorf("%s: num_attention_heads %d must be a positive multiple of num_key_value_heads %d", c.Path, cfg.heads, cfg.kvHeads)
	}
	if cfg.hidden <= 0 || cfg.vocab <= 0 || cfg.layers <= 0 || cfg.inter <= 0 || cfg.headDim <= 0 {
		return nil, fmt.Errorf("%s: hidden_size, vocab_size, num_hidden_layers, intermediate_size and head_dim must be positive", c.Path)
	}
	d := &decoder{cfg: cfg, weights: w}
	H, Q, KV, I := cfg.hidden, cfg.heads*cfg.headDim, cfg.kvHeads*cfg.headDim, cfg.inter
	d.embed = w.Matrix("model.embed_tokens.weight", cfg.vocab, H)
	d.finalNorm = w.Vector("model.norm.weight", H)
	if cfg.tied {
		d.lmHead = d.embed
	} else {
		d.lmHead = w.Matrix("lm_head.weight", cfg.vocab, H)
	}
	d.layers = make([]layer, cfg.layers)
	for i := range d.layers {
		l := &d.layers[i]
		p := fmt.Sprintf("model.layers.%d.", i)
		l.attnNorm = w.Vector(p+"input_layernorm.weight", H)
		if cfg.sandwich {
			l.postAttnNorm = w.Vector(p+"post_attention_layernorm.weight", H)
			l.ffnNorm = w.Vector(p+"pre_feedforward_layernorm.weight", H)
			l.postFFNNorm = w.Vector(p+"post_feedforward_layernorm.weight", H)
		} else {
			l.ffnNorm = w.Vector(p+"post_attention_layernorm.weight", H)
		}
		if cfg.fusedQKV {
			qkv := w.Matrix(p+"self_attn.qkv_proj.weight", Q+2*KV, H)
			if qkv != nil {
				l.wq, l.wk, l.wv = qkv.RowSlice(0, Q), qkv.RowSlice(Q, Q+KV), qkv.RowSlice(Q+KV, Q+2*KV)
			}
		} else {
			l.wq = w.Matrix(p+"self_attn.q_proj.weight", Q, H)
			l.wk = w.Matrix(p+"self_attn.k_proj.weight", KV, H)
			l.wv = w.Matrix(p+"self_attn.v_proj.weight", KV, H)
		}
		l.wo = w.Matrix(p+"self_attn.o_proj.weight", H, Q)
		if cfg.qkvBias {
			l.bq = w.Vector(p+"self_attn.q_proj.bias", Q)
			l.bk = w.Vector(p+"self_attn.k_proj.bias", KV)
			l.bv = w.Vector(p+"self_attn.v_proj.bias", KV)
		}
		if cfg.oBias {
			l.bo = w.Vector(p+"self_attn.o_proj.bias", H)
		}
		if cfg.qkNorm {
			l.qNorm = w.Vector(p+"self_attn.q_norm.weight", cfg.headDim)
			l.kNorm = w.Vector(p+"self_attn.k_norm.weight", cfg.headDim)
		}
		if cfg.fusedGateUp {
			gu := w.Matrix(p+"mlp.gate_up_proj.weight", 2*I, H)
			if gu != nil {
				l.gate, l.up = gu.RowSlice(0, I), gu.RowSlice(I, 2*I)
			}
		} else {
			l.gate = w.Matrix(p+"mlp.gate_proj.weight", I, H)
			l.up = w.Matrix(p+"mlp.up_proj.weight", I, H)
		}
		l.down = w.Matrix(p+"mlp.down_proj.weight", H, I)
		if cfg.mlpBias {
			l.bGate = w.Vector(p+"mlp.gate_proj.bias", I)
			l.bUp = w.Vector(p+"mlp.up_proj.bias", I)
			l.bDown = w.Vector(p+"mlp.down_proj.bias", H)
		}
		l.window = cfg.window[i]
		l.rope = cfg.rope[i]
	}
	if err := w.Err(); err != nil {
		return nil, err
	}
	eos, err := generationEOS(w.Dir)
	if err != nil {
		return nil, err
	}
	if eos == nil {
		if eos, err = c.Ints("eos_token_id"); err != nil {
			return nil, err
		}
	}
	bos, err := c.Int("bos_token_id", -1)
	if err != nil {
		return nil, err
	}
	mt, _ := c.String("model_type", "")
	d.info = Info{
		Arch: arch, ModelType: mt, Vocab: cfg.vocab, Hidden: H, Layers: cfg.layers, MaxPos: cfg.maxPos,
		DType: d.embed.DType, BOS: bos, EOS: eos, Params: w.params, WeightBytes: w.bytes,
	}
	return d, nil
}

func (d *decoder) Info() Info   { return d.info }
func (d *decoder) Close() error { return d.weights.Close() }

func (d *decoder) Cache() []LayerCache {
	out := make([]LayerCache, len(d.layers))
	for i, l := range d.layers {
		kind := FullAttention
		if l.window > 0 {
			kind = WindowedAttention
		}
		out[i] = LayerCache{Kind: kind, KVHeads: d.cfg.kvHeads, HeadDim: d.cfg.headDim, Window: l.window}
	}
	return out
}

// workspace holds the activations of one step, grown as needed and reused.
type workspace struct {
	ids                   []int32
	x, h, q, k, v, att, o []float32
	gate, up              []float32
	rows                  []float32 // hidden rows that need logits
	logits                []float32
	ropes                 []ropeTable
	attn                  []gpu.AttnSeq
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

// Forward implements Model. It is the whole dense forward pass: embed, then
// per layer attention and MLP with residuals, then the final norm and the
// output projection for the rows that asked for logits.
func (d *decoder) Forward(dev gpu.Device, pool *kvcache.Pool, seqs []Seq) ([]float32, error) {
	kv := pool.Layers()
	c := &d.cfg
	ws := &d.ws
	T, R := 0, 0
	for i, s := range seqs {
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("model: sequence %d has no tokens", i)
		}
		end := s.Pos + len(s.Tokens)
		if len(s.Pages)*kv[0].PageSize < end {
			return nil, fmt.Errorf("model: sequence %d needs %d positions, its page table covers %d", i, end, len(s.Pages)*kv[0].PageSize)
		}
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= c.vocab {
				return nil, fmt.Errorf("model: token id %d out of range [0, %d)", id, c.vocab)
			}
		}
		T += len(s.Tokens)
		switch s.Logits {
		case LastLogits:
			R++
		case AllLogits:
			R += len(s.Tokens)
		}
	}
	if len(kv) != len(d.layers) {
		return nil, fmt.Errorf("model: %d KV layers for %d model layers", len(kv), len(d.layers))
	}
	H, Q, KVD, I, D := c.hidden, c.heads*c.headDim, c.kvHeads*c.headDim, c.inter, c.headDim
	ws.ids = ws.ids[:0]
	ws.attn = ws.attn[:0]
	row := 0
	for _, s := range seqs {
		ws.ids = append(ws.ids, s.Tokens...)
		ws.attn = append(ws.attn, gpu.AttnSeq{Row: row, N: len(s.Tokens), Pos: s.Pos, Pages: s.Pages})
		row += len(s.Tokens)
	}
	ws.x, ws.h, ws.o = grow(ws.x, T*H), grow(ws.h, T*H), grow(ws.o, T*H)
	ws.q, ws.att = grow(ws.q, T*Q), grow(ws.att, T*Q)
	ws.k, ws.v = grow(ws.k, T*KVD), grow(ws.v, T*KVD)
	ws.gate, ws.up = grow(ws.gate, T*I), grow(ws.up, T*I)
	d.buildRopes(seqs, T)

	x := ws.x
	dev.Embed(x, d.embed, ws.ids)
	if c.embedScale != 0 {
		dev.Scale(x, c.embedScale)
	}
	for li := range d.layers {
		l := &d.layers[li]
		dev.RMSNorm(ws.h, x, l.attnNorm, H, c.eps, c.unitNorm)
		dev.MatMul(ws.q, ws.h, T, l.wq)
		dev.MatMul(ws.k, ws.h, T, l.wk)
		dev.MatMul(ws.v, ws.h, T, l.wv)
		if l.bq != nil {
			dev.AddBias(ws.q, l.bq)
			dev.AddBias(ws.k, l.bk)
			dev.AddBias(ws.v, l.bv)
		}
		if l.qNorm != nil {
			dev.RMSNorm(ws.q, ws.q, l.qNorm, D, c.eps, c.unitNorm)
			dev.RMSNorm(ws.k, ws.k, l.kNorm, D, c.eps, c.unitNorm)
		}
		rt := ws.ropeFor(l.rope)
		dev.RoPE(ws.q, c.heads, D, rt.cos, rt.sin)
		dev.RoPE(ws.k, c.kvHeads, D, rt.cos, rt.sin)
		storeKV(&kv[li], ws.k, ws.v, ws.attn)
		dev.Attention(ws.att, ws.q, &kv[li], ws.attn, gpu.AttnParams{
			Heads: c.heads, KVHeads: c.kvHeads, HeadDim: D,
			Scale: c.attnScale, Window: l.window, Softcap: c.attnSoftcap,
		})
		dev.MatMul(ws.o, ws.att, T, l.wo)
		if l.bo != nil {
			dev.AddBias(ws.o, l.bo)
		}
		if l.postAttnNorm != nil {
			dev.RMSNorm(ws.o, ws.o, l.postAttnNorm, H, c.eps, c.unitNorm)
		}
		dev.Add(x, x, ws.o)

		dev.RMSNorm(ws.h, x, l.ffnNorm, H, c.eps, c.unitNorm)
		dev.MatMul(ws.gate, ws.h, T, l.gate)
		dev.MatMul(ws.up, ws.h, T, l.up)
		if l.bGate != nil {
			dev.AddBias(ws.gate, l.bGate)
			dev.AddBias(ws.up, l.bUp)
		}
		if c.gelu {
			dev.GELUTanhMul(ws.gate, ws.gate, ws.up)
		} else {
			dev.SiLUMul(ws.gate, ws.gate, ws.up)
		}
		dev.MatMul(ws.o, ws.gate, T, l.down)
		if l.bDown != nil {
			dev.AddBias(ws.o, l.bDown)
		}
		if l.postFFNNorm != nil {
			dev.RMSNorm(ws.o, ws.o, l.postFFNNorm, H, c.eps, c.unitNorm)
		}
		dev.Add(x, x, ws.o)
	}
	if R == 0 {
		return nil, nil
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
	dev.RMSNorm(ws.rows, ws.rows, d.finalNorm, H, c.eps, c.unitNorm)
	ws.logits = grow(ws.logits, R*c.vocab)
	dev.MatMul(ws.logits, ws.rows, R, d.lmHead)
	if c.finalSoftcap > 0 {
		dev.Softcap(ws.logits, c.finalSoftcap)
	}
	return ws.logits, nil
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

// buildRopes fills one cos/sin table per distinct Rope of the model for the
// positions of this step.
func (d *decoder) buildRopes(seqs []Seq, T int) {
	ws := &d.ws
	ws.ropes = ws.ropes[:0]
	for li := range d.layers {
		r := d.layers[li].rope
		if ws.ropeFor(r) != nil {
			continue
		}
		half := r.Dim / 2
		rt := ropeTable{rope: r, cos: make([]float32, T*half), sin: make([]float32, T*half)}
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

// defaultAttnScale is 1/sqrt(head_dim).
func defaultAttnScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

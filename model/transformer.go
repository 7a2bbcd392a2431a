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
	attn                      attention
	mlp                       mlp
}

// decoder is a dense decoder-only transformer: Llama and its relatives.
type decoder struct {
	cfg     decoderConfig
	info    Info
	weights *Weights
	embed   *gpu.Weight
	layers  []layer
	head    head
	ropes   []*Rope
	ws      workspace
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
	H, I := cfg.hidden, cfg.inter
	d.embed = w.Matrix("model.embed_tokens.weight", cfg.vocab, H)
	d.head = head{norm: w.Vector("model.norm.weight", H), eps: cfg.eps, unitNorm: cfg.unitNorm, lmHead: d.embed, softcap: cfg.finalSoftcap}
	if !cfg.tied {
		d.head.lmHead = w.Matrix("lm_head.weight", cfg.vocab, H)
	}
	d.layers = make([]layer, cfg.layers)
	blocks := make([]*attention, cfg.layers)
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
		l.attn = loadAttention(w, p+"self_attn.", attention{
			heads: cfg.heads, kvHeads: cfg.kvHeads, headDim: cfg.headDim,
			scale: cfg.attnScale, softcap: cfg.attnSoftcap, window: cfg.window[i], rope: cfg.rope[i],
			eps: cfg.eps, unitNorm: cfg.unitNorm,
		}, H, cfg.fusedQKV, cfg.qkvBias, cfg.oBias, cfg.qkNorm)
		l.mlp = loadMLP(w, p+"mlp.", H, I, cfg.fusedGateUp, cfg.mlpBias, cfg.gelu)
		blocks[i] = &l.attn
	}
	d.ropes = ropesOf(blocks)
	info, err := readInfo(c, w, arch, cfg.vocab, H, cfg.layers, cfg.maxPos, d.embed)
	if err != nil {
		return nil, err
	}
	d.info = info
	return d, nil
}

func (d *decoder) Info() Info   { return d.info }
func (d *decoder) Close() error { return d.weights.Close() }

func (d *decoder) Cache() []LayerCache {
	out := make([]LayerCache, len(d.layers))
	for i := range d.layers {
		out[i] = d.layers[i].attn.cache()
	}
	return out
}

// Forward implements Model. It is the whole dense forward pass: embed, then
// per layer attention and MLP with residuals, then the final norm and the
// output projection for the rows that asked for logits.
func (d *decoder) Forward(dev gpu.Device, pool *kvcache.Pool, seqs []Seq) ([]float32, error) {
	c, ws := &d.cfg, &d.ws
	kv := pool.Layers()
	if len(kv) != len(d.layers) {
		return nil, fmt.Errorf("model: %d KV layers for %d model layers", len(kv), len(d.layers))
	}
	R, err := ws.begin(pool, seqs, c.vocab, true, false)
	if err != nil {
		return nil, err
	}
	T, H := ws.T, c.hidden
	ws.x, ws.h, ws.o = grow(ws.x, T*H), grow(ws.h, T*H), grow(ws.o, T*H)
	ws.buildRopes(d.ropes, seqs)

	x := ws.x
	dev.Embed(x, d.embed, ws.ids)
	if c.embedScale != 0 {
		dev.Scale(x, c.embedScale)
	}
	for li := range d.layers {
		l := &d.layers[li]
		dev.RMSNorm(ws.h, x, l.attnNorm, H, c.eps, c.unitNorm)
		if l.postAttnNorm == nil {
			l.attn.forwardAdd(dev, ws, &kv[li], ws.h, x)
		} else {
			l.attn.forward(dev, ws, &kv[li], ws.h, ws.o)
			dev.RMSNorm(ws.o, ws.o, l.postAttnNorm, H, c.eps, c.unitNorm)
			dev.Add(x, x, ws.o)
		}

		dev.RMSNorm(ws.h, x, l.ffnNorm, H, c.eps, c.unitNorm)
		if l.postFFNNorm == nil {
			l.mlp.forwardAdd(dev, ws, ws.h, x, T)
		} else {
			l.mlp.forward(dev, ws, ws.h, ws.o, T)
			dev.RMSNorm(ws.o, ws.o, l.postFFNNorm, H, c.eps, c.unitNorm)
			dev.Add(x, x, ws.o)
		}
	}
	return d.head.logits(dev, ws, seqs, x, R, H), nil
}

// defaultAttnScale is 1/sqrt(head_dim).
func defaultAttnScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// Snapshot implements Model.
func (d *decoder) Snapshot(pool *kvcache.Pool, seq *kvcache.Seq, tokens []int32) (*Snapshot, error) {
	return TakeSnapshot(pool, d.Cache(), seq, tokens)
}

package model

import (
	"fmt"
	"math"
)

// Rope computes rotary-embedding angles the way transformers'
// ROPE_INIT_FUNCTIONS do, in float32: inverse frequencies, then
// angle = float32(pos) * invFreq, then cos/sin (times an attention factor for
// the scaled variants that have one).
type Rope struct {
	Dim     int // rotated dimensions per head (even)
	kind    string
	base    float64
	invFreq []float32
	factor  float64 // attention factor applied to cos and sin (1 = none)

	// dynamic NTK
	maxPos  int
	scaling float64
	// longrope
	origMax     int
	short, long []float64
}

// NewRope reads rope settings: base theta, rotary dimensions, and the
// rope_scaling object of config.json (nil for plain RoPE).
// origMax is the top-level original_max_position_embeddings (Phi-3), used by
// longrope when rope_scaling does not carry its own.
func NewRope(base float64, dim, maxPos, origMax int, scaling *Config) (*Rope, error) {
	if dim <= 0 || dim%2 != 0 {
		return nil, fmt.Errorf("rotary dimension %d must be positive and even", dim)
	}
	r := &Rope{Dim: dim, kind: "default", base: base, factor: 1, maxPos: maxPos}
	if scaling != nil {
		g := getter{c: scaling}
		kind := g.string("rope_type", "")
		if kind == "" {
			kind = g.string("type", "default")
		}
		r.kind = kind
		switch kind {
		case "default":
		case "linear":
			r.scaling = g.float("factor", 1)
		case "dynamic":
			r.scaling = g.float("factor", 1)
		case "llama3":
			r.scaling = g.float("factor", 8)
			low := g.float("low_freq_factor", 1)
			high := g.float("high_freq_factor", 4)
			orig := g.int("original_max_position_embeddings", 8192)
			if g.err == nil {
				r.invFreq = llama3InvFreq(defaultInvFreq(base, dim), r.scaling, low, high, float64(orig))
			}
		case "longrope", "su":
			r.origMax = g.int("original_max_position_embeddings", origMax)
			var err error
			if r.short, err = floats(scaling, "short_factor", dim/2); err == nil {
				r.long, err = floats(scaling, "long_factor", dim/2)
			}
			g.keep(err)
			if r.origMax == 0 {
				r.origMax = maxPos
			}
			scale := float64(maxPos) / float64(r.origMax)
			if scaling.Has("attention_factor") {
				r.factor = g.float("attention_factor", 1)
			} else if scale > 1 {
				r.factor = math.Sqrt(1 + math.Log(scale)/math.Log(float64(r.origMax)))
			}
		default:
			return nil, fmt.Errorf("%s: unsupported rope_scaling type %q (supported: linear, dynamic, llama3, longrope)", scaling.Path, kind)
		}
		if g.err != nil {
			return nil, g.err
		}
	}
	if r.invFreq == nil {
		r.invFreq = defaultInvFreq(base, dim)
		if r.kind == "linear" && r.scaling != 0 {
			for i := range r.invFreq {
				r.invFreq[i] /= float32(r.scaling)
			}
		}
	}
	return r, nil
}

// divideFreqs divides each inverse frequency by its factor, as llama.cpp
// applies a rope_freqs tensor (llama3 scaling as the GGUF converter stores
// it). Only plain RoPE can take factors.
func (r *Rope) divideFreqs(factors []float32) error {
	if r.kind != "default" {
		return fmt.Errorf("rope frequency factors cannot be combined with %s rope scaling", r.kind)
	}
	if len(factors) != len(r.invFreq) {
		return fmt.Errorf("%d rope frequency factors for %d frequencies", len(factors), len(r.invFreq))
	}
	inv := make([]float32, len(r.invFreq))
	for i, f := range factors {
		if !(f > 0) {
			return fmt.Errorf("rope frequency factor %d is %g, want > 0", i, f)
		}
		inv[i] = r.invFreq[i] / f
	}
	r.invFreq = inv
	return nil
}

// floats reads key as a list of n numbers.
func floats(c *Config, key string, n int) ([]float64, error) {
	out, err := c.Floats(key)
	if err == nil && len(out) != n {
		err = fmt.Errorf("%s: %q must be a list of %d numbers", c.Path, key, n)
	}
	return out, err
}

// defaultInvFreq is 1 / base^(2i/dim), computed in float32 as torch does.
func defaultInvFreq(base float64, dim int) []float32 {
	inv := make([]float32, dim/2)
	for i := range inv {
		e := float32(2*i) / float32(dim)
		inv[i] = 1 / float32(math.Pow(base, float64(e)))
	}
	return inv
}

func llama3InvFreq(inv []float32, factor, low, high, orig float64) []float32 {
	lowWave, highWave := orig/low, orig/high
	out := make([]float32, len(inv))
	for i, f := range inv {
		wave := 2 * math.Pi / float64(f)
		switch {
		case wave < highWave:
			out[i] = f
		case wave > lowWave:
			out[i] = float32(float64(f) / factor)
		default:
			smooth := (orig/wave - low) / (high - low)
			out[i] = float32((1-smooth)*float64(f)/factor + smooth*float64(f))
		}
	}
	return out
}

// freqs returns the inverse frequencies for a sequence of seqLen positions
// (only the dynamic and longrope variants depend on it).
func (r *Rope) freqs(seqLen int) []float32 {
	switch r.kind {
	case "dynamic":
		if seqLen <= r.maxPos {
			return r.invFreq
		}
		base := r.base * math.Pow(r.scaling*float64(seqLen)/float64(r.maxPos)-(r.scaling-1), float64(r.Dim)/float64(r.Dim-2))
		return defaultInvFreq(base, r.Dim)
	case "longrope", "su":
		ext := r.short
		if seqLen > r.origMax {
			ext = r.long
		}
		inv := make([]float32, r.Dim/2)
		for i := range inv {
			e := float32(2*i) / float32(r.Dim)
			inv[i] = 1 / float32(ext[i]*float64(float32(math.Pow(r.base, float64(e)))))
		}
		return inv
	}
	return r.invFreq
}

// fill writes cos and sin (Dim/2 each) for position pos of a sequence of
// seqLen positions.
func (r *Rope) fill(cos, sin []float32, inv []float32, pos int) {
	p := float32(pos)
	for i, f := range inv {
		a := float64(p * f)
		cos[i] = float32(math.Cos(a)) * float32(r.factor)
		sin[i] = float32(math.Sin(a)) * float32(r.factor)
	}
}

// InvFreq returns the inverse frequencies used for a sequence of seqLen
// positions.
func (r *Rope) InvFreq(seqLen int) []float32 { return r.freqs(seqLen) }

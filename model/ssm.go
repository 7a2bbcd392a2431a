package model

import (
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/gpu"
)

// ssm is a Mamba mixer: version 1 (S6, as in Mamba and Jamba) or version 2
// (SSD with scalar A per head and a gated RMSNorm, as in Mamba2 and Bamba).
// Both run as one selective scan over the whole chunk from the sequence's
// stored state, so a prefill chunk of any length continues a conversation
// exactly where the last one stopped.
type ssm struct {
	version         int
	inProj, outProj *gpu.Weight
	inBias, outBias []float32
	conv            gpu.ConvParams
	scan            gpu.ScanParams
	dInner          int
	eps             float32

	// version 1
	xProj, dtProj        *gpu.Weight
	dtBias               []float32 // dt_proj.bias
	dtRank               int
	dtNorm, bNorm, cNorm []float32 // Jamba's RMSNorms on dt, B and C

	// version 2
	headBias       []float32 // dt_bias, one per head
	norm           []float32 // gated RMSNorm weight
	normGroup      int
	dtMin, dtMax   float64
	mlpPart        int // d_mlp: leading in_proj outputs unused here
	convDim, heads int
}

// ssmShape is what a family's config says about its mixers.
type ssmShape struct {
	version                      int
	hidden, dInner, dState, conv int
	dtRank                       int // version 1
	heads, headDim, groups       int // version 2
	inBias, convBias, outBias    bool
	bcdtNorms                    bool // Jamba
	eps                          float32
	dtMin, dtMax                 float64
	perGroupNorm                 bool
}

func loadSSM(w *Weights, prefix string, s ssmShape) *ssm {
	m := &ssm{version: s.version, dInner: s.dInner, eps: s.eps}
	N, K, dI := s.dState, s.conv, s.dInner
	if s.version == 1 {
		m.convDim = dI
		m.inProj = w.Matrix(prefix+"in_proj.weight", 2*dI, s.hidden)
		m.xProj = w.Matrix(prefix+"x_proj.weight", s.dtRank+2*N, dI)
		m.dtProj = w.Matrix(prefix+"dt_proj.weight", dI, s.dtRank)
		m.dtBias = w.Vector(prefix+"dt_proj.bias", dI)
		m.dtRank = s.dtRank
		if s.bcdtNorms {
			m.dtNorm = w.Vector(prefix+"dt_layernorm.weight", s.dtRank)
			m.bNorm = w.Vector(prefix+"b_layernorm.weight", N)
			m.cNorm = w.Vector(prefix+"c_layernorm.weight", N)
		}
		var aLog []float32
		if a := w.Matrix(prefix+"A_log", dI, N); a != nil {
			aLog = a.Float32s()
		}
		m.scan = gpu.ScanParams{Heads: dI, HeadDim: 1, StateDim: N, Groups: 1, A: negExp(aLog), D: w.Vector(prefix+"D", dI)}
	} else {
		H, G := s.heads, s.groups
		m.heads = H
		m.convDim = dI + 2*G*N
		proj := 2*dI + 2*G*N + H
		if w.Has(prefix + "in_proj.weight") {
			if t, err := w.st.Tensor(prefix + "in_proj.weight"); err == nil && len(t.Shape) == 2 && t.Shape[0] > proj {
				m.mlpPart = (t.Shape[0] - proj) / 2
			}
		}
		m.inProj = w.Matrix(prefix+"in_proj.weight", proj+2*m.mlpPart, s.hidden)
		m.headBias = w.Vector(prefix+"dt_bias", H)
		m.norm = w.Vector(prefix+"norm.weight", dI)
		m.normGroup = dI
		if s.perGroupNorm {
			m.normGroup = dI / G
		}
		m.dtMin, m.dtMax = s.dtMin, s.dtMax
		aLog := w.Vector(prefix+"A_log", H)
		a := make([]float32, H*N)
		for h, v := range negExp(aLog) {
			for n := 0; n < N; n++ {
				a[h*N+n] = v
			}
		}
		m.scan = gpu.ScanParams{Heads: H, HeadDim: s.headDim, StateDim: N, Groups: G, A: a, D: w.Vector(prefix+"D", H)}
	}
	m.outProj = w.Matrix(prefix+"out_proj.weight", s.hidden, dI)
	if s.inBias {
		m.inBias = w.Vector(prefix+"in_proj.bias", m.inProj.Rows)
	}
	if s.outBias {
		m.outBias = w.Vector(prefix+"out_proj.bias", s.hidden)
	}
	cw := w.tensor(prefix+"conv1d.weight", m.convDim, 1, K)
	if cw != nil {
		m.conv = gpu.ConvParams{Channels: m.convDim, Width: K, SiLU: true,
			Weight: (&gpu.Weight{DType: cw.DType, Rows: m.convDim, Cols: K, Data: cw.Data}).Float32s()}
	}
	if s.convBias {
		m.conv.Bias = w.Vector(prefix+"conv1d.bias", m.convDim)
	}
	m.scan.StateOffset = (K - 1) * m.convDim
	return m
}

// negExp is A = -exp(A_log).
func negExp(aLog []float32) []float32 {
	out := make([]float32, len(aLog))
	for i, v := range aLog {
		out[i] = -float32(math.Exp(float64(v)))
	}
	return out
}

func (m *ssm) cache() LayerCache {
	return LayerCache{Kind: RecurrentState, ConvState: m.scan.StateOffset,
		SSMState: m.scan.Heads * m.scan.HeadDim * m.scan.StateDim}
}

// splitCols copies column ranges of a rows x width matrix into dsts, each
// rows x its width, skipping skip leading columns.
func splitCols(src []float32, rows, width, skip int, dsts []*[]float32, widths []int) {
	for i, d := range dsts {
		*d = grow(*d, rows*widths[i])
	}
	for r := 0; r < rows; r++ {
		off := r*width + skip
		for i, d := range dsts {
			copy((*d)[r*widths[i]:(r+1)*widths[i]], src[off:off+widths[i]])
			off += widths[i]
		}
	}
}

// forward: out = mixer(in) for the step's rows, advancing every sequence's
// state in rec.
func (m *ssm) forward(dev gpu.Device, ws *workspace, rec []gpu.RecSeq, in, out []float32) {
	T, dI := ws.T, m.dInner
	N, G := m.scan.StateDim, m.scan.Groups
	proj := m.inProj.Rows
	ws.xz = grow(ws.xz, T*proj)
	dev.MatMul(ws.xz, in, T, m.inProj)
	if m.inBias != nil {
		dev.AddBias(ws.xz, m.inBias)
	}
	var x, z, y []float32
	if m.version == 1 {
		// in_proj gives x then the gate z; conv and silu on x; x_proj gives
		// dt (rank R), B and C.
		splitCols(ws.xz, T, proj, 0, []*[]float32{&ws.h, &ws.gate}, []int{dI, dI})
		ws.conv = grow(ws.conv, T*dI)
		dev.CausalConv1D(ws.conv, ws.h, m.conv, rec)
		x, z = ws.conv, ws.gate
		R := m.dtRank
		ws.up = grow(ws.up, T*(R+2*N))
		dev.MatMul(ws.up, x, T, m.xProj)
		splitCols(ws.up, T, R+2*N, 0, []*[]float32{&ws.q, &ws.b, &ws.c}, []int{R, N, N})
		if m.dtNorm != nil {
			dev.RMSNorm(ws.q, ws.q, m.dtNorm, R, m.eps, false)
			dev.RMSNorm(ws.b, ws.b, m.bNorm, N, m.eps, false)
			dev.RMSNorm(ws.c, ws.c, m.cNorm, N, m.eps, false)
		}
		ws.dt = grow(ws.dt, T*dI)
		dev.MatMul(ws.dt, ws.q, T, m.dtProj)
		dev.AddBias(ws.dt, m.dtBias)
		dev.Softplus(ws.dt)
	} else {
		// in_proj gives [mlp, mlp,] z, xBC, dt; conv and silu on xBC, which
		// then splits into x, B and C.
		H := m.heads
		splitCols(ws.xz, T, proj, 2*m.mlpPart, []*[]float32{&ws.gate, &ws.h, &ws.dt}, []int{dI, m.convDim, H})
		ws.conv = grow(ws.conv, T*m.convDim)
		dev.CausalConv1D(ws.conv, ws.h, m.conv, rec)
		splitCols(ws.conv, T, m.convDim, 0, []*[]float32{&ws.q, &ws.b, &ws.c}, []int{dI, G * N, G * N})
		x, z = ws.q, ws.gate
		dev.AddBias(ws.dt, m.headBias)
		dev.Softplus(ws.dt)
		if m.dtMin > 0 || !math.IsInf(m.dtMax, 1) {
			for i, v := range ws.dt {
				ws.dt[i] = float32(math.Min(math.Max(float64(v), m.dtMin), m.dtMax))
			}
		}
	}
	ws.att = grow(ws.att, T*dI)
	y = ws.att
	dev.SelectiveScan(y, x, ws.dt, ws.b, ws.c, m.scan, rec)
	if m.version == 1 {
		dev.SiLUMul(y, z, y)
	} else {
		dev.RMSNormGated(y, y, z, m.norm, dI, m.normGroup, m.eps)
	}
	dev.MatMul(out, y, T, m.outProj)
	if m.outBias != nil {
		dev.AddBias(out, m.outBias)
	}
}

// dtRankOf reads time_step_rank / mamba_dt_rank, which may be "auto"
// (ceil(hidden / 16)).
func dtRankOf(c *Config, key string, hidden int) (int, error) {
	switch v := c.Raw(key).(type) {
	case nil:
		return (hidden + 15) / 16, nil
	case string:
		if v == "auto" {
			return (hidden + 15) / 16, nil
		}
	case float64:
		return int(v), nil
	}
	return 0, fmt.Errorf("%s: %q must be an integer or \"auto\", got %v", c.Path, key, c.Raw(key))
}

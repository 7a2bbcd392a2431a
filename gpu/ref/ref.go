// Package ref is the plain-Go reference implementation of gpu.Device.
//
// It favours clarity and accuracy over speed (float64 accumulation, no
// threads) and defines the exact semantics the fast backends must match.
//
// It also holds the reference dequantizers of the ggml tensor types that
// GGUF files store (Dequantize, quant.go): the specification, bit-exact
// against gguf-py and ggml, that the quantized kernels are tested against.
package ref

import (
	"math"

	"github.com/troupe-ai/troupe/gpu"
)

// Device is the reference backend. The zero value is ready to use.
type Device struct{}

var _ gpu.Device = Device{}

// Name implements gpu.Device.
func (Device) Name() string { return "ref" }

// MatMul implements gpu.Device. Quantized weights are dequantized row by
// row (gpu.Weight.Row, the block dequantizers) and the dot products taken in
// float64: the exact product of x with the weights' values. The fast
// backends quantize x too; QuantMatMul is the reference of what they compute.
func (Device) MatMul(dst, x []float32, m int, w *gpu.Weight) {
	rowf := make([]float32, w.Cols)
	row := make([]float64, w.Cols)
	for j := 0; j < w.Rows; j++ {
		w.Row(rowf, j)
		for k, v := range rowf {
			row[k] = float64(v)
		}
		for i := 0; i < m; i++ {
			xi := x[i*w.Cols : (i+1)*w.Cols]
			var s float64
			for k, v := range xi {
				s += float64(v) * row[k]
			}
			dst[i*w.Rows+j] = float32(s)
		}
	}
}

// Embed implements gpu.Device: the rows of w widened (dequantized) to float32.
func (Device) Embed(dst []float32, w *gpu.Weight, ids []int32) {
	for i, id := range ids {
		w.Row(dst[i*w.Cols:(i+1)*w.Cols], int(id))
	}
}

// RMSNorm implements gpu.Device.
func (Device) RMSNorm(dst, x, w []float32, n int, eps float32, unitOffset bool) {
	for r := 0; r < len(x)/n; r++ {
		xr := x[r*n : (r+1)*n]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(n)+float64(eps))
		for i, v := range xr {
			g := float64(w[i])
			if unitOffset {
				g += 1
			}
			dst[r*n+i] = float32(float64(v) * inv * g)
		}
	}
}

// RoPE implements gpu.Device.
func (Device) RoPE(x []float32, heads, headDim int, cos, sin []float32) {
	rows := len(x) / (heads * headDim)
	half := len(cos) / rows
	for r := 0; r < rows; r++ {
		c := cos[r*half : (r+1)*half]
		s := sin[r*half : (r+1)*half]
		for h := 0; h < heads; h++ {
			v := x[(r*heads+h)*headDim:]
			for i := 0; i < half; i++ {
				a, b := float64(v[i]), float64(v[i+half])
				v[i] = float32(a*float64(c[i]) - b*float64(s[i]))
				v[i+half] = float32(b*float64(c[i]) + a*float64(s[i]))
			}
		}
	}
}

// AddBias implements gpu.Device.
func (Device) AddBias(x, bias []float32) {
	for i := range x {
		x[i] += bias[i%len(bias)]
	}
}

// Add implements gpu.Device.
func (Device) Add(dst, a, b []float32) {
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

// SiLUMul implements gpu.Device.
func (Device) SiLUMul(dst, gate, up []float32) {
	for i := range dst {
		g := float64(gate[i])
		dst[i] = float32(g / (1 + math.Exp(-g)) * float64(up[i]))
	}
}

// GELUTanhMul implements gpu.Device.
func (Device) GELUTanhMul(dst, gate, up []float32) {
	for i := range dst {
		g := float64(gate[i])
		t := math.Tanh(math.Sqrt(2/math.Pi) * (g + 0.044715*g*g*g))
		dst[i] = float32(0.5 * g * (1 + t) * float64(up[i]))
	}
}

// Softcap implements gpu.Device.
func (Device) Softcap(x []float32, c float32) {
	for i, v := range x {
		x[i] = float32(float64(c) * math.Tanh(float64(v)/float64(c)))
	}
}

// Scale implements gpu.Device.
func (Device) Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// Attention implements gpu.Device.
func (Device) Attention(out, q []float32, kv *gpu.KVLayer, seqs []gpu.AttnSeq, p gpu.AttnParams) {
	group := p.Heads / p.KVHeads
	qdim := p.Heads * p.HeadDim
	for _, s := range seqs {
		for r := 0; r < s.N; r++ {
			pos := s.Pos + r
			lo := 0
			if p.Window > 0 && pos-p.Window+1 > lo {
				lo = pos - p.Window + 1
			}
			scores := make([]float64, pos+1-lo)
			for h := 0; h < p.Heads; h++ {
				qh := q[(s.Row+r)*qdim+h*p.HeadDim:][:p.HeadDim]
				kvh := (h / group) * p.HeadDim
				maxs := math.Inf(-1)
				for j := lo; j <= pos; j++ {
					k := kv.K[kv.Slot(s.Pages, j)+kvh:][:p.HeadDim]
					var d float64
					for i := range qh {
						d += float64(qh[i]) * float64(k[i])
					}
					d *= float64(p.Scale)
					if p.Softcap > 0 {
						d = float64(p.Softcap) * math.Tanh(d/float64(p.Softcap))
					}
					scores[j-lo] = d
					maxs = math.Max(maxs, d)
				}
				var sum float64
				for i := range scores {
					scores[i] = math.Exp(scores[i] - maxs)
					sum += scores[i]
				}
				o := out[(s.Row+r)*qdim+h*p.HeadDim:][:p.HeadDim]
				acc := make([]float64, p.HeadDim)
				for j := lo; j <= pos; j++ {
					v := kv.V[kv.Slot(s.Pages, j)+kvh:][:p.HeadDim]
					wgt := scores[j-lo] / sum
					for i := range acc {
						acc[i] += wgt * float64(v[i])
					}
				}
				for i := range o {
					o[i] = float32(acc[i])
				}
			}
		}
	}
}

// CausalConv1D implements gpu.Device.
func (Device) CausalConv1D(out, x []float32, p gpu.ConvParams, seqs []gpu.RecSeq) {
	C, K := p.Channels, p.Width
	for _, s := range seqs {
		state := s.State[p.StateOffset : p.StateOffset+(K-1)*C]
		// in(t) for t in [-(K-1), N): the state, then the chunk's rows.
		in := func(t int) []float32 {
			if t < 0 {
				return state[(K-1+t)*C:]
			}
			return x[(s.Row+t)*C:]
		}
		for t := 0; t < s.N; t++ {
			o := out[(s.Row+t)*C : (s.Row+t+1)*C]
			for c := range o {
				var acc float64
				if p.Bias != nil {
					acc = float64(p.Bias[c])
				}
				for j := 0; j < K; j++ {
					acc += float64(p.Weight[c*K+j]) * float64(in(t - K + 1 + j)[c])
				}
				if p.SiLU {
					acc = acc / (1 + math.Exp(-acc))
				}
				o[c] = float32(acc)
			}
		}
		// The new state is the last K-1 inputs of (old state, chunk).
		next := make([]float32, (K-1)*C)
		for i := 0; i < K-1; i++ {
			copy(next[i*C:(i+1)*C], in(s.N - (K - 1) + i)[:C])
		}
		copy(state, next)
	}
}

// SelectiveScan implements gpu.Device.
func (Device) SelectiveScan(y, x, dt, B, C []float32, p gpu.ScanParams, seqs []gpu.RecSeq) {
	H, P, N, G := p.Heads, p.HeadDim, p.StateDim, p.Groups
	perGroup := H / G
	for _, s := range seqs {
		state := s.State[p.StateOffset : p.StateOffset+H*P*N]
		for t := s.Row; t < s.Row+s.N; t++ {
			for h := 0; h < H; h++ {
				d := float64(dt[t*H+h])
				g := h / perGroup
				b := B[(t*G+g)*N:][:N]
				c := C[(t*G+g)*N:][:N]
				for i := 0; i < P; i++ {
					xv := float64(x[t*H*P+h*P+i])
					st := state[(h*P+i)*N:][:N]
					var acc float64
					for n := 0; n < N; n++ {
						v := math.Exp(d*float64(p.A[h*N+n]))*float64(st[n]) + d*float64(b[n])*xv
						st[n] = float32(v)
						acc += v * float64(c[n])
					}
					y[t*H*P+h*P+i] = float32(acc + float64(p.D[h])*xv)
				}
			}
		}
	}
}

// RMSNormGated implements gpu.Device.
func (Device) RMSNormGated(dst, x, gate, w []float32, n, group int, eps float32) {
	h := make([]float64, group)
	for r := 0; r < len(x)/n; r++ {
		for g0 := 0; g0 < n; g0 += group {
			var ss float64
			for i := range h {
				j := r*n + g0 + i
				gv := float64(gate[j])
				h[i] = float64(x[j]) * gv / (1 + math.Exp(-gv))
				ss += h[i] * h[i]
			}
			inv := 1 / math.Sqrt(ss/float64(group)+float64(eps))
			for i := range h {
				dst[r*n+g0+i] = float32(h[i] * inv * float64(w[g0+i]))
			}
		}
	}
}

// Softplus implements gpu.Device.
func (Device) Softplus(x []float32) {
	for i, v := range x {
		if v <= 20 {
			x[i] = float32(math.Log1p(math.Exp(float64(v))))
		}
	}
}

package gpu

// Packed is a copy of a weight's values in a layout a backend chose for its
// kernels, made once (at load) so that the kernels stop rearranging the
// weight on every call. Backends that do not know Layout ignore it.
type Packed struct {
	// Layout names the backend and the arrangement, e.g. "cpu/panel32-bf16".
	Layout string
	// Data holds the packed values.
	Data []byte
	// Owner keeps the memory behind Data alive when it is not Go memory
	// (the backend frees it once Owner is unreachable); nil otherwise.
	Owner any
}

// Packed returns the weight's packed copy, or nil.
func (w *Weight) Packed() *Packed { return w.packed.Load() }

// SetPacked attaches a packed copy of the weight's values (nil removes it).
// Only a backend that made p from w's own values may set it.
func (w *Weight) SetPacked(p *Packed) { w.packed.Store(p) }

// Packer is a Device that can pack weights ahead of time. PackWeights
// attaches a packed copy to each weight its kernels gain from (leaving the
// others, and weights it packed before, as they are) and reports the bytes
// it added. A batch may share one allocation.
type Packer interface {
	PackWeights(ws []*Weight) (int64, error)
}

// FusedMatMul is a Device that can fold the operation around a matmul into
// it. Each method reports false, having done nothing, when it has no fused
// kernel for the case (then the caller runs the separate operations).
type FusedMatMul interface {
	// MatMulAdd: dst[i][j] += sum_k x[i][k] * w[j][k] (a residual add).
	MatMulAdd(dst, x []float32, m int, w *Weight) bool
	// MatMulGated: dst[i][j] = act(x[i]·gate[j]) * (x[i]·up[j]), act being
	// SiLU or, when gelu, GELU (tanh approximation), as SiLUMul and
	// GELUTanhMul compute it.
	MatMulGated(dst, x []float32, m int, gate, up *Weight, gelu bool) bool
	// MatMulMulti: dsts[i] = x·ws[i]ᵀ for weights of the same width, in one
	// pass (q, k and v).
	MatMulMulti(dsts [][]float32, x []float32, m int, ws []*Weight) bool
}

package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/troupe-ai/troupe/gguf"
)

// DType is the storage type of a weight matrix. Activations are always float32.
//
// The plain types (F32, BF16, F16) store one element per Size bytes. The
// quantized types are ggml's block formats as GGUF files store them: a row of
// Cols elements is Cols/BlockSize blocks of BlockBytes bytes each (Cols must
// be a multiple of BlockSize), see RowBytes; their values are defined by the
// block dequantizers (Dequantizer).
type DType uint8

const (
	// F32 is IEEE-754 single precision, 4 bytes.
	F32 DType = iota + 1
	// BF16 is bfloat16: the high 16 bits of a float32, 2 bytes.
	BF16
	// F16 is IEEE-754 half precision, 2 bytes.
	F16
	// Q8_0 is ggml's Q8_0: blocks of 32 int8 quants with an F16 scale (34 bytes).
	Q8_0
	// Q4_0 is ggml's Q4_0: blocks of 32 4-bit quants (offset 8) with an F16
	// scale (18 bytes).
	Q4_0
	// Q4_1 is ggml's Q4_1: blocks of 32 4-bit quants with an F16 scale and
	// minimum (20 bytes).
	Q4_1
	// Q5_0 is ggml's Q5_0: blocks of 32 5-bit quants (offset 16) with an F16
	// scale (22 bytes).
	Q5_0
	// Q5_1 is ggml's Q5_1: blocks of 32 5-bit quants with an F16 scale and
	// minimum (24 bytes).
	Q5_1
	// Q2_K is ggml's Q2_K: super-blocks of 256 2-bit quants, 4-bit scales and
	// minimums per 16 (84 bytes).
	Q2_K
	// Q3_K is ggml's Q3_K: super-blocks of 256 3-bit quants, 6-bit scales per
	// 16 (110 bytes).
	Q3_K
	// Q4_K is ggml's Q4_K: super-blocks of 256 4-bit quants, 6-bit scales and
	// minimums per 32 (144 bytes).
	Q4_K
	// Q5_K is ggml's Q5_K: super-blocks of 256 5-bit quants, 6-bit scales and
	// minimums per 32 (176 bytes).
	Q5_K
	// Q6_K is ggml's Q6_K: super-blocks of 256 6-bit quants, int8 scales per
	// 16 (210 bytes).
	Q6_K
)

// info returns the name, elements per block, bytes per block and ggml type of d.
func (d DType) info() (name string, block, bytes int, g gguf.GGMLType) {
	switch d {
	case F32:
		return "F32", 1, 4, gguf.F32
	case BF16:
		return "BF16", 1, 2, gguf.BF16
	case F16:
		return "F16", 1, 2, gguf.F16
	case Q8_0:
		return "Q8_0", 32, 34, gguf.Q8_0
	case Q4_0:
		return "Q4_0", 32, 18, gguf.Q4_0
	case Q4_1:
		return "Q4_1", 32, 20, gguf.Q4_1
	case Q5_0:
		return "Q5_0", 32, 22, gguf.Q5_0
	case Q5_1:
		return "Q5_1", 32, 24, gguf.Q5_1
	case Q2_K:
		return "Q2_K", 256, 84, gguf.Q2_K
	case Q3_K:
		return "Q3_K", 256, 110, gguf.Q3_K
	case Q4_K:
		return "Q4_K", 256, 144, gguf.Q4_K
	case Q5_K:
		return "Q5_K", 256, 176, gguf.Q5_K
	case Q6_K:
		return "Q6_K", 256, 210, gguf.Q6_K
	}
	return "", 0, 0, 0
}

// DTypes lists every dtype, plain ones first.
func DTypes() []DType {
	return []DType{F32, BF16, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}
}

// Size is the number of bytes one element of a plain dtype occupies; 0 for
// the quantized dtypes (whose elements share blocks: see RowBytes) and for
// unknown ones.
func (d DType) Size() int {
	if _, bs, b, _ := d.info(); bs == 1 {
		return b
	}
	return 0
}

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool {
	_, bs, _, _ := d.info()
	return bs > 0
}

// Quantized reports whether d stores elements in blocks of more than one.
func (d DType) Quantized() bool { return d.BlockSize() > 1 }

// BlockSize is the number of elements one block holds: 1 for the plain
// dtypes, 32 or 256 for the quantized ones, 0 for an unknown dtype.
func (d DType) BlockSize() int {
	_, bs, _, _ := d.info()
	return bs
}

// BlockBytes is the number of bytes one block occupies (Size for the plain
// dtypes); 0 for an unknown dtype.
func (d DType) BlockBytes() int {
	_, _, b, _ := d.info()
	return b
}

// RowBytes is the number of bytes a row of cols elements occupies. It fails
// for an unknown dtype, cols <= 0, or cols not a multiple of the block size.
func (d DType) RowBytes(cols int) (int, error) {
	name, bs, b, _ := d.info()
	if bs == 0 {
		return 0, fmt.Errorf("gpu: unsupported dtype %v", d)
	}
	if cols <= 0 {
		return 0, fmt.Errorf("gpu: %s row of %d elements", name, cols)
	}
	if cols%bs != 0 {
		return 0, fmt.Errorf("gpu: %s row of %d elements: not a multiple of the block size %d", name, cols, bs)
	}
	return cols / bs * b, nil
}

// GGML returns the ggml tensor type with d's layout (0, which is F32's id,
// with ok false for an unknown dtype).
func (d DType) GGML() (t gguf.GGMLType, ok bool) {
	_, bs, _, g := d.info()
	return g, bs > 0
}

// DTypeOf returns the dtype that stores ggml type t, or false when gpu has
// none (the IQ types, Q8_1, Q8_K, integer types, F64, ...).
func DTypeOf(t gguf.GGMLType) (DType, bool) {
	for _, d := range DTypes() {
		if g, _ := d.GGML(); g == t {
			return d, true
		}
	}
	return 0, false
}

// String names the dtype as safetensors (plain) and ggml (quantized) do.
func (d DType) String() string {
	if name, _, _, _ := d.info(); name != "" {
		return name
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Weight is a read-only matrix of Rows x Cols elements stored row-major in its
// own dtype, in the layout of a PyTorch nn.Linear weight: one row per output
// feature, Cols input features. Data holds the little-endian bytes (for a
// quantized dtype, each row its Cols/BlockSize blocks) and may point into a
// memory-mapped file.
type Weight struct {
	DType      DType
	Rows, Cols int
	Data       []byte

	packed atomic.Pointer[Packed] // see Packed
}

// NewWeight checks that data holds exactly rows rows of cols elements of
// dtype (for a quantized dtype, cols must be a multiple of its block size).
func NewWeight(dtype DType, rows, cols int, data []byte) (*Weight, error) {
	rb, err := dtype.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("gpu: %v weight %dx%d: %w", dtype, rows, cols, err)
	}
	if rows <= 0 || len(data) != rows*rb {
		return nil, fmt.Errorf("gpu: %v weight %dx%d needs %d bytes, have %d", dtype, rows, cols, rows*rb, len(data))
	}
	return &Weight{DType: dtype, Rows: rows, Cols: cols, Data: data}, nil
}

// RowBytes is the number of bytes one row of w occupies (0 when w's dtype
// and width do not fit: NewWeight rejects such weights).
func (w *Weight) RowBytes() int {
	rb, _ := w.DType.RowBytes(w.Cols)
	return rb
}

// RowSlice returns rows [from, to) as a Weight sharing the same bytes.
func (w *Weight) RowSlice(from, to int) *Weight {
	rb := w.RowBytes()
	return &Weight{DType: w.DType, Rows: to - from, Cols: w.Cols, Data: w.Data[from*rb : to*rb]}
}

// Row widens row r into dst (len(dst) >= Cols), dequantizing a quantized
// dtype block by block exactly as the block dequantizers define.
func (w *Weight) Row(dst []float32, r int) {
	rb := w.RowBytes()
	row := w.Data[r*rb : (r+1)*rb]
	f := w.DType.Dequantizer()
	bs, bb := w.DType.BlockSize(), w.DType.BlockBytes()
	if f == nil || rb == 0 {
		panic(fmt.Sprintf("gpu: bad weight dtype %v", w.DType))
	}
	if bs == 1 {
		f(dst[:w.Cols], row)
		return
	}
	for b := 0; b < w.Cols/bs; b++ {
		f(dst[b*bs:(b+1)*bs], row[b*bb:(b+1)*bb])
	}
}

// At returns element (r, c) widened to float32. For a quantized dtype it
// dequantizes the block that holds the element (it is meant for the
// reference backend and tests, not for loops over a whole matrix).
func (w *Weight) At(r, c int) float32 {
	i := r*w.Cols + c
	switch w.DType {
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(w.Data[4*i:]))
	case BF16:
		return BF16ToF32(binary.LittleEndian.Uint16(w.Data[2*i:]))
	case F16:
		return F16ToF32(binary.LittleEndian.Uint16(w.Data[2*i:]))
	}
	f := w.DType.Dequantizer()
	bs, bb := w.DType.BlockSize(), w.DType.BlockBytes()
	if f == nil || bs <= 1 {
		panic(fmt.Sprintf("gpu: bad weight dtype %v", w.DType))
	}
	off := r*w.RowBytes() + c/bs*bb
	var blk [256]float32
	f(blk[:bs], w.Data[off:off+bb])
	return blk[c%bs]
}

// Float32s widens the whole matrix to a new float32 slice (norm weights,
// biases, and the reference backend's view of quantized weights).
func (w *Weight) Float32s() []float32 {
	out := make([]float32, w.Rows*w.Cols)
	for r := 0; r < w.Rows; r++ {
		w.Row(out[r*w.Cols:(r+1)*w.Cols], r)
	}
	return out
}

// BF16ToF32 widens a bfloat16 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even (NaN stays NaN).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToF32 widens an IEEE half exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 rounds to nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	if b&0x7fffffff >= 0x7f800000 { // inf or nan
		if b&0x7fffffff > 0x7f800000 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp >= 0x1f {
		return sign | 0x7c00
	}
	if exp <= 0 {
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// KVLayer is one layer's paged key/value storage. Position p of a sequence
// whose page table is pages lives in page pages[p/PageSize], slot p%PageSize;
// each slot holds Dim = KVHeads*HeadDim floats of K and the same of V:
// K[(page*PageSize+slot)*Dim : ...+Dim].
type KVLayer struct {
	PageSize int
	Dim      int
	K, V     []float32
}

// Slot returns the offset in K/V of position pos under the page table pages.
func (kv *KVLayer) Slot(pages []int32, pos int) int {
	return (int(pages[pos/kv.PageSize])*kv.PageSize + pos%kv.PageSize) * kv.Dim
}

// AttnSeq describes one sequence's queries in a batched attention call.
type AttnSeq struct {
	Row   int     // first row of this sequence's queries in q and out
	N     int     // number of query rows
	Pos   int     // position of the first query; keys cover positions [0, Pos+N)
	Pages []int32 // the sequence's page table in the KVLayer
}

// AttnParams are the per-layer attention settings.
type AttnParams struct {
	Heads, KVHeads, HeadDim int
	Scale                   float32 // q·k is multiplied by Scale
	Window                  int     // > 0: the query at i sees keys j with i-Window < j <= i
	Softcap                 float32 // > 0: score = Softcap * tanh(score / Softcap), before masking
}

// RecSeq is one sequence's rows in a call on a recurrent (state-space)
// layer, and that layer's state of the sequence, which the call reads and
// advances.
type RecSeq struct {
	Row, N int       // rows [Row, Row+N) of the call's inputs
	State  []float32 // the layer's state slot
}

// ConvParams describe a depthwise causal convolution over time.
type ConvParams struct {
	Channels int
	Width    int       // kernel size K
	Weight   []float32 // Channels x K; Weight[c*K+j] multiplies the input at t-K+1+j
	Bias     []float32 // Channels, or nil
	SiLU     bool      // apply silu to the output
	// The state is the last K-1 inputs, oldest first, each Channels wide, at
	// State[StateOffset : StateOffset+(K-1)*Channels].
	StateOffset int
}

// ScanParams describe a selective state-space scan (Mamba's S6 and
// Mamba2's SSD, written as the same recurrence). Channels are Heads x
// HeadDim; heads share B and C within Groups (Heads/Groups heads per group).
// Mamba v1 is Heads = channels, HeadDim = 1, Groups = 1, A per channel and
// state; Mamba2 has one A per head, repeated over StateDim.
type ScanParams struct {
	Heads, HeadDim, StateDim, Groups int
	A                                []float32 // Heads x StateDim (already -exp(A_log))
	D                                []float32 // Heads: skip connection
	// The state is Heads x HeadDim x StateDim floats at
	// State[StateOffset : StateOffset+Heads*HeadDim*StateDim].
	StateOffset int
}

// Device is the compute seam the models are written against. All activation
// slices are float32, row-major. Implementations may run operations
// asynchronously on a stream but must observe them in call order; the CPU
// backend runs each call to completion.
//
// Shapes: a "rows x n" argument means len(x) == rows*n, rows inferred.
type Device interface {
	// Name says which backend and kernel set is in use (for logs and benchmarks).
	Name() string

	// MatMul: dst[i][j] = sum_k x[i][k] * w[j][k] for i < m, j < w.Rows, k < w.Cols.
	MatMul(dst, x []float32, m int, w *Weight)

	// Embed gathers rows of w (widened to float32) into dst, one per id.
	Embed(dst []float32, w *Weight, ids []int32)

	// RMSNorm normalises each row of n elements of x into dst (dst may alias x):
	// dst = x / sqrt(mean(x^2) + eps) * g, with g = w or, when unitOffset, 1 + w.
	RMSNorm(dst, x, w []float32, n int, eps float32, unitOffset bool)

	// RoPE rotates, in place, every head of every row of x (rows x heads*headDim)
	// in the "rotate half" layout of Hugging Face: for i < rot/2 with
	// rot = 2*len(row of cos), (x[i], x[i+rot/2]) becomes
	// (x[i]*c - x[i+rot/2]*s, x[i+rot/2]*c + x[i]*s), c = cos[row][i], s = sin[row][i].
	// Dimensions at and past rot are left untouched. cos and sin are rows x rot/2.
	RoPE(x []float32, heads, headDim int, cos, sin []float32)

	// AddBias adds bias (n elements) to each row of x.
	AddBias(x, bias []float32)

	// Add: dst = a + b elementwise (dst may alias either).
	Add(dst, a, b []float32)

	// SiLUMul: dst = silu(gate) * up, with silu(g) = g / (1 + exp(-g)).
	SiLUMul(dst, gate, up []float32)

	// GELUTanhMul: dst = gelu_tanh(gate) * up, the tanh approximation
	// 0.5*g*(1 + tanh(sqrt(2/pi)*(g + 0.044715*g^3))).
	GELUTanhMul(dst, gate, up []float32)

	// Softcap: x = c * tanh(x / c) elementwise.
	Softcap(x []float32, c float32)

	// Scale: x *= s elementwise.
	Scale(x []float32, s float32)

	// Attention computes causal multi-head attention with grouped KV heads for
	// each sequence: the query row r of seq (position p = Pos + r - Row) of head h
	// attends to the keys of kv head h / (Heads/KVHeads) at positions j <= p
	// (and j > p - Window when Window > 0), with softmax(Scale*q·k [softcapped])
	// weighting V. q and out are rows x Heads*HeadDim. The keys and values of the
	// queries' own positions must already be stored in kv.
	Attention(out, q []float32, kv *KVLayer, seqs []AttnSeq, p AttnParams)

	// CausalConv1D convolves each sequence's rows of x (rows x Channels) with
	// the per-channel kernel, continuing from and then advancing the state:
	// out[t][c] = bias[c] + sum_j w[c][j] * in(t-K+1+j)[c], where inputs before
	// the chunk come from the state. out must not alias x.
	CausalConv1D(out, x []float32, p ConvParams, seqs []RecSeq)

	// SelectiveScan runs the recurrence, per sequence, from its state:
	//   s[h,p,n] = exp(dt[t,h]*A[h,n]) * s[h,p,n] + dt[t,h] * B[t,g,n] * x[t,h,p]
	//   y[t,h,p] = sum_n s[h,p,n] * C[t,g,n] + D[h] * x[t,h,p]
	// with g = h / (Heads/Groups). x and y are rows x Heads*HeadDim, dt rows x
	// Heads (after softplus), B and C rows x Groups*StateDim.
	SelectiveScan(y, x, dt, B, C []float32, p ScanParams, seqs []RecSeq)

	// RMSNormGated: h = x * silu(gate), then each group of size elements of
	// every row of n is RMS-normalised and scaled by w (Mamba2's gated norm).
	RMSNormGated(dst, x, gate, w []float32, n, group int, eps float32)

	// Softplus: x = log(1 + exp(x)), and x itself above 20 (torch's threshold).
	Softplus(x []float32)
}

// RoPEShape checks the arguments of Device.RoPE and returns the rows of x
// and the rotated half width (len(cos)/rows); rows is 0 when x holds no
// whole row. The error is a backend's bug, which it panics with.
func RoPEShape(x []float32, heads, headDim int, cos, sin []float32) (rows, half int, err error) {
	if len(x) == 0 {
		return 0, 0, nil
	}
	if heads <= 0 || headDim <= 0 {
		return 0, 0, fmt.Errorf("RoPE: %d heads of %d dimensions", heads, headDim)
	}
	if rows = len(x) / (heads * headDim); rows == 0 {
		return 0, 0, nil
	}
	half = len(cos) / rows
	if half*2 > headDim {
		return 0, 0, fmt.Errorf("RoPE: rotary dims %d exceed head dim %d", 2*half, headDim)
	}
	if len(sin) < rows*half {
		return 0, 0, fmt.Errorf("RoPE sin: slice has %d elements, need %d", len(sin), rows*half)
	}
	return rows, half, nil
}

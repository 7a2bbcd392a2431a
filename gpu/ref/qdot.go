package ref

// The reference of what the fast backends compute with quantized weights.
//
// A quantized matmul does not widen the weights: it quantizes each row of x
// per block too, takes the dot product of the integer quants of a weight
// block and an activation block in integer arithmetic, and multiplies that
// by the blocks' scales (the approach of llama.cpp). The result differs from
// MatMul's (x times the dequantized weights) by the quantization error of
// the activations, which is what the kernels must reproduce to within float
// rounding and what this file defines:
//
//   - Types with blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) take x in
//     blocks of 32; types with super-blocks of 256 (Q2_K ... Q6_K) take x in
//     blocks of 256 with the sums of every 16 quants (llama.cpp's Q8_K).
//   - An activation block of x has the scale d = amax/127 (amax the largest
//     |x|, d = 0 for an all-zero block) and the quants
//     q = roundToEven(x * (127/amax)), each product rounded to float32 first,
//     clamped to [-127, 127]; also the sum of its quants (per 16 for blocks
//     of 256). The backends must produce these same quants bit for bit.
//   - Per weight block, the integer dot products of the stored (unsigned)
//     weight quants with the activation quants, and the offsets and minimums
//     applied through the activation sums, are exact; the float part is
//     d_w*d_x*sumi (plus m_w*d_x*sum_x for Q4_1/Q5_1, minus dmin*d_x*Σmin*sum
//     for the K types with minimums).

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/gpu"
)

// ActBlock is one block of quantized activations: scale D, quants Q (32 or
// 256 of them) and the sums of each run of SumLen consecutive quants.
type ActBlock struct {
	D    float32
	Q    []int8
	Sums []int32
}

// ActBlockSize is the number of elements per activation block the kernels
// pair with weights of dtype d: 32 for the types with blocks of 32, 256 for
// the K types, 0 for plain and unknown dtypes.
func ActBlockSize(d gpu.DType) int {
	if !d.Quantized() {
		return 0
	}
	return d.BlockSize()
}

// QuantizeAct quantizes x (a multiple of bs elements, bs 32 or 256) into
// blocks of bs as the kernels do (see the file comment); the sums are per 32
// quants for bs 32 (one per block) and per 16 for bs 256.
func QuantizeAct(x []float32, bs int) []ActBlock {
	sumLen := 16
	if bs == 32 {
		sumLen = 32
	}
	out := make([]ActBlock, len(x)/bs)
	for b := range out {
		xb := x[b*bs : (b+1)*bs]
		var amax float32
		for _, v := range xb {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax = a
			}
		}
		blk := ActBlock{D: amax / 127, Q: make([]int8, bs), Sums: make([]int32, bs/sumLen)}
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for i, v := range xb {
			p := v * id
			q := math.RoundToEven(float64(p))
			q = math.Max(-127, math.Min(127, q))
			blk.Q[i] = int8(q)
			blk.Sums[i/sumLen] += int32(q)
		}
		out[b] = blk
	}
	return out
}

// QuantMatMul is the reference of the quantized-activation matmul of the
// fast backends: dst[i][j] = the dot product of row i of x, quantized per
// block (QuantizeAct), with row j of w, from the integer block dot products
// times the scales, accumulated in float64. w must be quantized. When mag is
// not nil it receives, per output, the sum of the absolute values of every
// float term the result is made of (the scale against which a float32
// evaluation's rounding error is measured).
func QuantMatMul(dst, x []float32, m int, w *gpu.Weight, mag []float32) error {
	bs := ActBlockSize(w.DType)
	if bs == 0 {
		return fmt.Errorf("ref: QuantMatMul: %v weights are not quantized", w.DType)
	}
	if w.Cols%bs != 0 {
		return fmt.Errorf("ref: QuantMatMul: %d columns is not a multiple of %d", w.Cols, bs)
	}
	rb, bb := w.RowBytes(), w.DType.BlockBytes()
	for i := 0; i < m; i++ {
		act := QuantizeAct(x[i*w.Cols:(i+1)*w.Cols], bs)
		for j := 0; j < w.Rows; j++ {
			row := w.Data[j*rb : (j+1)*rb]
			var s, a float64
			for b := range act {
				v, am := blockDot(w.DType, row[b*bb:(b+1)*bb], &act[b])
				s += v
				a += am
			}
			dst[i*w.Rows+j] = float32(s)
			if mag != nil {
				mag[i*w.Rows+j] = float32(a)
			}
		}
	}
	return nil
}

func f16(b []byte) float64 { return float64(gpu.F16ToF32(binary.LittleEndian.Uint16(b))) }

func iabs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// blockDot returns one weight block's term of the dot product with the
// activation block a, and the sum of the absolute values of its float terms.
func blockDot(t gpu.DType, w []byte, a *ActBlock) (val, mag float64) {
	da := float64(a.D)
	switch t {
	case gpu.Q8_0:
		d := f16(w)
		var sumi, absi int64
		for i := range 32 {
			p := int64(int8(w[2+i])) * int64(a.Q[i])
			sumi += p
			absi += iabs(p)
		}
		return d * da * float64(sumi), math.Abs(d*da) * float64(absi)
	case gpu.Q4_0, gpu.Q5_0, gpu.Q4_1, gpu.Q5_1:
		var q [32]int64
		d, mn := f16(w), 0.0
		var off int64
		switch t {
		case gpu.Q4_0:
			for j := range 16 {
				q[j], q[j+16] = int64(w[2+j]&15), int64(w[2+j]>>4)
			}
			off = 8
		case gpu.Q4_1:
			mn = f16(w[2:])
			for j := range 16 {
				q[j], q[j+16] = int64(w[4+j]&15), int64(w[4+j]>>4)
			}
		case gpu.Q5_0:
			qh := binary.LittleEndian.Uint32(w[2:])
			for j := range 16 {
				q[j] = int64(w[6+j]&15) | int64(qh>>j&1)<<4
				q[j+16] = int64(w[6+j]>>4) | int64(qh>>(j+16)&1)<<4
			}
			off = 16
		case gpu.Q5_1:
			mn = f16(w[2:])
			qh := binary.LittleEndian.Uint32(w[4:])
			for j := range 16 {
				q[j] = int64(w[8+j]&15) | int64(qh>>j&1)<<4
				q[j+16] = int64(w[8+j]>>4) | int64(qh>>(j+16)&1)<<4
			}
		}
		var sumi, absi int64
		for i := range 32 {
			p := q[i] * int64(a.Q[i])
			sumi += p
			absi += iabs(p)
		}
		suma := int64(a.Sums[0])
		sumi -= off * suma
		absi += off * iabs(suma)
		val = d * da * float64(sumi)
		mag = math.Abs(d*da) * float64(absi)
		if mn != 0 {
			val += mn * da * float64(suma)
			mag += math.Abs(mn * da * float64(suma))
		}
		return val, mag
	}
	// K types: integer quants u (unsigned as stored, offset off), a scale per
	// sub-block (and a minimum for Q2_K, Q4_K, Q5_K).
	var u [256]int64
	var sc, mn []int64
	var off int64
	var d, dmin float64
	switch t {
	case gpu.Q2_K:
		scales, qs := w[0:16], w[16:80]
		d, dmin = f16(w[80:]), f16(w[82:])
		for e := range 256 {
			h, j, l := e/128, e%128/32, e%32
			u[e] = int64(qs[h*32+l] >> (2 * j) & 3)
		}
		for s := range 16 {
			sc = append(sc, int64(scales[s]&15))
			mn = append(mn, int64(scales[s]>>4))
		}
	case gpu.Q3_K:
		hmask, qs, scales := w[0:32], w[32:96], w[96:108]
		d = f16(w[108:])
		for e := range 256 {
			h, j, l := e/128, e%128/32, e%32
			u[e] = int64(qs[h*32+l]>>(2*j)&3) | int64(hmask[l]>>(h*4+j)&1)<<2
		}
		for i := range 16 {
			var low uint8
			if i < 8 {
				low = scales[i] & 15
			} else {
				low = scales[i-8] >> 4
			}
			high := scales[8+i%4] >> (2 * (i / 4)) & 3
			sc = append(sc, int64(low|high<<4)-32)
		}
		off = 4
	case gpu.Q4_K, gpu.Q5_K:
		d, dmin = f16(w[0:]), f16(w[2:])
		scales := w[4:16]
		qs := w[16:144]
		var qh []byte
		if t == gpu.Q5_K {
			qh, qs = w[16:48], w[48:176]
		}
		for s := range 8 {
			var a, b uint8
			if s < 4 {
				a, b = scales[s]&63, scales[s+4]&63
			} else {
				a = scales[s+4]&15 | (scales[s-4]>>6)<<4
				b = scales[s+4]>>4 | (scales[s]>>6)<<4
			}
			// per 16, so that every type has 16 sub-blocks
			sc = append(sc, int64(a), int64(a))
			mn = append(mn, int64(b), int64(b))
			for l := range 32 {
				v := int64(qs[s/2*32+l] >> (4 * (s % 2)) & 15)
				if qh != nil {
					v |= int64(qh[l]>>s&1) << 4
				}
				u[s*32+l] = v
			}
		}
	case gpu.Q6_K:
		ql, qh, scales := w[0:128], w[128:192], w[192:208]
		d = f16(w[208:])
		for e := range 256 {
			h, j, l := e/128, e%128/32, e%32
			low := ql[h*64+(j%2)*32+l] >> (4 * (j / 2)) & 15
			high := qh[h*32+l] >> (2 * j) & 3
			u[e] = int64(low | high<<4)
		}
		for s := range 16 {
			sc = append(sc, int64(int8(scales[s])))
		}
		off = 32
	default:
		panic(fmt.Sprintf("ref: no quantized dot product for %v", t))
	}
	var isum, iabsum, msum, mabs int64
	for s := range 16 {
		var p, pa int64
		for l := range 16 {
			v := u[s*16+l] * int64(a.Q[s*16+l])
			p += v
			pa += iabs(v)
		}
		bsum := int64(a.Sums[s])
		p -= off * bsum
		pa += off * iabs(bsum)
		isum += sc[s] * p
		iabsum += iabs(sc[s]) * pa
		if mn != nil {
			msum += mn[s] * bsum
			mabs += mn[s] * iabs(bsum)
		}
	}
	val = d * da * float64(isum)
	mag = math.Abs(d*da) * float64(iabsum)
	if mn != nil {
		val -= dmin * da * float64(msum)
		mag += math.Abs(dmin*da) * float64(mabs)
	}
	return val, mag
}

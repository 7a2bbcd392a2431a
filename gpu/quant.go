package gpu

// Block dequantizers of the ggml quantized types (moved here from gpu/ref so
// that Weight.At and the backends can widen quantized weights; gpu/ref's
// Dequantize is built on them and remains the documented specification).
//
// They are written for reading, one function per type, each following the
// type's block layout (ggml's block_* structs in ggml-common.h) field by
// field, and are bit-exact against gguf-py's gguf.quants.dequantize, which
// is itself bit-identical to ggml's C dequantizers (to_float), checked on
// every tensor of the shared GGUF fixtures (gpu/ref's TestDequantizeFixtures).
//
// Bit-exactness depends on the order and rounding of each float32 operation,
// which this code fixes as ggml and gguf-py do: scales are F16 widened
// exactly to float32; a sub-block scale is the float32 product
// d * float32(scale); an element is that scale times the quant, rounded,
// then (for the types with a minimum) minus or plus the offset, rounded
// again. Most of these products are exact (an F16 has 11 significant bits,
// a sub-scale at most 8, a quant at most 6), so rounding happens in Q6_K's
// (d * scale) * q and in the additions of the minimum. Go may fuse x*y + z
// into one fused multiply-add, which rounds once; every such expression here
// converts the product with float32(...) first, which the Go spec defines
// to round and so forbids the fusion.

import (
	"encoding/binary"
	"math"
)

// BlockFunc dequantizes one block of a quantized type: b holds the type's
// BlockBytes bytes, dst receives its BlockSize elements. The functions of
// the plain types (block size 1) convert any number of elements in one call.
type BlockFunc func(dst []float32, b []byte)

// Dequantizer returns the block function of d, nil for an unknown dtype.
func (d DType) Dequantizer() BlockFunc {
	switch d {
	case F32:
		return DequantF32
	case F16:
		return DequantF16
	case BF16:
		return DequantBF16
	case Q8_0:
		return DequantQ8_0
	case Q4_0:
		return DequantQ4_0
	case Q4_1:
		return DequantQ4_1
	case Q5_0:
		return DequantQ5_0
	case Q5_1:
		return DequantQ5_1
	case Q2_K:
		return DequantQ2_K
	case Q3_K:
		return DequantQ3_K
	case Q4_K:
		return DequantQ4_K
	case Q5_K:
		return DequantQ5_K
	case Q6_K:
		return DequantQ6_K
	}
	return nil
}

// f16 reads the little-endian IEEE half at b[0:2], widened exactly.
func f16(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// DequantF32 converts F32: little-endian IEEE single.
func DequantF32(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// DequantF16 converts F16: little-endian IEEE half, widened exactly (NaN payloads kept).
func DequantF16(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = f16(b[2*i:])
	}
}

// DequantBF16 converts BF16: the high 16 bits of a float32.
func DequantBF16(dst []float32, b []byte) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
	}
}

// DequantQ8_0 dequantizes a block of Q8_0, 32 elements in 34 bytes: d (F16), qs[32] (int8).
// x[i] = qs[i] * d.
func DequantQ8_0(dst []float32, b []byte) {
	d := f16(b[0:])
	qs := b[2:34]
	for i := range 32 {
		dst[i] = float32(int8(qs[i])) * d
	}
}

// DequantQ4_0 dequantizes a block of Q4_0, 32 elements in 18 bytes: d (F16), qs[16] (the low nibbles hold
// elements 0-15, the high nibbles elements 16-31).
// x[i] = (q[i] - 8) * d.
func DequantQ4_0(dst []float32, b []byte) {
	d := f16(b[0:])
	qs := b[2:18]
	for j := range 16 {
		dst[j] = float32(int(qs[j]&0x0f)-8) * d
		dst[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// DequantQ4_1 dequantizes a block of Q4_1, 32 elements in 20 bytes: d (F16), m (F16), qs[16] as in Q4_0.
// x[i] = q[i] * d + m.
func DequantQ4_1(dst []float32, b []byte) {
	d, m := f16(b[0:]), f16(b[2:])
	qs := b[4:20]
	for j := range 16 {
		dst[j] = float32(float32(qs[j]&0x0f)*d) + m
		dst[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

// DequantQ5_0 dequantizes a block of Q5_0, 32 elements in 22 bytes: d (F16), qh (uint32: bit i is the fifth
// bit of element i), qs[16] (the low four bits, as in Q4_0).
// x[i] = (q[i] - 16) * d.
func DequantQ5_0(dst []float32, b []byte) {
	d := f16(b[0:])
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	for j := range 16 {
		lo := int(qs[j]&0x0f) | int(qh>>j&1)<<4
		hi := int(qs[j]>>4) | int(qh>>(j+16)&1)<<4
		dst[j] = float32(lo-16) * d
		dst[j+16] = float32(hi-16) * d
	}
}

// DequantQ5_1 dequantizes a block of Q5_1, 32 elements in 24 bytes: d (F16), m (F16), qh (uint32), qs[16] as in
// Q5_0.
// x[i] = q[i] * d + m.
func DequantQ5_1(dst []float32, b []byte) {
	d, m := f16(b[0:]), f16(b[2:])
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	for j := range 16 {
		lo := qs[j]&0x0f | uint8(qh>>j&1)<<4
		hi := qs[j]>>4 | uint8(qh>>(j+16)&1)<<4
		dst[j] = float32(float32(lo)*d) + m
		dst[j+16] = float32(float32(hi)*d) + m
	}
}

// DequantQ2_K dequantizes a block of Q2_K, 256 elements in 84 bytes: scales[16] (per 16 elements: the scale in
// the low nibble, the minimum in the high nibble), qs[64] (2-bit quants),
// d (F16), dmin (F16).
//
// The quants come in two halves of 128 elements; in half h, element
// h*128 + j*32 + l (j = 0..3, l = 0..31) is bits 2j..2j+1 of qs[h*32 + l].
// x[e] = (d * scale[e/16]) * q[e] - (dmin * min[e/16]).
func DequantQ2_K(dst []float32, b []byte) {
	scales := b[0:16]
	qs := b[16:80]
	d, dmin := f16(b[80:]), f16(b[82:])
	for h := range 2 {
		for j := range 4 {
			for l := range 32 {
				e := h*128 + j*32 + l
				sc := scales[e/16]
				dl := float32(d * float32(sc&0x0f))
				ml := float32(dmin * float32(sc>>4))
				q := qs[h*32+l] >> (2 * j) & 3
				dst[e] = float32(dl*float32(q)) - ml
			}
		}
	}
}

// DequantQ3_K dequantizes a block of Q3_K, 256 elements in 110 bytes: hmask[32] (high bits), qs[64] (low two
// bits), scales[12] (sixteen 6-bit signed scales), d (F16).
//
// Element e = h*128 + j*32 + l (h = 0..1, j = 0..3, l = 0..31) has its low
// two bits at bits 2j..2j+1 of qs[h*32 + l] and its high bit at bit h*4 + j
// (= e/32) of hmask[l]; the quant is low - 4 when the high bit is clear,
// low when it is set. Scale i (0..15) has its low four bits in the low
// nibble of scales[i] for i < 8, the high nibble of scales[i-8] for i >= 8,
// and its top two bits at bits 2*(i/4)..2*(i/4)+1 of scales[8 + i%4]; the
// six bits are stored with an offset of 32.
// x[e] = (d * (scale[e/16] - 32)) * q[e].
func DequantQ3_K(dst []float32, b []byte) {
	hmask := b[0:32]
	qs := b[32:96]
	scales := b[96:108]
	d := f16(b[108:])
	var sc [16]int
	for i := range 16 {
		var low uint8
		if i < 8 {
			low = scales[i] & 0x0f
		} else {
			low = scales[i-8] >> 4
		}
		high := scales[8+i%4] >> (2 * (i / 4)) & 3
		sc[i] = int(low|high<<4) - 32
	}
	for h := range 2 {
		for j := range 4 {
			for l := range 32 {
				e := h*128 + j*32 + l
				q := int(qs[h*32+l] >> (2 * j) & 3)
				if hmask[l]>>(h*4+j)&1 == 0 {
					q -= 4
				}
				dl := float32(d * float32(sc[e/16]))
				dst[e] = dl * float32(q)
			}
		}
	}
}

// kScaleMin unpacks the eight 6-bit scales and minimums of a Q4_K or Q5_K
// block from its 12 scale bytes: for sub-block s < 4 they are the low six
// bits of bytes s and s+4; for s >= 4 the low four bits come from byte s+4
// (scale: low nibble, minimum: high nibble) and the top two from the top two
// bits of bytes s-4 (scale) and s (minimum).
func kScaleMin(scales []byte) (sc, mn [8]uint8) {
	for s := range 8 {
		if s < 4 {
			sc[s] = scales[s] & 63
			mn[s] = scales[s+4] & 63
		} else {
			sc[s] = scales[s+4]&0x0f | (scales[s-4]>>6)<<4
			mn[s] = scales[s+4]>>4 | (scales[s]>>6)<<4
		}
	}
	return sc, mn
}

// DequantQ4_K dequantizes a block of Q4_K, 256 elements in 144 bytes: d (F16), dmin (F16), scales[12] (eight
// 6-bit scales and minimums, see kScaleMin), qs[128] (4-bit quants).
//
// Sub-block s (32 elements) is 2c+k: the low (k = 0) or high (k = 1) nibbles
// of qs[c*32 : c*32+32].
// x[s*32 + l] = (d * scale[s]) * q - (dmin * min[s]).
func DequantQ4_K(dst []float32, b []byte) {
	d, dmin := f16(b[0:]), f16(b[2:])
	sc, mn := kScaleMin(b[4:16])
	qs := b[16:144]
	for s := range 8 {
		d1 := float32(d * float32(sc[s]))
		m1 := float32(dmin * float32(mn[s]))
		c, k := s/2, s%2
		for l := range 32 {
			q := qs[c*32+l] >> (4 * k) & 0x0f
			dst[s*32+l] = float32(d1*float32(q)) - m1
		}
	}
}

// DequantQ5_K dequantizes a block of Q5_K, 256 elements in 176 bytes: d (F16), dmin (F16), scales[12] as in
// Q4_K, qh[32] (bit s of qh[l] is the fifth bit of element s*32 + l),
// qs[128] (the low four bits, laid out as in Q4_K).
// x[s*32 + l] = (d * scale[s]) * q - (dmin * min[s]).
func DequantQ5_K(dst []float32, b []byte) {
	d, dmin := f16(b[0:]), f16(b[2:])
	sc, mn := kScaleMin(b[4:16])
	qh := b[16:48]
	qs := b[48:176]
	for s := range 8 {
		d1 := float32(d * float32(sc[s]))
		m1 := float32(dmin * float32(mn[s]))
		c, k := s/2, s%2
		for l := range 32 {
			q := qs[c*32+l]>>(4*k)&0x0f | (qh[l]>>s&1)<<4
			dst[s*32+l] = float32(d1*float32(q)) - m1
		}
	}
}

// DequantQ6_K dequantizes a block of Q6_K, 256 elements in 210 bytes: ql[128] (low four bits), qh[64] (high two
// bits), scales[16] (int8, per 16 elements), d (F16).
//
// In half h (128 elements), element h*128 + j*32 + l (j = 0..3, l = 0..31)
// has its low bits in the low (j < 2) or high (j >= 2) nibble of
// ql[h*64 + (j%2)*32 + l] and its high bits at bits 2j..2j+1 of
// qh[h*32 + l]; the six bits are stored with an offset of 32.
// x[e] = (d * scale[e/16]) * (q[e] - 32).
func DequantQ6_K(dst []float32, b []byte) {
	ql := b[0:128]
	qh := b[128:192]
	scales := b[192:208]
	d := f16(b[208:])
	for h := range 2 {
		for j := range 4 {
			for l := range 32 {
				e := h*128 + j*32 + l
				low := ql[h*64+(j%2)*32+l] >> (4 * (j / 2)) & 0x0f
				high := qh[h*32+l] >> (2 * j) & 3
				q := int(low|high<<4) - 32
				dl := float32(d * float32(int8(scales[e/16])))
				dst[e] = dl * float32(q)
			}
		}
	}
}

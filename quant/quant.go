// Package quant quantizes float32 weights into ggml's block formats, the
// inverse of gpu/ref's dequantizers: what `troupe quantize` writes into GGUF
// files and what serve --quantize keeps in memory.
//
// The algorithms are those of llama.cpp's reference quantizers (the
// quantize_row_*_ref functions of ggml-quants.c, which llama-quantize uses
// when it has no importance matrix), written anew in Go from their
// description: per block of 32, Q8_0 and the legacy 4- and 5-bit types take
// the block's extreme values as the scale; per super-block of 256, the
// K-quants fit a scale (and a minimum for Q4_K and Q5_K) to each sub-block
// with a weighted least-squares search over candidate scales, then quantize
// the sub-block scales themselves to 6 or 8 bits and the weights again with
// the rounded scales. So a file troupe writes holds the same kind of blocks
// llama-quantize writes, and TestQuantizeFixtures checks how close they are
// on llama.cpp's own files.
//
// Every float operation is float32, in the order the description gives, with
// no fused multiply-add.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
)

// Types are the types Quantize writes.
var Types = []gguf.GGMLType{gguf.F32, gguf.F16, gguf.BF16, gguf.Q8_0, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K}

// Quantize encodes src (whole rows, each a multiple of t's block size) as
// type t.
func Quantize(t gguf.GGMLType, src []float32) ([]byte, error) {
	n := int64(len(src))
	size, err := t.RowSize(n)
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	dst := make([]byte, size)
	bs, ts := t.BlockSize(), t.TypeSize()
	blocks := len(src) / bs
	var row func(x []float32, y []byte)
	switch t {
	case gguf.F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
		return dst, nil
	case gguf.F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], gpu.F32ToF16(v))
		}
		return dst, nil
	case gguf.BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], gpu.F32ToBF16(v))
		}
		return dst, nil
	case gguf.Q8_0:
		row = q8_0
	case gguf.Q4_0:
		row = q4_0
	case gguf.Q4_1:
		row = q4_1
	case gguf.Q5_0:
		row = q5_0
	case gguf.Q5_1:
		row = q5_1
	case gguf.Q4_K:
		row = q4K
	case gguf.Q5_K:
		row = q5K
	case gguf.Q6_K:
		row = q6K
	default:
		return nil, fmt.Errorf("quant: no quantizer for %v (have %v)", t, Types)
	}
	for b := range blocks {
		row(src[b*bs:(b+1)*bs], dst[b*ts:(b+1)*ts])
	}
	return dst, nil
}

func putF16(b []byte, v float32) { binary.LittleEndian.PutUint16(b, gpu.F32ToF16(v)) }
func f16(v float32) float32      { return gpu.F16ToF32(gpu.F32ToF16(v)) }

// nearestInt rounds to the nearest integer, ties to even, for |f| < 2^22:
// adding 1.5·2^23 leaves the integer in the low mantissa bits.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// absMax is the value of largest magnitude (the first of ties), and its
// magnitude.
func absMax(x []float32) (max, amax float32) {
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	return max, amax
}

// q8_0: 32 int8 with one f16 scale, amax/127.
func q8_0(x []float32, y []byte) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	for j, v := range x {
		y[2+j] = byte(int8(math.Round(float64(v * id))))
	}
}

// q4_0: 32 4-bit values, offset 8, scale max/-8 (max: the value of largest
// magnitude), low nibbles the first half.
func q4_0(x []float32, y []byte) {
	m, _ := absMax(x)
	d := m / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	for j := range 16 {
		a := min(15, uint8(int8(x[j]*id+8.5)))
		b := min(15, uint8(int8(x[16+j]*id+8.5)))
		y[2+j] = a | b<<4
	}
}

// minMax are the block's least and largest values.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// q4_1: 32 4-bit values with an f16 scale (max-min)/15 and minimum.
func q4_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	putF16(y[2:], lo)
	for j := range 16 {
		a := min(15, uint8(int8((x[j]-lo)*id+0.5)))
		b := min(15, uint8(int8((x[16+j]-lo)*id+0.5)))
		y[4+j] = a | b<<4
	}
}

// q5_0: 32 5-bit values, offset 16, scale max/-16; the fifth bits in a
// 32-bit word.
func q5_0(x []float32, y []byte) {
	m, _ := absMax(x)
	d := m / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	var qh uint32
	for j := range 16 {
		a := min(31, uint8(int8(x[j]*id+16.5)))
		b := min(31, uint8(int8(x[16+j]*id+16.5)))
		y[6+j] = a&0xF | (b&0xF)<<4
		qh |= uint32(a>>4) << j
		qh |= uint32(b>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[2:], qh)
}

// q5_1: 32 5-bit values with an f16 scale (max-min)/31 and minimum.
func q5_1(x []float32, y []byte) {
	lo, hi := minMax(x)
	d := (hi - lo) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putF16(y, d)
	putF16(y[2:], lo)
	var qh uint32
	for j := range 16 {
		a := uint8((x[j]-lo)*id + 0.5)
		b := uint8((x[16+j]-lo)*id + 0.5)
		y[8+j] = a&0xF | (b&0xF)<<4
		qh |= uint32(a>>4&1) << j
		qh |= uint32(b>>4&1) << (j + 16)
	}
	binary.LittleEndian.PutUint32(y[4:], qh)
}

// fitScaleMin fits x ≈ scale·L + min with L in [0, nmax] and min ≤ 0,
// minimising the weighted squared error: it starts from the range's scale,
// then tries nstep+1 candidate scales (nmax + rmin + rdelta·k over the
// range), solving the weighted least squares for scale and min at each
// candidate's levels, and keeps the best. It returns the scale and -min, and
// leaves the levels in L.
func fitScaleMin(x, w []float32, L []uint8, nmax int, rmin, rdelta float32, nstep int) (scale, negMin float32) {
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := sumW * x[0]
	for i := 1; i < len(x); i++ {
		lo, hi = min(lo, x[i]), max(hi, x[i])
		sumW += w[i]
		sumX += w[i] * x[i]
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var best float32
	for i, v := range x {
		l := max(0, min(nmax, nearestInt(iscale*(v-lo))))
		L[i] = uint8(l)
		diff := scale*float32(l) + lo - v
		best += w[i] * (diff * diff)
	}
	var aux [32]uint8
	for is := 0; is <= nstep; is++ {
		iscale = (rmin + rdelta*float32(is) + float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := max(0, min(nmax, nearestInt(iscale*(v-lo))))
			aux[i] = uint8(l)
			fl := float32(l)
			sumL += w[i] * fl
			sumL2 += w[i] * fl * fl
			sumXL += w[i] * fl * v
		}
		D := sumW*sumL2 - sumL*sumL
		if D <= 0 {
			continue
		}
		thisScale := (sumW*sumXL - sumX*sumL) / D
		thisMin := (sumL2*sumX - sumL*sumXL) / D
		if thisMin > 0 {
			thisMin = 0
			thisScale = sumXL / sumL2
		}
		var cur float32
		for i, v := range x {
			diff := thisScale*float32(aux[i]) + thisMin - v
			cur += w[i] * (diff * diff)
		}
		if cur < best {
			copy(L, aux[:len(x)])
			best, scale, lo = cur, thisScale, thisMin
		}
	}
	return scale, -lo
}

// subScales quantizes the eight sub-block scales and minimums of a Q4_K or
// Q5_K super-block to 6 bits against their largest, packed as
// get_scale_min_k4 reads them, and writes d and dmin (f16) to y[0:4] and
// the packed 12 bytes to y[4:16]. It returns the effective scale and
// minimum of each sub-block.
func subScales(scales, mins []float32, y []byte) (d, m [8]float32) {
	var maxScale, maxMin float32
	for j := range 8 {
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	clear(sc)
	var ls, lm [8]uint8
	for j := range 8 {
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			sc[j], sc[j+4] = ls[j], lm[j]
		} else {
			sc[j+4] = ls[j]&0xF | (lm[j]&0xF)<<4
			sc[j-4] |= (ls[j] >> 4) << 6
			sc[j] |= (lm[j] >> 4) << 6
		}
	}
	putF16(y, maxScale/63)
	putF16(y[2:], maxMin/63)
	dd, dm := f16(maxScale/63), f16(maxMin/63)
	for j := range 8 {
		d[j], m[j] = dd*float32(ls[j]), dm*float32(lm[j])
	}
	return d, m
}

// kLevels fits each sub-block of 32 of a Q4_K/Q5_K super-block (weights
// rms + |x|), writes the scales, and requantizes x against the rounded
// scales into L (0..nmax).
func kLevels(x []float32, y []byte, L *[256]uint8, nmax int, rmin, rdelta float32, nstep int) {
	var scales, mins [8]float32
	var w [32]float32
	for j := range 8 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += v * v
		}
		av := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			w[l] = av + abs32(v)
		}
		scales[j], mins[j] = fitScaleMin(xs, w[:], L[32*j:32*j+32], nmax, rmin, rdelta, nstep)
	}
	d, m := subScales(scales[:], mins[:], y)
	for j := range 8 {
		if d[j] == 0 {
			continue
		}
		for i := range 32 {
			l := nearestInt((x[32*j+i] + m[j]) / d[j])
			L[32*j+i] = uint8(max(0, min(nmax, l)))
		}
	}
}

// q4K: a super-block of 256 in eight sub-blocks of 32, 4-bit levels with a
// 6-bit scale and minimum each; 144 bytes: d, dmin, 12 bytes of scales,
// 128 of nibbles (32 bytes per 64 values: low nibbles the first 32).
func q4K(x []float32, y []byte) {
	var L [256]uint8
	kLevels(x, y, &L, 15, -1, 0.1, 20)
	q := y[16:]
	for j := 0; j < 256; j += 64 {
		for l := range 32 {
			q[l] = L[j+l] | L[j+l+32]<<4
		}
		q = q[32:]
	}
}

// q5K: as Q4_K with 5-bit levels, the fifth bits in 32 bytes (qh) before
// the nibbles; 176 bytes.
func q5K(x []float32, y []byte) {
	var L [256]uint8
	kLevels(x, y, &L, 31, -0.5, 0.1, 15)
	qh, ql := y[16:48], y[48:]
	clear(qh)
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < 256; n += 64 {
		for j := range 32 {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[j] = l1 | l2<<4
		}
		m1, m2 = m1<<2, m2<<2
		ql = ql[32:]
	}
}

// fitScale fits x ≈ scale·(L - nmax) with L in [0, 2·nmax), weights x²: it
// starts from the scale that maps the value of largest magnitude to -nmax,
// takes the least-squares scale at those levels, then tries 18 nearby
// starting scales and keeps the best fit. Levels are left in L.
func fitScale(x []float32, L []int8, nmax int) float32 {
	m, amax := absMax(x)
	if amax < 1e-15 {
		clear(L)
		return 0
	}
	iscale := -float32(nmax) / m
	level := func(v float32) int { return max(-nmax, min(nmax-1, nearestInt(iscale*v))) }
	var sumLX, sumL2 float32
	for i, v := range x {
		l := level(v)
		L[i] = int8(l + nmax)
		w := v * v
		fl := float32(l)
		sumLX += w * v * fl
		sumL2 += w * fl * fl
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + 0.1*float32(is)) / m
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := float32(level(v))
			w := v * v
			sumLX += w * v * l
			sumL2 += w * l * l
		}
		if sumL2 > 0 && sumLX*sumLX > best*sumL2 {
			for i, v := range x {
				L[i] = int8(level(v) + nmax)
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

// q6K: a super-block of 256 in sixteen sub-blocks of 16, 6-bit levels
// (offset 32) with an 8-bit scale each; 210 bytes: 128 of low nibbles, 64
// of high bit pairs, 16 scales, d.
func q6K(x []float32, y []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := range 16 {
		s := fitScale(x[16*ib:16*ib+16], L[16*ib:16*ib+16], 32)
		scales[ib] = s
		if a := abs32(s); a > maxAbs {
			maxAbs, maxScale = a, s
		}
	}
	clear(y[:210])
	if maxAbs < 1e-15 {
		return
	}
	iscale := -128 / maxScale
	putF16(y[208:], 1/iscale)
	d := f16(1 / iscale)
	sc := y[192:208]
	for ib := range 16 {
		sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	for j := range 16 {
		dj := d * float32(int8(sc[j]))
		if dj == 0 {
			continue
		}
		for i := range 16 {
			l := max(-32, min(31, nearestInt(x[16*j+i]/dj)))
			L[16*j+i] = int8(l + 32)
		}
	}
	ql, qh := y[0:128], y[128:192]
	for j := 0; j < 256; j += 128 {
		for l := range 32 {
			q1, q2, q3, q4 := uint8(L[j+l]), uint8(L[j+l+32]), uint8(L[j+l+64]), uint8(L[j+l+96])
			ql[l] = q1&0xF | (q3&0xF)<<4
			ql[l+32] = q2&0xF | (q4&0xF)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
}

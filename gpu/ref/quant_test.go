package ref

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
)

func TestDequantizePlainTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    gguf.GGMLType
		data []byte
		want []uint32 // float32 bits
	}{
		{"f32", gguf.F32, le32(0x3f800000, 0x7fc00001, 0x80000000), []uint32{0x3f800000, 0x7fc00001, 0x80000000}},
		{"f16 normal", gguf.F16, le16(0x3c00, 0xc000, 0x7bff, 0x0400), []uint32{0x3f800000, 0xc0000000, 0x477fe000, 0x38800000}},
		{"f16 subnormal", gguf.F16, le16(0x0001, 0x03ff, 0x8001), []uint32{0x33800000, 0x387fc000, 0xb3800000}},
		{"f16 zero inf nan", gguf.F16, le16(0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01), []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f802000}},
		{"bf16", gguf.BF16, le16(0x3f80, 0xc049, 0x7fc1, 0x0001), []uint32{0x3f800000, 0xc0490000, 0x7fc10000, 0x00010000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Dequantize(tc.t, tc.data, len(tc.want))
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range x {
				if math.Float32bits(v) != tc.want[i] {
					t.Errorf("element %d: %08x, want %08x", i, math.Float32bits(v), tc.want[i])
				}
			}
		})
	}
}

// TestDequantizeBF16 checks BF16 against gpu.F32ToBF16 on values a bfloat16
// holds exactly (no fixture file stores BF16).
func TestDequantizeBF16(t *testing.T) {
	want := []float32{0, 1, -2.5, math.Float32frombits(0x00080000), 3.140625, -65280}
	var data []byte
	for _, v := range want {
		data = binary.LittleEndian.AppendUint16(data, gpu.F32ToBF16(v))
	}
	x, err := Dequantize(gguf.BF16, data, len(want))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
			t.Errorf("element %d: %v, want %v", i, x[i], want[i])
		}
	}
}

func TestDequantizeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    gguf.GGMLType
		data []byte
		n    int
		msg  string
	}{
		{"unsupported quant", gguf.IQ2_XXS, make([]byte, 66), 256, "IQ2_XXS: unsupported type"},
		{"Q8_K is not a storage type here", gguf.Q8_K, make([]byte, 292), 256, "Q8_K: unsupported type"},
		{"unknown id", gguf.GGMLType(4), nil, 0, "GGMLType(4): unsupported type"},
		{"ragged row", gguf.Q4_K, make([]byte, 144), 200, "not a multiple of the block size 256"},
		{"short data", gguf.Q8_0, make([]byte, 33), 32, "32 elements take 34 bytes, data has 33"},
		{"long data", gguf.F16, make([]byte, 10), 4, "4 elements take 8 bytes, data has 10"},
		{"negative count", gguf.F32, nil, -4, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Dequantize(tc.t, tc.data, tc.n)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want one containing %q", err, tc.msg)
			}
		})
	}
	if !strings.Contains(func() string { _, err := Dequantize(gguf.IQ4_XS, nil, 0); return err.Error() }(), "Q6_K") {
		t.Error("the unsupported-type error does not list the supported types")
	}
}

// quantBlock is one block built from known quants and scales, with the
// values its elements must dequantize to.
type quantBlock struct {
	data []byte
	want []float32
}

// The pack* functions below write blocks in the other direction from the
// dequantizers: element by element, each quant's bits are placed where the
// layout puts them. With random quants and scales, a dequantizer that reads
// a bit from the wrong place fails; these tests need no fixtures.

func randF16(r *rand.Rand) (uint16, float32) {
	h := gpu.F32ToF16(float32(r.NormFloat64() * 0.01))
	return h, gpu.F16ToF32(h)
}

func packQ8_0(r *rand.Rand) quantBlock {
	dh, d := randF16(r)
	b := binary.LittleEndian.AppendUint16(nil, dh)
	var want []float32
	for range 32 {
		q := int8(r.IntN(256) - 128)
		b = append(b, uint8(q))
		want = append(want, float32(q)*d)
	}
	return quantBlock{b, want}
}

// packQ4Q5 packs the four legacy 4- and 5-bit types: bits of quant i go to
// the nibble of byte i%16 (low for i < 16) and, for 5 bits, to bit i of qh.
func packQ4Q5(r *rand.Rand, bits int, withMin bool) quantBlock {
	dh, d := randF16(r)
	mh, m := randF16(r)
	b := binary.LittleEndian.AppendUint16(nil, dh)
	if withMin {
		b = binary.LittleEndian.AppendUint16(b, mh)
	}
	var qh uint32
	qs := make([]byte, 16)
	want := make([]float32, 32)
	for i := range 32 {
		q := r.IntN(1 << bits)
		qs[i%16] |= uint8(q&15) << (4 * (i / 16))
		qh |= uint32(q>>4) << i
		switch {
		case withMin:
			want[i] = float32(float32(q)*d) + m
		default:
			want[i] = float32(q-(1<<(bits-1))) * d
		}
	}
	if bits == 5 {
		b = binary.LittleEndian.AppendUint32(b, qh)
	}
	return quantBlock{append(b, qs...), want}
}

func packQ2_K(r *rand.Rand) quantBlock {
	dh, d := randF16(r)
	mh, dmin := randF16(r)
	scales, qs := make([]byte, 16), make([]byte, 64)
	for i := range scales {
		scales[i] = uint8(r.IntN(256))
	}
	want := make([]float32, 256)
	for e := range 256 {
		q := r.IntN(4)
		qs[(e/128)*32+e%32] |= uint8(q) << (2 * (e % 128 / 32))
		sc, mn := float32(scales[e/16]&15), float32(scales[e/16]>>4)
		want[e] = float32(float32(d*sc)*float32(q)) - float32(dmin*mn)
	}
	b := append(scales, qs...)
	b = binary.LittleEndian.AppendUint16(b, dh)
	return quantBlock{binary.LittleEndian.AppendUint16(b, mh), want}
}

func packQ3_K(r *rand.Rand) quantBlock {
	dh, d := randF16(r)
	hmask, qs, scales := make([]byte, 32), make([]byte, 64), make([]byte, 12)
	var sc [16]int
	for i := range 16 {
		v := r.IntN(64)
		sc[i] = v - 32
		if i < 8 {
			scales[i] |= uint8(v & 15)
		} else {
			scales[i-8] |= uint8(v&15) << 4
		}
		scales[8+i%4] |= uint8(v>>4) << (2 * (i / 4))
	}
	want := make([]float32, 256)
	for e := range 256 {
		v := r.IntN(8) // stored 3 bits: quant v-4
		qs[(e/128)*32+e%32] |= uint8(v&3) << (2 * (e % 128 / 32))
		hmask[e%32] |= uint8(v>>2) << (e / 32)
		want[e] = float32(d*float32(sc[e/16])) * float32(v-4)
	}
	b := append(append(hmask, qs...), scales...)
	return quantBlock{binary.LittleEndian.AppendUint16(b, dh), want}
}

// packQ4Q5_K packs Q4_K (bits 4) or Q5_K (bits 5).
func packQ4Q5_K(r *rand.Rand, bits int) quantBlock {
	dh, d := randF16(r)
	mh, dmin := randF16(r)
	scales := make([]byte, 12)
	var sc, mn [8]int
	for s := range 8 {
		sc[s], mn[s] = r.IntN(64), r.IntN(64)
		if s < 4 {
			scales[s] |= uint8(sc[s])
			scales[s+4] |= uint8(mn[s])
		} else {
			scales[s+4] = uint8(sc[s]&15) | uint8(mn[s]&15)<<4
			scales[s-4] |= uint8(sc[s]>>4) << 6
			scales[s] |= uint8(mn[s]>>4) << 6
		}
	}
	qh, qs := make([]byte, 32), make([]byte, 128)
	want := make([]float32, 256)
	for e := range 256 {
		q := r.IntN(1 << bits)
		s := e / 32
		qs[(s/2)*32+e%32] |= uint8(q&15) << (4 * (s % 2))
		qh[e%32] |= uint8(q>>4) << s
		want[e] = float32(float32(d*float32(sc[s]))*float32(q)) - float32(dmin*float32(mn[s]))
	}
	b := binary.LittleEndian.AppendUint16(nil, dh)
	b = binary.LittleEndian.AppendUint16(b, mh)
	b = append(b, scales...)
	if bits == 5 {
		b = append(b, qh...)
	}
	return quantBlock{append(b, qs...), want}
}

func packQ6_K(r *rand.Rand) quantBlock {
	dh, d := randF16(r)
	ql, qh, scales := make([]byte, 128), make([]byte, 64), make([]byte, 16)
	for i := range scales {
		scales[i] = uint8(r.IntN(256))
	}
	want := make([]float32, 256)
	for e := range 256 {
		q := r.IntN(64)
		h, j, l := e/128, e%128/32, e%32
		ql[h*64+(j%2)*32+l] |= uint8(q&15) << (4 * (j / 2))
		qh[h*32+l] |= uint8(q>>4) << (2 * j)
		want[e] = float32(d*float32(int8(scales[e/16]))) * float32(q-32)
	}
	b := append(append(ql, qh...), scales...)
	return quantBlock{binary.LittleEndian.AppendUint16(b, dh), want}
}

// TestDequantizePacked checks every quantized type on blocks packed from
// random quants and scales: every element must come out bit for bit as the
// layout and the formula say, across several blocks in one call.
func TestDequantizePacked(t *testing.T) {
	for _, tc := range []struct {
		t    gguf.GGMLType
		pack func(*rand.Rand) quantBlock
	}{
		{gguf.Q8_0, packQ8_0},
		{gguf.Q4_0, func(r *rand.Rand) quantBlock { return packQ4Q5(r, 4, false) }},
		{gguf.Q4_1, func(r *rand.Rand) quantBlock { return packQ4Q5(r, 4, true) }},
		{gguf.Q5_0, func(r *rand.Rand) quantBlock { return packQ4Q5(r, 5, false) }},
		{gguf.Q5_1, func(r *rand.Rand) quantBlock { return packQ4Q5(r, 5, true) }},
		{gguf.Q2_K, packQ2_K},
		{gguf.Q3_K, packQ3_K},
		{gguf.Q4_K, func(r *rand.Rand) quantBlock { return packQ4Q5_K(r, 4) }},
		{gguf.Q5_K, func(r *rand.Rand) quantBlock { return packQ4Q5_K(r, 5) }},
		{gguf.Q6_K, packQ6_K},
	} {
		t.Run(tc.t.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.t), 17))
			var data []byte
			var want []float32
			for range 5 {
				blk := tc.pack(r)
				if len(blk.data) != tc.t.TypeSize() || len(blk.want) != tc.t.BlockSize() {
					t.Fatalf("packed %d bytes / %d values, the type has %d / %d", len(blk.data), len(blk.want), tc.t.TypeSize(), tc.t.BlockSize())
				}
				data = append(data, blk.data...)
				want = append(want, blk.want...)
			}
			got, err := Dequantize(tc.t, data, len(want))
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("element %d (block %d, index %d): %v, want %v", i, i/tc.t.BlockSize(), i%tc.t.BlockSize(), got[i], want[i])
				}
			}
		})
	}
}

// BenchmarkDequantize measures each type on 64 Ki elements of random bytes
// (F16 scales forced finite).
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 16
	for _, typ := range DequantizableTypes() {
		b.Run(typ.String(), func(b *testing.B) {
			size, _ := typ.RowSize(n)
			data := make([]byte, size)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range data {
				data[i] = uint8(r.IntN(256)) & 0xbf // keeps F16/F32/BF16 exponents off all-ones
			}
			dst := make([]float32, n)
			b.SetBytes(n * 4)
			b.ResetTimer()
			for range b.N {
				if err := DequantizeInto(dst, typ, data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func le16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

func le32(v ...uint32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, x)
	}
	return b
}

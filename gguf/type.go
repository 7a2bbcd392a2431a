package gguf

import "fmt"

// GGMLType is the storage type of a tensor, ggml's enum ggml_type as GGUF
// stores it (a uint32 in each tensor info). The numbering is ggml's: ids that
// ggml retired (4, 5, 31-33, 36-38) are not types.
type GGMLType uint32

// The ggml tensor types, with ggml's ids.
const (
	F32     GGMLType = 0
	F16     GGMLType = 1
	Q4_0    GGMLType = 2
	Q4_1    GGMLType = 3
	Q5_0    GGMLType = 6
	Q5_1    GGMLType = 7
	Q8_0    GGMLType = 8
	Q8_1    GGMLType = 9
	Q2_K    GGMLType = 10
	Q3_K    GGMLType = 11
	Q4_K    GGMLType = 12
	Q5_K    GGMLType = 13
	Q6_K    GGMLType = 14
	Q8_K    GGMLType = 15
	IQ2_XXS GGMLType = 16
	IQ2_XS  GGMLType = 17
	IQ3_XXS GGMLType = 18
	IQ1_S   GGMLType = 19
	IQ4_NL  GGMLType = 20
	IQ3_S   GGMLType = 21
	IQ2_S   GGMLType = 22
	IQ4_XS  GGMLType = 23
	I8      GGMLType = 24
	I16     GGMLType = 25
	I32     GGMLType = 26
	I64     GGMLType = 27
	F64     GGMLType = 28
	IQ1_M   GGMLType = 29
	BF16    GGMLType = 30
	TQ1_0   GGMLType = 34
	TQ2_0   GGMLType = 35
	MXFP4   GGMLType = 39
)

// QK_K is the number of elements in a block of the K-quant types
// (Q2_K ... Q8_K) and of most IQ types: one "super-block".
const QK_K = 256

// traits returns ggml's name, block size (elements per block) and type size
// (bytes per block) of t; ok is false for an id ggml does not define.
func (t GGMLType) traits() (name string, blockSize, typeSize int, ok bool) {
	switch t {
	case F32:
		return "F32", 1, 4, true
	case F16:
		return "F16", 1, 2, true
	case Q4_0:
		return "Q4_0", 32, 2 + 16, true
	case Q4_1:
		return "Q4_1", 32, 2 + 2 + 16, true
	case Q5_0:
		return "Q5_0", 32, 2 + 4 + 16, true
	case Q5_1:
		return "Q5_1", 32, 2 + 2 + 4 + 16, true
	case Q8_0:
		return "Q8_0", 32, 2 + 32, true
	case Q8_1:
		return "Q8_1", 32, 2 + 2 + 32, true
	case Q2_K:
		return "Q2_K", QK_K, QK_K/16 + QK_K/4 + 2 + 2, true
	case Q3_K:
		return "Q3_K", QK_K, QK_K/8 + QK_K/4 + 12 + 2, true
	case Q4_K:
		return "Q4_K", QK_K, 2 + 2 + 12 + QK_K/2, true
	case Q5_K:
		return "Q5_K", QK_K, 2 + 2 + 12 + QK_K/8 + QK_K/2, true
	case Q6_K:
		return "Q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2, true
	case Q8_K:
		return "Q8_K", QK_K, 4 + QK_K + QK_K/16*2, true
	case IQ2_XXS:
		return "IQ2_XXS", QK_K, 2 + QK_K/4, true
	case IQ2_XS:
		return "IQ2_XS", QK_K, 2 + QK_K/4 + QK_K/32, true
	case IQ3_XXS:
		return "IQ3_XXS", QK_K, 2 + QK_K/4 + QK_K/8, true
	case IQ1_S:
		return "IQ1_S", QK_K, 2 + QK_K/8 + QK_K/16, true
	case IQ4_NL:
		return "IQ4_NL", 32, 2 + 16, true
	case IQ3_S:
		return "IQ3_S", QK_K, 2 + QK_K/4 + QK_K/8 + QK_K/32 + 4, true
	case IQ2_S:
		return "IQ2_S", QK_K, 2 + QK_K/4 + QK_K/16, true
	case IQ4_XS:
		return "IQ4_XS", QK_K, 2 + 2 + QK_K/2 + QK_K/64, true
	case I8:
		return "I8", 1, 1, true
	case I16:
		return "I16", 1, 2, true
	case I32:
		return "I32", 1, 4, true
	case I64:
		return "I64", 1, 8, true
	case F64:
		return "F64", 1, 8, true
	case IQ1_M:
		return "IQ1_M", QK_K, QK_K/8 + QK_K/16 + QK_K/32, true
	case BF16:
		return "BF16", 1, 2, true
	case TQ1_0:
		return "TQ1_0", QK_K, 2 + 4*13, true
	case TQ2_0:
		return "TQ2_0", QK_K, 2 + 64, true
	case MXFP4:
		return "MXFP4", 32, 1 + 16, true
	}
	return "", 0, 0, false
}

// Known reports whether t is a type ggml defines (and so one whose byte size
// this package can compute). It says nothing about whether a dequantizer or
// kernel exists for it.
func (t GGMLType) Known() bool {
	_, _, _, ok := t.traits()
	return ok
}

// BlockSize is the number of elements one block of t holds (1 for the plain
// types, 32 or 256 for the quantized ones); 0 for an unknown type.
func (t GGMLType) BlockSize() int {
	_, bs, _, _ := t.traits()
	return bs
}

// TypeSize is the number of bytes one block of t occupies; 0 for an unknown
// type.
func (t GGMLType) TypeSize() int {
	_, _, ts, _ := t.traits()
	return ts
}

// Quantized reports whether t stores elements in blocks of more than one
// (every known type except the plain float and integer types).
func (t GGMLType) Quantized() bool { return t.BlockSize() > 1 }

// RowSize is the number of bytes n consecutive elements of t occupy. It fails
// for an unknown type, a negative n, or an n that is not a multiple of the
// block size.
func (t GGMLType) RowSize(n int64) (int64, error) {
	name, bs, ts, ok := t.traits()
	if !ok {
		return 0, fmt.Errorf("unknown ggml type id %d", uint32(t))
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: negative element count %d", name, n)
	}
	if n%int64(bs) != 0 {
		return 0, fmt.Errorf("%s: %d elements is not a multiple of the block size %d", name, n, bs)
	}
	return n / int64(bs) * int64(ts), nil
}

// String is ggml's name of the type ("Q4_K"), or "GGMLType(N)" for an id
// ggml does not define.
func (t GGMLType) String() string {
	if name, _, _, ok := t.traits(); ok {
		return name
	}
	return fmt.Sprintf("GGMLType(%d)", uint32(t))
}

// ParseGGMLType returns the type ggml names name (as String spells it, case
// sensitive: "Q4_K", "BF16").
func ParseGGMLType(name string) (GGMLType, error) {
	for id := GGMLType(0); id <= MXFP4; id++ {
		if n, _, _, ok := id.traits(); ok && n == name {
			return id, nil
		}
	}
	return 0, fmt.Errorf("gguf: unknown ggml type name %q", name)
}

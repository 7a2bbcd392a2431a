package ref

// Reference dequantizers for the ggml tensor types GGUF files store.
//
// These are the specification the quantized kernels are tested against, so
// they are written for reading, one function per type (in package gpu, file
// quant.go, which Weight.At and the backends share), each following the
// type's block layout (ggml's block_* structs in ggml-common.h) field by
// field. They are bit-exact against gguf-py's gguf.quants.dequantize, which
// is itself bit-identical to ggml's C dequantizers (to_float), checked on
// every tensor of the shared GGUF fixtures.
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
// to round and so forbids the fusion (the compiler fuses float32 x*y + z
// into VFMADD231SS under GOAMD64=v3, and on arm64; the fixture test passes
// under GOAMD64=v3).

import (
	"fmt"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
)

// blockFunc dequantizes one block: b holds the type's TypeSize bytes, dst
// receives its BlockSize elements. The functions of the plain types (block
// size 1) convert any number of elements in one call.
type blockFunc func(dst []float32, b []byte)

// dequantizer returns the block function of t, nil when there is none. The
// functions themselves live in package gpu (gpu.DType.Dequantizer), so that
// gpu.Weight and the backends widen quantized weights with this same code.
func dequantizer(t gguf.GGMLType) blockFunc {
	d, ok := gpu.DTypeOf(t)
	if !ok {
		return nil
	}
	return blockFunc(d.Dequantizer())
}

// DequantizableTypes lists the types Dequantize supports, in ggml id order.
func DequantizableTypes() []gguf.GGMLType {
	var out []gguf.GGMLType
	for t := gguf.GGMLType(0); t <= gguf.MXFP4; t++ {
		if dequantizer(t) != nil {
			out = append(out, t)
		}
	}
	return out
}

// CanDequantize reports whether Dequantize supports t.
func CanDequantize(t gguf.GGMLType) bool { return dequantizer(t) != nil }

// Dequantize returns the n elements that data stores in type t as float32,
// in storage order (for a GGUF tensor: row-major, ne[0] fastest). n must be
// a multiple of t's block size and data exactly t.RowSize(n) bytes long.
func Dequantize(t gguf.GGMLType, data []byte, n int) ([]float32, error) {
	if n < 0 {
		return nil, fmt.Errorf("ref: dequantize %v: negative element count %d", t, n)
	}
	dst := make([]float32, n)
	if err := DequantizeInto(dst, t, data); err != nil {
		return nil, err
	}
	return dst, nil
}

// DequantizeInto is Dequantize writing the len(dst) elements into dst.
func DequantizeInto(dst []float32, t gguf.GGMLType, data []byte) error {
	f := dequantizer(t)
	if f == nil {
		return fmt.Errorf("ref: dequantize %v: unsupported type (supported: %v)", t, DequantizableTypes())
	}
	size, err := t.RowSize(int64(len(dst)))
	if err != nil {
		return fmt.Errorf("ref: dequantize: %w", err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("ref: dequantize %v: %d elements take %d bytes, data has %d", t, len(dst), size, len(data))
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	if bs == 1 {
		f(dst, data)
		return nil
	}
	for i := 0; i < len(dst)/bs; i++ {
		f(dst[i*bs:(i+1)*bs], data[i*ts:(i+1)*ts])
	}
	return nil
}

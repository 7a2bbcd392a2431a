// Package gputest builds inputs for the backends' tests: random weights in
// ggml's quantized block formats and plain weights from values, shared by
// the backends' tests (gpu/ref, gpu/cpu, gpu/cuda).
package gputest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"

	"github.com/troupe-ai/troupe/gpu"
)

// QuantType is a quantized dtype with the byte offsets of its F16 scale
// (and minimum) fields in a block.
type QuantType struct {
	DType  gpu.DType
	Scales []int
}

// QuantTypes are the quantized dtypes.
func QuantTypes() []QuantType {
	return []QuantType{
		{gpu.Q8_0, []int{0}},
		{gpu.Q4_0, []int{0}},
		{gpu.Q4_1, []int{0, 2}},
		{gpu.Q5_0, []int{0}},
		{gpu.Q5_1, []int{0, 2}},
		{gpu.Q2_K, []int{80, 82}},
		{gpu.Q3_K, []int{108}},
		{gpu.Q4_K, []int{0, 2}},
		{gpu.Q5_K, []int{0, 2}},
		{gpu.Q6_K, []int{208}},
	}
}

// RandQuantWeight builds rows x cols of the quantized type qt from random
// blocks: random quant and sub-scale bytes (every bit pattern a block can
// hold), and F16 scales of random sign around 2^-5.
func RandQuantWeight(r *rand.Rand, qt QuantType, rows, cols int) *gpu.Weight {
	rb, err := qt.DType.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, rows*rb)
	r.Read(data)
	bb := qt.DType.BlockBytes()
	for b := 0; b < len(data)/bb; b++ {
		for _, off := range qt.Scales {
			v := float32((0.5 + r.Float64()) / 32)
			if r.Intn(2) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint16(data[b*bb+off:], gpu.F32ToF16(v))
		}
	}
	w, err := gpu.NewWeight(qt.DType, rows, cols, data)
	if err != nil {
		panic(err)
	}
	return w
}

// Weight encodes vals (row-major, rows*cols of them; missing ones are 0) as
// a weight of the plain dtype dt: F32, BF16 or F16.
func Weight(dt gpu.DType, rows, cols int, vals []float32) (*gpu.Weight, error) {
	data := make([]byte, rows*cols*dt.Size())
	for i, v := range vals[:min(len(vals), rows*cols)] {
		switch dt {
		case gpu.F32:
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
		case gpu.BF16:
			binary.LittleEndian.PutUint16(data[2*i:], gpu.F32ToBF16(v))
		case gpu.F16:
			binary.LittleEndian.PutUint16(data[2*i:], gpu.F32ToF16(v))
		default:
			return nil, fmt.Errorf("gputest: %v is not a plain dtype", dt)
		}
	}
	return gpu.NewWeight(dt, rows, cols, data)
}

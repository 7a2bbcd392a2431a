package cpu

/*
#include "tr_impl.h"
*/
import "C"

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/troupe-ai/troupe/gpu"
)

// quantDequantMin is the number of rows of x from which MatMul with
// quantized weights dequantizes them and multiplies x unquantized (qmm.c).
const quantDequantMin = int(C.TR_QMM_DEQUANT)

// actBlock is one block of quantized activations as the C kernels store it
// (tr_qa32, tr_qak), decoded for tests.
type actBlock struct {
	D    float32
	Q    []int8
	Sums []int32
}

// quantizeAct quantizes the m rows of k elements of x as the quantized
// matmul of dt weights does, on this device's kernels (tests).
func (d *Device) quantizeAct(x []float32, m, k int, dt gpu.DType) []actBlock {
	per := int(C.tr_qact_bytes(C.int(dt), C.long(k)))
	buf := make([]byte, m*per)
	d.lock()
	C.tr_qact(d.ctx, unsafe.Pointer(unsafe.SliceData(buf)), fp(x), C.long(m), C.long(k), C.int(dt))
	d.mu.Unlock()
	bs := dt.BlockSize()
	var out []actBlock
	for off := 0; off < len(buf); {
		var b actBlock
		b.D = math.Float32frombits(binary.LittleEndian.Uint32(buf[off:]))
		if bs == 32 {
			b.Sums = []int32{int32(binary.LittleEndian.Uint32(buf[off+4:]))}
			off += 8
		} else {
			for s := 0; s < 16; s++ {
				b.Sums = append(b.Sums, int32(int16(binary.LittleEndian.Uint16(buf[off+4+2*s:]))))
			}
			off += 36
		}
		for i := 0; i < bs; i++ {
			b.Q = append(b.Q, int8(buf[off+i]))
		}
		off += bs
		out = append(out, b)
	}
	return out
}

package cuda

import (
	"errors"
	"fmt"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
)

// ScratchMargin is the device memory the load-time check (CheckFit) sets
// aside for a Device's scratch: the staging slots of the operations, each
// grown to a power of two (the largest, a 512-row chunk's logits over a
// 64k vocabulary, is 128 MiB). It is a stated margin, not a bound: a
// larger step or vocabulary grows the slots past it. (The KV pages
// Attention stages in its slots while the pool is host memory are covered
// by the KV figure, which counts the whole pool.)
const ScratchMargin int64 = 256 << 20

// ErrOutOfMemory is the error of CheckFit when a model does not fit in the
// GPU's free memory.
var ErrOutOfMemory = errors.New("not enough free GPU memory")

// UploadBytes is the GPU memory a Device takes for weights of the given
// parameter counts by dtype (model.Info.DTypeParams) once it has uploaded
// them: 4 bytes a parameter for F32; for BF16 and F16, 2 under
// Options.Half16, else 4 (widened to float32); 4 for quantized dtypes
// (dequantized to float32 at upload) and any other. It counts every
// tensor, the vectors the operations pass as host slices included, so it
// errs high by those (a hidden size's worth each). It errs low where a
// Device uploads a matrix twice: the joined q/k/v and gate/up projections
// that steps of up to 64 rows multiply, and the views of their parts that
// longer prefill steps multiply (model/block.go), are uploaded once each,
// as the Device keys uploads by *gpu.Weight.
func UploadBytes(params map[gpu.DType]int64, half16 bool) int64 {
	var n int64
	for dt, p := range params {
		size := int64(4)
		if half16 && (dt == gpu.BF16 || dt == gpu.F16) {
			size = 2
		}
		n += size * p
	}
	return n
}

// MemoryNeed is the GPU memory a model needs to run, in bytes.
type MemoryNeed struct {
	Weights int64 // the weights as uploaded (UploadBytes)
	// KV is the KV pool the KV budget gives (kvcache.Pool.Bytes), counted
	// whole, as a device-resident pool will hold it; for now the pool is
	// host memory and the Device stages one layer's pages at a time, so
	// this errs high.
	KV      int64
	Scratch int64 // the margin for scratch (ScratchMargin)
}

// Total is the sum of the three.
func (n MemoryNeed) Total() int64 { return n.Weights + n.KV + n.Scratch }

// String formats the need as CheckFit's error names it:
// "1.5 GiB (weights 270.0 MiB, KV 1.0 GiB, scratch 256.0 MiB)".
func (n MemoryNeed) String() string {
	return fmt.Sprintf("%s (weights %s, KV %s, scratch %s)", kvcache.FormatBytes(n.Total()),
		kvcache.FormatBytes(n.Weights), kvcache.FormatBytes(n.KV), kvcache.FormatBytes(n.Scratch))
}

// CheckFit reports whether need fits in the free bytes of a GPU of total
// bytes (cuMemGetInfo's figures); device names it in the error. A need
// larger than free is an error wrapping ErrOutOfMemory that names the
// three parts, the free and the total memory, e.g. "cuda:0: needs 1.5 GiB
// (weights 270.0 MiB, KV 1.0 GiB, scratch 256.0 MiB) but 800.0 MiB of
// 80.0 GiB is free: not enough free GPU memory". A negative figure is an
// error too.
func CheckFit(device string, need MemoryNeed, free, total int64) error {
	if need.Weights < 0 || need.KV < 0 || need.Scratch < 0 || free < 0 || total < free {
		return fmt.Errorf("%s: bad memory figures: weights %d, KV %d, scratch %d, free %d of %d bytes",
			device, need.Weights, need.KV, need.Scratch, free, total)
	}
	if need.Total() > free {
		return fmt.Errorf("%s: needs %s but %s of %s is free: %w", device, need,
			kvcache.FormatBytes(free), kvcache.FormatBytes(total), ErrOutOfMemory)
	}
	return nil
}

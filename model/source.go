package model

import (
	"context"
	"slices"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// tensorSource is where Weights gets its tensors: a safetensors checkpoint
// (one file or a sharded index) or a GGUF file. Tensors are asked for by
// their Hugging Face name and come back in Hugging Face layout (row-major,
// shape as transformers declares it) in a dtype the devices take (F32,
// BF16, F16), so the family loaders do not know which format they read.
type tensorSource interface {
	// Has reports whether the checkpoint holds a tensor called name.
	Has(name string) bool
	// Tensor returns the tensor called name.
	Tensor(name string) (*srcTensor, error)
	// Count is the number of tensors, Bytes the bytes Tensor hands out for
	// all of them together (what copying every one costs).
	Count() int
	Bytes() int64
	// Prefault reads the backing files once, reporting progress in bytes.
	Prefault(ctx context.Context, progress func(done, total int64)) error
	// DropPages says that data, a srcTensor's Data (or part of it), has
	// been copied elsewhere; for data in a memory-mapped file the mapped
	// pages may leave the resident set. Data the source allocated itself is
	// left alone.
	DropPages(data []byte)
	Close() error
}

// srcTensor is one tensor of a tensorSource. Data may alias a read-only
// file mapping: it must not be written to and is invalid after Close.
type srcTensor struct {
	// Stored is the tensor's name in the file when it differs from the
	// Hugging Face name it was asked for ("" otherwise).
	Stored string
	DType  gpu.DType
	Shape  []int  // row-major, Hugging Face order
	Data   []byte // little-endian, product(Shape) * DType.Size() bytes
	File   string // the file holding it, for messages
}

// stSource adapts a safetensors checkpoint.
type stSource struct{ m *safetensors.Model }

func (s stSource) Has(name string) bool { return s.m.Has(name) }

func (s stSource) Tensor(name string) (*srcTensor, error) {
	t, err := s.m.Tensor(name)
	if err != nil {
		return nil, err
	}
	return &srcTensor{DType: t.DType, Shape: slices.Clone(t.Shape), Data: t.Data, File: t.File}, nil
}

func (s stSource) Count() int   { return len(s.m.Names()) }
func (s stSource) Bytes() int64 { return s.m.Bytes() }

func (s stSource) Prefault(ctx context.Context, progress func(done, total int64)) error {
	return s.m.Prefault(ctx, progress)
}

func (s stSource) DropPages(data []byte) { s.m.DropPages(data) }
func (s stSource) Close() error          { return s.m.Close() }

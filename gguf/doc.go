// Package gguf reads GGUF files, the single-file model format of llama.cpp
// and ggml (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), and
// names ggml's tensor types (GGMLType) for every package that handles
// quantized weights.
//
// # Format
//
// A GGUF file is, all little-endian: the magic "GGUF", a uint32 version, a
// uint64 tensor count, a uint64 metadata count; the metadata entries (a
// string key, a uint32 value type, the value); the tensor infos (a string
// name, a uint32 dimension count, that many uint64 dimensions fastest-varying
// first, a uint32 ggml type, a uint64 offset); padding to the alignment; the
// data section, where each tensor's bytes start at its offset. Strings are a
// uint64 length and that many bytes; arrays a uint32 element type, a uint64
// count and the elements, which may themselves be strings or arrays.
//
// # Shape of the package
//
// The reader follows model/safetensors: Open memory-maps the file read-only
// (internal/mmap, shared with it), parses everything but the tensor data
// eagerly, and hands out tensor bytes that alias the mapping, so opening a
// multi-gigabyte model costs a header parse. Metadata is copied into Go values
// and outlives Close. Tensor data is handed out raw, in its ggml type: turning
// it into numbers is the job of gpu/ref (the reference dequantizers) and of
// the kernels, which import GGMLType from here. This package imports nothing
// of the model, so those packages can use it without cycles.
//
// # What is checked, and which upstream behaviour it matches
//
// Open accepts what ggml's gguf.cpp (gguf_init_from_file) accepts, with the
// same rules: versions 2 and 3 (version 1, with its 32-bit counts, and
// big-endian files are refused with an explicit message); general.alignment
// must be a UINT32 power of two, default 32; the data section starts at the
// first aligned offset after the tensor infos; a tensor has at most 4
// dimensions, none negative as int64, an element count that fits int64, a
// type id ggml defines, a row length (ne[0]) that is a multiple of the
// type's block size, an offset that is a multiple of the alignment, and data
// inside the file; keys and tensor names are unique. Unlike gguf.cpp, tensors
// need not be packed back to back in info order (gguf-py does not require
// that either). Arrays of arrays are read, as gguf-py reads them, to a depth
// of MaxArrayDepth.
//
// A malformed file is an error, never a panic, and never a large allocation:
// every count and length is checked against the bytes left in the file
// before anything is allocated for it, so what a file can make the reader
// allocate is a small multiple of its size. Every error says which file,
// metadata key or tensor, what is wrong and at which byte, and wraps one of
// ErrTruncated, ErrBadMagic, ErrVersion or ErrMalformed. The metadata
// accessors fail with ErrNotFound or ErrType, naming the key.
//
// The byte sizes of all types, block sizes and type ids are ggml's (ggml.h,
// gguf-py's GGML_QUANT_SIZES); GGMLType.String spells ggml's type names.
//
// # Split sets and writing
//
// llama.cpp's gguf-split cuts a model into NAME-00001-of-0000N.gguf and its
// siblings, each with split.no and split.count, the first with the
// metadata. Open of the first part opens the set: one File with every
// part's tensors (TensorInfo.Part says which file holds the data); another
// part is refused with an error naming the first. Write and WriteFile write
// GGUF v3 (the quantize command's output), refusing what Open would refuse;
// llama.cpp's own files, rewritten, read back the same (TestWriteFixtures).
package gguf

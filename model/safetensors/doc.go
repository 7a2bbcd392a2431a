// Package safetensors reads and writes the Hugging Face safetensors format
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON header mapping tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" map of strings, then the raw little-endian tensor bytes, with
// offsets counted from the first byte after the header.
//
// Files are memory-mapped read-only (syscall.Mmap on unix; other platforms
// read the file into memory), so Tensor.Data aliases the file: opening a
// checkpoint costs a header parse, not a copy of the weights. A file must not
// be modified while it is open.
//
// The checks follow the upstream reader where they matter for safety: the
// header is limited to 100 MB, must be valid UTF-8 and a JSON object, every
// data_offsets pair must lie inside the data section, and the byte length must
// equal product(shape) times the element size for every dtype whose size is
// known. Two deliberate differences: overlapping or non-contiguous tensors are
// not rejected, and unsupported dtypes (I64 position buffers, quantised
// formats) are reported per tensor by Model.Tensor rather than failing the
// whole file, because checkpoints routinely carry buffers an inference engine
// never reads. Only F32, BF16 and F16 are handed out, matching gpu.DType.
//
// Open takes a checkpoint directory as transformers' save_pretrained writes
// it: model.safetensors.index.json ("weight_map": tensor name -> shard file)
// when present, otherwise model.safetensors. Other *.safetensors files in the
// directory (reference outputs, adapters) are never opened.
//
// Write produces files the upstream library reads: header padded with spaces
// to a multiple of 8 bytes, "__metadata__" first, tensors laid out back to back
// in the order given, written atomically through a temporary file and rename.
package safetensors

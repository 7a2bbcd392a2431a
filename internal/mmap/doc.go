// Package mmap maps whole files read-only for the weight readers
// (model/safetensors, gguf): syscall.Mmap on unix, a plain read into memory
// elsewhere. The mapped bytes alias the file, so a reader hands out tensor
// data without copying it; the file must not change while it is mapped.
package mmap

package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
)

// Values to write. Each makes the Value a File would read back for it.

// StringValue is a STRING value.
func StringValue(s string) Value { return Value{typ: TypeString, str: s} }

// Uint32Value is a UINT32 value.
func Uint32Value(v uint32) Value { return Value{typ: TypeUint32, bits: uint64(v)} }

// Int32Value is an INT32 value.
func Int32Value(v int32) Value { return Value{typ: TypeInt32, bits: uint64(int64(v))} }

// Uint64Value is a UINT64 value.
func Uint64Value(v uint64) Value { return Value{typ: TypeUint64, bits: v} }

// Uint16Value is a UINT16 value.
func Uint16Value(v uint16) Value { return Value{typ: TypeUint16, bits: uint64(v)} }

// Float32Value is a FLOAT32 value.
func Float32Value(v float32) Value {
	return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(v))}
}

// BoolValue is a BOOL value.
func BoolValue(v bool) Value {
	var b uint64
	if v {
		b = 1
	}
	return Value{typ: TypeBool, bits: b}
}

// StringsValue is an ARRAY of STRING.
func StringsValue(a []string) Value {
	return Value{typ: TypeArray, elem: TypeString, arr: slices.Clone(a)}
}

// Float32sValue is an ARRAY of FLOAT32.
func Float32sValue(a []float32) Value {
	return Value{typ: TypeArray, elem: TypeFloat32, arr: slices.Clone(a)}
}

// Int32sValue is an ARRAY of INT32.
func Int32sValue(a []int32) Value {
	return Value{typ: TypeArray, elem: TypeInt32, arr: slices.Clone(a)}
}

// WriteTensor is a tensor to write: its name, ggml dims (fastest-varying
// first), type and data, exactly RowSize(Dims[0]) * rows bytes.
type WriteTensor struct {
	Name string
	Dims []int64
	Type GGMLType
	Data []byte
}

// Write writes a GGUF v3 file to w: the metadata entries in order, then the
// tensor infos and their data, each aligned to alignment (0: the default,
// 32; written as general.alignment when it is not the default). It checks
// what a reader would refuse: duplicate keys or names, data whose size does
// not match the dims and type, rows that are not whole blocks.
func Write(w io.Writer, kvs []KV, tensors []WriteTensor, alignment uint64) error {
	if alignment == 0 {
		alignment = DefaultAlignment
	}
	if alignment&(alignment-1) != 0 {
		return fmt.Errorf("gguf: write: alignment %d is not a power of two", alignment)
	}
	kvs = slices.Clone(kvs)
	if alignment != DefaultAlignment {
		kvs = append(kvs, KV{Key: AlignmentKey, Value: Uint32Value(uint32(alignment))})
	}
	keys := map[string]bool{}
	for _, kv := range kvs {
		if keys[kv.Key] {
			return fmt.Errorf("gguf: write: duplicate key %q", kv.Key)
		}
		keys[kv.Key] = true
	}
	names := map[string]bool{}
	offsets := make([]uint64, len(tensors))
	var off uint64
	for i, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("gguf: write: duplicate tensor %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
			return fmt.Errorf("gguf: write: tensor %q: %d dims (1 to %d)", t.Name, len(t.Dims), MaxDims)
		}
		info := TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type}
		row, err := t.Type.RowSize(info.RowLen())
		if err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		want := row * info.Rows()
		if int64(len(t.Data)) != want {
			return fmt.Errorf("gguf: write: tensor %q: %v %v needs %d bytes, have %d", t.Name, t.Type, t.Dims, want, len(t.Data))
		}
		offsets[i] = off
		off = alignUp(off+uint64(len(t.Data)), alignment)
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	cw := &countingWriter{w: bw}
	le := binary.LittleEndian
	put := func(b []byte) { cw.write(b) }
	u32 := func(v uint32) { put(le.AppendUint32(nil, v)) }
	u64 := func(v uint64) { put(le.AppendUint64(nil, v)) }
	str := func(s string) { u64(uint64(len(s))); put([]byte(s)) }

	put([]byte(Magic))
	u32(3)
	u64(uint64(len(tensors)))
	u64(uint64(len(kvs)))
	for _, kv := range kvs {
		str(kv.Key)
		if err := writeValue(cw, kv.Value, kv.Key); err != nil {
			return err
		}
	}
	for i, t := range tensors {
		str(t.Name)
		u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			u64(uint64(d))
		}
		u32(uint32(t.Type))
		u64(offsets[i])
	}
	pad := func() {
		if n := alignUp(uint64(cw.n), alignment) - uint64(cw.n); n > 0 {
			put(make([]byte, n))
		}
	}
	pad()
	for _, t := range tensors {
		put(t.Data)
		pad()
	}
	if cw.err != nil {
		return fmt.Errorf("gguf: write: %w", cw.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}

// WriteFile writes a GGUF file at path (see Write), replacing it only once
// the whole file is written.
func WriteFile(path string, kvs []KV, tensors []WriteTensor, alignment uint64) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := Write(f, kvs, tensors, alignment); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) / a * a }

// countingWriter counts bytes and keeps the first error.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

// writeValue writes v's type id and encoding.
func writeValue(cw *countingWriter, v Value, key string) error {
	le := binary.LittleEndian
	cw.write(le.AppendUint32(nil, uint32(v.typ)))
	switch v.typ {
	case TypeString:
		cw.write(le.AppendUint64(nil, uint64(len(v.str))))
		cw.write([]byte(v.str))
		return nil
	case TypeArray:
		return writeArray(cw, v, key)
	}
	size := v.typ.size()
	if size == 0 {
		return fmt.Errorf("gguf: write: key %q: value of unknown type %v", key, v.typ)
	}
	cw.write(le.AppendUint64(nil, v.bits)[:size])
	return nil
}

func writeArray(cw *countingWriter, v Value, key string) error {
	le := binary.LittleEndian
	cw.write(le.AppendUint32(nil, uint32(v.elem)))
	cw.write(le.AppendUint64(nil, uint64(v.Len())))
	var buf []byte
	switch a := v.arr.(type) {
	case []string:
		for _, s := range a {
			buf = le.AppendUint64(buf, uint64(len(s)))
			buf = append(buf, s...)
		}
	case []Value:
		for _, e := range a {
			if err := writeArray(cw, e, key); err != nil {
				return err
			}
		}
	case []uint8:
		buf = append(buf, a...)
	case []int8:
		buf = appendEach(buf, a, func(b []byte, x int8) []byte { return append(b, byte(x)) })
	case []bool:
		buf = appendEach(buf, a, func(b []byte, x bool) []byte {
			if x {
				return append(b, 1)
			}
			return append(b, 0)
		})
	case []uint16:
		buf = appendEach(buf, a, le.AppendUint16)
	case []int16:
		buf = appendEach(buf, a, func(b []byte, x int16) []byte { return le.AppendUint16(b, uint16(x)) })
	case []uint32:
		buf = appendEach(buf, a, le.AppendUint32)
	case []int32:
		buf = appendEach(buf, a, func(b []byte, x int32) []byte { return le.AppendUint32(b, uint32(x)) })
	case []float32:
		buf = appendEach(buf, a, func(b []byte, x float32) []byte { return le.AppendUint32(b, math.Float32bits(x)) })
	case []uint64:
		buf = appendEach(buf, a, le.AppendUint64)
	case []int64:
		buf = appendEach(buf, a, func(b []byte, x int64) []byte { return le.AppendUint64(b, uint64(x)) })
	case []float64:
		buf = appendEach(buf, a, func(b []byte, x float64) []byte { return le.AppendUint64(b, math.Float64bits(x)) })
	default:
		return fmt.Errorf("gguf: write: key %q: array of %v not writable", key, v.elem)
	}
	cw.write(buf)
	return nil
}

// appendEach appends every element of a to buf with f.
func appendEach[T any](buf []byte, a []T, f func([]byte, T) []byte) []byte {
	for _, x := range a {
		buf = f(buf, x)
	}
	return buf
}

package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/troupe-ai/troupe/internal/mmap"
)

const (
	// Magic is the first four bytes of every GGUF file.
	Magic = "GGUF"
	// DefaultAlignment is the alignment of tensor data when the file has no
	// general.alignment key.
	DefaultAlignment = 32
	// AlignmentKey is the metadata key that sets the alignment of the data
	// section and of every tensor's offset in it.
	AlignmentKey = "general.alignment"
	// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
	MaxDims = 4
	// MaxArrayDepth bounds how deeply metadata arrays of arrays may nest.
	MaxArrayDepth = 8
)

// Errors a malformed or unsupported file is reported with, wrapped in an error
// that says which file, key or tensor and what is wrong (test with errors.Is).
var (
	// ErrTruncated: the file ends inside the header, the metadata, the
	// tensor infos or a tensor's data.
	ErrTruncated = errors.New("truncated file")
	// ErrBadMagic: the file does not start with "GGUF".
	ErrBadMagic = errors.New("not a GGUF file")
	// ErrVersion: a GGUF version this reader does not read (only 2 and 3,
	// little-endian).
	ErrVersion = errors.New("unsupported GGUF version")
	// ErrMalformed: a count, length, type id, dimension, offset or alignment
	// that no valid file holds.
	ErrMalformed = errors.New("malformed GGUF file")
	// ErrNotFound: no metadata key or tensor of that name.
	ErrNotFound = errors.New("not found")
	// ErrType: a metadata value of another type than the one asked for.
	ErrType = errors.New("wrong metadata type")
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a File.
type TensorInfo struct {
	// Name as stored ("blk.0.attn_q.weight").
	Name string
	// Dims are ggml's ne, fastest-varying first: a matrix of R rows of C
	// elements has Dims [C, R]. Unused trailing dimensions are not stored.
	Dims []int64
	// Type is the storage type.
	Type GGMLType
	// Offset is the byte offset of the data from the start of the data
	// section (a multiple of the file's alignment).
	Offset uint64
	// Size is the number of bytes of data.
	Size int64
	// Part is the index of the file of a split set that holds the data (0
	// for the first part, or a file that is not split); Offset is from
	// the start of that part's data section.
	Part int
}

// Elements is the number of elements, the product of Dims (1 for no dims).
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// RowLen is the number of elements in one row, Dims[0] (1 for no dims).
func (t TensorInfo) RowLen() int64 {
	if len(t.Dims) == 0 {
		return 1
	}
	return t.Dims[0]
}

// Rows is the number of rows, the product of Dims[1:].
func (t TensorInfo) Rows() int64 {
	n := int64(1)
	for _, d := range t.Dims[min(1, len(t.Dims)):] {
		n *= d
	}
	return n
}

// File is an open GGUF file: its metadata and tensor infos, parsed when it is
// opened, and its memory-mapped tensor data. The metadata stays valid after
// Close; tensor data does not. All methods but Close may be called
// concurrently.
type File struct {
	// Path is the file's path as given to Open.
	Path string
	// Version is the GGUF version (2 or 3).
	Version uint32
	// Alignment of the data section and of every tensor offset in it.
	Alignment uint64
	// DataOffset is the file offset of the data section.
	DataOffset int64

	kvs     []KV
	tensors []TensorInfo
	byKey   map[string]int
	byName  map[string]int
	data    []byte // the whole file
	release func() error
	closed  bool
	// parts are the other files of a split set (OpenSplit), in order.
	parts []*File
}

// Open memory-maps and parses the GGUF file at path. Every structural check
// happens here: a file that opens has in-range, aligned data for every tensor
// of a known type.
//
// The first file of a split set (llama.cpp's gguf-split: NAME-00001-of-0000N.gguf,
// whose metadata says split.count) opens the whole set: the metadata is the
// first file's, the tensors are every part's. Any other part is refused,
// naming the first.
func Open(path string) (*File, error) {
	f, err := openOne(path)
	if err != nil {
		return nil, err
	}
	if err := f.openParts(); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func openOne(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer osf.Close()
	st, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	data, release, err := mmap.Map(osf, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f, err := parse(path, data)
	if err != nil {
		_ = release()
		return nil, err
	}
	f.release = release
	return f, nil
}

// Close unmaps the file (every part of a split set). Tensor data handed out
// before becomes invalid.
func (f *File) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	var first error
	for _, p := range f.parts {
		if err := p.Close(); err != nil && first == nil {
			first = err
		}
	}
	if err := f.closeOne(); err != nil {
		return err
	}
	return first
}

func (f *File) closeOne() error {
	f.data = nil
	if f.release == nil {
		return nil
	}
	if err := f.release(); err != nil {
		return fmt.Errorf("gguf: %s: %w", f.Path, err)
	}
	return nil
}

// KVs returns the metadata entries in file order (a copy of the list).
func (f *File) KVs() []KV { return slices.Clone(f.kvs) }

// Keys returns the metadata keys in file order.
func (f *File) Keys() []string {
	keys := make([]string, len(f.kvs))
	for i, kv := range f.kvs {
		keys[i] = kv.Key
	}
	return keys
}

// Value returns the metadata value of key.
func (f *File) Value(key string) (Value, bool) {
	i, ok := f.byKey[key]
	if !ok {
		return Value{}, false
	}
	return f.kvs[i].Value, true
}

// Has reports whether the metadata holds key.
func (f *File) Has(key string) bool {
	_, ok := f.byKey[key]
	return ok
}

// Tensors returns the tensor infos in file order (a copy).
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.tensors))
	for i, t := range f.tensors {
		t.Dims = slices.Clone(t.Dims)
		out[i] = t
	}
	return out
}

// Tensor returns the info of the tensor called name (a copy).
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.tensors[i]
	t.Dims = slices.Clone(t.Dims)
	return t, true
}

// TensorData returns the bytes of the tensor called name as stored: they
// alias the read-only mapping, must not be written to, and are invalid after
// Close.
func (f *File) TensorData(name string) ([]byte, error) {
	i, ok := f.byName[name]
	if !ok {
		return nil, fmt.Errorf("gguf: %s: tensor %q: %w", f.Path, name, ErrNotFound)
	}
	if f.closed {
		return nil, fmt.Errorf("gguf: %s: tensor %q: file is closed", f.Path, name)
	}
	t := f.tensors[i]
	part := f
	if t.Part > 0 {
		part = f.parts[t.Part-1]
	}
	start := part.DataOffset + int64(t.Offset)
	return part.data[start : start+t.Size : start+t.Size], nil
}

// parse reads the header, metadata and tensor infos of a whole file held in
// data and checks every tensor's data range against it. name is used in
// errors only.
func parse(name string, data []byte) (*File, error) {
	r := &reader{name: name, data: data}
	f := &File{Path: name, data: data, Alignment: DefaultAlignment}

	magic, err := r.bytes(4, "the magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, r.errorf(ErrBadMagic, "magic %q, want %q", magic, Magic)
	}
	version, err := r.u32("the version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, r.errorf(ErrVersion, "version 1 (32-bit counts, from before August 2023): convert the file with a current llama.cpp")
	case bits32Swapped(version) == 2 || bits32Swapped(version) == 3:
		return nil, r.errorf(ErrVersion, "big-endian file (version %d byte-swapped): only little-endian files are read", bits32Swapped(version))
	default:
		return nil, r.errorf(ErrVersion, "version %d: only versions 2 and 3 are read", version)
	}
	f.Version = version

	nTensors, err := r.u64("the tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("the metadata count")
	if err != nil {
		return nil, err
	}
	// Each entry takes at least this many bytes: a count above what the rest
	// of the file can hold (a count that lies, or a truncated file) must not
	// size an allocation.
	const minKV = 8 + 4 + 1         // key length, value type, 1-byte value
	const minTensor = 8 + 4 + 4 + 8 // name length, dims count, type, offset
	if rest := uint64(r.left()); nKV > rest/minKV {
		return nil, r.errorf(ErrTruncated, "metadata count %d: the %d bytes after the header hold at most %d entries", nKV, rest, rest/minKV)
	}
	if rest := uint64(r.left()) - nKV*minKV; nTensors > rest/minTensor {
		return nil, r.errorf(ErrTruncated, "tensor count %d: the %d bytes after the header and %d metadata entries hold at most %d tensor infos", nTensors, rest, nKV, rest/minTensor)
	}

	f.kvs = make([]KV, 0, nKV)
	f.byKey = make(map[string]int, nKV)
	for i := range nKV {
		key, err := r.str(fmt.Sprintf("the key of metadata entry %d", i))
		if err != nil {
			return nil, err
		}
		what := "metadata key " + quote(key)
		if _, dup := f.byKey[key]; dup {
			return nil, r.errorf(ErrMalformed, "%s appears twice", what)
		}
		typ, err := r.u32("the value type of " + what)
		if err != nil {
			return nil, err
		}
		v, err := r.value(ValueType(typ), what, 0)
		if err != nil {
			return nil, err
		}
		f.byKey[key] = len(f.kvs)
		f.kvs = append(f.kvs, KV{Key: key, Value: v})
	}

	if v, ok := f.Value(AlignmentKey); ok {
		a, ok := v.Uint32()
		if !ok {
			return nil, r.errorf(ErrMalformed, "metadata key %q is %v, must be UINT32", AlignmentKey, v.Type())
		}
		if a == 0 || a&(a-1) != 0 {
			return nil, r.errorf(ErrMalformed, "metadata key %q is %d, must be a power of two", AlignmentKey, a)
		}
		f.Alignment = uint64(a)
	}

	f.tensors = make([]TensorInfo, 0, nTensors)
	f.byName = make(map[string]int, nTensors)
	for i := range nTensors {
		t, err := r.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.byName[t.Name]; dup {
			return nil, r.errorf(ErrMalformed, "tensor %s appears twice", quote(t.Name))
		}
		f.byName[t.Name] = len(f.tensors)
		f.tensors = append(f.tensors, t)
	}

	// The data section starts at the next multiple of the alignment.
	start := (uint64(r.pos) + f.Alignment - 1) / f.Alignment * f.Alignment
	f.DataOffset = int64(start)
	size := uint64(len(data))
	for _, t := range f.tensors {
		if t.Offset%f.Alignment != 0 {
			return nil, r.errorf(ErrMalformed, "tensor %s: offset %d is not a multiple of the alignment %d", quote(t.Name), t.Offset, f.Alignment)
		}
		// start <= size is not given: a file may end right after its infos.
		if start > size || t.Offset > size-start || uint64(t.Size) > size-start-t.Offset {
			return nil, r.errorf(ErrTruncated, "tensor %s: data [%d, %d) of the data section at file offset %d runs past the end of the %d-byte file",
				quote(t.Name), t.Offset, satAdd(t.Offset, uint64(t.Size)), start, size)
		}
	}
	return f, nil
}

// tensorInfo reads the i-th tensor info.
func (r *reader) tensorInfo(i uint64) (TensorInfo, error) {
	name, err := r.str(fmt.Sprintf("the name of tensor %d", i))
	if err != nil {
		return TensorInfo{}, err
	}
	what := "tensor " + quote(name)
	nDims, err := r.u32("the dimension count of " + what)
	if err != nil {
		return TensorInfo{}, err
	}
	if nDims > MaxDims {
		return TensorInfo{}, r.errorf(ErrMalformed, "%s has %d dimensions, at most %d are allowed", what, nDims, MaxDims)
	}
	t := TensorInfo{Name: name, Dims: make([]int64, nDims)}
	elems := int64(1)
	for d := range t.Dims {
		ne, err := r.u64(fmt.Sprintf("dimension %d of %s", d, what))
		if err != nil {
			return TensorInfo{}, err
		}
		if ne > math.MaxInt64 {
			return TensorInfo{}, r.errorf(ErrMalformed, "%s: dimension %d is %d, negative as ggml's int64", what, d, ne)
		}
		t.Dims[d] = int64(ne)
		if ne != 0 && elems > math.MaxInt64/int64(ne) {
			return TensorInfo{}, r.errorf(ErrMalformed, "%s: the element count of dims %v overflows int64", what, t.Dims[:d+1])
		}
		elems *= int64(ne)
	}
	typ, err := r.u32("the type of " + what)
	if err != nil {
		return TensorInfo{}, err
	}
	t.Type = GGMLType(typ)
	if !t.Type.Known() {
		return TensorInfo{}, r.errorf(ErrMalformed, "%s: unknown ggml type id %d", what, typ)
	}
	rowBytes, err := t.Type.RowSize(t.RowLen())
	if err != nil {
		return TensorInfo{}, r.errorf(ErrMalformed, "%s: row of dims %v: %v", what, t.Dims, err)
	}
	if rows := t.Rows(); rows != 0 && rowBytes > math.MaxInt64/rows {
		return TensorInfo{}, r.errorf(ErrMalformed, "%s: byte size of dims %v overflows int64", what, t.Dims)
	}
	t.Size = rowBytes * t.Rows()
	if t.Offset, err = r.u64("the data offset of " + what); err != nil {
		return TensorInfo{}, err
	}
	return t, nil
}

// reader reads little-endian values from data, failing with ErrTruncated
// (naming what it was reading) when data ends.
type reader struct {
	name string
	data []byte
	pos  int
}

func (r *reader) left() int { return len(r.data) - r.pos }

// errorf formats an error about the file at the reader's position.
func (r *reader) errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("gguf: %s: %s (at byte %d): %w", r.name, fmt.Sprintf(format, args...), r.pos, kind)
}

func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if n > uint64(r.left()) {
		return nil, r.errorf(ErrTruncated, "reading %s: need %d bytes, %d left", what, n, r.left())
	}
	b := r.data[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a GGUF string: a uint64 length and that many bytes (copied).
func (r *reader) str(what string) (string, error) {
	if r.left() < 8 {
		return "", r.errorf(ErrTruncated, "reading the length of %s: need 8 bytes, %d left", what, r.left())
	}
	n := binary.LittleEndian.Uint64(r.data[r.pos:])
	if n > uint64(r.left()-8) {
		return "", r.errorf(ErrTruncated, "%s: string of %d bytes, only %d left in the file", what, n, r.left()-8)
	}
	s := string(r.data[r.pos+8 : r.pos+8+int(n)])
	r.pos += 8 + int(n)
	return s, nil
}

// strings reads n strings (n already bounded by the file size) into one
// backing allocation. what describes the array for errors.
func (r *reader) strings(n uint64, what string) ([]string, error) {
	// First pass: check every length and find where the strings end.
	start, p := r.pos, r.pos
	for i := range n {
		if len(r.data)-p < 8 {
			r.pos = p
			return nil, r.errorf(ErrTruncated, "reading the length of element %d of %s: need 8 bytes, %d left", i, what, len(r.data)-p)
		}
		l := binary.LittleEndian.Uint64(r.data[p:])
		if l > uint64(len(r.data)-p-8) {
			r.pos = p
			return nil, r.errorf(ErrTruncated, "element %d of %s: string of %d bytes, only %d left in the file", i, what, l, len(r.data)-p-8)
		}
		p += 8 + int(l)
	}
	// Second pass: slice the strings out of one copy of the span.
	blob := string(r.data[start:p])
	a := make([]string, n)
	q := 0
	for i := range a {
		l := int(binary.LittleEndian.Uint64(r.data[start+q:]))
		a[i] = blob[q+8 : q+8+l]
		q += 8 + l
	}
	r.pos = p
	return a, nil
}

// value reads a value of type typ; depth counts enclosing arrays.
func (r *reader) value(typ ValueType, what string, depth int) (Value, error) {
	v := Value{typ: typ}
	switch typ {
	case TypeString:
		s, err := r.str(what)
		if err != nil {
			return Value{}, err
		}
		v.str = s
		return v, nil
	case TypeArray:
		return r.array(what, depth)
	}
	size := typ.size()
	if size == 0 {
		return Value{}, r.errorf(ErrMalformed, "%s: unknown value type id %d", what, uint32(typ))
	}
	b, err := r.bytes(uint64(size), what)
	if err != nil {
		return Value{}, err
	}
	v.bits = scalarBits(typ, b)
	return v, nil
}

// scalarBits decodes the fixed-size scalar of type typ in b (len(b) ==
// typ.size()), sign-extending the signed integer types.
func scalarBits(typ ValueType, b []byte) uint64 {
	switch typ {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(binary.LittleEndian.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(binary.LittleEndian.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	}
	return binary.LittleEndian.Uint64(b)
}

// array reads an array: element type, uint64 count, elements.
func (r *reader) array(what string, depth int) (Value, error) {
	if depth >= MaxArrayDepth {
		return Value{}, r.errorf(ErrMalformed, "%s: arrays nested more than %d deep", what, MaxArrayDepth)
	}
	et, err := r.u32("the element type of " + what)
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	n, err := r.u64("the element count of " + what)
	if err != nil {
		return Value{}, err
	}
	// Every element takes at least minSize bytes: bound n by the file before
	// allocating for it.
	minSize := uint64(elem.size())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 4 + 8
	case TypeUint8, TypeInt8, TypeBool, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeFloat32, TypeUint64, TypeInt64, TypeFloat64:
	default:
		return Value{}, r.errorf(ErrMalformed, "%s: array of unknown value type id %d", what, et)
	}
	if n > uint64(r.left())/minSize {
		return Value{}, r.errorf(ErrTruncated, "%s: array of %d %v needs at least %d bytes, only %d left in the file", what, n, elem, satMul(n, minSize), r.left())
	}
	v := Value{typ: TypeArray, elem: elem}
	switch elem {
	case TypeString:
		a, err := r.strings(n, what)
		if err != nil {
			return Value{}, err
		}
		v.arr = a
	case TypeArray:
		a := make([]Value, n)
		for i := range a {
			if a[i], err = r.array(fmt.Sprintf("element %d of %s", i, what), depth+1); err != nil {
				return Value{}, err
			}
		}
		v.arr = a
	default:
		b, _ := r.bytes(n*minSize, what) // in range: checked above
		v.arr = decodeScalars(elem, b, int(n))
	}
	return v, nil
}

// decodeScalars decodes n little-endian scalars of type typ from b.
func decodeScalars(typ ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch typ {
	case TypeUint8:
		return slices.Clone(b[:n])
	case TypeInt8:
		return decodeEach(b, n, 1, func(p []byte) int8 { return int8(p[0]) })
	case TypeBool:
		return decodeEach(b, n, 1, func(p []byte) bool { return p[0] != 0 })
	case TypeUint16:
		return decodeEach(b, n, 2, le.Uint16)
	case TypeInt16:
		return decodeEach(b, n, 2, func(p []byte) int16 { return int16(le.Uint16(p)) })
	case TypeUint32:
		return decodeEach(b, n, 4, le.Uint32)
	case TypeInt32:
		return decodeEach(b, n, 4, func(p []byte) int32 { return int32(le.Uint32(p)) })
	case TypeFloat32:
		return decodeEach(b, n, 4, func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) })
	case TypeUint64:
		return decodeEach(b, n, 8, le.Uint64)
	case TypeInt64:
		return decodeEach(b, n, 8, func(p []byte) int64 { return int64(le.Uint64(p)) })
	case TypeFloat64:
		return decodeEach(b, n, 8, func(p []byte) float64 { return math.Float64frombits(le.Uint64(p)) })
	}
	return nil
}

// decodeEach decodes n elements of size bytes each from b with f.
func decodeEach[T any](b []byte, n, size int, f func([]byte) T) []T {
	a := make([]T, n)
	for i := range a {
		a[i] = f(b[size*i:])
	}
	return a
}

// quote quotes a key or tensor name for an error message, cut to 100 bytes
// (a malformed file may hold names of any length).
func quote(s string) string {
	const limit = 100
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

func bits32Swapped(v uint32) uint32 {
	return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24
}

// satAdd and satMul saturate at math.MaxUint64 (for error messages only).
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

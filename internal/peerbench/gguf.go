package peerbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
)

// GGML tensor types this reader hands out data for (ggml.h's enum ggml_type).
const (
	ggmlF32  = 0
	ggmlF16  = 1
	ggmlBF16 = 30
)

// GGUF value types (gguf.h's enum gguf_type).
const (
	ggufUint8 = iota
	ggufInt8
	ggufUint16
	ggufInt16
	ggufUint32
	ggufInt32
	ggufFloat32
	ggufBool
	ggufString
	ggufArray
	ggufUint64
	ggufInt64
	ggufFloat64
)

// ggufTensor is one tensor of a GGUF file. Dims are ggml's ne, innermost
// first: a row-major [rows, cols] matrix has Dims [cols, rows].
type ggufTensor struct {
	Name string
	Dims []uint64
	Type uint32
	Data []byte // nil for types other than F32, F16 and BF16
}

// ggufFile is the part of a GGUF file the weight check needs.
type ggufFile struct {
	Version uint32
	KV      map[string]any // scalar and string values; arrays are skipped
	Tensors []ggufTensor
}

// maxGGUFString bounds one string's length while parsing, so that a corrupt
// length cannot make the reader allocate gigabytes.
const maxGGUFString = 1 << 24

// readGGUF reads a GGUF (version 2 or 3) file: its scalar metadata, its
// tensor table and the data of its F32, F16 and BF16 tensors.
func readGGUF(path string) (*ggufFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parseGGUF(b)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	return f, nil
}

type ggufReader struct {
	b   []byte
	off int
	err error
}

func (r *ggufReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || r.off+n > len(r.b) {
		r.err = fmt.Errorf("truncated at byte %d (need %d more)", r.off, n)
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *ggufReader) u32() uint32 {
	s := r.take(4)
	if s == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(s)
}

func (r *ggufReader) u64() uint64 {
	s := r.take(8)
	if s == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(s)
}

func (r *ggufReader) str() string {
	n := r.u64()
	if n > maxGGUFString {
		if r.err == nil {
			r.err = fmt.Errorf("string of %d bytes at byte %d", n, r.off)
		}
		return ""
	}
	return string(r.take(int(n)))
}

// value reads one value of type t; arrays are read past and returned as nil.
func (r *ggufReader) value(t uint32, depth int) any {
	switch t {
	case ggufUint8:
		if s := r.take(1); s != nil {
			return uint64(s[0])
		}
	case ggufInt8:
		if s := r.take(1); s != nil {
			return int64(int8(s[0]))
		}
	case ggufBool:
		if s := r.take(1); s != nil {
			return s[0] != 0
		}
	case ggufUint16:
		if s := r.take(2); s != nil {
			return uint64(binary.LittleEndian.Uint16(s))
		}
	case ggufInt16:
		if s := r.take(2); s != nil {
			return int64(int16(binary.LittleEndian.Uint16(s)))
		}
	case ggufUint32:
		return uint64(r.u32())
	case ggufInt32:
		return int64(int32(r.u32()))
	case ggufFloat32:
		return float64(math.Float32frombits(r.u32()))
	case ggufUint64:
		return r.u64()
	case ggufInt64:
		return int64(r.u64())
	case ggufFloat64:
		return math.Float64frombits(r.u64())
	case ggufString:
		return r.str()
	case ggufArray:
		if depth > 2 {
			r.err = errors.New("arrays nested too deep")
			return nil
		}
		et, n := r.u32(), r.u64()
		if n > uint64(len(r.b)) {
			r.err = fmt.Errorf("array of %d elements in a %d-byte file", n, len(r.b))
			return nil
		}
		for i := uint64(0); i < n && r.err == nil; i++ {
			r.value(et, depth+1)
		}
		return nil
	default:
		r.err = fmt.Errorf("unknown value type %d at byte %d", t, r.off)
	}
	return nil
}

func parseGGUF(b []byte) (*ggufFile, error) {
	r := &ggufReader{b: b}
	if magic := r.take(4); r.err != nil || string(magic) != "GGUF" {
		return nil, errors.New("not a GGUF file (bad magic)")
	}
	f := &ggufFile{Version: r.u32(), KV: map[string]any{}}
	if f.Version != 2 && f.Version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d", f.Version)
	}
	nTensors, nKV := r.u64(), r.u64()
	if nTensors > uint64(len(b)) || nKV > uint64(len(b)) {
		return nil, fmt.Errorf("implausible counts: %d tensors, %d keys", nTensors, nKV)
	}
	for i := uint64(0); i < nKV && r.err == nil; i++ {
		k := r.str()
		v := r.value(r.u32(), 0)
		if v != nil {
			f.KV[k] = v
		}
	}
	type info struct {
		t   ggufTensor
		off uint64
	}
	infos := make([]info, 0, nTensors)
	for i := uint64(0); i < nTensors && r.err == nil; i++ {
		var t ggufTensor
		t.Name = r.str()
		nd := r.u32()
		if nd > 4 {
			return nil, fmt.Errorf("tensor %q has %d dims", t.Name, nd)
		}
		for d := uint32(0); d < nd; d++ {
			t.Dims = append(t.Dims, r.u64())
		}
		t.Type = r.u32()
		infos = append(infos, info{t, r.u64()})
	}
	if r.err != nil {
		return nil, r.err
	}
	align := uint64(32)
	if a, ok := f.KV["general.alignment"].(uint64); ok {
		if a == 0 || a&(a-1) != 0 {
			return nil, fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		align = a
	}
	base := (uint64(r.off) + align - 1) / align * align
	for _, in := range infos {
		t := in.t
		size, ok := elemSize(t.Type)
		if ok {
			n := uint64(1)
			for _, d := range t.Dims {
				if d != 0 && n > math.MaxInt64/d {
					return nil, fmt.Errorf("tensor %q: dims overflow", t.Name)
				}
				n *= d
			}
			begin, end := base+in.off, base+in.off+n*size
			if in.off > uint64(len(b)) || end > uint64(len(b)) || end < begin {
				return nil, fmt.Errorf("tensor %q: data [%d, %d) outside the %d-byte file", t.Name, begin, end, len(b))
			}
			t.Data = b[begin:end:end]
		}
		f.Tensors = append(f.Tensors, t)
	}
	return f, nil
}

// elemSize is the byte size of one element of the unquantized types.
func elemSize(t uint32) (uint64, bool) {
	switch t {
	case ggmlF32:
		return 4, true
	case ggmlF16, ggmlBF16:
		return 2, true
	}
	return 0, false
}

package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// enc appends little-endian GGUF encodings.
type enc []byte

func (e enc) u8(v uint8) enc   { return append(e, v) }
func (e enc) u16(v uint16) enc { return binary.LittleEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc { return binary.LittleEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc { return binary.LittleEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc { return append(e.u64(uint64(len(s))), s...) }

// kv is one metadata entry to encode: its type id and encoded value.
type kv struct {
	key string
	typ uint32
	val enc
}

// tensor is one tensor info to encode.
type tensor struct {
	name   string
	dims   []uint64
	typ    uint32
	offset uint64
}

// spec describes a file for build. Counts of zero-value -1 mean "the real
// count"; other values let a test write a count that lies.
type spec struct {
	magic      string
	version    uint32
	nTensors   int64
	nKV        int64
	kvs        []kv
	tensors    []tensor
	align      int // padding before the data section
	data       []byte
	truncateAt int // cut the file to this many bytes (0: keep all)
}

func (s spec) build() []byte {
	e := enc(s.magic)
	e = e.u32(s.version)
	nt, nk := uint64(len(s.tensors)), uint64(len(s.kvs))
	if s.nTensors >= 0 {
		nt = uint64(s.nTensors)
	}
	if s.nKV >= 0 {
		nk = uint64(s.nKV)
	}
	e = e.u64(nt).u64(nk)
	for _, kv := range s.kvs {
		e = e.str(kv.key).u32(kv.typ)
		e = append(e, kv.val...)
	}
	for _, t := range s.tensors {
		e = e.str(t.name).u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			e = e.u64(d)
		}
		e = e.u32(t.typ).u64(t.offset)
	}
	for len(e)%s.align != 0 {
		e = append(e, 0)
	}
	e = append(e, s.data...)
	if s.truncateAt > 0 {
		e = e[:s.truncateAt]
	}
	return e
}

// validSpec is a small well-formed v3 file: every scalar type, a string, an
// array of strings, an array of arrays of strings, and two tensors (an F32
// 4x2 matrix and a Q8_0 row of 32) with their data.
func validSpec() spec {
	f32 := enc(nil)
	for i := range 8 {
		f32 = f32.u32(math.Float32bits(float32(i) + 0.5))
	}
	q8 := enc(nil).u16(0x3c00) // d = 1
	for i := range 32 {
		q8 = q8.u8(uint8(int8(i - 16)))
	}
	data := append(append(slices.Clone(f32), make([]byte, 32-len(f32))...), q8...)
	nested := enc(nil).u32(uint32(TypeArray)).u64(2).
		u32(uint32(TypeString)).u64(2).str("a").str("b").
		u32(uint32(TypeString)).u64(1).str("c")
	return spec{
		magic: Magic, version: 3, nTensors: -1, nKV: -1, align: 32,
		kvs: []kv{
			{"general.architecture", uint32(TypeString), enc(nil).str("llama")},
			{"u8", uint32(TypeUint8), enc(nil).u8(200)},
			{"i8", uint32(TypeInt8), enc(nil).u8(0xff)},
			{"u16", uint32(TypeUint16), enc(nil).u16(65535)},
			{"i16", uint32(TypeInt16), enc(nil).u16(0x8000)},
			{"u32", uint32(TypeUint32), enc(nil).u32(4000000000)},
			{"i32", uint32(TypeInt32), enc(nil).u32(0xfffffffe)},
			{"f32", uint32(TypeFloat32), enc(nil).u32(math.Float32bits(1e-5))},
			{"bool", uint32(TypeBool), enc(nil).u8(1)},
			{"u64", uint32(TypeUint64), enc(nil).u64(math.MaxUint64)},
			{"i64", uint32(TypeInt64), enc(nil).u64(uint64(1) << 62)},
			{"f64", uint32(TypeFloat64), enc(nil).u64(math.Float64bits(1e6))},
			{"tokens", uint32(TypeArray), enc(nil).u32(uint32(TypeString)).u64(3).str("<s>").str("").str("héllo")},
			{"scores", uint32(TypeArray), enc(nil).u32(uint32(TypeFloat32)).u64(2).u32(math.Float32bits(-1)).u32(math.Float32bits(2.5))},
			{"types", uint32(TypeArray), enc(nil).u32(uint32(TypeInt32)).u64(2).u32(3).u32(0xffffffff)},
			{"nested", uint32(TypeArray), nested},
		},
		tensors: []tensor{
			{"w", []uint64{4, 2}, uint32(F32), 0},
			{"q", []uint64{32}, uint32(Q8_0), 32},
		},
		data: data,
	}
}

// open writes b to a temporary file and opens it.
func open(t *testing.T, b []byte) (*File, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "test.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err == nil {
		t.Cleanup(func() { f.Close() })
	}
	return f, err
}

func TestOpenValid(t *testing.T) {
	f, err := open(t, validSpec().build())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	wantKeys := []string{"general.architecture", "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "u64", "i64", "f64", "tokens", "scores", "types", "nested"}
	if got := f.Keys(); !slices.Equal(got, wantKeys) {
		t.Errorf("keys %q, want %q", got, wantKeys)
	}
	if a, err := f.Architecture(); err != nil || a != "llama" {
		t.Errorf("architecture %q %v", a, err)
	}
	must := func(ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("%s", what)
		}
	}
	v := func(k string) Value { x, _ := f.Value(k); return x }
	u8, ok := v("u8").Uint8()
	must(ok && u8 == 200, "u8")
	i8, ok := v("i8").Int8()
	must(ok && i8 == -1, "i8")
	u16, ok := v("u16").Uint16()
	must(ok && u16 == 65535, "u16")
	i16, ok := v("i16").Int16()
	must(ok && i16 == -32768, "i16")
	if n, err := f.Uint32("u32"); err != nil || n != 4000000000 {
		t.Errorf("u32 %d %v", n, err)
	}
	if n, err := f.Int32("i32"); err != nil || n != -2 {
		t.Errorf("i32 %d %v", n, err)
	}
	if x, err := f.Float32("f32"); err != nil || x != 1e-5 {
		t.Errorf("f32 %v %v", x, err)
	}
	if b, err := f.Bool("bool"); err != nil || !b {
		t.Errorf("bool %v %v", b, err)
	}
	if n, err := f.Uint64("u64"); err != nil || n != math.MaxUint64 {
		t.Errorf("u64 %d %v", n, err)
	}
	i64, ok := v("i64").Int64()
	must(ok && i64 == 1<<62, "i64")
	if x, err := f.Float("f64"); err != nil || x != 1e6 {
		t.Errorf("f64 %v %v", x, err)
	}
	// Int accepts every integer type whose value fits.
	for key, want := range map[string]int{"u8": 200, "i8": -1, "u16": 65535, "i16": -32768, "u32": 4000000000, "i32": -2, "i64": 1 << 62} {
		if got, err := f.Int(key); err != nil || got != want {
			t.Errorf("Int(%s) = %d %v, want %d", key, got, err, want)
		}
	}
	if _, err := f.Int("u64"); !errors.Is(err, ErrType) {
		t.Errorf("Int of a UINT64 above MaxInt64: %v, want ErrType", err)
	}
	if toks, err := f.Strings("tokens"); err != nil || !slices.Equal(toks, []string{"<s>", "", "héllo"}) {
		t.Errorf("tokens %q %v", toks, err)
	}
	if sc, err := f.Float32s("scores"); err != nil || !slices.Equal(sc, []float32{-1, 2.5}) {
		t.Errorf("scores %v %v", sc, err)
	}
	if ty, err := f.Int32s("types"); err != nil || !slices.Equal(ty, []int32{3, -1}) {
		t.Errorf("types %v %v", ty, err)
	}
	if ty, err := f.Ints("types"); err != nil || !slices.Equal(ty, []int64{3, -1}) {
		t.Errorf("Ints(types) %v %v", ty, err)
	}
	nested, ok := v("nested").Values()
	if !ok || len(nested) != 2 {
		t.Fatalf("nested: %v", v("nested"))
	}
	if a, _ := nested[0].Strings(); !slices.Equal(a, []string{"a", "b"}) {
		t.Errorf("nested[0] %q", a)
	}
	if a, _ := nested[1].Strings(); !slices.Equal(a, []string{"c"}) {
		t.Errorf("nested[1] %q", a)
	}
	if got := v("nested").String(); got != `[ARRAY x 2: [STRING x 2: "a" "b"] [STRING x 1: "c"]]` {
		t.Errorf("nested formats as %s", got)
	}

	// Tensors, in file order, with their data.
	ts := f.Tensors()
	if len(ts) != 2 || ts[0].Name != "w" || ts[1].Name != "q" {
		t.Fatalf("tensors %+v", ts)
	}
	w, _ := f.Tensor("w")
	if w.Type != F32 || !slices.Equal(w.Dims, []int64{4, 2}) || w.Size != 32 || w.Rows() != 2 || w.RowLen() != 4 || w.Elements() != 8 {
		t.Errorf("w: %+v", w)
	}
	wd, err := f.TensorData("w")
	if err != nil || len(wd) != 32 || math.Float32frombits(binary.LittleEndian.Uint32(wd[4:])) != 1.5 {
		t.Errorf("w data %v %v", wd, err)
	}
	q, _ := f.Tensor("q")
	qd, err := f.TensorData("q")
	if err != nil || q.Type != Q8_0 || q.Size != 34 || len(qd) != 34 || qd[2] != uint8(0xf0) {
		t.Errorf("q: %+v data %v %v", q, qd, err)
	}
	if _, err := f.TensorData("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing tensor: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TensorData("w"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("TensorData after Close: %v", err)
	}
	if s, err := f.String("general.architecture"); err != nil || s != "llama" {
		t.Errorf("metadata after Close: %q %v", s, err)
	}
}

func TestMetadataAccessorErrors(t *testing.T) {
	f, err := open(t, validSpec().build())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
		is   error
		msg  string
	}{
		{"missing", func() error { _, err := f.String("llama.block_count"); return err }, ErrNotFound, `"llama.block_count"`},
		{"uint32 of int32", func() error { _, err := f.Uint32("i32"); return err }, ErrType, `"i32" is INT32, want UINT32`},
		{"string of uint8", func() error { _, err := f.String("u8"); return err }, ErrType, `"u8" is UINT8, want STRING`},
		{"strings of float32s", func() error { _, err := f.Strings("scores"); return err }, ErrType, `"scores" is ARRAY of FLOAT32, want ARRAY of STRING`},
		{"int of string", func() error { _, err := f.Int("general.architecture"); return err }, ErrType, "want an integer"},
		{"float of bool", func() error { _, err := f.Float("bool"); return err }, ErrType, "want FLOAT32 or FLOAT64"},
		{"ints of strings", func() error { _, err := f.Ints("tokens"); return err }, ErrType, `"tokens"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %v, want %v containing %q", err, tc.is, tc.msg)
			}
		})
	}
}

func TestOpenVersion2AndAlignment(t *testing.T) {
	s := validSpec()
	s.version = 2
	s.kvs = append(s.kvs, kv{AlignmentKey, uint32(TypeUint32), enc(nil).u32(64)})
	s.align = 64
	s.tensors[1].offset = 64
	s.data = append(append(s.data[:32:32], make([]byte, 32)...), s.data[32:]...)
	f, err := open(t, s.build())
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if qd, err := f.TensorData("q"); err != nil || qd[0] != 0x00 || qd[1] != 0x3c {
		t.Errorf("q data %v %v", qd, err)
	}
}

func TestOpenNoTensors(t *testing.T) {
	s := validSpec()
	s.tensors, s.data, s.align = nil, nil, 1 // the file ends after the metadata
	f, err := open(t, s.build())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors()) != 0 || len(f.Keys()) != len(s.kvs) {
		t.Errorf("%d tensors, %d keys", len(f.Tensors()), len(f.Keys()))
	}
}

// TestOpenMalformed: each broken file is a clear error (the right kind, naming
// the key or tensor), never a panic or a large allocation.
func TestOpenMalformed(t *testing.T) {
	valid := validSpec().build()
	headerEnd := 4 + 4 + 8 + 8
	bomb := validSpec()
	bomb.tensors, bomb.data, bomb.align, bomb.nTensors = nil, nil, 1, 1
	nameBomb := append(enc(bomb.build()).u64(4<<30), make([]byte, 16)...)
	for _, tc := range []struct {
		name   string
		mutate func(*spec)
		raw    []byte // used instead of the spec when set
		is     error
		msg    []string
	}{
		{name: "empty file", raw: []byte{}, is: ErrTruncated, msg: []string{"the magic"}},
		{name: "short magic", raw: []byte("GGU"), is: ErrTruncated, msg: []string{"the magic"}},
		{name: "bad magic", mutate: func(s *spec) { s.magic = "GGML" }, is: ErrBadMagic, msg: []string{`"GGML"`}},
		{name: "safetensors file", raw: append(enc(nil).u64(2), "{}"...), is: ErrBadMagic},
		{name: "version 1", mutate: func(s *spec) { s.version = 1 }, is: ErrVersion, msg: []string{"version 1"}},
		{name: "version 4", mutate: func(s *spec) { s.version = 4 }, is: ErrVersion, msg: []string{"version 4"}},
		{name: "big-endian", mutate: func(s *spec) { s.version = 3 << 24 }, is: ErrVersion, msg: []string{"big-endian"}},
		{name: "truncated header", raw: valid[:headerEnd-3], is: ErrTruncated, msg: []string{"the metadata count"}},
		{name: "tensor count lies", mutate: func(s *spec) { s.nTensors = 1 << 40 }, is: ErrTruncated, msg: []string{"tensor count 1099511627776"}},
		{name: "metadata count lies", mutate: func(s *spec) { s.nKV = math.MaxInt64 }, is: ErrTruncated, msg: []string{"metadata count"}},
		{name: "metadata count one too many", mutate: func(s *spec) { s.nKV = int64(len(s.kvs) + 1) }, is: ErrTruncated},
		{name: "key of 4 GB", raw: append(enc(valid[:headerEnd:headerEnd]).u64(4<<30), make([]byte, 300)...), is: ErrTruncated, msg: []string{"key of metadata entry 0", "string of 4294967296 bytes"}},
		{name: "string value of 4 GB", mutate: func(s *spec) { s.kvs[0].val = enc(nil).u64(4 << 30) }, is: ErrTruncated, msg: []string{`"general.architecture"`, "string of 4294967296 bytes"}},
		{name: "unknown value type", mutate: func(s *spec) { s.kvs[1].typ = 13 }, is: ErrMalformed, msg: []string{`"u8"`, "unknown value type id 13"}},
		{name: "array of unknown type", mutate: func(s *spec) { s.kvs[13].val = enc(nil).u32(77).u64(1).u32(0) }, is: ErrMalformed, msg: []string{`"scores"`, "id 77"}},
		{name: "array count lies", mutate: func(s *spec) { s.kvs[13].val = enc(nil).u32(uint32(TypeFloat32)).u64(1 << 61) }, is: ErrTruncated, msg: []string{`"scores"`, "array of 2305843009213693952 FLOAT32"}},
		{name: "string array count lies", mutate: func(s *spec) { s.kvs[12].val = enc(nil).u32(uint32(TypeString)).u64(1 << 40).str("x") }, is: ErrTruncated, msg: []string{`"tokens"`}},
		{name: "string in array of 4 GB", mutate: func(s *spec) { s.kvs[12].val = enc(nil).u32(uint32(TypeString)).u64(2).str("x").u64(4 << 30) }, is: ErrTruncated, msg: []string{"element 1 of metadata key \"tokens\"", "4294967296"}},
		{name: "arrays nested too deep", mutate: func(s *spec) {
			e := enc(nil)
			for range MaxArrayDepth + 1 {
				e = e.u32(uint32(TypeArray)).u64(1)
			}
			s.kvs[15].val = e.u32(uint32(TypeUint8)).u64(0)
		}, is: ErrMalformed, msg: []string{"nested more than"}},
		{name: "long duplicate key", mutate: func(s *spec) { s.kvs[1].key = strings.Repeat("k", 1000); s.kvs[2].key = s.kvs[1].key }, is: ErrMalformed, msg: []string{`kkk"... (1000 bytes) appears twice`}},
		{name: "duplicate key", mutate: func(s *spec) { s.kvs[2].key = "u8" }, is: ErrMalformed, msg: []string{`"u8" appears twice`}},
		{name: "alignment not uint32", mutate: func(s *spec) {
			s.kvs = append(s.kvs, kv{AlignmentKey, uint32(TypeUint64), enc(nil).u64(32)})
		}, is: ErrMalformed, msg: []string{AlignmentKey, "UINT64"}},
		{name: "alignment zero", mutate: func(s *spec) { s.kvs = append(s.kvs, kv{AlignmentKey, uint32(TypeUint32), enc(nil).u32(0)}) }, is: ErrMalformed, msg: []string{"power of two"}},
		{name: "alignment 48", mutate: func(s *spec) { s.kvs = append(s.kvs, kv{AlignmentKey, uint32(TypeUint32), enc(nil).u32(48)}) }, is: ErrMalformed, msg: []string{"power of two"}},
		{name: "five dims", mutate: func(s *spec) { s.tensors[0].dims = []uint64{1, 1, 1, 4, 2} }, is: ErrMalformed, msg: []string{`tensor "w"`, "5 dimensions"}},
		{name: "negative dim", mutate: func(s *spec) { s.tensors[0].dims = []uint64{4, 1 << 63} }, is: ErrMalformed, msg: []string{`tensor "w"`, "negative"}},
		{name: "element count overflow", mutate: func(s *spec) { s.tensors[0].dims = []uint64{1 << 32, 1 << 32} }, is: ErrMalformed, msg: []string{`tensor "w"`, "overflows"}},
		{name: "byte size overflow", mutate: func(s *spec) { s.tensors[0].dims = []uint64{1 << 31, 1 << 31} }, is: ErrMalformed, msg: []string{`tensor "w"`, "overflows"}},
		{name: "retired type id", mutate: func(s *spec) { s.tensors[1].typ = 4 }, is: ErrMalformed, msg: []string{`tensor "q"`, "unknown ggml type id 4"}},
		{name: "unknown type id", mutate: func(s *spec) { s.tensors[0].typ = 1000 }, is: ErrMalformed, msg: []string{`tensor "w"`, "unknown ggml type id 1000"}},
		{name: "row not whole blocks", mutate: func(s *spec) { s.tensors[1].dims = []uint64{16, 2} }, is: ErrMalformed, msg: []string{`tensor "q"`, "not a multiple of the block size 32"}},
		{name: "misaligned offset", mutate: func(s *spec) { s.tensors[1].offset = 36 }, is: ErrMalformed, msg: []string{`tensor "q"`, "offset 36", "alignment 32"}},
		{name: "offset past the end", mutate: func(s *spec) { s.tensors[1].offset = 1 << 20 }, is: ErrTruncated, msg: []string{`tensor "q"`, "past the end"}},
		{name: "offset near 2^64", mutate: func(s *spec) { s.tensors[1].offset = math.MaxUint64 - 31 }, is: ErrTruncated, msg: []string{`tensor "q"`}},
		{name: "data truncated", mutate: func(s *spec) { s.data = s.data[:len(s.data)-1] }, is: ErrTruncated, msg: []string{`tensor "q"`, "past the end"}},
		{name: "tensor larger than file", mutate: func(s *spec) { s.tensors[0].dims = []uint64{1 << 20, 1 << 20} }, is: ErrTruncated, msg: []string{`tensor "w"`}},
		{name: "duplicate tensor", mutate: func(s *spec) { s.tensors[1].name = "w" }, is: ErrMalformed, msg: []string{`tensor "w" appears twice`}},
		{name: "tensor name of 4 GB", raw: nameBomb, is: ErrTruncated, msg: []string{"name of tensor 0", "string of 4294967296 bytes"}},
		{name: "truncated in tensor infos", mutate: func(s *spec) { s.data, s.align, s.truncateAt = nil, 1, len(s.build())-10 }, is: ErrTruncated, msg: []string{`tensor "q"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.raw
			if b == nil {
				s := validSpec()
				tc.mutate(&s)
				b = s.build()
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, _ = parse("mem", b)
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Errorf("parsing %d bytes allocated %d bytes", len(b), n)
			}
			f, err := open(t, b)
			if err == nil {
				t.Fatalf("opened (%d tensors), want an error", len(f.Tensors()))
			}
			if !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", err, tc.is)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
			if !strings.Contains(err.Error(), "test.gguf") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestOpenEveryTruncation cuts a valid file at every length: each prefix is
// an ErrTruncated error, never a panic.
func TestOpenEveryTruncation(t *testing.T) {
	valid := validSpec().build()
	for n := range len(valid) {
		f, err := parse("cut", valid[:n])
		if err == nil {
			t.Fatalf("the first %d of %d bytes parsed (%d tensors)", n, len(valid), len(f.Tensors()))
		}
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("the first %d of %d bytes: %v, want ErrTruncated", n, len(valid), err)
		}
	}
}

func TestGGMLTypeTraits(t *testing.T) {
	for _, tc := range []struct {
		t         GGMLType
		name      string
		blockSize int
		typeSize  int
	}{
		{F32, "F32", 1, 4}, {F16, "F16", 1, 2}, {BF16, "BF16", 1, 2},
		{Q4_0, "Q4_0", 32, 18}, {Q4_1, "Q4_1", 32, 20}, {Q5_0, "Q5_0", 32, 22}, {Q5_1, "Q5_1", 32, 24},
		{Q8_0, "Q8_0", 32, 34}, {Q8_1, "Q8_1", 32, 36},
		{Q2_K, "Q2_K", 256, 84}, {Q3_K, "Q3_K", 256, 110}, {Q4_K, "Q4_K", 256, 144},
		{Q5_K, "Q5_K", 256, 176}, {Q6_K, "Q6_K", 256, 210}, {Q8_K, "Q8_K", 256, 292},
		{IQ2_XXS, "IQ2_XXS", 256, 66}, {IQ2_XS, "IQ2_XS", 256, 74}, {IQ3_XXS, "IQ3_XXS", 256, 98},
		{IQ1_S, "IQ1_S", 256, 50}, {IQ4_NL, "IQ4_NL", 32, 18}, {IQ3_S, "IQ3_S", 256, 110},
		{IQ2_S, "IQ2_S", 256, 82}, {IQ4_XS, "IQ4_XS", 256, 136}, {IQ1_M, "IQ1_M", 256, 56},
		{I8, "I8", 1, 1}, {I16, "I16", 1, 2}, {I32, "I32", 1, 4}, {I64, "I64", 1, 8}, {F64, "F64", 1, 8},
		{TQ1_0, "TQ1_0", 256, 54}, {TQ2_0, "TQ2_0", 256, 66}, {MXFP4, "MXFP4", 32, 17},
	} {
		if tc.t.String() != tc.name || tc.t.BlockSize() != tc.blockSize || tc.t.TypeSize() != tc.typeSize || !tc.t.Known() {
			t.Errorf("%d: %s %d %d, want %s %d %d", uint32(tc.t), tc.t, tc.t.BlockSize(), tc.t.TypeSize(), tc.name, tc.blockSize, tc.typeSize)
		}
		if p, err := ParseGGMLType(tc.name); err != nil || p != tc.t {
			t.Errorf("ParseGGMLType(%s) = %v %v", tc.name, p, err)
		}
	}
	for _, id := range []GGMLType{4, 5, 31, 32, 33, 36, 37, 38, 40, 1 << 31} {
		if id.Known() || id.BlockSize() != 0 || !strings.HasPrefix(id.String(), "GGMLType(") {
			t.Errorf("id %d is known as %s", uint32(id), id)
		}
		if _, err := id.RowSize(32); err == nil {
			t.Errorf("RowSize of unknown id %d succeeded", uint32(id))
		}
	}
	if n, err := Q4_K.RowSize(512); err != nil || n != 288 {
		t.Errorf("Q4_K.RowSize(512) = %d %v", n, err)
	}
	if _, err := Q4_K.RowSize(100); err == nil {
		t.Error("Q4_K.RowSize(100) succeeded")
	}
	if _, err := ParseGGMLType("Q4_K_M"); err == nil {
		t.Error(`ParseGGMLType("Q4_K_M") succeeded: it is a file type, not a tensor type`)
	}
}

// FuzzOpen feeds arbitrary bytes to the parser Open runs on the mapped file:
// it must return a File or an error, never panic, and a File it returns must
// hand out every tensor's data in range.
func FuzzOpen(f *testing.F) {
	valid := validSpec().build()
	f.Add(valid)
	f.Add(valid[:len(valid)/2])
	f.Add([]byte("GGUF"))
	s := validSpec()
	s.version = 2
	f.Add(s.build())
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := parse("fuzz", b)
		if err != nil {
			if g != nil {
				t.Fatal("File and error both returned")
			}
			return
		}
		for _, kv := range g.KVs() {
			_ = kv.Value.String()
			_, _ = g.Int(kv.Key)
			_, _ = g.Strings(kv.Key)
		}
		for _, ti := range g.Tensors() {
			d, err := g.TensorData(ti.Name)
			if err != nil || int64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: %d bytes (%v), info says %d", ti.Name, len(d), err, ti.Size)
			}
		}
	})
}

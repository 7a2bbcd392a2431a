package gguf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// rewrite writes f's metadata (but general.alignment) and tensors to a new
// file in dir and opens it.
func rewrite(t *testing.T, f *File, dir string, alignment uint64) *File {
	t.Helper()
	var kvs []KV
	for _, kv := range f.KVs() {
		if kv.Key != AlignmentKey {
			kvs = append(kvs, kv)
		}
	}
	var ts []WriteTensor
	for _, info := range f.Tensors() {
		data, err := f.TensorData(info.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, WriteTensor{Name: info.Name, Dims: info.Dims, Type: info.Type, Data: data})
	}
	path := filepath.Join(dir, "out.gguf")
	if err := WriteFile(path, kvs, ts, alignment); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// sameFile checks that g holds f's metadata and tensors.
func sameFile(t *testing.T, f, g *File) {
	t.Helper()
	var fk, gk []KV
	for _, kv := range f.KVs() {
		if kv.Key != AlignmentKey {
			fk = append(fk, kv)
		}
	}
	for _, kv := range g.KVs() {
		if kv.Key != AlignmentKey {
			gk = append(gk, kv)
		}
	}
	if !reflect.DeepEqual(fk, gk) {
		t.Fatalf("metadata differs after a rewrite:\n%v\n%v", fk, gk)
	}
	ft, gt := f.Tensors(), g.Tensors()
	if len(ft) != len(gt) {
		t.Fatalf("%d tensors, rewrite has %d", len(ft), len(gt))
	}
	for i := range ft {
		a, b := ft[i], gt[i]
		if a.Name != b.Name || a.Type != b.Type || !reflect.DeepEqual(a.Dims, b.Dims) || a.Size != b.Size {
			t.Fatalf("tensor %d: %+v, rewrite %+v", i, a, b)
		}
		da, _ := f.TensorData(a.Name)
		db, _ := g.TensorData(b.Name)
		if !bytes.Equal(da, db) {
			t.Fatalf("tensor %q: data differs after a rewrite", a.Name)
		}
	}
}

// TestWriteRoundTrip: every value type and tensors of several types, written
// and read back, at the default alignment and at 64 (stored as
// general.alignment).
func TestWriteRoundTrip(t *testing.T) {
	f, err := open(t, validSpec().build())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, align := range []uint64{0, 64} {
		g := rewrite(t, f, t.TempDir(), align)
		sameFile(t, f, g)
		want := uint64(DefaultAlignment)
		if align != 0 {
			want = align
		}
		if g.Alignment != want {
			t.Errorf("alignment %d, want %d", g.Alignment, want)
		}
	}
	// The constructors make what the reader reads.
	kvs := []KV{
		{"s", StringValue("héllo")}, {"u32", Uint32Value(7)}, {"i32", Int32Value(-7)}, {"u64", Uint64Value(1 << 40)},
		{"u16", Uint16Value(9)}, {"f", Float32Value(1.5)}, {"b", BoolValue(true)}, {"ss", StringsValue([]string{"a", "", "c"})},
		{"fs", Float32sValue([]float32{-1, 2.5})}, {"is", Int32sValue([]int32{1, -2, 3})},
	}
	path := filepath.Join(t.TempDir(), "kv.gguf")
	data := make([]byte, 34) // one Q8_0 block of 32
	data[0] = 0x3c
	if err := WriteFile(path, kvs, []WriteTensor{{Name: "w", Dims: []int64{32, 1}, Type: Q8_0, Data: data}}, 0); err != nil {
		t.Fatal(err)
	}
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !reflect.DeepEqual(g.KVs(), kvs) {
		t.Errorf("metadata read back:\n%v\nwant\n%v", g.KVs(), kvs)
	}
}

// TestWriteRefuses: what a reader would refuse is not written.
func TestWriteRefuses(t *testing.T) {
	q := func(n int) []byte { return make([]byte, n) }
	for _, tc := range []struct {
		name    string
		kvs     []KV
		tensors []WriteTensor
		align   uint64
		want    string
	}{
		{"duplicate key", []KV{{"a", Uint32Value(1)}, {"a", Uint32Value(2)}}, nil, 0, `duplicate key "a"`},
		{"duplicate tensor", nil, []WriteTensor{{"w", []int64{32}, Q8_0, q(34)}, {"w", []int64{32}, Q8_0, q(34)}}, 0, `duplicate tensor "w"`},
		{"partial block", nil, []WriteTensor{{"w", []int64{16}, Q8_0, q(17)}}, 0, "not a multiple of the block size"},
		{"short data", nil, []WriteTensor{{"w", []int64{32, 2}, Q8_0, q(34)}}, 0, "needs 68 bytes, have 34"},
		{"no dims", nil, []WriteTensor{{"w", nil, F32, nil}}, 0, "0 dims"},
		{"odd alignment", nil, nil, 24, "not a power of two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.kvs, tc.tensors, tc.align)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestWriteFixtures: llama.cpp's own files, rewritten, read back the same.
func TestWriteFixtures(t *testing.T) {
	dir, _ := loadManifest(t)
	for _, name := range []string{"llama/llama-q4_k_m.gguf", "qwen3/qwen3-q8_0.gguf", "tokenizer/bpe-tokenizer-q4_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			f, err := Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sameFile(t, f, rewrite(t, f, t.TempDir(), 0))
		})
	}
}

// TestSplitSet: a file split in three parts as gguf-split writes them (every
// part with split.no / split.count, the first with the metadata) opens from
// its first part with every tensor; other parts and broken sets are
// refused with errors that say what to do.
func TestSplitSet(t *testing.T) {
	src, err := open(t, validSpec().build())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	infos := src.Tensors()
	if len(infos) < 2 {
		t.Fatalf("the valid spec has %d tensors; the test needs 2", len(infos))
	}
	// parts[i]: the tensors of part i (the first two parts one tensor each,
	// the last the rest).
	write := func(dir string, n int, mutate func(i int, kvs []KV) []KV) string {
		var first string
		for i := range n {
			kvs := []KV{{SplitNoKey, Uint16Value(uint16(i))}, {SplitCountKey, Uint16Value(uint16(n))}, {SplitTensorsKey, Int32Value(int32(len(infos)))}}
			if i == 0 {
				for _, kv := range src.KVs() {
					if kv.Key != AlignmentKey {
						kvs = append(kvs, kv)
					}
				}
			}
			if mutate != nil {
				kvs = mutate(i, kvs)
			}
			var ts []WriteTensor
			for j, info := range infos {
				if min(j, n-1) != i {
					continue
				}
				data, _ := src.TensorData(info.Name)
				ts = append(ts, WriteTensor{Name: info.Name, Dims: info.Dims, Type: info.Type, Data: data})
			}
			path := filepath.Join(dir, fmt.Sprintf("m-%05d-of-%05d.gguf", i+1, n))
			if err := WriteFile(path, kvs, ts, 0); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = path
			}
		}
		return first
	}
	n := min(3, len(infos))
	dir := t.TempDir()
	first := write(dir, n, nil)
	f, err := Open(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(f.Tensors()); got != len(infos) {
		t.Fatalf("%d tensors, want %d", got, len(infos))
	}
	for _, info := range infos {
		want, _ := src.TensorData(info.Name)
		got, err := f.TensorData(info.Name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("tensor %q: %v, data equal %v", info.Name, err, bytes.Equal(got, want))
		}
	}
	if v, _ := f.String("general.name"); v == "" && src.Has("general.name") {
		t.Errorf("the first part's metadata is not the set's")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	second := filepath.Join(dir, fmt.Sprintf("m-%05d-of-%05d.gguf", 2, n))
	if _, err := Open(second); err == nil || !strings.Contains(err.Error(), "open "+filepath.Join(dir, fmt.Sprintf("m-00001-of-%05d.gguf", n))) {
		t.Errorf("opening part 2: %v, want an error naming the first part", err)
	}
	// Broken sets.
	for _, tc := range []struct {
		name   string
		mutate func(i int, kvs []KV) []KV
		remove int // part to delete (0: none)
		want   string
	}{
		{"missing part", nil, n, "no such file"},
		{"wrong part number", func(i int, kvs []KV) []KV {
			if i == 1 {
				kvs[0].Value = Uint16Value(0)
			}
			return kvs
		}, 0, "says it is part 1 of"},
		{"wrong tensor count", func(i int, kvs []KV) []KV {
			kvs[2].Value = Int32Value(99)
			return kvs
		}, 0, "split.tensors.count = 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			first := write(dir, n, tc.mutate)
			if tc.remove > 0 {
				os.Remove(filepath.Join(dir, fmt.Sprintf("m-%05d-of-%05d.gguf", tc.remove, n)))
			}
			f, err := Open(first)
			if err == nil {
				f.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
	// A first part not named as one cannot find the others.
	renamed := filepath.Join(t.TempDir(), "model.gguf")
	data, _ := os.ReadFile(first)
	os.WriteFile(renamed, data, 0o644)
	if _, err := Open(renamed); err == nil || !strings.Contains(err.Error(), "not named NAME-00001-of-") {
		t.Errorf("a renamed first part: %v", err)
	}
}

func TestFind(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		want  string // file name, or "error: substring"
	}{
		{"one file", []string{"model-q4_k_m.gguf", "README.md"}, "model-q4_k_m.gguf"},
		{"split set", []string{"m-00002-of-00003.gguf", "m-00001-of-00003.gguf", "m-00003-of-00003.gguf"}, "m-00001-of-00003.gguf"},
		{"none", []string{"config.json"}, "error: no .gguf file"},
		{"two models", []string{"a.gguf", "b.gguf"}, "error: several GGUF models (a.gguf, b.gguf)"},
		{"shards without the first", []string{"m-00002-of-00003.gguf"}, "error: not its first one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Find(dir)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Find = %q, %v; want an error containing %q", got, err, want)
				}
				return
			}
			if err != nil || got != filepath.Join(dir, tc.want) {
				t.Fatalf("Find = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

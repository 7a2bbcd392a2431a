package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gpu"
)

// rawFile assembles a safetensors file from a header string and data bytes,
// without any of Write's checks.
func rawFile(header string, data []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(data)
	return b.Bytes()
}

func writeRaw(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustWrite(t *testing.T, path string, tensors []WriteTensor, meta map[string]string) {
	t.Helper()
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

func TestOpenErrors(t *testing.T) {
	lenOnly := func(n uint64, rest string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, n)
		return append(b, rest...)
	}
	x16 := seq(16)
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty file", nil, "too short"},
		{"short length field", []byte{1, 0, 0, 0}, "too short"},
		{"header longer than file", lenOnly(100, `{}`), "exceeds the 2 bytes after the length field"},
		{"absurd header length", lenOnly(1<<40, `{}`), "exceeds the 104857600-byte limit"},
		{"header just over limit", lenOnly(MaxHeaderSize+1, `{}`), "limit"},
		{"empty header", rawFile("", nil), "not a JSON object"},
		{"invalid JSON", rawFile(`{"x": {"dtype": "F32",`, nil), "invalid JSON header"},
		{"trailing garbage", rawFile(`{} x`, nil), "invalid JSON header"},
		{"header is array", rawFile(`[1, 2]`, nil), "not a JSON object"},
		{"header is null", rawFile(`null`, nil), "not a JSON object"},
		{"invalid UTF-8", rawFile("{\"\xff\": 1}", nil), "UTF-8"},
		{"entry not an object", rawFile(`{"x": 5}`, nil), `tensor "x": invalid entry`},
		{"missing dtype", rawFile(`{"x": {"shape": [1], "data_offsets": [0, 4]}}`, x16), "missing dtype"},
		{"missing shape", rawFile(`{"x": {"dtype": "F32", "data_offsets": [0, 4]}}`, x16), "missing shape"},
		{"missing offsets", rawFile(`{"x": {"dtype": "F32", "shape": [1]}}`, x16), "missing data_offsets"},
		{"null offsets", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": null}}`, x16), "missing data_offsets"},
		{"one offset", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, x16), "has 1 values, want 2"},
		{"three offsets", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}`, x16), "has 3 values"},
		{"end before begin", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}`, x16), "invalid data_offsets [8, 4]"},
		{"negative begin", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}`, x16), "invalid data_offsets [-4, 0]"},
		{"fractional offset", rawFile(`{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0.5, 4]}}`, x16), "invalid entry"},
		{"offsets past data", rawFile(`{"x": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}}`, x16), "extend past the 16-byte data section"},
		{"truncated data", rawFile(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}`, x16), `tensor "b": data_offsets [8, 24] extend past`},
		{"size mismatch F32", rawFile(`{"x": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 8]}}`, x16), "F32 shape [2 2] needs 16 bytes"},
		{"size mismatch BF16", rawFile(`{"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}}`, x16), "BF16 shape [3] needs 6 bytes"},
		{"size mismatch I64", rawFile(`{"x": {"dtype": "I64", "shape": [1], "data_offsets": [0, 4]}}`, x16), "I64 shape [1] needs 8 bytes"},
		{"negative dim", rawFile(`{"x": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}`, x16), "negative dimension"},
		{"shape overflow", rawFile(`{"x": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}}`, x16), "overflows"},
		{"element bytes overflow", rawFile(`{"x": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 16]}}`, x16), "overflows"},
		{"metadata not strings", rawFile(`{"__metadata__": {"format": 1}}`, nil), "__metadata__ is not a map of strings"},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := writeRaw(t, dir, "case"+string(rune('a'+i))+".safetensors", tc.content)
			m, err := OpenFile(p)
			if err == nil {
				m.Close()
				t.Fatalf("OpenFile succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file %s", err, p)
			}
		})
	}
}

func TestOpenFileMissing(t *testing.T) {
	_, err := OpenFile(filepath.Join(t.TempDir(), "nope.safetensors"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

func TestOpenDirMissingModel(t *testing.T) {
	dir := t.TempDir()
	// A safetensors file with another name must not be picked up.
	mustWrite(t, filepath.Join(dir, "reference_logits.safetensors"), []WriteTensor{{Name: "logits", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil)
	_, err := Open(dir)
	if err == nil || !strings.Contains(err.Error(), "neither model.safetensors nor model.safetensors.index.json") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnsupportedDTypePerTensor(t *testing.T) {
	dir := t.TempDir()
	p := writeRaw(t, dir, "model.safetensors", rawFile(
		`{"x.weight": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]},`+
			`"pos": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]},`+
			`"q": {"dtype": "Q4_FUTURE", "shape": [7], "data_offsets": [12, 15]},`+
			`"w": {"dtype": "F32", "shape": [1], "data_offsets": [16, 20]}}`, seq(20)))
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := m.Names(), []string{"pos", "q", "w", "x.weight"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if !m.Has("pos") || m.Has("missing") {
		t.Errorf("Has is wrong")
	}
	w, err := m.Tensor("w")
	if err != nil {
		t.Fatal(err)
	}
	if w.DType != gpu.F32 || !bytes.Equal(w.Data, seq(20)[16:20]) || w.File != p {
		t.Errorf("w = %+v", w)
	}
	for name, dt := range map[string]string{"x.weight": "I8", "pos": "I64", "q": "Q4_FUTURE"} {
		_, err := m.Tensor(name)
		want := p + `: tensor "` + name + `": unsupported dtype ` + dt
		if err == nil || err.Error() != want {
			t.Errorf("Tensor(%q) error = %v, want %q", name, err, want)
		}
	}
	if _, err := m.Tensor("missing"); err == nil || !strings.Contains(err.Error(), `no tensor "missing"`) || !strings.Contains(err.Error(), p) {
		t.Errorf("Tensor(missing) error = %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	f32 := make([]byte, 0, 24)
	for _, v := range []float32{1, -2.5, 3e-7, float32(math.Inf(1)), 0, 6} {
		f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(v))
	}
	bf16 := make([]byte, 0, 8)
	f16 := make([]byte, 0, 6)
	for _, v := range []float32{1, -0.5, 65504, 1e-3} {
		bf16 = binary.LittleEndian.AppendUint16(bf16, gpu.F32ToBF16(v))
	}
	for _, v := range []uint16{0x3c00, 0xbc00, 0x7bff} {
		f16 = binary.LittleEndian.AppendUint16(f16, v)
	}
	in := []WriteTensor{
		{Name: "z.f32", DType: "F32", Shape: []int{2, 3}, Data: f32},
		{Name: "a.bf16", DType: "BF16", Shape: []int{4}, Data: bf16},
		{Name: "m.f16", DType: "F16", Shape: []int{3, 1}, Data: f16},
		{Name: "scalar", DType: "F32", Shape: []int{}, Data: f32[:4]},
		{Name: "empty", DType: "BF16", Shape: []int{0, 5}, Data: nil},
		{Name: "<html&name>", DType: "F16", Shape: []int{1}, Data: f16[:2]},
	}
	meta := map[string]string{"format": "pt", "note": "round <trip>"}
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	mustWrite(t, path, in, meta)

	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	hdr := string(raw[8 : 8+n])
	if !strings.HasPrefix(hdr, `{"__metadata__":{"format":"pt","note":"round <trip>"}`) {
		t.Errorf("header does not start with metadata: %s", hdr)
	}
	// Tensors are laid out in the given order.
	var parsed map[string]struct {
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(raw[8:8+n], &parsed); err != nil {
		t.Fatal(err)
	}
	off := 0
	for _, w := range in {
		if got := parsed[w.Name].Offsets; got != [2]int{off, off + len(w.Data)} {
			t.Errorf("%s offsets %v, want [%d %d]", w.Name, got, off, off+len(w.Data))
		}
		off += len(w.Data)
	}
	if len(raw) != 8+int(n)+off {
		t.Errorf("file is %d bytes, want %d", len(raw), 8+int(n)+off)
	}

	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var names []string
	for _, w := range in {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	if got := m.Names(); !slices.Equal(got, names) {
		t.Errorf("Names = %v, want %v", got, names)
	}
	if got := m.Metadata(); len(got) != 2 || got["format"] != "pt" || got["note"] != "round <trip>" {
		t.Errorf("Metadata = %v", got)
	}
	wantDT := map[string]gpu.DType{"F32": gpu.F32, "BF16": gpu.BF16, "F16": gpu.F16}
	for _, w := range in {
		tt, err := m.Tensor(w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if tt.Name != w.Name || tt.RawDType != w.DType || tt.DType != wantDT[w.DType] || !slices.Equal(tt.Shape, w.Shape) || !bytes.Equal(tt.Data, w.Data) || tt.File != path {
			t.Errorf("%s: got %+v", w.Name, tt)
		}
		if tt.Elements()*tt.DType.Size() != len(tt.Data) {
			t.Errorf("%s: Elements %d inconsistent with %d bytes", w.Name, tt.Elements(), len(tt.Data))
		}
	}
	// The weights feed gpu.NewWeight directly.
	zt, _ := m.Tensor("z.f32")
	gw, err := gpu.NewWeight(zt.DType, zt.Shape[0], zt.Shape[1], zt.Data)
	if err != nil {
		t.Fatal(err)
	}
	if gw.At(0, 1) != -2.5 || !math.IsInf(float64(gw.At(1, 0)), 1) {
		t.Errorf("weight values wrong: %v", gw.Float32s())
	}
	at, _ := m.Tensor("a.bf16")
	bw, _ := gpu.NewWeight(at.DType, 1, 4, at.Data)
	if bw.At(0, 1) != -0.5 {
		t.Errorf("bf16 value %v", bw.At(0, 1))
	}
	ft, _ := m.Tensor("m.f16")
	fw, _ := gpu.NewWeight(ft.DType, 3, 1, ft.Data)
	if fw.At(2, 0) != 65504 {
		t.Errorf("f16 value %v", fw.At(2, 0))
	}
	// Shapes handed out are copies.
	zt.Shape[0] = 99
	if z2, _ := m.Tensor("z.f32"); z2.Shape[0] != 2 {
		t.Errorf("Tensor shares its shape slice")
	}

	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.Tensor("z.f32"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Tensor after Close: %v", err)
	}
}

func TestWriteNoMetadataAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.safetensors")
	mustWrite(t, path, []WriteTensor{{Name: "a", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil)
	m, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Metadata()) != 0 {
		t.Errorf("Metadata = %v, want empty", m.Metadata())
	}
	// Overwriting a file that is open (mapped) replaces it atomically; the
	// open model keeps reading the old contents.
	mustWrite(t, path, []WriteTensor{{Name: "b", DType: "I64", Shape: []int{2}, Data: seq(16)}}, map[string]string{"k": "v"})
	if a, err := m.Tensor("a"); err != nil || !bytes.Equal(a.Data, seq(4)) {
		t.Errorf("old model after overwrite: %v %v", a, err)
	}
	m.Close()
	m, err = OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !slices.Equal(m.Names(), []string{"b"}) || m.Metadata()["k"] != "v" {
		t.Errorf("new file: names %v metadata %v", m.Names(), m.Metadata())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name    string
		tensors []WriteTensor
		meta    map[string]string
		want    string
	}{
		{"size mismatch", []WriteTensor{{Name: "a", DType: "F32", Shape: []int{2}, Data: seq(4)}}, nil, "needs 8 bytes, have 4"},
		{"unknown dtype", []WriteTensor{{Name: "a", DType: "F24", Shape: []int{1}, Data: seq(3)}}, nil, `unknown dtype "F24"`},
		{"duplicate", []WriteTensor{{Name: "a", DType: "F32", Shape: []int{1}, Data: seq(4)}, {Name: "a", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil, `duplicate tensor "a"`},
		{"reserved name", []WriteTensor{{Name: "__metadata__", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil, "reserved"},
		{"negative dim", []WriteTensor{{Name: "a", DType: "F32", Shape: []int{-1}, Data: nil}}, nil, "invalid shape"},
		{"invalid UTF-8 name", []WriteTensor{{Name: "\xff", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil, "UTF-8"},
		{"invalid UTF-8 metadata", nil, map[string]string{"k": "\xfe"}, "UTF-8"},
	}
	dir := t.TempDir()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "out.safetensors")
			err := Write(path, tc.tensors, tc.meta)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want one naming %s and containing %q", err, path, tc.want)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left %d files behind", len(entries))
	}
	if err := Write(filepath.Join(dir, "no", "such", "dir.safetensors"), nil, nil); err == nil {
		t.Errorf("Write into a missing directory succeeded")
	}
}

func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 123}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	writeRaw(t, dir, IndexFile, b)
}

func TestSharded(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	mustWrite(t, filepath.Join(dir, s1), []WriteTensor{
		{Name: "embed", DType: "BF16", Shape: []int{2, 2}, Data: seq(8)},
		{Name: "layer.0", DType: "F32", Shape: []int{2}, Data: seq(8)},
	}, map[string]string{"format": "pt", "shard": "1"})
	mustWrite(t, filepath.Join(dir, s2), []WriteTensor{
		{Name: "layer.1", DType: "F16", Shape: []int{3}, Data: seq(6)},
		{Name: "extra", DType: "F32", Shape: []int{1}, Data: seq(4)}, // not in the index
	}, map[string]string{"format": "pt", "shard": "2", "other": "x"})
	writeIndex(t, dir, map[string]string{"embed": s1, "layer.0": s1, "layer.1": s2})
	// Neither of these may be opened: the index wins over model.safetensors,
	// and unrelated files are ignored.
	writeRaw(t, dir, "model.safetensors", []byte("garbage"))
	writeRaw(t, dir, "reference_logits.safetensors", []byte("garbage"))

	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, want := m.Names(), []string{"embed", "layer.0", "layer.1"}; !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if m.Has("extra") {
		t.Errorf("Has(extra): tensors outside the weight_map must not be listed")
	}
	for name, file := range map[string]string{"embed": s1, "layer.0": s1, "layer.1": s2} {
		tt, err := m.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		if tt.File != filepath.Join(dir, file) {
			t.Errorf("%s from %s, want %s", name, tt.File, file)
		}
	}
	if l1, _ := m.Tensor("layer.1"); l1.DType != gpu.F16 || !bytes.Equal(l1.Data, seq(6)) {
		t.Errorf("layer.1 = %+v", l1)
	}
	if got := m.Metadata(); got["shard"] != "1" || got["other"] != "x" || got["format"] != "pt" {
		t.Errorf("Metadata = %v", got)
	}
}

func TestShardedErrors(t *testing.T) {
	good := "model-00001-of-00001.safetensors"
	tests := []struct {
		name  string
		index string // raw index JSON
		want  string
	}{
		{"invalid JSON", `{"weight_map": {`, "invalid index"},
		{"no weight_map", `{"metadata": {}}`, "no weight_map entries"},
		{"weight_map wrong type", `{"weight_map": ["a"]}`, "invalid index"},
		{"missing shard", `{"weight_map": {"a": "` + good + `", "b": "model-00002-of-00002.safetensors"}}`, "model-00002-of-00002.safetensors"},
		{"tensor not in shard", `{"weight_map": {"a": "` + good + `", "ghost": "` + good + `"}}`, `index maps tensor "ghost" to`},
		{"shard outside dir", `{"weight_map": {"a": "../` + good + `"}}`, "is not a file inside"},
		{"absolute shard", `{"weight_map": {"a": "/etc/passwd"}}`, "is not a file inside"},
		{"corrupt shard", `{"weight_map": {"a": "bad.safetensors"}}`, "too short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mustWrite(t, filepath.Join(dir, good), []WriteTensor{{Name: "a", DType: "F32", Shape: []int{1}, Data: seq(4)}}, nil)
			writeRaw(t, dir, "bad.safetensors", []byte{1, 2})
			index := writeRaw(t, dir, IndexFile, []byte(tc.index))
			m, err := Open(dir)
			if err == nil {
				m.Close()
				t.Fatalf("Open succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), index) {
				t.Errorf("error %q should contain %q and name %s", err, tc.want, index)
			}
		})
	}
}

func FuzzOpen(f *testing.F) {
	f.Add(rawFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, seq(8)))
	f.Add(rawFile(`{"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"b":{"dtype":"I64","shape":[],"data_offsets":[4,12]}}`, seq(12)))
	f.Add(rawFile(`{"a":{"dtype":"F16","shape":[0],"data_offsets":[0,0]}}    `, nil))
	f.Add(rawFile(`{"a":{"dtype":"F32","shape":[9223372036854775807],"data_offsets":[0,8]}}`, seq(8)))
	f.Add(rawFile(`{"a":{"dtype":"X","shape":[1],"data_offsets":[3,2]}}`, seq(8)))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		p := filepath.Join(dir, "fuzz.safetensors")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := OpenFile(p)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		defer m.Close()
		_ = m.Metadata()
		for _, name := range m.Names() {
			tt, err := m.Tensor(name)
			if err != nil {
				continue
			}
			if len(tt.Data) != tt.Elements()*tt.DType.Size() {
				t.Errorf("%q: %d bytes for shape %v %v", name, len(tt.Data), tt.Shape, tt.DType)
			}
			var sum byte
			for _, b := range tt.Data {
				sum += b
			}
			_ = sum
		}
	})
}

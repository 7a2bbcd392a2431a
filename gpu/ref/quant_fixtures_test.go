package ref

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// ggufManifest is the part of fixtures/gguf/manifest.json the dequantization
// parity test reads.
type ggufManifest struct {
	Files []struct {
		File        string `json:"file"`
		DequantFile string `json:"dequant_file"`
		Tensors     map[string]struct {
			Type      string  `json:"type"`
			Ne        []int64 `json:"ne"`
			SHA256Raw string  `json:"sha256_raw"`
			SHA256F32 string  `json:"sha256_f32"`
			Rows      int     `json:"rows_in_safetensors"`
		} `json:"tensors"`
	} `json:"files"`
}

// TestDequantizeFixtures dequantizes every tensor of every GGUF fixture file
// and compares the sha256 of the float32 result (little-endian, row-major,
// ne[0] fastest) with gguf-py's (manifest sha256_f32): bit-exact or fail. On
// a mismatch the first rows are compared with <file>.dequant.safetensors to
// name the first differing element.
func TestDequantizeFixtures(t *testing.T) {
	p := fixtures.Path(t, "gguf", "manifest.json")
	dir := filepath.Dir(p)
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m ggufManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if len(m.Files) == 0 {
		t.Fatalf("%s lists no files", p)
	}
	perType := map[gguf.GGMLType]int{}
	for _, mf := range m.Files {
		t.Run(mf.File, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, mf.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors()) != len(mf.Tensors) {
				t.Errorf("%d tensors, manifest lists %d", len(f.Tensors()), len(mf.Tensors))
			}
			var rows map[string][]float32 // read on the first mismatch
			for name, want := range mf.Tensors {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("tensor %s missing", name)
					continue
				}
				if ti.Type.String() != want.Type {
					t.Errorf("%s: type %v, want %s", name, ti.Type, want.Type)
					continue
				}
				data, err := f.TensorData(name)
				if err != nil {
					t.Fatal(err)
				}
				if got := sha(data); got != want.SHA256Raw {
					t.Errorf("%s: sha256 of the stored bytes %s, want %s", name, got, want.SHA256Raw)
					continue
				}
				x, err := Dequantize(ti.Type, data, int(ti.Elements()))
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got := sha(f32Bytes(x)); got == want.SHA256F32 {
					perType[ti.Type]++
					continue
				}
				if rows == nil && mf.DequantFile != "" {
					if rows, err = readF32Safetensors(filepath.Join(dir, mf.DequantFile)); err != nil {
						t.Fatal(err)
					}
				}
				t.Errorf("%s (%v %v): sha256 of the dequantization differs from gguf-py's; %s", name, ti.Type, ti.Dims, firstDifference(x, rows[name]))
			}
		})
	}
	for _, typ := range DequantizableTypes() {
		if typ == gguf.BF16 {
			continue // no fixture holds BF16 (see TestDequantizeBF16)
		}
		if perType[typ] == 0 && !t.Failed() {
			t.Errorf("no fixture tensor of type %v was checked", typ)
		}
	}
	t.Logf("bit-exact tensors per type: %v", perType)
}

// TestDequantizeBPETokenizerFile dequantizes every tensor of the tokenizer
// fixture (not in the manifest: no hashes) and checks the values are finite
// and plausible for its N(0, 0.02) weights.
func TestDequantizeBPETokenizerFile(t *testing.T) {
	f, err := gguf.Open(fixtures.Path(t, "gguf", "tokenizer", "bpe-tokenizer-q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ti := range f.Tensors() {
		data, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		x, err := Dequantize(ti.Type, data, int(ti.Elements()))
		if err != nil {
			t.Errorf("%s: %v", ti.Name, err)
			continue
		}
		for i, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || math.Abs(float64(v)) > 2 {
				t.Errorf("%s (%v): element %d = %v", ti.Name, ti.Type, i, v)
				break
			}
		}
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func f32Bytes(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// firstDifference describes where got first differs from want, the first
// rows of the reference.
func firstDifference(got, want []float32) string {
	if want == nil {
		return "no reference rows stored for it"
	}
	for i := range min(len(got), len(want)) {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Sprintf("first difference at element %d: %v (%08x), gguf-py %v (%08x)",
				i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return fmt.Sprintf("the first %d elements (the stored rows) agree; the difference is further on", len(want))
}

// readF32Safetensors reads every F32 tensor of a safetensors file (8-byte
// little-endian header length, JSON header, data) into name -> values. It is
// written here rather than imported so that gpu/ref stays free of model/.
func readF32Safetensors(path string) (map[string][]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: too short", path)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("%s: header length %d past the end", path, n)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	body := b[8+n:]
	out := map[string][]float32{}
	for name, rawEntry := range header {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(rawEntry, &e); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		if e.DType != "F32" || e.Offsets[0] < 0 || e.Offsets[1] > int64(len(body)) || e.Offsets[0] > e.Offsets[1] {
			return nil, fmt.Errorf("%s: %s: dtype %s offsets %v", path, name, e.DType, e.Offsets)
		}
		data := body[e.Offsets[0]:e.Offsets[1]]
		v := make([]float32, len(data)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		out[name] = v
	}
	return out, nil
}

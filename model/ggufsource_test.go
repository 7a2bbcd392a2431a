package model

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// TestUnpermuteRows: llama.cpp's rope pairs rows 2i and 2i+1 of a head,
// transformers' pairs i and i + head_dim/2; the loader moves each stored
// row back to where transformers keeps it, head by head, whatever the row
// size.
func TestUnpermuteRows(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rows, heads   int
		rowBytes      int
		stored, wantO []int // row labels in storage order, and the order wanted
	}{
		{"one head of 4", 4, 1, 1, []int{0, 1, 2, 3}, []int{0, 2, 1, 3}},
		{"two heads of 4, 2-byte rows", 8, 2, 2, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 2, 1, 3, 4, 6, 5, 7}},
		{"one head of 8", 8, 1, 3, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 2, 4, 6, 1, 3, 5, 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var data []byte
			for _, r := range tc.stored {
				data = append(data, bytes.Repeat([]byte{byte(r)}, tc.rowBytes)...)
			}
			out, err := unpermuteRows(data, tc.rows, tc.heads)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for r := 0; r < tc.rows; r++ {
				got = append(got, int(out[r*tc.rowBytes]))
			}
			if !slices.Equal(got, tc.wantO) {
				t.Errorf("rows %v, want %v", got, tc.wantO)
			}
		})
	}
	if _, err := unpermuteRows(make([]byte, 6), 6, 2); err == nil {
		t.Error("3 rows per head accepted")
	}
}

// TestDequantizeParallel: the loader's dequantization, split over rows and
// goroutines, gives gpu/ref.Dequantize's result bit for bit on every
// quantized tensor of a fixture of each mixture.
func TestDequantizeParallel(t *testing.T) {
	dir := fixtures.Path(t, "gguf", "llama")
	for _, name := range []string{"llama-q8_0", "llama-q4_0", "llama-q4_1", "llama-q5_0", "llama-q5_1", "llama-q2_k", "llama-q3_k_m", "llama-q4_k_m", "llama-q5_k_m", "llama-q6_k"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, ti := range f.Tensors() {
				if !ti.Type.Quantized() {
					continue
				}
				data, err := f.TensorData(ti.Name)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Dequantize(ti.Type, data, int(ti.Elements()))
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(want))
				if err := dequantize(got, ti.Type, data, int(ti.Rows())); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(f32Bytes(got), f32Bytes(want)) {
					t.Errorf("%s (%v): parallel dequantization differs", ti.Name, ti.Type)
				}
			}
		})
	}
}

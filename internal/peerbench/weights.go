package peerbench

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// WeightCheck is what CompareWeights found: the two checkpoints hold the
// same values in every tensor.
type WeightCheck struct {
	Tensors  int   `json:"tensors"`
	Elements int64 `json:"elements"`
	Vocab    int   `json:"vocab"` // config.json's vocab_size
	// HFBytes and GGUFBytes are the bytes of tensor data in each file: the
	// weights a forward pass reads (the tied embedding counts once, as the
	// LM head reads all of it and the lookup one row).
	HFBytes   int64 `json:"hf_bytes"`
	GGUFBytes int64 `json:"gguf_bytes"`
}

// CompareWeights checks that the Llama checkpoint in hfDir (config.json and
// safetensors) and the GGUF file hold the same values in every tensor, and
// that neither has a tensor the other lacks. llama.cpp stores q_proj and
// k_proj with each head's rows reordered from the rotate-half layout to
// interleaved pairs; the comparison undoes that.
func CompareWeights(hfDir, ggufPath string) (WeightCheck, error) {
	var wc WeightCheck
	var cfg struct {
		Heads   int `json:"num_attention_heads"`
		KVHeads int `json:"num_key_value_heads"`
		Vocab   int `json:"vocab_size"`
	}
	raw, err := os.ReadFile(filepath.Join(hfDir, "config.json"))
	if err != nil {
		return wc, fmt.Errorf("compare weights: %w", err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Heads <= 0 {
		return wc, fmt.Errorf("compare weights: %s/config.json: no num_attention_heads (%v)", hfDir, err)
	}
	if cfg.KVHeads == 0 {
		cfg.KVHeads = cfg.Heads
	}
	wc.Vocab = cfg.Vocab
	hf, err := safetensors.Open(hfDir)
	if err != nil {
		return wc, fmt.Errorf("compare weights: %w", err)
	}
	defer hf.Close()
	gf, err := gguf.Open(ggufPath)
	if err != nil {
		return wc, fmt.Errorf("compare weights: %w", err)
	}
	defer gf.Close()
	byName := map[string]gguf.TensorInfo{}
	for _, t := range gf.Tensors() {
		byName[t.Name] = t
		wc.GGUFBytes += t.Size
	}
	seen := map[string]bool{}
	for _, name := range hf.Names() {
		gname, ok := gguf.TensorName(name)
		if !ok {
			return wc, fmt.Errorf("compare weights: no llama.cpp name for tensor %q", name)
		}
		ht, err := hf.Tensor(name)
		if err != nil {
			return wc, fmt.Errorf("compare weights: %w", err)
		}
		gt, ok := byName[gname]
		if !ok {
			return wc, fmt.Errorf("compare weights: %s has no tensor %q (for %q)", ggufPath, gname, name)
		}
		gdata, err := gf.TensorData(gname)
		if err != nil {
			return wc, fmt.Errorf("compare weights: %w", err)
		}
		seen[gname] = true
		heads := 0
		switch {
		case strings.HasSuffix(name, "self_attn.q_proj.weight"):
			heads = cfg.Heads
		case strings.HasSuffix(name, "self_attn.k_proj.weight"):
			heads = cfg.KVHeads
		}
		if err := compareTensor(ht, gt, gdata, heads); err != nil {
			return wc, fmt.Errorf("compare weights: %s vs %s: %w", name, gname, err)
		}
		wc.Tensors++
		wc.Elements += int64(ht.Elements())
		wc.HFBytes += int64(len(ht.Data))
	}
	for _, t := range gf.Tensors() {
		if !seen[t.Name] {
			return wc, fmt.Errorf("compare weights: %s has tensor %q that %s lacks", ggufPath, t.Name, hfDir)
		}
	}
	return wc, nil
}

// compareTensor checks shapes and values. heads > 0 marks a q/k projection
// whose GGUF rows are permuted per head.
func compareTensor(ht *safetensors.Tensor, gt gguf.TensorInfo, gdata []byte, heads int) error {
	// ggml's ne is innermost first: reverse it to compare with the row-major shape.
	gshape := make([]int, len(gt.Dims))
	for i, d := range gt.Dims {
		gshape[len(gt.Dims)-1-i] = int(d)
	}
	if !slices.Equal(gshape, ht.Shape) {
		return fmt.Errorf("shape %v vs %v", ht.Shape, gshape)
	}
	hget, err := elemReader(ht.RawDType, ht.Data)
	if err != nil {
		return err
	}
	gvals, err := ref.Dequantize(gt.Type, gdata, int(gt.Elements()))
	if err != nil {
		return err
	}
	gget := func(i int) float32 { return gvals[i] }
	n := ht.Elements()
	cols, rows := n, 1
	if len(ht.Shape) == 2 {
		rows, cols = ht.Shape[0], ht.Shape[1]
	}
	hd := 0
	if heads > 0 {
		if len(ht.Shape) != 2 || rows%heads != 0 || (rows/heads)%2 != 0 {
			return fmt.Errorf("shape %v does not split into %d heads of even size", ht.Shape, heads)
		}
		hd = rows / heads
	}
	for g := 0; g < rows; g++ {
		h := g // the HF row stored at GGUF row g
		if hd > 0 {
			w := g % hd
			h = g - w + (w%2)*(hd/2) + w/2
		}
		for c := 0; c < cols; c++ {
			a, b := hget(h*cols+c), gget(g*cols+c)
			if a != b && !(math.IsNaN(float64(a)) && math.IsNaN(float64(b))) {
				return fmt.Errorf("element [%d,%d] differs: %g vs %g", h, c, a, b)
			}
		}
	}
	return nil
}

// elemReader returns element i of little-endian data of the given dtype as float32.
func elemReader(dtype string, data []byte) (func(i int) float32, error) {
	switch dtype {
	case "F32":
		return func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])) }, nil
	case "BF16":
		return func(i int) float32 { return math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16) }, nil
	case "F16":
		return func(i int) float32 { return gpu.F16ToF32(binary.LittleEndian.Uint16(data[2*i:])) }, nil
	}
	return nil, fmt.Errorf("dtype %q is not F32, F16 or BF16", dtype)
}

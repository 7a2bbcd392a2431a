package model_test

import (
	"path/filepath"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model"
)

// TestGGUFConverted converts the Hugging Face fixtures of every family
// that loads from GGUF into GGUF files as llama.cpp's converter lays them
// out (gguf_convert_test.go) and checks the loaded model against
// transformers' logits and greedy ids, as TestParity does for the
// safetensors folders. For qwen2, phi3, gemma2 and gemma3 this is the only
// check (there is no llama.cpp-written fixture of them); llama and qwen3
// are also checked against llama.cpp in TestGGUFParity.
func TestGGUFConverted(t *testing.T) {
	root := fixtures.Dir(t)
	for _, tc := range []struct {
		name  string
		extra []ggufKV
	}{
		{name: "llama_gqa"},
		{name: "llama_tied"},
		{name: "qwen2"},
		{name: "qwen3"},
		{name: "phi3"},
		{name: "gemma2"},
		// This fixture's sliding_window_pattern is 2; llama.cpp's
		// converter writes no pattern and llama.cpp assumes 6, so the
		// file says it.
		{name: "gemma3_text", extra: []ggufKV{{"gemma3.attention.sliding_window_pattern", uint32(2)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(root, "models", tc.name)
			refs := readReference(t, dir)
			want := readLogits(t, filepath.Join(dir, "reference_logits.safetensors"), "prompt_logits")["prompt_logits"]
			path := filepath.Join(t.TempDir(), tc.name+".gguf")
			toGGUF(t, dir, path, tc.extra...)
			m, err := model.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, b := range backends(t)[:2] {
				t.Run(b.name, func(t *testing.T) {
					checkPromptLogits(t, m, b.dev, refs, want)
					checkGreedy(t, m, b.dev, refs)
				})
			}
		})
	}
}

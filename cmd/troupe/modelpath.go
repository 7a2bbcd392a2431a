package main

import (
	"fmt"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/internal/ollama"
)

// ollamaPrefix marks a model of the local Ollama store: ollama:llama3.2:3b.
const ollamaPrefix = "ollama:"

// resolveModel turns a --model value into a path: ollama:NAME becomes the
// GGUF blob of that model in the local Ollama store (OLLAMA_MODELS, or
// ~/.ollama/models), read in place; anything else is returned as given.
func resolveModel(spec string) (string, error) {
	name, ok := strings.CutPrefix(spec, ollamaPrefix)
	if !ok {
		return spec, nil
	}
	dir, err := ollama.Dir()
	if err != nil {
		return "", err
	}
	m, err := ollama.Resolve(dir, name)
	if err != nil {
		return "", fmt.Errorf("--model %s: %w", spec, err)
	}
	return m.GGUF, nil
}

// quantizeTypes are the --quantize values: the block types the CPU kernels
// run.
const quantizeTypes = "q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k"

// parseQuantize reads --quantize ("" or "none": keep the weights' types).
func parseQuantize(s string) (gpu.DType, error) {
	if s == "" || s == "none" {
		return 0, nil
	}
	t, err := gguf.ParseGGMLType(strings.ToUpper(s))
	d, ok := gpu.DTypeOf(t)
	if err != nil || !ok || !d.Quantized() || t == gguf.Q2_K || t == gguf.Q3_K {
		return 0, fmt.Errorf("--quantize %q: not one of %s", s, quantizeTypes)
	}
	return d, nil
}

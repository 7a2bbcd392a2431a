package main

import (
	"fmt"
	"strings"

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

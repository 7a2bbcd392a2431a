package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
)

// demoVersion names the demo model's configuration and seed; bump it when
// either changes so cached copies are rebuilt.
const demoVersion = "demo-v3"

// demoStd spreads the logits enough that greedy decoding wanders instead of
// repeating one token.
const demoStd = 0.25

// DemoConfig is the built-in demo model: a small Llama with random weights
// and a byte-level tokenizer with a ChatML template. Its outputs are noise,
// but it exercises the real loader, tokenizer, template and forward pass.
func DemoConfig() Config {
	return Config{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
		"num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": ByteVocab,
		"tie_word_embeddings": true, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
		"max_position_embeddings": 4096, "eos_token_id": 258, "pad_token_id": 256,
		"hidden_act": "silu",
	}
}

// Demo returns the folder of the built-in demo model, writing it on first
// use into the user's cache directory (or the system temp directory), so that
// it loads through exactly the same path as a downloaded checkpoint.
func Demo() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "troupe", demoVersion)
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), demoVersion+".tmp")
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := Write(tmp, DemoConfig(), Options{Seed: 1, Std: demoStd}); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := WriteByteTokenizer(tmp); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process may have won the race; use its copy.
		if _, statErr := os.Stat(filepath.Join(dir, "model.safetensors")); statErr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("demo model: %w", err)
	}
	return dir, nil
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// TestGenerateGGUF: generate takes a GGUF file for --model and continues
// the fixtures' prompt with llama.cpp's greedy ids (the F16 llama file,
// whose 16 steps are all decided by a clear margin), from --prompt-ids and
// from --prompt through the file's tokenizer; the same file pulled from a
// Hub repository of GGUF files (org/name:QUANT) does too.
func TestGenerateGGUF(t *testing.T) {
	manPath := fixtures.Path(t, "gguf", "manifest.json")
	data, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	type fileEntry struct {
		File               string  `json:"file"`
		GreedyIDs          []int32 `json:"greedy_ids"`
		GreedyStepsChecked int     `json:"greedy_steps_checked"`
	}
	var man struct {
		Prompt struct{ IDs []int32 } `json:"prompt"`
		Files  []fileEntry           `json:"files"`
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	const file = "llama/llama-f16.gguf"
	i := slices.IndexFunc(man.Files, func(f fileEntry) bool { return f.File == file })
	if i < 0 {
		t.Fatalf("%s does not list %s", manPath, file)
	}
	fx := man.Files[i]
	ids := make([]string, len(man.Prompt.IDs))
	for i, id := range man.Prompt.IDs {
		ids[i] = strconv.Itoa(int(id))
	}
	path := filepath.Join(filepath.Dir(manPath), file)
	n := fx.GreedyStepsChecked
	// greedy generates n tokens from model with the prompt args and checks
	// them against llama.cpp's.
	greedy := func(what, model string, prompt ...string) {
		t.Helper()
		args := append([]string{"generate", "--model", model}, prompt...)
		out, err := runCLI(t, append(args, "--max-tokens", strconv.Itoa(n), "--ignore-eos", "--json", "--threads", "1")...)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v in %s", what, err, out)
		}
		if !slices.Equal(got.IDs, fx.GreedyIDs[:n]) {
			t.Errorf("%s: greedy ids\n got %v\nwant %v (llama.cpp)", what, got.IDs, fx.GreedyIDs[:n])
		}
	}
	promptIDs := []string{"--prompt-ids", strings.Join(ids, ",")}
	greedy("--prompt-ids", path, promptIDs...)
	// The prompt as text, through the file's own tokenizer, gives the same
	// ids (llama-tokenize's) and so the same continuation.
	greedy("--prompt", path, "--prompt", "One day, a little boy named Tom went to the park with his mom. He")

	// The same file from a Hub repository of GGUF files (a fake Hub):
	// pull org/name:F16 fetches that quantization alone and prints the
	// file, which generates as above; Q4_K_M, the default, is not there.
	srv, _, cache := fakeHub(t)
	f16, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv.AddRepo("troupe-test/tiny-GGUF", map[string][]byte{"tiny-F16.gguf": f16, "tiny-Q8_0.gguf": []byte("GGUF not fetched"), "README.md": []byte("#")})
	out, err := runCLI(t, "pull", "troupe-test/tiny-GGUF:f16")
	if err != nil {
		t.Fatal(err)
	}
	pulled := strings.TrimSpace(out)
	if filepath.Base(pulled) != "tiny-F16.gguf" || !strings.HasPrefix(pulled, filepath.Join(cache, "models--troupe-test--tiny-GGUF")) {
		t.Fatalf("pull printed %q", pulled)
	}
	if others, _ := filepath.Glob(filepath.Join(filepath.Dir(pulled), "*Q8_0*")); len(others) > 0 {
		t.Errorf("another quantization was fetched: %v", others)
	}
	greedy("pulled from the Hub", pulled, promptIDs...)
	if _, err := runCLI(t, "pull", "troupe-test/tiny-GGUF"); err == nil || !strings.Contains(err.Error(), "Q4_K_M") {
		t.Errorf("pull without a quantization, no Q4_K_M in the repository: %v", err)
	}
}

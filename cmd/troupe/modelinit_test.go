package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelInitOut: --out may name a folder that does not exist yet (its
// parents too); a failed init leaves nothing behind, not even a temporary
// folder; a non-empty folder is never overwritten.
func TestModelInitOut(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "new", "deeper", "model")
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--byte-tokenizer", "--out", out); err != nil {
		t.Fatalf("init into a new folder: %v", err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s missing: %v", f, err)
		}
	}
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--byte-tokenizer", "--out", out); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("init over a model: %v, want a refusal", err)
	}
	failed := filepath.Join(base, "failed")
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--tokenizer", filepath.Join(base, "no-such-tokenizer"), "--out", failed); err == nil {
		t.Fatal("init with a missing tokenizer folder succeeded")
	}
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if e.Name() != "new" {
			t.Errorf("a failed init left %s behind", e.Name())
		}
	}
}

package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/gguf"
)

// TestQuantizeCLI: model init, then quantize to a GGUF file whose matrices
// have the type asked for; bad flags say what is missing.
func TestQuantizeCLI(t *testing.T) {
	dir := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--byte-tokenizer", "--out", dir); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "tiny-q8_0.gguf")
	stdout, err := runCLI(t, "quantize", "--type", "Q8_0", "--in", dir, "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "wrote "+out+": q8_0") {
		t.Errorf("output %q", stdout)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if info, ok := f.Tensor("blk.0.attn_q.weight"); !ok || info.Type != gguf.Q8_0 {
		t.Errorf("blk.0.attn_q.weight: %+v", info)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", "--in", dir, "--out", out}, "give --type"},
		{[]string{"quantize", "--type", "q9", "--in", dir, "--out", out}, `unknown type "q9"`},
		{[]string{"quantize", "--type", "q8_0", "--in", t.TempDir(), "--out", out}, "config.json"},
	} {
		if _, err := runCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

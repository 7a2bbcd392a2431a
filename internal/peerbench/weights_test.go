package peerbench

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/troupe-ai/troupe/gguf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/tiny-hf and testdata/tiny.gguf hold the same weights, written by
// make_tiny.py with llama.cpp's gguf-py (q/k rows permuted as its converters do).
func TestCompareWeightsSame(t *testing.T) {
	wc, err := CompareWeights("testdata/tiny-hf", "testdata/tiny.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if wc.Tensors != 11 || wc.Vocab != 16 {
		t.Errorf("check %+v, want 11 tensors and vocab 16", wc)
	}
	// bf16 matrices (2 bytes) and f32 norms in the GGUF against all-bf16 safetensors.
	if wc.HFBytes != 2*wc.Elements || wc.GGUFBytes != wc.HFBytes+3*8*2 {
		t.Errorf("bytes: hf %d gguf %d for %d elements", wc.HFBytes, wc.GGUFBytes, wc.Elements)
	}
}

// copyTiny copies the fixture pair into a temporary folder for mutation.
func copyTiny(t *testing.T) (hfDir, gguf string) {
	t.Helper()
	dir := t.TempDir()
	hfDir = filepath.Join(dir, "hf")
	if err := os.Mkdir(hfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"tiny-hf/config.json", "tiny-hf/model.safetensors", "tiny.gguf"} {
		b, err := os.ReadFile("testdata/" + p)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(hfDir, filepath.Base(p))
		if p == "tiny.gguf" {
			dst = filepath.Join(dir, p)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return hfDir, filepath.Join(dir, "tiny.gguf")
}

func TestCompareWeightsFindsDifferences(t *testing.T) {
	flipIn := func(name string) func(t *testing.T, hf, gg string) {
		return func(t *testing.T, hf, gg string) {
			b, err := os.ReadFile(gg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(gg)
			if err != nil {
				t.Fatal(err)
			}
			tn, ok := f.Tensor(name)
			off := f.DataOffset
			f.Close()
			if !ok {
				t.Fatalf("no tensor %s", name)
			}
			b[off+int64(tn.Offset)+tn.Size-1] ^= 0x40 // the last element's high byte
			if err := os.WriteFile(gg, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, hf, gg string)
		want   string
	}{
		{"one value of attn_q", flipIn("blk.0.attn_q.weight"), "differs"},
		{"one value of a norm", flipIn("output_norm.weight"), "differs"},
		{"head count that breaks the q/k permutation", func(t *testing.T, hf, gg string) {
			cfg := `{"num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 16}`
			if err := os.WriteFile(filepath.Join(hf, "config.json"), []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "differs"},
		{"no config.json", func(t *testing.T, hf, gg string) {
			os.Remove(filepath.Join(hf, "config.json"))
		}, "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hf, gg := copyTiny(t)
			if _, err := CompareWeights(hf, gg); err != nil {
				t.Fatalf("unmutated copy: %v", err)
			}
			tc.mutate(t, hf, gg)
			if _, err := CompareWeights(hf, gg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestParseChecksums(t *testing.T) {
	out := "params: 134515008\nwrote x\nsha256 " + strings.Repeat("ab", 32) + "  hf-bf16/model.safetensors\n" +
		"sha256 " + strings.Repeat("cd", 32) + "  smollm2-135m-random-bf16.gguf\n"
	got, err := parseChecksums([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["hf-bf16/model.safetensors"] != strings.Repeat("ab", 32) {
		t.Errorf("checksums %v", got)
	}
	if _, err := parseChecksums([]byte("wrote x\n")); err == nil {
		t.Error("output without checksums was taken")
	}
}

func TestUntarStaysInside(t *testing.T) {
	mk := func(name string) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
		tw.Write([]byte("hi"))
		tw.Close()
		return b.Bytes()
	}
	dir := t.TempDir()
	if err := untar(bytes.NewReader(mk("gguf-py/gguf/__init__.py")), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "gguf-py/gguf/__init__.py")); err != nil || string(b) != "hi" {
		t.Errorf("extracted %q, %v", b, err)
	}
	for _, bad := range []string{"../escape", "/abs/path"} {
		if err := untar(bytes.NewReader(mk(bad)), dir); err == nil {
			t.Errorf("untar took %q", bad)
		}
	}
}

// A prepared cache folder is reused when its files match the recorded
// checksums and refused when they do not; nothing is regenerated (no
// python is needed).
func TestPrepareReusesVerifiedCache(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, ModelName+"-seed1234")
	hf, gg := copyTiny(t)
	if err := os.MkdirAll(filepath.Join(dir, "hf-bf16"), 0o755); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for src, dst := range map[string]string{
		filepath.Join(hf, "config.json"):       "hf-bf16/config.json",
		filepath.Join(hf, "model.safetensors"): "hf-bf16/model.safetensors",
		gg:                                     ModelName + "-bf16.gguf",
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		sums[dst] = hex.EncodeToString(h[:])
	}
	delete(sums, "hf-bf16/config.json")
	mb, _ := json.Marshal(marker{Seed: 1234, Checksums: sums})
	if err := os.WriteFile(filepath.Join(dir, markerFile), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := PrepareConfig{CacheDir: cache, Seed: 1234, Python: "/nonexistent/python"}
	m, err := Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Check.Tensors != 11 || m.HF != filepath.Join(dir, "hf-bf16") || m.Checksums[ModelName+"-bf16.gguf"] == "" {
		t.Errorf("models %+v", m)
	}
	// A changed file no longer matches its recorded checksum.
	p := filepath.Join(dir, ModelName+"-bf16.gguf")
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("a modified cache was taken: %v", err)
	}
}

func TestPrepareWithoutGGUFPySaysHow(t *testing.T) {
	_, err := Prepare(context.Background(), PrepareConfig{CacheDir: t.TempDir(), Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "git archive "+LlamaCommit+" gguf-py") {
		t.Errorf("err %v, want instructions for gguf-py", err)
	}
}

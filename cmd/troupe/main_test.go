package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/model/safetensors"
	"github.com/troupe-ai/troupe/tokenizer"
)

func runCLI(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, &out, &errOut)
	return out.String(), err
}

func tinyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--seed", "3", "--out", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGenerateJSON(t *testing.T) {
	dir := tinyDir(t)
	out, err := runCLI(t, "generate", "--model", dir, "--prompt-ids", "1,2,3", "--max-tokens", "5", "--ignore-eos", "--json", "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		IDs              []int32   `json:"ids"`
		PromptLastLogits []float32 `json:"prompt_last_logits"`
		Timings          struct {
			PromptTokens    int     `json:"prompt_tokens"`
			PromptMS        float64 `json:"prompt_ms"`
			GeneratedTokens int     `json:"generated_tokens"`
			GenerateMS      float64 `json:"generate_ms"`
		} `json:"timings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out)
	}
	if len(got.IDs) != 5 || len(got.PromptLastLogits) != 512 || got.Timings.PromptTokens != 3 || got.Timings.GeneratedTokens != 5 {
		t.Fatalf("unexpected output: %d ids, %d logits, timings %+v", len(got.IDs), len(got.PromptLastLogits), got.Timings)
	}
	// Greedy generation is deterministic: the same command gives the same ids.
	again, err := runCLI(t, "generate", "--model", dir, "--prompt-ids", "1,2,3", "--max-tokens", "5", "--ignore-eos", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var second struct{ IDs []int32 }
	json.Unmarshal([]byte(again), &second)
	if !slices.Equal(second.IDs, got.IDs) {
		t.Fatalf("greedy runs differ: %v vs %v", got.IDs, second.IDs)
	}
}

// TestBadModelInput: every broken checkpoint ends in one error naming the
// file and the problem, never a panic.
func TestBadModelInput(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(t *testing.T, dir string)
		want   []string
	}{
		{"missing folder", func(t *testing.T, dir string) { os.RemoveAll(dir) }, []string{"config.json", "no such file"}},
		{"missing weights", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, []string{"model.safetensors"}},
		{"unknown architecture", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) {
				c["model_type"] = "transmogrifier"
				c["architectures"] = []string{"TransmogrifierForCausalLM"}
			})
		}, []string{"config.json", "TransmogrifierForCausalLM", "unknown architecture"}},
		{"mismatched shape", func(t *testing.T, dir string) {
			editConfig(t, dir, func(c map[string]any) { c["intermediate_size"] = 100 })
		}, []string{"model.safetensors", "mlp.gate_proj.weight", "shape"}},
		{"truncated weights", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.safetensors")
			st, _ := os.Stat(p)
			os.Truncate(p, st.Size()/2)
		}, []string{"model.safetensors"}},
		{"unsupported dtype", func(t *testing.T, dir string) {
			m, err := safetensors.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			var ts []safetensors.WriteTensor
			for _, n := range m.Names() {
				tt, _ := m.Tensor(n)
				wt := safetensors.WriteTensor{Name: n, DType: tt.RawDType, Shape: tt.Shape, Data: append([]byte(nil), tt.Data...)}
				if n == "model.norm.weight" {
					wt.DType, wt.Data = "I32", make([]byte, 4*tt.Elements())
				}
				ts = append(ts, wt)
			}
			m.Close()
			if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
				t.Fatal(err)
			}
		}, []string{"model.safetensors", "model.norm.weight", "I32"}},
		{"garbage header", func(t *testing.T, dir string) {
			b := make([]byte, 16)
			binary.LittleEndian.PutUint64(b, 8)
			copy(b[8:], "{not js")
			os.WriteFile(filepath.Join(dir, "model.safetensors"), b, 0o644)
		}, []string{"model.safetensors"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tinyDir(t)
			tc.break_(t, dir)
			_, err := runCLI(t, "generate", "--model", dir, "--prompt-ids", "1,2")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans several lines: %q", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	json.Unmarshal(data, &c)
	edit(c)
	data, _ = json.Marshal(c)
	os.WriteFile(p, data, 0o644)
}

func TestBadCommandLines(t *testing.T) {
	dir := tinyDir(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"generate", "--model", dir}, "--prompt TEXT or --prompt-ids"},
		{[]string{"generate", "--model", dir, "--prompt-ids", "1,x"}, `"x" is not a token id`},
		{[]string{"generate", "--model", dir, "--prompt-ids", "1,99999"}, "outside the vocabulary"},
		{[]string{"generate", "--model", dir, "--prompt-ids", "1", "--temperature", "-1"}, "Temperature"},
		{[]string{"generate", "--model", dir, "--prompt-ids", "1", "--kernels", "quantum"}, "quantum"},
		{[]string{"model", "init", "--preset", "nope", "--out", t.TempDir()}, "unknown preset"},
		{[]string{"model", "init", "--preset", "tiny"}, "--out"},
		{[]string{"model", "init", "--preset", "tiny", "--dtype", "f8", "--out", t.TempDir()}, "--dtype"},
	}
	for _, tc := range tests {
		_, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestModelInitWithTokenizer: --tokenizer copies the tokenizer files and takes
// vocabulary size and BOS/EOS from them.
func TestModelInitWithTokenizer(t *testing.T) {
	tok := fixtures.Path(t, "tokenizers", "llama2")
	out := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--tokenizer", tok, "--out", out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "config.json", "generation_config.json", "model.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	c, err := checkpoint.ReadConfig(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c["vocab_size"] != 32000.0 || c["bos_token_id"] != 1.0 || c["eos_token_id"] != 2.0 {
		t.Fatalf("vocab/bos/eos = %v/%v/%v, want 32000/1/2", c["vocab_size"], c["bos_token_id"], c["eos_token_id"])
	}
	if _, err := runCLI(t, "generate", "--model", out, "--prompt-ids", "1,400,31999", "--max-tokens", "2"); err != nil {
		t.Fatal(err)
	}
}

// TestModelInitByteTokenizer: --byte-tokenizer makes a servable folder whose
// tokenizer covers the config's whole vocabulary.
func TestModelInitByteTokenizer(t *testing.T) {
	out := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--byte-tokenizer", "--out", out); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(out, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 512 {
		t.Fatalf("tokenizer vocabulary %d, want the config's 512", tok.VocabSize())
	}
	if got := tok.Decode([]int32{'h', 'i', 400}, false); got != "hi<t400>" {
		t.Fatalf("decode %q", got)
	}
	if _, err := runCLI(t, "model", "init", "--arch", "mamba", "--byte-tokenizer", "--tokenizer", out, "--out", t.TempDir()); err == nil {
		t.Fatal("--byte-tokenizer with --tokenizer accepted")
	}
}

// TestHelpAndVersion: -h on any command is a success (exit 0), serve's help
// hides the testing flags and says how TROUPE_* sets flags, and --version
// names the build.
func TestHelpAndVersion(t *testing.T) {
	for _, args := range [][]string{{"serve", "-h"}, {"generate", "--help"}, {"bench", "-h"}, {"model", "init", "-h"}, {"--help"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		if code := exitCode(err); code != 0 {
			t.Errorf("%v: exit %d (%v)", args, code, err)
		}
		if args[0] == "serve" {
			help := errOut.String()
			if !strings.Contains(help, "TROUPE_") || !strings.Contains(help, "-kv-budget") || strings.Contains(help, "debug-load-delay") {
				t.Errorf("serve -h:\n%s", help)
			}
		}
	}
	out, err := runCLI(t, "--version")
	if err != nil || !strings.HasPrefix(out, "troupe ") {
		t.Errorf("--version: %q %v", out, err)
	}
	if code := exitCode(errors.New("boom")); code != 1 {
		t.Errorf("an error exits %d", code)
	}
}

// TestGeneratePrompt: --prompt encodes text with the model's tokenizer and
// prints the continuation, first space kept (stories260k continues
// "Lily was" with " a little girl", as llama.cpp does).
func TestGeneratePrompt(t *testing.T) {
	dir := fixtures.Path(t, "models", "stories260k")
	out, err := runCLI(t, "generate", "--model", dir, "--prompt", "Lily was", "--max-tokens", "5", "--json", "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		IDs  []int32 `json:"ids"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if got.Text == nil || !strings.HasPrefix(*got.Text, " a little girl") || len(got.IDs) != 5 {
		t.Fatalf("generate --prompt %q: %+v (text %v)", "Lily was", got.IDs, got.Text)
	}
	plain, err := runCLI(t, "generate", "--model", dir, "--prompt", "Lily was", "--max-tokens", "5", "--threads", "1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Lily was" + *got.Text + "\n"; plain != want {
		t.Fatalf("plain output %q, want %q", plain, want)
	}
	// A model folder without tokenizer.json takes only --prompt-ids.
	if _, err := runCLI(t, "generate", "--model", tinyDir(t), "--prompt", "hi"); err == nil || !strings.Contains(err.Error(), "--prompt-ids") {
		t.Fatalf("--prompt without a tokenizer: %v", err)
	}
}

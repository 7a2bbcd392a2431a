// Package e2e runs a real `troupe serve` process on loopback and talks to it
// with the official OpenAI Go SDK, as users do.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/tests/internal/serveproc"
)

// binary is the troupe command built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "troupe-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = serveproc.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// modelDir makes a random-weight checkpoint with a real tokenizer and chat
// template from the shared fixtures.
func modelDir(t *testing.T, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "model")
	cmd := exec.Command(binary, append([]string{"model", "init", "--out", out}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("model init: %v\n%s", err, b)
	}
	return out
}

func qwen3Model(t *testing.T) string {
	return modelDir(t, "--preset", "tiny", "--seed", "5", "--tokenizer", fixtures.Path(t, "tokenizers", "qwen3"))
}

// toolScript is what a script model made by scriptModel(t, toolScript) says
// after Qwen3's generation prompt (which ends "<|im_start|>assistant\n"):
// reasoning, a word of answer and a Hermes tool call. Every token in it has
// one successor (model init --script refuses otherwise), hence the uneven
// JSON spacing.
const toolScript = "assistant\n<think>Plan: call the tool.</think>Sure<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Paris\"}}</tool_call><|im_end|>"

// scriptModel makes a tiny Qwen3 model with the real Qwen3 tokenizer and
// chat template whose output after a prompt ending in script's first token
// is the rest of script: a real forward pass with a predictable answer, so
// reasoning and tool calls can be tested through the SDKs.
func scriptModel(t *testing.T, script string) string {
	return modelDir(t, "--preset", "tiny", "--seed", "2", "--tokenizer", fixtures.Path(t, "tokenizers", "qwen3"), "--script", script)
}

// serverProc is a running `troupe serve`.
type serverProc struct {
	*serveproc.Server
	url string
}

// serve starts `troupe serve --threads 1` and waits until it listens (not
// until ready).
func serve(t *testing.T, args ...string) *serverProc {
	t.Helper()
	s := serveproc.Start(t, binary, append([]string{"--threads", "1"}, args...)...)
	return &serverProc{Server: s, url: s.URL}
}

func (s *serverProc) waitReady(t *testing.T) {
	t.Helper()
	s.WaitReady(t, 60*time.Second)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

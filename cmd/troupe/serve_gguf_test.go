package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// TestServeGGUF: a model troupe quantized to GGUF, kept in a local Ollama
// store, serves chat by its Ollama name (ollama:tiny:q8), with the
// tokenizer and chat template from the file.
func TestServeGGUF(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, err := runCLI(t, "quantize", "--type", "q8_0", "--in", servableDir(t), "--out", file); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The store: the GGUF as a blob named by its digest, and a manifest.
	store := t.TempDir()
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	os.MkdirAll(filepath.Join(store, "blobs"), 0o755)
	if err := os.WriteFile(filepath.Join(store, "blobs", "sha256-"+digest), data, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf(`{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:%s","size":%d}]}`, digest, len(data))
	mdir := filepath.Join(store, "manifests", "registry.ollama.ai", "library", "tiny")
	os.MkdirAll(mdir, 0o755)
	if err := os.WriteFile(filepath.Join(mdir, "q8"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OLLAMA_MODELS", store)

	port := freePorts(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "ollama:tiny:q8", "--port", fmt.Sprint(port), "--threads", "1", "--kv-budget", "8MiB"}, &out, &errOut)
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	body := `{"model":"tiny:q8","max_tokens":4,"temperature":0,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil || len(got.Choices) != 1 || got.Model != "tiny:q8" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// The ChatML prompt of one user turn: three special tokens and the
	// rest byte by byte; the template and the tokenizer came from the file.
	if want := 3 + len("user\nhi") + len("\n") + len("assistant\n"); got.Usage.PromptTokens != want {
		t.Errorf("prompt tokens %d, want %d (the file's ChatML template over bytes)", got.Usage.PromptTokens, want)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("after shutdown: %v", err)
	}
	if _, err := runCLI(t, "serve", "ollama:nothere", "--port", "0"); err == nil || !strings.Contains(err.Error(), "ollama pull") {
		t.Errorf("a model the store lacks: %v", err)
	}
}

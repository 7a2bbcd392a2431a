package troupe

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/convert"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
)

// TestGGUFAssets: a GGUF model (a file, a folder holding one, an
// extensionless blob as Ollama stores them) brings its tokenizer, chat
// template, special tokens and end-of-generation ids from its metadata, the
// same as the checkpoint it was written from.
func TestGGUFAssets(t *testing.T) {
	hf := t.TempDir()
	c, _ := checkpoint.Tiny("qwen3")
	if err := checkpoint.Write(hf, c, checkpoint.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizerSized(hf, 512); err != nil {
		t.Fatal(err)
	}
	folder := t.TempDir()
	file := filepath.Join(folder, "tiny-q8_0.gguf")
	if err := convert.Write(hf, file, convert.Options{Type: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(t.TempDir(), "sha256-0123")
	data, _ := os.ReadFile(file)
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(path string) *chat.Assets {
		t.Helper()
		l := &dirLoader{opts: Options{Model: path, Logger: slog.New(slog.DiscardHandler)}}
		a, err := l.LoadAssets(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return a
	}
	want := load(hf)
	v, err := templates.DecodeJSON([]byte(`[{"role":"user","content":"hi there"}]`))
	if err != nil {
		t.Fatal(err)
	}
	req := func() *chat.Request { return &chat.Request{Messages: v.([]any)} }
	for _, path := range []string{file, folder, blob} {
		got := load(path)
		if got.Template == nil {
			t.Fatalf("%s: no chat template", path)
		}
		for _, text := range []string{"hi there", "<|im_start|>user\nx<|im_end|>"} {
			if a, b := want.Tokenizer.EncodeIDs(text, true), got.Tokenizer.EncodeIDs(text, true); !slices.Equal(a, b) {
				t.Errorf("%s: %q encodes as %v, the checkpoint as %v", path, text, b, a)
			}
		}
		wp, err := want.Prepare(req(), false)
		if err != nil {
			t.Fatal(err)
		}
		gp, err := got.Prepare(req(), false)
		if err != nil || gp.Prompt != wp.Prompt || !slices.Equal(gp.IDs, wp.IDs) {
			t.Errorf("%s: prompt %+v (%v), the checkpoint's %+v", path, gp, err, wp)
		}
		imEnd := want.Tokenizer.EncodeIDs("<|im_end|>", false)
		if len(imEnd) != 1 || !slices.Contains(got.EOS, imEnd[0]) {
			t.Errorf("%s: EOS %v lacks <|im_end|> %v", path, got.EOS, imEnd)
		}
	}
	// A folder with two GGUF models says which.
	two := t.TempDir()
	for _, n := range []string{"a.gguf", "b.gguf"} {
		if err := os.WriteFile(filepath.Join(two, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := &dirLoader{opts: Options{Model: two, Logger: slog.New(slog.DiscardHandler)}}
	if _, err := l.LoadAssets(context.Background()); err == nil || !strings.Contains(err.Error(), "a.gguf, b.gguf") {
		t.Errorf("two models: %v", err)
	}
}

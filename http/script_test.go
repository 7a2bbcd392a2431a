package http_test

import (
	"path/filepath"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// toolScript is what the script model says after Qwen3's generation prompt
// (which ends "<|im_start|>assistant\n"): reasoning, a word of answer and a
// Hermes tool call. Every token in it has one successor (see
// checkpoint.Options.Script), hence the uneven JSON spacing.
const toolScript = "assistant\n<think>Plan: call the tool.</think>Sure<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Paris\"}}</tool_call><|im_end|>"

// scriptModel writes a tiny Qwen3-architecture model with the real Qwen3
// tokenizer and chat template whose output after the generation prompt is
// script: a real forward pass with a predictable answer, so reasoning and
// tool calls can be tested through every API.
func scriptModel(t *testing.T, script string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "script")
	cfg, err := checkpoint.Tiny("qwen3")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.AdoptTokenizer(cfg, fixtures.Path(t, "tokenizers", "qwen3"), dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 2, Script: tok.EncodeIDs(script, false)}); err != nil {
		t.Fatal(err)
	}
	return dir
}

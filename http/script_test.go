package http_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
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

// scratch is a folder shared by the package's tests (removed after them),
// for models that are slow to write and are only read.
var scratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "troupe-http-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// callOnlyScript is a reply that is only a tool call: no reasoning, no
// text, so OpenAI's message has content null.
const callOnlyScript = "assistant\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Paris\"}}</tool_call><|im_end|>"

var callOnlyModel struct {
	once sync.Once
	dir  string
	err  error
}

// callOnlyScriptModel is scriptModel's twin that says callOnlyScript.
func callOnlyScriptModel(t *testing.T) string {
	t.Helper()
	tokDir := fixtures.Path(t, "tokenizers", "qwen3")
	callOnlyModel.once.Do(func() {
		dir := filepath.Join(scratch, "call-only")
		callOnlyModel.dir, callOnlyModel.err = dir, writeScriptModel(dir, tokDir, callOnlyScript)
	})
	if callOnlyModel.err != nil {
		t.Fatal(callOnlyModel.err)
	}
	return callOnlyModel.dir
}

var toolModel struct {
	once sync.Once
	dir  string
	err  error
}

// scriptModel returns a tiny Qwen3-architecture model with the real Qwen3
// tokenizer and chat template whose output after the generation prompt is
// toolScript: a real forward pass with a predictable answer, so reasoning
// and tool calls can be tested through every API. It is written once per
// test binary (its 150k-token vocabulary makes it ~80 MB).
func scriptModel(t *testing.T) string {
	t.Helper()
	tokDir := fixtures.Path(t, "tokenizers", "qwen3")
	toolModel.once.Do(func() {
		dir := filepath.Join(scratch, "script")
		toolModel.dir, toolModel.err = dir, writeScriptModel(dir, tokDir, toolScript)
	})
	if toolModel.err != nil {
		t.Fatal(toolModel.err)
	}
	return toolModel.dir
}

func writeScriptModel(dir, tokDir, script string) error {
	cfg, err := checkpoint.Tiny("qwen3")
	if err != nil {
		return err
	}
	if err := checkpoint.AdoptTokenizer(cfg, tokDir, dir); err != nil {
		return err
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		return err
	}
	return checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 2, Script: tok.EncodeIDs(script, false)})
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

func runLines(t *testing.T, cmd func(context.Context, []string, *strings.Reader, *bytes.Buffer, *bytes.Buffer) error, args []string, input string) []map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := cmd(context.Background(), args, strings.NewReader(input), &out, &errOut); err != nil {
		t.Fatalf("%v (stderr %s)", err, errOut.String())
	}
	var res []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q is not JSON: %v", line, err)
		}
		res = append(res, m)
	}
	return res
}

func tokenizeCmd(ctx context.Context, args []string, in *strings.Reader, out, errOut *bytes.Buffer) error {
	return cmdTokenize(ctx, args, in, out, errOut)
}

func detokenizeCmd(ctx context.Context, args []string, in *strings.Reader, out, errOut *bytes.Buffer) error {
	return cmdDetokenize(ctx, args, in, out, errOut)
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTokenizeCLI(t *testing.T) {
	llama2 := fixtures.Path(t, "tokenizers", "llama2") // small: quick to load under -race
	deepseek := fixtures.Path(t, "tokenizers", "deepseek_v3")
	tests := []struct {
		name  string
		args  []string
		input string
		want  []string // JSON of each output line
	}{
		{"lines: ids tokens offsets, malformed lines continue", []string{"--tokenizer", llama2},
			`{"text": "Hello, world!"}` + "\n" +
				`{"text": "é", "add_special_tokens": false}` + "\n" +
				"not json\n\n{\"text\": 3}\n{}\n{\"text\": \"\", \"add_special_tokens\": false}\n" +
				`{"text": "a"}`, // no final newline
			[]string{
				`{"ids":[1,22557,28725,1526,28808],"tokens":["<s>","▁Hello",",","▁world","!"],"offsets":[[0,0],[0,5],[5,6],[6,12],[12,13]]}`,
				`{"ids":[1233],"tokens":["▁é"],"offsets":[[0,2]]}`,
				`{"error":"bad request: invalid character 'o' in literal null (expecting 'u')"}`, `{"error":"empty line"}`,
				`{"error":"bad request: json: cannot unmarshal number into Go struct field tokenizeRequest.text of type string"}`,
				`{"error":"missing \"text\""}`, `{"ids":[],"offsets":[],"tokens":[]}`,
				`{"ids":[1,264],"tokens":["<s>","▁a"],"offsets":[[0,0],[0,1]]}`,
			}},
		{"transformers adds BOS", []string{"--tokenizer", deepseek},
			`{"text": "Hi"}` + "\n",
			[]string{`{"ids":[0,23166],"offsets":[[0,0],[0,2]],"tokens":["<｜begin▁of▁sentence｜>","Hi"]}`}},
		{"raw does not", []string{"--tokenizer", deepseek, "--raw"},
			`{"text": "Hi"}` + "\n",
			[]string{`{"ids":[23166],"offsets":[[0,2]],"tokens":["Hi"]}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runLines(t, tokenizeCmd, tc.args, tc.input)
			if len(got) != len(tc.want) {
				t.Fatalf("%d output lines, want %d: %v", len(got), len(tc.want), got)
			}
			for i := range got {
				var w map[string]any
				if err := json.Unmarshal([]byte(tc.want[i]), &w); err != nil {
					t.Fatal(err)
				}
				if asJSON(got[i]) != asJSON(w) {
					t.Errorf("line %d: got %s, want %s", i, asJSON(got[i]), asJSON(w))
				}
			}
		})
	}
}

func TestDetokenizeCLI(t *testing.T) {
	llama := fixtures.Path(t, "tokenizers", "llama3_1")
	tests := []struct {
		name  string
		args  []string
		input string
		want  []string
	}{
		{"transformers cleans up spaces", []string{"--tokenizer", llama},
			`{"ids": [128000, 9906, 1174, 1917, 758]}` + "\n" +
				`{"ids": [128000, 9906], "skip_special_tokens": true}` + "\n" + `{"ids": "x"}` + "\n" + `{"ids": []}` + "\n",
			[]string{`{"text":"<|begin_of_text|>Hello, world!"}`, `{"text":"Hello"}`,
				`{"error":"bad request: json: cannot unmarshal string into Go struct field detokenizeRequest.ids of type []int32"}`, `{"text":""}`}},
		{"raw keeps them", []string{"--tokenizer", llama, "--raw"},
			`{"ids": [128000, 9906, 1174, 1917, 758]}` + "\n",
			[]string{`{"text":"<|begin_of_text|>Hello , world !"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runLines(t, detokenizeCmd, tc.args, tc.input)
			if len(got) != len(tc.want) {
				t.Fatalf("%d output lines, want %d: %v", len(got), len(tc.want), got)
			}
			for i := range got {
				var w map[string]any
				if err := json.Unmarshal([]byte(tc.want[i]), &w); err != nil {
					t.Fatal(err)
				}
				if asJSON(got[i]) != asJSON(w) {
					t.Errorf("line %d: got %s, want %s", i, asJSON(got[i]), asJSON(w))
				}
			}
		})
	}
}

func TestTokenizeCLIErrors(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := cmdTokenize(context.Background(), nil, strings.NewReader(""), &out, &errOut); err == nil || !strings.Contains(err.Error(), "--tokenizer") {
		t.Fatalf("missing --tokenizer: %v", err)
	}
	if err := cmdDetokenize(context.Background(), []string{"--tokenizer", t.TempDir()}, strings.NewReader(""), &out, &errOut); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("missing tokenizer.json: %v", err)
	}
	if _, err := runCLI(t, "tokenize", "--tokenizer"); err == nil {
		t.Fatal("flag without value accepted")
	}
}

// TestTokenizeCLIGGUF runs tokenize and detokenize on the tokenizers of
// GGUF files (a file, and a folder holding one), with the ids llama.cpp's
// llama-tokenize gives (the fixtures' tokenizer/cases.json).
func TestTokenizeCLIGGUF(t *testing.T) {
	bpe := fixtures.Path(t, "gguf", "tokenizer", "bpe-tokenizer-q4_0.gguf")
	spm := fixtures.Path(t, "gguf", "llama", "llama-f16.gguf")
	dir := t.TempDir() // a folder holding one GGUF model and no tokenizer.json
	if err := os.Symlink(bpe, filepath.Join(dir, "model.gguf")); err != nil {
		t.Fatal(err)
	}
	chat := `{"text": "<|im_start|>user\nhi<|im_end|>"}`
	chatPlain := `{"text": "<|im_start|>user\nhi<|im_end|>", "split_special_tokens": true}`
	tests := []struct {
		name  string
		path  string
		input string
		want  [][]int32
	}{
		{"bpe file: specials parsed, and not", bpe, chat + "\n" + chatPlain + "\n",
			[][]int32{{49150, 872, 198, 6023, 49151}, {27, 91, 318, 4906, 91, 29, 872, 198, 6023, 27, 91, 318, 6213, 91, 29}}},
		{"folder with one gguf", dir, `{"text": "Hello world"}` + "\n", [][]int32{{9707, 1879}}},
		{"spm file adds BOS", spm, `{"text": "</s> after end"}` + "\n" + `{"text": "</s> after end", "split_special_tokens": true}` + "\n",
			[][]int32{{1, 2, 410, 261, 431, 413, 285, 344, 264}, {1, 410, 504, 492, 419, 505, 261, 431, 413, 285, 344, 264}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runLines(t, tokenizeCmd, []string{"--tokenizer", tc.path}, tc.input)
			if len(got) != len(tc.want) {
				t.Fatalf("%d output lines, want %d: %v", len(got), len(tc.want), got)
			}
			for i, line := range got {
				if g, w := asJSON(line["ids"]), asJSON(tc.want[i]); g != w {
					t.Errorf("line %d: ids %s, want %s (%v)", i, g, w, line)
				}
			}
		})
	}
	got := runLines(t, detokenizeCmd, []string{"--tokenizer", bpe},
		`{"ids": [49150, 872, 198, 6023, 49151]}`+"\n"+`{"ids": [49150, 872, 198, 6023, 49151], "skip_special_tokens": true}`+"\n")
	if g, w := asJSON(got), `[{"text":"\u003c|im_start|\u003euser\nhi\u003c|im_end|\u003e"},{"text":"user\nhi"}]`; g != w {
		t.Errorf("detokenize: %s, want %s", g, w)
	}
	got = runLines(t, detokenizeCmd, []string{"--tokenizer", spm}, `{"ids": [1, 346, 306, 414, 263, 304, 341], "skip_special_tokens": true}`+"\n")
	if g, w := asJSON(got), `[{"text":"Hello world"}]`; g != w {
		t.Errorf("detokenize: %s, want %s", g, w)
	}
	var out, errOut bytes.Buffer
	if err := cmdTokenize(context.Background(), []string{"--tokenizer", filepath.Join(dir, "model.gguf") + ".missing"}, strings.NewReader(""), &out, &errOut); err == nil {
		t.Error("missing GGUF file: no error")
	}
}

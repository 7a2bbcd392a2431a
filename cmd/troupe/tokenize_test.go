package main

import (
	"bytes"
	"context"
	"encoding/json"
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

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// fixtureCaseLine is a fixtures/templates/cases.jsonl record with its
// inputs kept as raw JSON, so that key order and number formats reach the
// CLI exactly as written.
type fixtureCaseLine struct {
	ID       string `json:"id"`
	Template string `json:"template"`
	Now      string `json:"strftime_now_datetime"`
	Inputs   struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		Documents           json.RawMessage `json:"documents"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		SpecialTokens       json.RawMessage `json:"special_tokens"`
		Kwargs              json.RawMessage `json:"kwargs"`
	} `json:"inputs"`
	Expected      *string      `json:"expected"`
	ExpectedError *renderError `json:"expected_error"`
}

func readFixtureCaseLines(t *testing.T) []fixtureCaseLine {
	t.Helper()
	f, err := os.Open(fixtures.Path(t, "templates", "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []fixtureCaseLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var c fixtureCaseLine
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func rawOrNull(r json.RawMessage) string {
	if len(r) == 0 {
		return "null"
	}
	return string(r)
}

// runRender runs troupe render on the given input lines and returns the
// decoded output lines.
func runRender(t *testing.T, args []string, lines []string) []renderResult {
	t.Helper()
	var out, errOut bytes.Buffer
	in := strings.Join(lines, "\n") + "\n"
	if err := cmdRender(context.Background(), args, strings.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("render: %v\n%s", err, errOut.String())
	}
	var results []renderResult
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var r renderResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("output line %q: %v", sc.Text(), err)
		}
		results = append(results, r)
	}
	if len(results) != len(lines) {
		t.Fatalf("%d output lines for %d inputs", len(results), len(lines))
	}
	return results
}

func checkResult(t *testing.T, id string, got renderResult, wantPrompt *string, wantErr *renderError) {
	t.Helper()
	switch {
	case wantErr != nil:
		if got.Error == nil || *got.Error != *wantErr {
			t.Errorf("%s: want error %+v, got %+v (prompt %v)", id, *wantErr, got.Error, got.Prompt != nil)
		}
	case got.Error != nil:
		t.Errorf("%s: unexpected error %+v", id, *got.Error)
	case got.Prompt == nil || *got.Prompt != *wantPrompt:
		t.Errorf("%s: prompt differs", id)
	}
}

// TestRenderCLIFixtures feeds every fixture case through troupe render.
func TestRenderCLIFixtures(t *testing.T) {
	cases := readFixtureCaseLines(t)
	dir := fixtures.Path(t, "templates", "templates")
	lines := make([]string, len(cases))
	for i, c := range cases {
		lines[i] = `{"template": ` + mustJSON(filepath.Join(dir, c.Template+".jinja")) +
			`, "messages": ` + rawOrNull(c.Inputs.Messages) +
			`, "tools": ` + rawOrNull(c.Inputs.Tools) +
			`, "documents": ` + rawOrNull(c.Inputs.Documents) +
			`, "add_generation_prompt": ` + mustJSON(c.Inputs.AddGenerationPrompt) +
			`, "special_tokens": ` + rawOrNull(c.Inputs.SpecialTokens) +
			`, "kwargs": ` + rawOrNull(c.Inputs.Kwargs) +
			`, "now": ` + mustJSON(c.Now) + `}`
	}
	for i, r := range runRender(t, nil, lines) {
		checkResult(t, cases[i].ID, r, cases[i].Expected, cases[i].ExpectedError)
	}
}

// TestRenderCLIModelFolder takes the template and the special tokens from
// a tokenizer folder's tokenizer_config.json.
func TestRenderCLIModelFolder(t *testing.T) {
	cases := readFixtureCaseLines(t)
	model := fixtures.Path(t, "tokenizers", "qwen3")
	var lines []string
	var want []fixtureCaseLine
	for _, c := range cases {
		if c.Template != "qwen3" {
			continue
		}
		lines = append(lines, `{"messages": `+rawOrNull(c.Inputs.Messages)+`, "tools": `+rawOrNull(c.Inputs.Tools)+
			`, "add_generation_prompt": `+mustJSON(c.Inputs.AddGenerationPrompt)+`, "kwargs": `+rawOrNull(c.Inputs.Kwargs)+`}`)
		want = append(want, c)
	}
	if len(lines) == 0 {
		t.Fatal("no qwen3 cases")
	}
	for i, r := range runRender(t, []string{"--model", model}, lines) {
		checkResult(t, want[i].ID, r, want[i].Expected, want[i].ExpectedError)
	}
}

func TestRenderCLIErrors(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(tmpl, []byte("{% if messages|length == 0 %}{{ raise_exception('no messages') }}{% endif %}{{ bos_token }}{{ messages[0].content }}|{{ strftime_now('%d %b %Y') }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.jinja")
	if err := os.WriteFile(bad, []byte("{% if %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	noTemplate := t.TempDir()
	if err := os.WriteFile(filepath.Join(noTemplate, "tokenizer_config.json"), []byte(`{"bos_token": "<s>"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	str := func(s string) *string { return &s }
	tests := []struct {
		name    string
		args    []string
		line    string
		prompt  *string
		errType string
	}{
		{"ok with now", nil, `{"template": "` + tmpl + `", "messages": [{"role": "user", "content": "hi"}], "special_tokens": {"bos_token": "<s>"}, "now": "2025-01-15T10:30:00"}`, str("<s>hi|15 Jan 2025"), ""},
		{"raise_exception", nil, `{"template": "` + tmpl + `", "messages": [], "now": "2025-01-15T10:30:00"}`, nil, "TemplateError"},
		{"flag template", []string{"--template", tmpl}, `{"messages": [{"role": "user", "content": "x"}], "now": "2024-02-29T00:00:00"}`, str("x|29 Feb 2024"), ""},
		{"syntax error", nil, `{"template": "` + bad + `", "messages": []}`, nil, "TemplateSyntaxError"},
		{"missing file", nil, `{"template": "` + filepath.Join(dir, "nope.jinja") + `", "messages": []}`, nil, "FileNotFoundError"},
		{"model without template", nil, `{"model": "` + noTemplate + `", "messages": []}`, nil, "ValueError"},
		{"demo model when nothing names a template", nil, `{"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": true}`, str("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"), ""},
		{"bad json", nil, `{"messages": [`, nil, "JSONDecodeError"},
		{"not an object", nil, `[1, 2]`, nil, "JSONDecodeError"},
		{"bad messages", nil, `{"template": "` + tmpl + `", "messages": {}}`, nil, "JSONDecodeError"},
		{"bad now", nil, `{"template": "` + tmpl + `", "messages": [], "now": "yesterday"}`, nil, "JSONDecodeError"},
		{"special tokens from model, flag template", []string{"--template", tmpl, "--model", noTemplate}, `{"messages": [{"role": "user", "content": "y"}], "now": "2025-01-15T10:30:00"}`, str("<s>y|15 Jan 2025"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runRender(t, tc.args, []string{tc.line})[0]
			if tc.errType != "" {
				if r.Error == nil || r.Error.Type != tc.errType {
					t.Fatalf("want %s error, got %+v %v", tc.errType, r.Error, r.Prompt)
				}
				return
			}
			if r.Error != nil || r.Prompt == nil || *r.Prompt != *tc.prompt {
				t.Fatalf("got %+v %q, want %q", r.Error, deref(r.Prompt), *tc.prompt)
			}
		})
	}
	// Errors do not stop the stream, and blank lines are skipped.
	lines := []string{`{"bad`, "", `{"template": "` + tmpl + `", "messages": [{"role": "user", "content": "z"}], "now": "2025-01-15T10:30:00"}`}
	var out, errOut bytes.Buffer
	if err := cmdRender(context.Background(), nil, strings.NewReader(strings.Join(lines, "\n")), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(out.String(), "\n"); got != 2 || !strings.Contains(out.String(), `"prompt":"z|15 Jan 2025"`) {
		t.Fatalf("stream output:\n%s", out.String())
	}
	if err := cmdRender(context.Background(), []string{"extra"}, strings.NewReader(""), &out, &errOut); err == nil {
		t.Fatal("an extra argument must be an error")
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

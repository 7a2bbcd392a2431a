package templates_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadModelTemplates(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		ask      string
		tools    bool
		want     string
		wantErr  string
		noTmpl   bool
		wantFrom string
	}{
		{name: "config string", files: map[string]string{"tokenizer_config.json": `{"chat_template": "A"}`}, want: "A", wantFrom: "tokenizer_config.json"},
		{name: "config list default", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`}, want: "D"},
		{name: "config list tools", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`}, tools: true, want: "T"},
		{name: "config list by name", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "D"}, {"name": "rag", "template": "R"}]}`}, ask: "rag", want: "R"},
		{name: "config list tools without tool_use", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "D"}]}`}, tools: true, want: "D"},
		{name: "config list no default", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "T"}]}`}, wantErr: "none is named", noTmpl: true},
		{name: "config list unknown name", files: map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "default", "template": "D"}]}`}, ask: "nope", wantErr: `no chat template named "nope"`},
		{name: "jinja file clobbers config", files: map[string]string{"tokenizer_config.json": `{"chat_template": "A"}`, "chat_template.jinja": "J"}, want: "J", wantFrom: "chat_template.jinja"},
		{name: "jinja file alone", files: map[string]string{"chat_template.jinja": "J\n"}, want: "J\n"},
		{name: "additional templates", files: map[string]string{"chat_template.jinja": "J", "additional_chat_templates/tool_use.jinja": "TU"}, tools: true, want: "TU"},
		{name: "processor chat_template.json", files: map[string]string{"tokenizer_config.json": `{"bos_token": "<s>"}`, "chat_template.json": `{"chat_template": "P"}`}, want: "P"},
		{name: "null template", files: map[string]string{"tokenizer_config.json": `{"chat_template": null}`}, wantErr: "no chat_template", noTmpl: true},
		{name: "no files", files: map[string]string{"config.json": `{}`}, wantErr: "no chat_template", noTmpl: true},
		{name: "bad type", files: map[string]string{"tokenizer_config.json": `{"chat_template": 5}`}, wantErr: "not a string or a list"},
		{name: "bad json", files: map[string]string{"tokenizer_config.json": `{"chat_template": `}, wantErr: "tokenizer_config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			m, err := templates.LoadModelTemplates(dir)
			var src string
			if err == nil {
				src, err = m.Select(tc.ask, tc.tools)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				if errors.Is(err, templates.ErrNoTemplate) != tc.noTmpl {
					t.Fatalf("errors.Is(err, ErrNoTemplate) = %v, want %v (%v)", !tc.noTmpl, tc.noTmpl, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src != tc.want {
				t.Fatalf("template %q, want %q", src, tc.want)
			}
			if tc.wantFrom != "" && filepath.Base(m.Origin) != tc.wantFrom {
				t.Fatalf("origin %s, want %s", m.Origin, tc.wantFrom)
			}
		})
	}
}

func TestLoadSpecialTokens(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"tokenizer_config.json":   `{"eos_token": {"__type": "AddedToken", "content": "</s>"}, "bos_token": "<s>", "pad_token": null, "unk_token": "", "additional_special_tokens": [], "extra_special_tokens": {"image_token": "<img>"}, "mask_token": "<m>"}`,
		"special_tokens_map.json": `{"mask_token": {"content": "<mask>"}, "sep_token": "<sep>"}`,
	})
	got, err := templates.LoadSpecialTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	got.Range(func(k, v any) bool { keys = append(keys, k.(string)+"="+v.(string)); return true })
	want := "bos_token=<s> eos_token=</s> sep_token=<sep> mask_token=<mask> image_token=<img>"
	if strings.Join(keys, " ") != want {
		t.Fatalf("got %s\nwant %s", strings.Join(keys, " "), want)
	}
	empty, err := templates.LoadSpecialTokens(t.TempDir())
	if err != nil || empty.Len() != 0 {
		t.Fatalf("empty folder: %v %v", empty.Len(), err)
	}
}

// TestFixtureTokenizerConfigs loads the chat templates and special tokens
// of the fixture tokenizers that ship a tokenizer_config.json with a chat
// template, and checks them against the fixture cases' template files and
// recorded special tokens.
func TestFixtureTokenizerConfigs(t *testing.T) {
	set := loadFixtures(t)
	tokDir := fixtures.Path(t, "tokenizers")
	for tmpl, family := range map[string]string{"qwen3": "qwen3", "deepseek-v3": "deepseek_v3", "gemma3": "gemma3", "llama3": "llama3_1"} {
		t.Run(tmpl, func(t *testing.T) {
			dir := filepath.Join(tokDir, family)
			m, err := templates.LoadModelTemplates(dir)
			if err != nil {
				t.Fatal(err)
			}
			src, err := m.Select("", false)
			if err != nil {
				t.Fatal(err)
			}
			if src != set.sources[tmpl] {
				t.Fatalf("template from %s differs from %s.jinja", m.Origin, tmpl)
			}
			st, err := templates.LoadSpecialTokens(dir)
			if err != nil {
				t.Fatal(err)
			}
			var want *templates.Dict
			for _, c := range set.cases {
				if c.Template == tmpl {
					want = c.In.SpecialTokens
					break
				}
			}
			if got, w := templates.ReprForTest(st), templates.ReprForTest(want); got != w {
				t.Fatalf("special tokens\n got %s\nwant %s", got, w)
			}
		})
	}
	// A tokenizer folder without a chat template fails clearly.
	_, err := templates.LoadModelTemplates(filepath.Join(tokDir, "gptoss"))
	if !errors.Is(err, templates.ErrNoTemplate) {
		t.Fatalf("gptoss has no template in its config: err = %v", err)
	}
}

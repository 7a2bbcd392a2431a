package chat_test

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
)

// fixtureTemplate is one of the real chat templates of the shared fixtures
// with the special tokens its model passes.
type fixtureTemplate struct {
	name    string
	source  string
	special *templates.Dict
}

func fixtureTemplates(t *testing.T) []fixtureTemplate {
	t.Helper()
	dir := fixtures.Path(t, "templates")
	reg, err := os.ReadFile(filepath.Join(dir, "templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := templates.DecodeJSON(reg)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := v.(*templates.Dict).Get("templates")
	var out []fixtureTemplate
	list.(*templates.Dict).Range(func(k, e any) bool {
		d := e.(*templates.Dict)
		file, _ := d.Get("file")
		src, err := os.ReadFile(filepath.Join(dir, file.(string)))
		if err != nil {
			t.Fatal(err)
		}
		sp, _ := d.Get("special_tokens")
		special, _ := sp.(*templates.Dict)
		out = append(out, fixtureTemplate{name: k.(string), source: string(src), special: special})
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	if len(out) < 17 {
		t.Fatalf("%d fixture templates, want 17", len(out))
	}
	return out
}

// argMarker is a tool-call argument that appears in a prompt only where the
// template rendered the call.
const argMarker = "Zanzibar-7"

// TestToolCallTurnsRenderOnEveryTemplate: an assistant tool-call turn
// renders on every fixture template whatever its content is (null — what
// OpenAI returns and the Vercel AI SDK and the OpenAI Agents SDK send back —
// missing, empty, an empty list or a list of text parts), with arguments as
// the JSON string OpenAI clients send or the object Anthropic's input is,
// and with our own long call_... ids; and the call appears in the prompt.
//
// Five templates render no tool calls at all (gemma2, gemma3, granite-3.3,
// llama3, phi-3.5: their sources never mention tool_calls); for them the
// turn must still render. The Gemma templates also refuse a "tool" message (roles must
// alternate), so their conversation has the user answer instead. DeepSeek V3
// and R1-Distill render calls only when the content is None, as their
// templates are written, so with a text part they show the text only (and
// several templates, e.g. hermes3, llama3.1, command-r7b, show the calls
// but not the text of such a turn).
func TestToolCallTurnsRenderOnEveryTemplate(t *testing.T) {
	noToolCalls := map[string]bool{"gemma2": true, "gemma3": true, "granite-3.3": true, "llama3": true, "phi-3.5": true}
	noToolRole := map[string]bool{"gemma2": true, "gemma3": true}
	callsOnlyWithoutText := map[string]bool{"deepseek-v3": true, "deepseek-r1-distill-qwen": true}
	contents := []struct {
		name, json string
		text       bool // the content has text
	}{
		{"null", `,"content":null`, false},
		{"missing", ``, false},
		{"empty", `,"content":""`, false},
		{"empty list", `,"content":[]`, false},
		{"text parts", `,"content":[{"type":"text","text":"Let me"},{"type":"text","text":"check."}]`, true},
	}
	args := []struct{ name, json string }{
		{"string arguments", `"{\"city\": \"` + argMarker + `\"}"`},
		{"object arguments", `{"city": "` + argMarker + `"}`},
	}
	const id = "call_4fT9zQ2xLm8Kp0Rb7Yw3Nc5V"
	tools := msgs(t, `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`)
	for _, ft := range fixtureTemplates(t) {
		if !noToolCalls[ft.name] && !strings.Contains(ft.source, "tool_calls") {
			t.Fatalf("%s: renders no tool calls; list it in noToolCalls", ft.name)
		}
		a := assets(t, ft.source)
		a.SpecialTokens = ft.special
		for _, c := range contents {
			for _, arg := range args {
				t.Run(ft.name+"/"+c.name+"/"+arg.name, func(t *testing.T) {
					call := `{"role":"assistant"` + c.json + `,"tool_calls":[{"id":"` + id + `","type":"function","function":{"name":"get_weather","arguments":` + arg.json + `}}]}`
					next := `{"role":"tool","tool_call_id":"` + id + `","content":"18C"}`
					if noToolRole[ft.name] {
						next = `{"role":"user","content":"Thanks."}`
					}
					conv := `[{"role":"user","content":"Weather in Paris?"},` + call + `,` + next + `]`
					p, err := a.Prepare(&chat.Request{Messages: msgs(t, conv), Tools: tools}, true)
					if err != nil {
						t.Fatalf("render: %v", err)
					}
					wantCall := !noToolCalls[ft.name] && !(c.text && callsOnlyWithoutText[ft.name])
					if got := strings.Contains(p.Prompt, argMarker); got != wantCall {
						t.Fatalf("call in the prompt: %v, want %v:\n%s", got, wantCall, p.Prompt)
					}
				})
			}
		}
	}
}

// TestNormalizeContent: content in every shape clients send renders as the
// template's string, and a non-text part is a clear error naming it.
func TestNormalizeContent(t *testing.T) {
	a := assets(t, chatML)
	tests := []struct {
		name, conv, prompt, param string
	}{
		{"parts joined", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_text","text":"b"}]}]`,
			"<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n", ""},
		{"null system", `[{"role":"system","content":null},{"role":"user","content":"hi"}]`,
			"<|im_start|>system\n<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", ""},
		{"image part", `[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:"}}]}]`, "", "messages[0].content[1]"},
		{"audio part", `[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]`, "", "messages[0].content[0]"},
		{"number content", `[{"role":"user","content":5}]`, "", "messages[0].content"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Prepare(&chat.Request{Messages: msgs(t, tc.conv)}, false)
			if tc.param != "" {
				var cp *chat.ContentParam
				if !errors.As(err, &cp) || cp.Param != tc.param {
					t.Fatalf("error %v, want one naming %s", err, tc.param)
				}
				var br *chat.BadRequest
				if !errors.As(err, &br) {
					t.Fatalf("error %v is not a BadRequest", err)
				}
				if strings.Contains(tc.name, "image") && !errors.Is(err, chat.ErrImageInput) {
					t.Fatalf("error %v, want ErrImageInput", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Prompt != tc.prompt {
				t.Fatalf("prompt %q, want %q", p.Prompt, tc.prompt)
			}
		})
	}
}

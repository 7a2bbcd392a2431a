package chat_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// chatML is the demo's ChatML template and byte tokenizer: one token per
// byte plus <|im_start|> and <|im_end|>, so token counts are easy to check.
func assets(t *testing.T, src string) *chat.Assets {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &chat.Assets{Tokenizer: tok}
	if src != "" {
		if a.Template, err = templates.Compile(src); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

const chatML = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

func msgs(t *testing.T, js string) []any {
	t.Helper()
	v, err := templates.DecodeJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return v.([]any)
}

func TestPrepare(t *testing.T) {
	a := assets(t, chatML)
	conv := `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"More?"}]`
	history := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
	tests := []struct {
		name         string
		req          *chat.Request
		withBoundary bool
		prompt       string
		rendered     bool
		boundary     int
		note         string
	}{
		{name: "single turn", req: &chat.Request{Messages: msgs(t, `[{"role":"user","content":"Hi"}]`)},
			prompt: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", note: "not rendered"},
		{name: "boundary asked, no assistant turn", req: &chat.Request{Messages: msgs(t, `[{"role":"user","content":"Hi"}]`)}, withBoundary: true,
			prompt: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", note: "no assistant turn"},
		{name: "boundary of a conversation", req: &chat.Request{Messages: msgs(t, conv)}, withBoundary: true,
			prompt: history + "<|im_start|>user\nMore?<|im_end|>\n<|im_start|>assistant\n", rendered: true,
			boundary: len(a.Tokenizer.EncodeIDs(history, false))},
		{name: "boundary not asked", req: &chat.Request{Messages: msgs(t, conv)},
			prompt: history + "<|im_start|>user\nMore?<|im_end|>\n<|im_start|>assistant\n", note: "not rendered"},
		{name: "not text-only", req: &chat.Request{Messages: msgs(t, `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]},{"role":"assistant","content":"a"}]`)},
			withBoundary: true, note: "not a text-only request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.Prepare(tc.req, tc.withBoundary)
			if tc.note == "not a text-only request" {
				// The image part renders as whatever the template makes of it;
				// only the boundary decision matters here.
				if err == nil && (p.BoundaryRendered || p.BoundaryNote != tc.note) {
					t.Fatalf("boundary %v note %q", p.BoundaryRendered, p.BoundaryNote)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Prompt != tc.prompt || !slices.Equal(p.IDs, a.Tokenizer.EncodeIDs(tc.prompt, false)) {
				t.Fatalf("prompt %q ids %v", p.Prompt, p.IDs)
			}
			if p.BoundaryRendered != tc.rendered || p.Boundary != tc.boundary || (tc.note != "" && p.BoundaryNote != tc.note) {
				t.Fatalf("boundary rendered %v len %d note %q; want %v %d %q", p.BoundaryRendered, p.Boundary, p.BoundaryNote, tc.rendered, tc.boundary, tc.note)
			}
			if p.Boundary > 0 && !slices.Equal(p.IDs[:p.Boundary], a.Tokenizer.EncodeIDs(history, false)) {
				t.Fatal("the boundary is not the history's tokens")
			}
		})
	}
}

func TestPrepareErrors(t *testing.T) {
	one := msgs(t, `[{"role":"user","content":"Hi"}]`)
	if _, err := assets(t, "").Prepare(&chat.Request{Messages: one}, false); !errors.Is(err, chat.ErrNoTemplate) {
		t.Fatalf("no template: %v", err)
	}
	var br *chat.BadRequest
	if _, err := assets(t, `{{ raise_exception("no system role") }}`).Prepare(&chat.Request{Messages: one}, false); !errors.As(err, &br) {
		t.Fatalf("a raising template must be a bad request, got %v", err)
	}
	if _, err := assets(t, chatML).Prepare(&chat.Request{Messages: []any{}}, false); !errors.As(err, &br) {
		t.Fatalf("empty messages: %v", err)
	}
	p, err := assets(t, chatML).Prepare(&chat.Request{Prompt: "abc"}, true)
	if err != nil || len(p.IDs) != 3 || p.BoundaryRendered {
		t.Fatalf("raw prompt: %+v %v", p, err)
	}
}

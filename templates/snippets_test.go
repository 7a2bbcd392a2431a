package templates_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// TestSnippets checks engine semantics against testdata/snippets.jsonl:
// small templates rendered by jinja2 3.1.6 configured as transformers
// configures it (see testdata/gen_snippets.py, which wrote the file).
// Syntax errors must be syntax errors; their wording is jinja2's parser's
// own and is not compared.
func TestSnippets(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "snippets.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Date(2025, 1, 15, 10, 30, 0, 0, time.Local)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	n, failed := 0, 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		v, err := templates.DecodeJSON(line)
		if err != nil {
			t.Fatal(err)
		}
		rec := v.(*templates.Dict)
		src := str(rec, "src")
		vars := map[string]any{}
		dict(rec, "vars").Range(func(k, v any) bool { vars[k.(string)] = v; return true })
		var got string
		tpl, err := templates.Compile(src, templates.WithClock(func() time.Time { return now }))
		if err == nil {
			got, err = tpl.Render(vars)
		}
		if e := dict(rec, "expected_error"); e != nil {
			var te *templates.Error
			switch {
			case err == nil:
				t.Errorf("%q: want %s: %s, rendered %q", src, str(e, "type"), str(e, "message"), got)
			case !errors.As(err, &te):
				t.Errorf("%q: want %s, got %v", src, str(e, "type"), err)
			case te.Type != str(e, "type"):
				t.Errorf("%q: want %s: %s\n got %s: %s", src, str(e, "type"), str(e, "message"), te.Type, te.Message)
			case te.Type != "TemplateSyntaxError" && te.Type != "SyntaxError" && te.Message != str(e, "message"):
				t.Errorf("%q: want %s: %s\n got %s: %s", src, str(e, "type"), str(e, "message"), te.Type, te.Message)
			default:
				continue
			}
			failed++
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", src, err)
			failed++
			continue
		}
		if want := str(rec, "expected"); got != want {
			t.Errorf("%q:\n want %q\n  got %q", src, want, got)
			failed++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d/%d snippets match jinja2", n-failed, n)
}

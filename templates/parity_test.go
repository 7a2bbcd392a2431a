package templates_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
)

// fixtureCase is one line of templates/cases.jsonl, decoded with
// templates.DecodeJSON so that key order and the int/float distinction
// survive exactly as Python's json.loads keeps them.
type fixtureCase struct {
	ID, Template, Tokenizer string
	Now                     time.Time
	In                      templates.ChatInput
	Expected                string
	HasExpected             bool
	ErrType, ErrMessage     string
	ExpectedIDs             []int32
	Boundary                *templates.Dict
}

type fixtureSet struct {
	dir       string
	cases     []fixtureCase
	sources   map[string]string // template name -> source
	tokenizer map[string]string // template name -> tokenizer family
}

var loadOnce struct {
	sync.Once
	set *fixtureSet
	err error
}

func str(d *templates.Dict, k string) string {
	v, _ := d.Get(k)
	s, _ := v.(string)
	return s
}

func dict(d *templates.Dict, k string) *templates.Dict {
	v, _ := d.Get(k)
	x, _ := v.(*templates.Dict)
	return x
}

func loadFixtures(t testing.TB) *fixtureSet {
	t.Helper()
	dir := fixtures.Dir(t)
	loadOnce.Do(func() { loadOnce.set, loadOnce.err = readFixtures(filepath.Join(dir, "templates")) })
	if loadOnce.err != nil {
		t.Fatal(loadOnce.err)
	}
	return loadOnce.set
}

func readFixtures(dir string) (*fixtureSet, error) {
	set := &fixtureSet{dir: dir, sources: map[string]string{}, tokenizer: map[string]string{}}
	reg, err := os.ReadFile(filepath.Join(dir, "templates.json"))
	if err != nil {
		return nil, err
	}
	rv, err := templates.DecodeJSON(reg)
	if err != nil {
		return nil, fmt.Errorf("templates.json: %w", err)
	}
	var ferr error
	dict(rv.(*templates.Dict), "templates").Range(func(k, v any) bool {
		name := k.(string)
		src, err := os.ReadFile(filepath.Join(dir, str(v.(*templates.Dict), "file")))
		if err != nil {
			ferr = err
			return false
		}
		set.sources[name] = string(src)
		set.tokenizer[name] = str(v.(*templates.Dict), "tokenizer")
		return true
	})
	if ferr != nil {
		return nil, ferr
	}
	set.cases, err = readCases(filepath.Join(dir, "cases.jsonl"))
	return set, err
}

// readCases reads a file of records in the format of the fixtures'
// cases.jsonl (gzip-compressed when its name ends in .gz).
func readCases(path string) ([]fixtureCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	var cases []fixtureCase
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		v, err := templates.DecodeJSON(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		c, err := caseFrom(v.(*templates.Dict))
		if err != nil {
			return nil, err
		}
		cases = append(cases, c)
	}
	return cases, sc.Err()
}

func parseNow(s string) (time.Time, error) {
	return time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
}

func caseFrom(d *templates.Dict) (fixtureCase, error) {
	c := fixtureCase{ID: str(d, "id"), Template: str(d, "template"), Tokenizer: str(d, "tokenizer")}
	nowText := str(d, "strftime_now_datetime")
	if nowText == "" {
		nowText = "2025-01-15T10:30:00"
	}
	now, err := parseNow(nowText)
	if err != nil {
		return c, fmt.Errorf("%s: %w", c.ID, err)
	}
	c.Now = now
	in := dict(d, "inputs")
	msgs, _ := in.Get("messages")
	c.In.Messages, _ = msgs.([]any)
	c.In.Tools, _ = in.Get("tools")
	c.In.Documents, _ = in.Get("documents")
	agp, _ := in.Get("add_generation_prompt")
	c.In.AddGenerationPrompt, _ = agp.(bool)
	c.In.SpecialTokens = dict(in, "special_tokens")
	c.In.Kwargs = dict(in, "kwargs")
	c.In.Now = now
	if e, ok := d.Get("expected"); ok {
		c.Expected, c.HasExpected = e.(string), true
	}
	if e := dict(d, "expected_error"); e != nil {
		c.ErrType, c.ErrMessage = str(e, "type"), str(e, "message")
	}
	if ids, ok := d.Get("expected_ids"); ok {
		for _, x := range ids.([]any) {
			c.ExpectedIDs = append(c.ExpectedIDs, int32(x.(int64)))
		}
	}
	c.Boundary = dict(d, "history_boundary")
	return c, nil
}

func (s *fixtureSet) compile(t testing.TB, name string) *templates.Template {
	t.Helper()
	tpl, err := templates.Compile(s.sources[name], templates.WithName(name))
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return tpl
}

// checkRender compares one render with the fixture's expectation and
// returns a description of the difference, or "".
func checkRender(got string, err error, c fixtureCase) string {
	if c.ErrType != "" {
		if err == nil {
			return fmt.Sprintf("expected %s %q, rendered %q", c.ErrType, c.ErrMessage, got)
		}
		var te *templates.Error
		if !errors.As(err, &te) {
			return fmt.Sprintf("expected %s, got non-template error %v", c.ErrType, err)
		}
		if te.Type != c.ErrType || te.Message != c.ErrMessage {
			return fmt.Sprintf("expected %s: %s\n     got %s: %s", c.ErrType, c.ErrMessage, te.Type, te.Message)
		}
		if (c.ErrType == "TemplateError") != errors.Is(err, templates.ErrRaised) {
			return "raise_exception errors must match ErrRaised, others must not"
		}
		return ""
	}
	if err != nil {
		return fmt.Sprintf("unexpected error %v", err)
	}
	if got != c.Expected {
		return "output differs:\n" + diffAt(c.Expected, got)
	}
	return ""
}

func diffAt(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-60)
	return fmt.Sprintf("  first difference at byte %d\n  want ...%q\n  got  ...%q", i, want[lo:min(len(want), i+60)], got[lo:min(len(got), i+60)])
}

// TestParity renders every fixture case and requires the exact string (or
// the same exception) that transformers produces.
func TestParity(t *testing.T) {
	set := loadFixtures(t)
	checkCases(t, set, set.cases)
}

// TestConversations renders testdata/conversations.jsonl.gz: further
// conversations for the same 17 templates (long OpenAI tool-call ids,
// float and nested tool arguments, documents, kwargs, images, odd roles),
// rendered by jinja2 as transformers configures it (gen_conversations.py).
func TestConversations(t *testing.T) {
	set := loadFixtures(t)
	cases, err := readCases(filepath.Join("testdata", "conversations.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	checkCases(t, set, cases)
	checkBoundaries(t, set, cases)
}

// TestRandomDiff checks a random differential corpus written by
// testdata/gen_random.py (set TEMPLATES_DIFF_FILE); it is a development
// tool, skipped otherwise.
func TestRandomDiff(t *testing.T) {
	path := os.Getenv("TEMPLATES_DIFF_FILE")
	if path == "" {
		t.Skip("TEMPLATES_DIFF_FILE not set (see testdata/gen_random.py)")
	}
	set := loadFixtures(t)
	cases, err := readCases(path)
	if err != nil {
		t.Fatal(err)
	}
	checkCases(t, set, cases)
}

func checkCases(t *testing.T, set *fixtureSet, cases []fixtureCase) {
	t.Helper()
	compiled := map[string]*templates.Template{}
	perTemplate := map[string][2]int{}
	for _, c := range cases {
		tpl := compiled[c.Template]
		if tpl == nil {
			tpl = set.compile(t, c.Template)
			compiled[c.Template] = tpl
		}
		got, err := tpl.RenderChat(c.In)
		diff := checkRender(got, err, c)
		p := perTemplate[c.Template]
		p[1]++
		if diff == "" {
			p[0]++
		} else {
			t.Errorf("%s: %s", c.ID, diff)
		}
		perTemplate[c.Template] = p
	}
	names := make([]string, 0, len(perTemplate))
	for n := range perTemplate {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	total, pass := 0, 0
	for _, n := range names {
		p := perTemplate[n]
		fmt.Fprintf(&b, "  %-26s %3d/%3d\n", n, p[0], p[1])
		total += p[1]
		pass += p[0]
	}
	t.Logf("parity %d/%d cases\n%s", pass, total, b.String())
	if len(cases) == 0 {
		t.Fatal("no cases")
	}
}

// TestHistoryBoundaryFixtures checks H, F and the character-level boundary
// facts of every case that has them.
func TestHistoryBoundaryFixtures(t *testing.T) {
	set := loadFixtures(t)
	checkBoundaries(t, set, set.cases)
}

func checkBoundaries(t *testing.T, set *fixtureSet, cases []fixtureCase) {
	t.Helper()
	compiled := map[string]*templates.Template{}
	n := 0
	for _, c := range cases {
		hb := c.Boundary
		if hb == nil {
			continue
		}
		n++
		tpl := compiled[c.Template]
		if tpl == nil {
			tpl = set.compile(t, c.Template)
			compiled[c.Template] = tpl
		}
		followup, _ := hb.Get("followup_message")
		hm, _ := hb.Get("history_messages")
		in := c.In
		last := templates.LastAssistant(in.Messages)
		if int64(last+1) != hm.(int64) {
			t.Errorf("%s: last assistant message at %d, fixture says history has %d messages", c.ID, last, hm)
			continue
		}
		fin := in
		fin.Messages = append(append([]any{}, in.Messages[:last+1]...), followup)
		fin.AddGenerationPrompt = true
		f, ferr := tpl.RenderChat(fin)
		if e := dict(hb, "error"); e != nil {
			_, herr, _ := renderH(tpl, fin)
			for _, which := range []struct {
				name string
				err  error
			}{{"H", herr}, {"F", ferr}} {
				want := dict(e, which.name)
				if want == nil {
					if which.err != nil {
						t.Errorf("%s: %s: unexpected error %v", c.ID, which.name, which.err)
					}
					continue
				}
				var te *templates.Error
				if !errors.As(which.err, &te) || te.Type != str(want, "type") || te.Message != str(want, "message") {
					t.Errorf("%s: %s: want %s: %s, got %v", c.ID, which.name, str(want, "type"), str(want, "message"), which.err)
				}
			}
			continue
		}
		if ferr != nil {
			t.Errorf("%s: F: %v", c.ID, ferr)
			continue
		}
		if f != str(hb, "F") {
			t.Errorf("%s: F differs:\n%s", c.ID, diffAt(str(hb, "F"), f))
		}
		b, ok, err := tpl.HistoryBoundary(fin, f, nil, nil)
		if err != nil || !ok {
			t.Errorf("%s: HistoryBoundary: ok=%v err=%v", c.ID, ok, err)
			continue
		}
		if b.History != str(hb, "H") {
			t.Errorf("%s: H differs:\n%s", c.ID, diffAt(str(hb, "H"), b.History))
		}
		want := func(k string) any { v, _ := hb.Get(k); return v }
		if b.TextPrefix != want("h_is_prefix_of_f").(bool) {
			t.Errorf("%s: H prefix of F = %v, want %v", c.ID, b.TextPrefix, want("h_is_prefix_of_f"))
		}
		if int64(b.CommonChars) != want("lcp_chars").(int64) {
			t.Errorf("%s: lcp_chars %d, want %d", c.ID, b.CommonChars, want("lcp_chars"))
		}
		if int64(utf8.RuneCountInString(b.History)) != want("h_chars").(int64) || int64(utf8.RuneCountInString(f)) != want("f_chars").(int64) {
			t.Errorf("%s: h_chars/f_chars differ", c.ID)
		}
		if b.Messages != last+1 {
			t.Errorf("%s: boundary covers %d messages, want %d", c.ID, b.Messages, last+1)
		}
	}
	if n == 0 {
		t.Fatal("no history_boundary facts")
	}
}

func renderH(tpl *templates.Template, in templates.ChatInput) (string, error, bool) {
	h, _, ok, err := tpl.RenderHistory(in)
	return h, err, ok
}

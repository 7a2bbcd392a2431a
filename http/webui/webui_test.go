package webui

import (
	"io"
	"io/fs"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
)

func app() *fiber.App {
	a := fiber.New()
	Mount(a)
	return a
}

// get sends method path with optional header pairs and returns the
// response and its body.
func get(t *testing.T, a *fiber.App, method, path string, header ...string) (int, map[string]string, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := a.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{}
	for k := range resp.Header {
		h[k] = resp.Header.Get(k)
	}
	return resp.StatusCode, h, string(body)
}

func TestServesPageAndAssets(t *testing.T) {
	a := app()
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script type="module" src="ui/app.js">`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "v1/chat/completions"},
		{"/ui/app.css", "text/css; charset=utf-8", ".messages"},
	} {
		code, h, body := get(t, a, "GET", tc.path)
		if code != 200 || h["Content-Type"] != tc.contentType || !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: %d %q, body has %q: %v", tc.path, code, h["Content-Type"], tc.contains, strings.Contains(body, tc.contains))
		}
		if h["Cache-Control"] != "no-cache" || h["Etag"] == "" || h["X-Content-Type-Options"] != "nosniff" {
			t.Errorf("GET %s: cache headers %q, ETag %q, nosniff %q", tc.path, h["Cache-Control"], h["Etag"], h["X-Content-Type-Options"])
		}
		// A browser revalidating its copy gets 304 with no body; a stale
		// or foreign tag gets the file.
		if code, _, body := get(t, a, "GET", tc.path, "If-None-Match", h["Etag"]); code != 304 || body != "" {
			t.Errorf("GET %s with its ETag: %d, %d bytes", tc.path, code, len(body))
		}
		if code, _, _ := get(t, a, "GET", tc.path, "If-None-Match", `W/"other", `+h["Etag"]); code != 304 {
			t.Errorf("GET %s with a tag list naming its ETag: %d", tc.path, code)
		}
		if code, _, body := get(t, a, "GET", tc.path, "If-None-Match", `"stale"`); code != 200 || body == "" {
			t.Errorf("GET %s with a stale ETag: %d", tc.path, code)
		}
	}
	_, h, _ := get(t, a, "GET", "/")
	if csp := h["Content-Security-Policy"]; !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("page CSP %q", csp)
	}
}

func TestRefusesOtherPathsAndMethods(t *testing.T) {
	a := app()
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/ui/nope.js", 404},
		{"GET", "/ui/index.html", 404}, // the page lives at / only
		{"GET", "/ui/", 404},
		{"GET", "/ui/../webui.go", 404},
		{"POST", "/", 405},
		{"DELETE", "/ui/app.js", 405},
		{"HEAD", "/", 200},
	} {
		if code, _, _ := get(t, a, tc.method, tc.path); code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, code, tc.want)
		}
	}
}

// TestPageReferencesServedFiles: every file index.html loads is served.
func TestPageReferencesServedFiles(t *testing.T) {
	a := app()
	_, _, page := get(t, a, "GET", "/")
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 2 {
		t.Fatalf("index.html references %d files", len(refs))
	}
	for _, m := range refs {
		if strings.HasPrefix(m[1], "data:") {
			continue
		}
		if code, _, _ := get(t, a, "GET", "/"+m[1]); code != 200 {
			t.Errorf("index.html loads %s: GET /%s answers %d", m[1], m[1], code)
		}
	}
}

// externalRef returns the first place in text that names or loads from
// another host: an absolute http(s) URL (also with JSON-escaped slashes),
// a protocol-relative src/href/url(), or a CSS @import; "" if none.
func externalRef(text string) string {
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)https?:\\?/\\?/[^\s"'<>)]*`),
		regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?//[^\s"'<>]*`),
		regexp.MustCompile(`(?i)url\(\s*["']?//[^)]*`),
		regexp.MustCompile(`(?i)@import\b[^;]*`),
	} {
		if m := re.FindString(text); m != "" {
			return m
		}
	}
	return ""
}

func TestExternalRefDetector(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{`<script src="https://cdn.example.com/x.js"></script>`, true},
		{`fetch('http://example.com/v1/models')`, true},
		{`"HTTPS:\/\/evil.example"`, true},
		{`<link href="//fonts.example.com/a.css">`, true},
		{`background: url(//img.example.com/a.png)`, true},
		{`@import "theme.css";`, true},
		{`<script type="module" src="ui/app.js"></script>`, false},
		{`fetch('v1/chat/completions', { method: 'POST' })`, false},
		{`// a comment with two slashes`, false},
		{`<link rel="icon" href="data:,">`, false},
	} {
		if got := externalRef(tc.text); (got != "") != tc.want {
			t.Errorf("externalRef(%q) = %q, want a match: %v", tc.text, got, tc.want)
		}
	}
}

// TestNoExternalURLs: the page works offline and leaks nothing to other
// hosts, so no embedded file names an absolute or protocol-relative URL.
func TestNoExternalURLs(t *testing.T) {
	files := 0
	err := fs.WalkDir(static, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		data, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(data), "\n") {
			if m := externalRef(line); m != "" {
				t.Errorf("%s:%d refers to another host (%s): %s", path, i+1, m, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 3 {
		t.Errorf("embedded %d files, want index.html, app.js and app.css", files)
	}
}

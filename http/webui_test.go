package http_test

import (
	"strings"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestChatPageMounted: the server serves the chat page at / without an API
// key while the API it calls still needs one, the API routes answer as
// before, and page loads are counted under their route, not as unmatched.
func TestChatPageMounted(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"sekret"}})
	s.waitReady(t) // /health is 503 until the model is loaded
	for _, tc := range []struct {
		method, path string
		header       []string
		want         int
		contentType  string
	}{
		{"GET", "/", nil, 200, "text/html; charset=utf-8"},
		{"GET", "/ui/app.js", nil, 200, "text/javascript; charset=utf-8"},
		{"GET", "/v1/models", nil, 401, "application/json"},
		{"GET", "/v1/models", []string{"Authorization", "Bearer sekret"}, 200, "application/json"},
		{"POST", "/", nil, 405, "application/json"},
		{"GET", "/nope", nil, 404, "application/json"},
		{"GET", "/health", nil, 200, "application/json"},
	} {
		resp, body := s.send(t, tc.method, tc.path, "", tc.header...)
		if resp.StatusCode != tc.want || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType) {
			t.Errorf("%s %s: %d %q, want %d %q: %.200s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.want, tc.contentType, body)
		}
	}
	_, m := s.get(t, "/metrics")
	for _, want := range []string{
		`troupe_requests_total{route="/",status="200"} 1`,
		`troupe_requests_total{route="/ui/:name",status="200"} 1`,
		`troupe_requests_total{route="unmatched",status="404"} 1`,
		`troupe_requests_total{route="/",status="405"} 1`,
		`troupe_requests_total{route="/v1/models",status="200"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q:\n%s", want, grep(m, "troupe_requests_total"))
		}
	}
}

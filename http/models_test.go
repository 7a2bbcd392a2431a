package http_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestSeveralModels: a server given a second runtime (AddModel) routes each
// request by the model its body names, on every API; lists both models;
// answers a model it does not serve with 404 in the route's error shape;
// and finds a stored response whichever model made it.
func TestSeveralModels(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	demo, err := troupe.Start(ctx, troupe.Options{Threads: 1, KVBudget: 64 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	mamba, err := troupe.Start(ctx, troupe.Options{Model: mambaDir(t), ServedName: "tiny-mamba", Threads: 1, KVBudget: 64 << 20, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer mamba.Close()
	srv := troupehttp.New(demo, troupehttp.Config{Parallel: 4})
	srv.AddModel(mamba)
	srv.AddModel(mamba) // again: nothing changes
	if got := srv.Models(); !slices.Equal(got, []string{"troupe-demo", "tiny-mamba"}) {
		t.Fatalf("Models() = %q", got)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.App.Listener(ln)
	defer srv.Shutdown(5 * time.Second)
	s := &server{rt: demo, url: "http://" + ln.Addr().String()}
	s.waitReady(t)
	(&server{rt: mamba}).waitReady(t)

	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	_, body := s.send(t, "GET", "/v1/models", "")
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) != 2 || list.Data[0].ID != "troupe-demo" || list.Data[1].ID != "tiny-mamba" {
		t.Fatalf("/v1/models = %s", body)
	}

	var answer struct {
		Model string `json:"model"`
		ID    string `json:"id"`
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"tiny-mamba","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "tiny-mamba"},
		{"/v1/chat/completions", `{"model":"troupe-demo","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "troupe-demo"},
		{"/v1/chat/completions", `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "troupe-demo"},
		{"/v1/completions", `{"model":"tiny-mamba","max_tokens":2,"prompt":"hi"}`, "tiny-mamba"},
		{"/v1/messages", `{"model":"tiny-mamba","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, "tiny-mamba"},
		{"/v1/responses", `{"model":"tiny-mamba","max_output_tokens":2,"input":"hi"}`, "tiny-mamba"},
	} {
		resp, body := s.post(t, tc.path, tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &answer); err != nil || answer.Model != tc.want {
			t.Fatalf("%s %s: model %q, want %q (%s)", tc.path, tc.body, answer.Model, tc.want, body)
		}
	}
	// The last answer was a stored response of tiny-mamba: found through
	// the shared store.
	if resp, body := s.send(t, "GET", "/v1/responses/"+answer.ID, ""); resp.StatusCode != 200 || !strings.Contains(string(body), `"tiny-mamba"`) {
		t.Fatalf("GET the stored response: %d %s", resp.StatusCode, body)
	}
	// Prompt inspection follows the model too: the byte tokenizer of
	// tiny-mamba gives one token per byte.
	_, body = s.post(t, "/tokenize", `{"model":"tiny-mamba","prompt":"abcd","add_special_tokens":false}`)
	var toks struct{ Tokens []int }
	if err := json.Unmarshal(body, &toks); err != nil || len(toks.Tokens) != 4 {
		t.Fatalf("/tokenize for tiny-mamba: %s", body)
	}

	for _, tc := range []struct{ path, body, want string }{
		{"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`, `"code":"model_not_found"`},
		{"/v1/messages", `{"model":"nope","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`, `"type":"not_found_error"`},
	} {
		resp, body := s.post(t, tc.path, tc.body)
		if resp.StatusCode != 404 || !strings.Contains(string(body), tc.want) || !strings.Contains(string(body), `\"tiny-mamba\"`) {
			t.Fatalf("%s naming no served model: %d %s", tc.path, resp.StatusCode, body)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// TestChatPipedLocal: `troupe chat DIR` with piped input loads the model
// here, answers each line on stdout (the replies alone: no prompt, no
// banner) and ends at the end of input.
func TestChatPipedLocal(t *testing.T) {
	model := servableDir(t)
	var out strings.Builder
	var errOut syncbuf.Buffer
	in := strings.NewReader("/set max_tokens 6\n/set ignore_eos true\nhello\nagain\n/show\n")
	err := cmdChat(context.Background(), []string{model, "--threads", "1", "--kv-budget", "8MiB", "--temperature", "0"}, in, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(errOut.String(), "loading tiny…") {
		t.Errorf("no loading message on stderr:\n%s", errOut.String())
	}
	got := out.String()
	if strings.Contains(got, ">>>") || !strings.Contains(got, "model: tiny\n") || !strings.Contains(got, "exchanges in the conversation: 2\n") {
		t.Fatalf("stdout:\n%q", got)
	}
	replies := strings.TrimSuffix(got[:strings.Index(got, "model: tiny")], "\n")
	if replies == "" {
		t.Fatalf("no replies before /show:\n%q", got)
	}
}

func TestChatBadCommandLines(t *testing.T) {
	tmp := t.TempDir()
	noWeights := filepath.Join(tmp, "no-weights")
	os.MkdirAll(noWeights, 0o755)
	model := servableDir(t)
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(model, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(noWeights, f), b, 0o644)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{filepath.Join(tmp, "nope")}, "does not exist"},
		{[]string{noWeights, "--threads", "1", "--kv-budget", "8MiB"}, "the model failed to load"},
		{[]string{"a", "b"}, `unexpected argument "b"`},
		{[]string{"a", "--model", "b"}, "two models"},
		{[]string{"--url", "http://127.0.0.1:1", "--threads", "2"}, "--threads applies to a model loaded here"},
		{[]string{"--url", "localhost:8080"}, "not an http:// or https:// address"},
		{[]string{"--api-key", "k"}, "--api-key is for a server at --url"},
		{[]string{"--temperature", "hot"}, "0 to 2"},
		{[]string{"--max-tokens", "0"}, "whole number"},
		{[]string{"--kv-budget", "lots"}, "--kv-budget"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--url", "http://127.0.0.1:1"}, "listing models"},
	} {
		err := cmdChat(context.Background(), tc.args, strings.NewReader(""), &strings.Builder{}, &syncbuf.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chat %v: %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestChatURL: with --url the argument names the served model, the key
// comes from the flag or the environment, and the chat goes over the
// server's streaming chat completions.
func TestChatURL(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+req.Model)
		mu.Unlock()
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"data":[{"id":"default-model"}]}`)
		case "/v1/chat/completions":
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"pong\"},\"finish_reason\":null}]}\n\n"+
				"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		}
	}))
	defer srv.Close()
	t.Setenv("TROUPE_API_KEY", "")
	t.Setenv("OPENAI_API_KEY", "sk-env")
	var out strings.Builder
	if err := cmdChat(context.Background(), []string{"--url", srv.URL + "/v1"}, strings.NewReader("ping\n"), &out, &out); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_API_KEY", "tr-env")
	if err := cmdChat(context.Background(), []string{"--url", srv.URL, "named-model"}, strings.NewReader("ping\n"), &out, &out); err != nil {
		t.Fatal(err)
	}
	if err := cmdChat(context.Background(), []string{"--url", srv.URL, "--api-key", "flag-key", "--model", "m2"}, strings.NewReader("ping\n"), &out, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GET /v1/models Bearer sk-env ", "POST /v1/chat/completions Bearer sk-env default-model",
		"POST /v1/chat/completions Bearer tr-env named-model",
		"POST /v1/chat/completions Bearer flag-key m2",
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, "\n") != strings.Join(want, "\n") || out.String() != "pong\npong\npong\n" {
		t.Fatalf("requests:\n%s\noutput %q", strings.Join(seen, "\n"), out.String())
	}
}

// TestChatReasoning: a model loaded here whose answer is scripted (a real
// forward pass, with Qwen3's tokenizer and template) shows its reasoning
// between Thinking... and ...done thinking., then the answer; the next
// turn is answered too (the reasoning is not sent back).
func TestChatReasoning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "scripted")
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--seed", "2", "--out", dir,
		"--tokenizer", fixtures.Path(t, "tokenizers", "qwen3"), "--script", "assistant\n<think>Plan a greeting.</think>Hello there!<|im_end|>"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var errOut syncbuf.Buffer
	err := cmdChat(context.Background(), []string{dir, "--threads", "1", "--kv-budget", "16MiB", "--temperature", "0"}, strings.NewReader("hi\nagain\n"), &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	turn := "Thinking...\nPlan a greeting.\n...done thinking.\n\nHello there!\n"
	if out.String() != turn+turn {
		t.Fatalf("stdout %q, want the scripted turn twice", out.String())
	}
}

package apierr_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/templates"
)

const secret = "/srv/models/secret/tokenizer_config.json"

// TestDescribe: each error the runtime returns maps to its status, the
// field it names in the API's own words, and a message without server
// paths.
func TestDescribe(t *testing.T) {
	chatParams := apierr.Params{Prompt: "messages", MaxTokens: "max_tokens"}
	respParams := apierr.Params{Prompt: "input", MaxTokens: "max_output_tokens"}
	tmplErr := &chat.BadRequest{Err: fmt.Errorf("chat template: %w", &templates.Error{Type: "TemplateError", Message: "roles must alternate", Raised: true, Name: secret, Line: 34})}
	tests := []struct {
		name    string
		err     error
		p       apierr.Params
		status  int
		param   string
		mention string
	}{
		{"template error", tmplErr, chatParams, 400, "messages", "roles must alternate (template line 34)"},
		{"template error, responses", tmplErr, respParams, 400, "input", "TemplateError"},
		{"max tokens too many", &engine.TooLongError{Prompt: 10, MaxTokens: 5000, Limit: 4096}, chatParams, 400, "max_tokens", "4096 positions"},
		{"max output tokens too many", fmt.Errorf("wrapped: %w", &engine.TooLongError{Prompt: 10, MaxTokens: 5000, Limit: 4096}), respParams, 400, "max_output_tokens", "max_output_tokens (5000)"},
		{"prompt too long", &engine.TooLongError{Prompt: 5000, MaxTokens: 1, Limit: 4096, PromptOnly: true}, respParams, 400, "input", "5000 tokens"},
		{"pool too small", &engine.TooLongError{Prompt: 10, MaxTokens: 900, Limit: 512, Pages: 32}, chatParams, 400, "max_tokens", "KV cache's 512 positions"},
		{"overloaded", &actors.Overloaded{What: "inspection requests in flight", Limit: 16, RetryAfter: time.Second}, chatParams, 429, "", "16 inspection requests"},
		{"prepare timeout", &actors.TimedOut{What: "prepare", After: 30 * time.Second}, chatParams, 503, "", "30s"},
		{"input too large", &actors.TooLarge{What: "the input", Size: 2000, Limit: 1000, Unit: "bytes of text"}, chatParams, 413, "messages", "limit of 1000"},
		{"field", apierr.Bad("temperature", "temperature must be between 0 and 2"), chatParams, 400, "temperature", "temperature"},
		{"no template", chat.ErrNoTemplate, chatParams, 400, "messages", "chat template"},
		{"unavailable", &actors.Unavailable{Cause: errors.New("broken")}, chatParams, 503, "", "failed to load"},
		{"other", errors.New("boom"), chatParams, 500, "", "boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, param, msg := apierr.Describe(tc.err, tc.p)
			if status != tc.status || param != tc.param {
				t.Fatalf("status %d param %q, want %d %q (%s)", status, param, tc.status, tc.param, msg)
			}
			if !strings.Contains(msg, tc.mention) {
				t.Fatalf("message %q does not mention %q", msg, tc.mention)
			}
			if strings.Contains(msg, "/srv/") {
				t.Fatalf("message %q leaks a server path", msg)
			}
		})
	}
}

// TestReplyLogsWhatItWithholds: the client gets the template's reason
// without the path, with Retry-After on retryable errors; the log keeps
// the path.
func TestReplyLogsWhatItWithholds(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	tmplErr := &chat.BadRequest{Err: &templates.Error{Type: "TemplateError", Message: "no system role", Name: secret, Line: 3}}
	app := fiber.New()
	app.Post("/openai", func(c *fiber.Ctx) error {
		return apierr.ReplyOpenAI(c, log, tmplErr, apierr.Params{Prompt: "messages", MaxTokens: "max_tokens"})
	})
	app.Post("/anthropic", func(c *fiber.Ctx) error {
		return apierr.ReplyAnthropic(c, log, &actors.TimedOut{What: "prepare", After: time.Second, RetryAfter: 2 * time.Second})
	})
	resp, err := app.Test(httptest.NewRequest("POST", "/openai", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || strings.Contains(string(body), "/srv/") || !strings.Contains(string(body), "no system role") || !strings.Contains(string(body), `"param":"messages"`) {
		t.Fatalf("template error: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(logs.String(), secret) {
		t.Fatalf("the log lost the template's path: %s", logs.String())
	}
	resp, err = app.Test(httptest.NewRequest("POST", "/anthropic", nil))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(body), `"type":"error"`) {
		t.Fatalf("timeout: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}

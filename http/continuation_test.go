package http_test

import (
	"encoding/json"
	"strings"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/internal/fixtures"
)

// TestCompletionKeepsLeadingSpace: on a SentencePiece model the first
// generated token's leading space belongs to the text, as vLLM and
// llama.cpp return it: stories260k continues "Lily was" with " a little
// girl", not "a little girl" (the decoder's start-of-text rule applies to
// the prompt, not to its continuation). Streamed and not.
func TestCompletionKeepsLeadingSpace(t *testing.T) {
	dir := fixtures.Path(t, "models", "stories260k")
	s := start(t, troupe.Options{Model: dir}, troupehttp.Config{})
	s.waitReady(t)
	resp, body := s.post(t, "/v1/completions", `{"prompt":"Lily was","max_tokens":5,"temperature":0}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("%v %s", err, body)
	}
	if got := out.Choices[0].Text; !strings.HasPrefix(got, " a little girl") {
		t.Errorf("completion of %q: %q, want it to start with %q", "Lily was", got, " a little girl")
	}
	_, body = s.post(t, "/v1/completions", `{"prompt":"Lily was","max_tokens":5,"temperature":0,"stream":true}`)
	var streamed strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Choices) > 0 {
			streamed.WriteString(chunk.Choices[0].Text)
		}
	}
	if streamed.String() != out.Choices[0].Text {
		t.Errorf("streamed completion: %q, not completion %q", streamed.String(), out.Choices[0].Text)
	}
}

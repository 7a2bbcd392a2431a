package http_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestStructuredOutput: each API's structured-output field reaches the
// sampler: the demo model writes noise, yet every reply follows its
// constraint (a JSON object with the schema's required typed keys, one of
// the choices, the regex, a forced tool call with valid arguments), and
// each is counted by kind.
func TestStructuredOutput(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"n":{"type":"integer","minimum":1,"maximum":9}},"required":["name","n"],"additionalProperties":false}`
	checkObject := func(t *testing.T, text string) {
		t.Helper()
		var v struct {
			Name *string
			N    *int
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.Name == nil || v.N == nil || *v.N < 1 || *v.N > 9 || len([]rune(*v.Name)) > 8 {
			t.Fatalf("%q does not follow the schema (%v)", text, err)
		}
	}
	chatBody := func(extra string) string {
		return `{"messages":[{"role":"user","content":"Go"}],"max_tokens":200,"temperature":1,` + extra + `}`
	}
	for seed := range 3 {
		seedField := `"seed":` + string(rune('1'+seed))
		t.Run("response_format", func(t *testing.T) {
			resp, body := s.post(t, "/v1/chat/completions", chatBody(seedField+`,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":`+schema+`}}`))
			var out struct {
				Choices []struct {
					Message      struct{ Content string }
					FinishReason string `json:"finish_reason"`
				}
			}
			if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out.Choices[0].FinishReason != "stop" {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			checkObject(t, out.Choices[0].Message.Content)
		})
		t.Run("guided_choice", func(t *testing.T) {
			_, body := s.post(t, "/v1/chat/completions", chatBody(seedField+`,"guided_choice":["red","green","blue"]`))
			var out struct {
				Choices []struct{ Message struct{ Content string } }
			}
			if json.Unmarshal(body, &out) != nil || !slices.Contains([]string{"red", "green", "blue"}, out.Choices[0].Message.Content) {
				t.Fatalf("%s", body)
			}
		})
		t.Run("completions guided_regex", func(t *testing.T) {
			_, body := s.post(t, "/v1/completions", `{"prompt":"x","max_tokens":50,"temperature":1,`+seedField+`,"guided_regex":"[0-9]{2,4}-[a-z]+"}`)
			var out struct{ Choices []struct{ Text string } }
			if json.Unmarshal(body, &out) != nil || !regexp.MustCompile(`^[0-9]{2,4}-[a-z]+$`).MatchString(out.Choices[0].Text) {
				t.Fatalf("%s", body)
			}
		})
		t.Run("responses text.format", func(t *testing.T) {
			_, body := s.post(t, "/v1/responses", `{"input":"Go","max_output_tokens":200,"temperature":1,"text":{"format":{"type":"json_schema","name":"x","schema":`+schema+`}}}`)
			var out struct {
				Output []struct {
					Content []struct{ Text string }
				}
				Text struct{ Format struct{ Type, Name string } }
			}
			if json.Unmarshal(body, &out) != nil || len(out.Output) == 0 || out.Text.Format.Type != "json_schema" || out.Text.Format.Name != "x" {
				t.Fatalf("%s", body)
			}
			checkObject(t, out.Output[len(out.Output)-1].Content[0].Text)
		})
		t.Run("anthropic output_format", func(t *testing.T) {
			_, body := s.post(t, "/v1/messages", `{"model":"troupe-demo","max_tokens":200,"messages":[{"role":"user","content":"Go"}],"output_format":{"type":"json_schema","schema":`+schema+`}}`)
			var out struct {
				Content    []struct{ Type, Text string }
				StopReason string `json:"stop_reason"`
			}
			if json.Unmarshal(body, &out) != nil || len(out.Content) != 1 || out.StopReason != "end_turn" {
				t.Fatalf("%s", body)
			}
			checkObject(t, out.Content[0].Text)
		})
		t.Run("tool_choice required", func(t *testing.T) {
			_, body := s.post(t, "/v1/chat/completions", chatBody(seedField+`,"tool_choice":"required","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f","parameters":`+schema+`}}]`))
			var out struct {
				Choices []struct {
					Message struct {
						ToolCalls []struct {
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
					FinishReason string `json:"finish_reason"`
				}
			}
			if json.Unmarshal(body, &out) != nil || out.Choices[0].FinishReason != "tool_calls" || len(out.Choices[0].Message.ToolCalls) != 1 {
				t.Fatalf("%s", body)
			}
			for _, c := range out.Choices[0].Message.ToolCalls {
				if c.Function.Name != "f" {
					t.Fatalf("call to %q", c.Function.Name)
				}
				checkObject(t, c.Function.Arguments)
			}
		})
	}
	for kind, want := range map[string]float64{"json_schema": 9, "choice": 3, "regex": 3, "tool_calls": 3} {
		if got := testutil.ToFloat64(s.rt.Metrics().Constrained.WithLabelValues(kind)); got != want {
			t.Errorf("troupe_constrained_requests_total{kind=%q} = %v, want %v", kind, got, want)
		}
	}
}

// TestKeepAliveIsACommentLine: the SSE keep-alive of the OpenAI routes is
// a comment line that never ends an event of its own (a blank line after
// it makes openai-go dispatch an empty event and fail the stream): every
// event block of the stream holds data.
func TestKeepAliveIsACommentLine(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{KeepAlive: time.Microsecond})
	s.waitReady(t)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":40,"stream":true,"ignore_eos":true}`},
		{"/v1/responses", `{"input":"Hi","max_output_tokens":40,"stream":true}`},
	} {
		_, body := s.post(t, tc.path, tc.body)
		text := string(body)
		if !strings.Contains(text, ": keep-alive\n") {
			t.Fatalf("%s: no keep-alive in a stream with a 1µs period", tc.path)
		}
		for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
			if !strings.Contains(block, "data:") {
				t.Fatalf("%s: an event block without data: %q", tc.path, block)
			}
		}
	}
}

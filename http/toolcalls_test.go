package http_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// scriptArgs are the arguments of the script model's tool call (see
// toolScript), exactly as it generates them.
const scriptArgs = `{"city": "Paris"}`

var (
	chatToolsJSON = `"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	respToolsJSON = `"tools":[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	anthToolsJSON = `"tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`
	idSuffix      = `[0-9A-Za-z]{24}`
	chatCallID    = regexp.MustCompile(`^call_` + idSuffix + `$`)
	anthCallID    = regexp.MustCompile(`^toolu_` + idSuffix + `$`)
	respFcID      = regexp.MustCompile(`^fc_` + idSuffix + `$`)
)

// toolStream is what a client assembles of one tool call from a stream.
type toolStream struct {
	id, name string
	pieces   []string // the argument deltas, in order
}

func (ts toolStream) args() string { return strings.Join(ts.pieces, "") }

// TestToolCallArgumentsStream: a tool call's arguments stream as they are
// generated, in each API's shape — OpenAI chat delta.tool_calls (a first
// entry with id, type and name, then argument pieces), Responses
// response.function_call_arguments.delta events, Anthropic input_json_delta
// pieces — in more than one piece, and the pieces join to exactly the final
// arguments; the call's id is the API's prefix and 24 random base62
// characters, the same in the stream and its final object, and new on
// every call.
func TestToolCallArgumentsStream(t *testing.T) {
	s := start(t, troupe.Options{Model: scriptModel(t)}, troupehttp.Config{})
	s.waitReady(t)

	t.Run("chat completions", func(t *testing.T) {
		body := `{"max_tokens":64,"messages":[{"role":"user","content":"Weather in Paris?"}],` + chatToolsJSON + `}`
		resp, data := s.post(t, "/v1/chat/completions", `{"stream":true,`+body[1:])
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		var ts toolStream
		finish := ""
		for _, d := range sse(string(data)) {
			if d == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						ToolCalls []struct {
							Index    *int    `json:"index"`
							ID       *string `json:"id"`
							Type     *string `json:"type"`
							Function struct {
								Name      *string `json:"name"`
								Arguments *string `json:"arguments"`
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"delta"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(d), &c); err != nil {
				t.Fatalf("chunk %s: %v", d, err)
			}
			if len(c.Choices) == 0 {
				continue
			}
			if f := c.Choices[0].FinishReason; f != nil {
				finish = *f
				if len(c.Choices[0].Delta.ToolCalls) > 0 {
					t.Fatalf("the last chunk repeats the tool calls: %s", d)
				}
			}
			for _, tc := range c.Choices[0].Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != 0 {
					t.Fatalf("tool call index in %s", d)
				}
				if ts.id == "" {
					if tc.ID == nil || tc.Type == nil || *tc.Type != "function" || tc.Function.Name == nil {
						t.Fatalf("the first tool_calls entry lacks id, type or name: %s", d)
					}
					ts.id, ts.name = *tc.ID, *tc.Function.Name
				} else if tc.ID != nil || tc.Function.Name != nil {
					t.Fatalf("a later tool_calls entry repeats id or name: %s", d)
				}
				if a := tc.Function.Arguments; a != nil && *a != "" {
					ts.pieces = append(ts.pieces, *a)
				}
			}
		}
		if !chatCallID.MatchString(ts.id) || ts.name != "get_weather" || len(ts.pieces) < 2 || ts.args() != scriptArgs || finish != "tool_calls" {
			t.Fatalf("streamed call %+v joined to %q, finish %q", ts, ts.args(), finish)
		}
		// Not streamed: the same arguments, an id of the same form, a new one.
		_, data = s.post(t, "/v1/chat/completions", body)
		var res struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &res); err != nil || len(res.Choices) != 1 || len(res.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("%s", data)
		}
		call := res.Choices[0].Message.ToolCalls[0]
		if !chatCallID.MatchString(call.ID) || call.ID == ts.id || call.Function.Arguments != scriptArgs || res.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("non-streamed call %+v (streamed id %s)", call, ts.id)
		}
	})

	t.Run("responses", func(t *testing.T) {
		body := `{"input":"Weather in Paris?",` + respToolsJSON + `}`
		resp, data := s.post(t, "/v1/responses", `{"stream":true,`+body[1:])
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		final, _, _ := streamed(t, string(data))
		var ts toolStream
		done := ""
		for _, ev := range respEvents(t, string(data)) {
			switch ev.name {
			case "response.output_item.added":
				if item := ev.data["item"].(map[string]any); item["type"] == "function_call" {
					ts.id, ts.name = item["id"].(string), item["name"].(string)
					if item["arguments"] != "" || item["status"] != "in_progress" {
						t.Fatalf("function_call added as %v", item)
					}
				}
			case "response.function_call_arguments.delta":
				if ev.data["item_id"] != ts.id {
					t.Fatalf("delta for %v, the call is %s", ev.data["item_id"], ts.id)
				}
				ts.pieces = append(ts.pieces, ev.data["delta"].(string))
			case "response.function_call_arguments.done":
				done = ev.data["arguments"].(string)
			}
		}
		out := final["output"].([]any)
		fc := out[len(out)-1].(map[string]any)
		if !respFcID.MatchString(ts.id) || ts.name != "get_weather" || len(ts.pieces) < 2 || ts.args() != scriptArgs || done != scriptArgs ||
			fc["id"] != ts.id || fc["arguments"] != scriptArgs || fc["call_id"] != "call_"+strings.TrimPrefix(ts.id, "fc_") {
			t.Fatalf("streamed call %+v joined to %q (done %q), final item %v", ts, ts.args(), done, fc)
		}
		_, obj := s.respPost(t, "/v1/responses", body)
		out = obj["output"].([]any)
		fc2 := out[len(out)-1].(map[string]any)
		if !respFcID.MatchString(fc2["id"].(string)) || fc2["id"] == ts.id || fc2["call_id"] != "call_"+strings.TrimPrefix(fc2["id"].(string), "fc_") || fc2["arguments"] != scriptArgs {
			t.Fatalf("non-streamed item %v", fc2)
		}
	})

	t.Run("anthropic", func(t *testing.T) {
		body := `{"max_tokens":64,` + anthToolsJSON + `,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
		code, data := s.anthPost(t, "/v1/messages", `{"stream":true,`+body[1:])
		if code != 200 {
			t.Fatalf("%d %s", code, data)
		}
		var ts toolStream
		toolIndex := -1
		for _, ev := range anthEvents(t, string(data)) {
			switch ev.Name {
			case "content_block_start":
				var b map[string]any
				ev.field(t, "content_block", &b)
				if b["type"] == "tool_use" {
					ts.id, ts.name = b["id"].(string), b["name"].(string)
					ev.field(t, "index", &toolIndex)
				}
			case "content_block_delta":
				var d map[string]string
				ev.field(t, "delta", &d)
				var index int
				ev.field(t, "index", &index)
				if d["type"] == "input_json_delta" {
					if index != toolIndex {
						t.Fatalf("input_json_delta in block %d, the tool_use is %d", index, toolIndex)
					}
					ts.pieces = append(ts.pieces, d["partial_json"])
				}
			}
		}
		if !anthCallID.MatchString(ts.id) || ts.name != "get_weather" || len(ts.pieces) < 2 || ts.args() != scriptArgs {
			t.Fatalf("streamed call %+v joined to %q", ts, ts.args())
		}
		m := s.anthNew(t, body)
		tu := m.Content[len(m.Content)-1]
		if tu.Type != "tool_use" || !anthCallID.MatchString(tu.ID) || tu.ID == ts.id || !jsonEqual(tu.Input, ts.args()) {
			t.Fatalf("non-streamed block %+v", tu)
		}
	})
}

// TestToolCallRoundTrip: what we return for a tool call, sent back as is
// as the next request's history, is accepted and renders the call: OpenAI's
// message (content null, tool_calls, reasoning_content), Responses' output
// items, Anthropic's content blocks.
//
// The model here replies with a tool call only (no reasoning, no text), so
// OpenAI's message has content null, which Qwen3's template cannot take as
// is ("argument of type 'NoneType' is not iterable").
func TestToolCallRoundTrip(t *testing.T) {
	s := start(t, troupe.Options{Model: callOnlyScriptModel(t)}, troupehttp.Config{})
	s.waitReady(t)
	rendersCall := func(t *testing.T, prompt string) {
		t.Helper()
		for _, want := range []string{`<tool_call>`, `"get_weather"`, `Paris`, `<tool_response>`, "18C"} {
			if !strings.Contains(prompt, want) {
				t.Fatalf("the next prompt lacks %q:\n%s", want, prompt)
			}
		}
	}

	t.Run("chat completions", func(t *testing.T) {
		user := `{"role":"user","content":"Weather in Paris?"}`
		_, data := s.post(t, "/v1/chat/completions", `{"max_tokens":64,"messages":[`+user+`],`+chatToolsJSON+`}`)
		var res struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(data, &res); err != nil || len(res.Choices) != 1 {
			t.Fatalf("%s", data)
		}
		msg := res.Choices[0].Message
		var m struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		}
		if err := json.Unmarshal(msg, &m); err != nil || m.Content != nil || len(m.ToolCalls) != 1 {
			t.Fatalf("message %s: want content null and one tool call", msg)
		}
		tool := `{"role":"tool","tool_call_id":"` + m.ToolCalls[0].ID + `","content":"18C"}`
		for _, path := range []string{"/v1/chat/completions/input_tokens", "/apply-template"} {
			resp, data := s.post(t, path, `{"messages":[`+user+`,`+string(msg)+`,`+tool+`],`+chatToolsJSON+`}`)
			var out struct{ Prompt string }
			if resp.StatusCode != 200 || json.Unmarshal(data, &out) != nil {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, data)
			}
			rendersCall(t, out.Prompt)
		}
		// The same message with content left out, "" or parts renders alike.
		for _, content := range []string{`"content":null,`, ``, `"content":"",`, `"content":[],`} {
			asst := `{"role":"assistant",` + content + `"tool_calls":[{"id":"` + m.ToolCalls[0].ID + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]}`
			resp, data := s.post(t, "/apply-template", `{"messages":[`+user+`,`+asst+`,`+tool+`],`+chatToolsJSON+`}`)
			var out struct{ Prompt string }
			if resp.StatusCode != 200 || json.Unmarshal(data, &out) != nil {
				t.Fatalf("content %s: %d %s", content, resp.StatusCode, data)
			}
			rendersCall(t, out.Prompt)
		}
	})

	t.Run("responses", func(t *testing.T) {
		code, obj := s.respPost(t, "/v1/responses", `{"input":"Weather in Paris?","store":false,`+respToolsJSON+`}`)
		if code != 200 {
			t.Fatalf("%d %v", code, obj)
		}
		items := obj["output"].([]any)
		fc := items[len(items)-1].(map[string]any)
		input := append([]any{map[string]any{"role": "user", "content": "Weather in Paris?"}}, items...)
		input = append(input, map[string]any{"type": "function_call_output", "call_id": fc["call_id"], "output": "18C"})
		in, _ := json.Marshal(input)
		code, res := s.respPost(t, "/v1/responses/input_tokens", `{"input":`+string(in)+`,`+respToolsJSON+`}`)
		if code != 200 {
			t.Fatalf("output items sent back: %d %v", code, res)
		}
		rendersCall(t, res["prompt"].(string))
	})

	t.Run("anthropic", func(t *testing.T) {
		user := `{"role":"user","content":"Weather in Paris?"}`
		code, data := s.anthPost(t, "/v1/messages", `{"max_tokens":64,`+anthToolsJSON+`,"messages":[`+user+`]}`)
		var m struct {
			Content []json.RawMessage `json:"content"`
		}
		if code != 200 || json.Unmarshal(data, &m) != nil {
			t.Fatalf("%d %s", code, data)
		}
		var last struct{ ID string }
		json.Unmarshal(m.Content[len(m.Content)-1], &last)
		blocks, _ := json.Marshal(m.Content)
		next := `{` + anthToolsJSON + `,"messages":[` + user + `,{"role":"assistant","content":` + string(blocks) + `},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + last.ID + `","content":"18C"}]}]}`
		code, data = s.anthPost(t, "/v1/messages/count_tokens", next)
		if code != 200 {
			t.Fatalf("content blocks sent back: %d %s", code, data)
		}
		// It renders as the same conversation in OpenAI's shape does (whose
		// prompt shows the call).
		var n, o struct {
			InputTokens int    `json:"input_tokens"`
			Prompt      string `json:"prompt"`
		}
		if json.Unmarshal(data, &n) != nil {
			t.Fatalf("count_tokens %s", data)
		}
		chatConv := `{"messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"` + last.ID + `","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
			`{"role":"tool","tool_call_id":"` + last.ID + `","content":"18C"}],` + chatToolsJSON + `}`
		resp, data := s.post(t, "/v1/chat/completions/input_tokens", chatConv)
		if resp.StatusCode != 200 || json.Unmarshal(data, &o) != nil {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		rendersCall(t, o.Prompt)
		if n.InputTokens != o.InputTokens {
			t.Fatalf("count_tokens %d, the same conversation in OpenAI's shape %d", n.InputTokens, o.InputTokens)
		}
	})
}

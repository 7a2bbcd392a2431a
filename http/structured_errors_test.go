package http_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// bigSchema is a JSON schema of about n bytes: an object with many
// described string properties.
func bigSchema(n int) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","description":"%s"}`, i, strings.Repeat("x", 40))
	}
	b.WriteString(`}}`)
	return b.String()
}

// TestStructuredBadInput: a structured-output request the server cannot
// honour is a 4xx (400 for a bad schema, regex or grammar) in the API's
// error shape that names the field and says why; never a 5xx or a hang.
// OpenAI's shape is {"error":{"message","type","param","code"}},
// Anthropic's {"type":"error","error":{"type","message"}} (no param: the
// field leads the message).
func TestStructuredBadInput(t *testing.T) {
	s := start(t, troupe.Options{}, troupehttp.Config{})
	s.waitReady(t)
	const chat = `"model":"troupe-demo","max_tokens":8,"messages":[{"role":"user","content":"hi"}]`
	const resp = `"model":"troupe-demo","max_output_tokens":8,"input":"hi"`
	const anth = `"model":"troupe-demo","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]`
	rf := func(schema string) string {
		return `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`
	}
	// Refusing a 5 MB schema takes seconds (the grammar is built until it
	// passes its size limit; 20 s under -race on a loaded machine), so one
	// route checks it.
	big := bigSchema(5 << 20)
	for _, tc := range []struct {
		name, path, body string
		// param is the field the error names (OpenAI's param; the start of
		// Anthropic's message), why words of the message.
		param string
		why   []string
	}{
		{"invalid type", "/v1/chat/completions", rf(`{"type":"nope"}`), "response_format.json_schema.schema", []string{"type", `"nope"`}},
		{"unsupported keyword", "/v1/chat/completions", rf(`{"type":"object","unevaluatedProperties":false}`), "response_format.json_schema.schema", []string{"unevaluatedProperties", "not supported"}},
		{"unsupported format", "/v1/chat/completions", rf(`{"type":"string","format":"iri"}`), "response_format.json_schema.schema", []string{"format", "not supported"}},
		{"schema not JSON", "/v1/chat/completions", `"guided_json":"{not json"`, "guided_json", []string{"not a JSON schema"}},
		{"malformed regex", "/v1/chat/completions", `"guided_regex":"a("`, "guided_regex", []string{"a(", "missing closing )"}},
		{"regex too large", "/v1/chat/completions", `"guided_regex":"(a{1000}){1000}"`, "guided_regex", []string{"repeat count"}},
		{"malformed GBNF", "/v1/chat/completions", `"guided_grammar":"root ::= (\"a\""`, "guided_grammar", []string{"expecting ')'"}},
		{"GBNF undefined rule", "/v1/chat/completions", `"grammar":"root ::= nowhere"`, "grammar", []string{"undefined rule", "nowhere"}},
		{"$ref to itself", "/v1/chat/completions", `"guided_json":{"$ref":"#"}`, "guided_json", []string{"$ref", "itself"}},
		{"$ref cycle through $defs", "/v1/chat/completions", `"json_schema":{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "json_schema", []string{"$ref", "itself"}},
		{"minLength too large", "/v1/chat/completions", `"guided_json":{"type":"string","minLength":100000000}`, "guided_json", []string{"minLength", "larger"}},
		{"empty choice", "/v1/chat/completions", `"guided_choice":[]`, "guided_choice", []string{"empty"}},
		{"two constraints", "/v1/chat/completions", `"response_format":{"type":"json_object"},"guided_json":{"type":"string"}`, "guided_json", []string{"response_format", "guided_json", "one"}},
		{"two vLLM constraints", "/v1/chat/completions", `"guided_regex":"a","guided_choice":["a"]`, "guided_choice", []string{"guided_regex", "guided_choice"}},
		{"strict tool schema", "/v1/chat/completions", `"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"nope"}}}]`, "tools[0].function.parameters", []string{"type", `"nope"`}},
		{"named tool missing", "/v1/chat/completions", `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"g"}}`, "tool_choice", []string{`"g"`}},
		{"5 MB schema", "/v1/chat/completions", rf(big), "response_format.json_schema.schema", []string{"too large"}},
		{"text.format invalid type", "/v1/responses", `"text":{"format":{"type":"json_schema","name":"x","schema":{"type":"nope"}}}`, "text.format.schema", []string{"type", `"nope"`}},
		{"text.format $ref cycle", "/v1/responses", `"text":{"format":{"type":"json_schema","name":"x","schema":{"$ref":"#"}}}`, "text.format.schema", []string{"$ref", "itself"}},
		{"strict function schema", "/v1/responses", `"tools":[{"type":"function","name":"f","strict":true,"parameters":{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}}]`, "tools[0].parameters", []string{"$ref", "itself"}},
		{"function choice missing", "/v1/responses", `"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"g"}`, "tool_choice", []string{`"g"`}},
		{"tool_choice names no tool", "/v1/messages", `"tool_choice":{"type":"tool","name":"g"}`, "tool_choice.name", []string{`"g"`}},
		{"tool_choice without name", "/v1/messages", `"tool_choice":{"type":"tool"}`, "tool_choice.name", []string{"required"}},
		{"tool_choice bad type", "/v1/messages", `"tool_choice":{"type":"nope"}`, "tool_choice.type", []string{`"nope"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := chat
			switch tc.path {
			case "/v1/responses":
				base = resp
			case "/v1/messages":
				base = anth
			}
			t0 := time.Now()
			r, data := s.post(t, tc.path, "{"+base+","+tc.body+"}")
			took := time.Since(t0)
			if r.StatusCode != 400 {
				t.Fatalf("status %d, want 400: %.300s", r.StatusCode, data)
			}
			if took > 30*time.Second {
				t.Errorf("answered in %v", took)
			}
			var msg string
			if tc.path == "/v1/messages" {
				var e struct {
					Type  string `json:"type"`
					Error *struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(data, &e); err != nil || e.Type != "error" || e.Error == nil || e.Error.Type != "invalid_request_error" {
					t.Fatalf("not Anthropic's error shape: %.300s", data)
				}
				msg = e.Error.Message
				if !strings.HasPrefix(msg, tc.param) {
					t.Errorf("message %q does not name %s", msg, tc.param)
				}
			} else {
				var e struct {
					Error map[string]json.RawMessage `json:"error"`
				}
				if err := json.Unmarshal(data, &e); err != nil || e.Error == nil {
					t.Fatalf("not OpenAI's error shape: %.300s", data)
				}
				for _, k := range []string{"message", "type", "param", "code"} {
					if _, ok := e.Error[k]; !ok {
						t.Errorf("error has no %q: %.300s", k, data)
					}
				}
				var param, typ string
				_ = json.Unmarshal(e.Error["param"], &param)
				_ = json.Unmarshal(e.Error["type"], &typ)
				_ = json.Unmarshal(e.Error["message"], &msg)
				if param != tc.param || typ != "invalid_request_error" {
					t.Errorf("param %q type %q, want %q invalid_request_error", param, typ, tc.param)
				}
			}
			for _, w := range tc.why {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
	// The server still answers.
	if r, data := s.post(t, "/v1/chat/completions", "{"+chat+`,"guided_choice":["yes","no"]}`); r.StatusCode != 200 || !strings.Contains(string(data), `"content":"yes"`) && !strings.Contains(string(data), `"content":"no"`) {
		t.Fatalf("after the bad requests: %d %.300s", r.StatusCode, data)
	}
}

package structured

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/troupe-ai/troupe/http/apierr"
)

// TestSpec: every field maps to its constraint, and a bad or doubled one
// is a 400 naming the field.
func TestSpec(t *testing.T) {
	cases := []struct {
		name, body string
		kind       string // the Spec's kind, "" for none
		field      string // the Spec's Field
		errParam   string // the error's param when it fails
	}{
		{"none", `{}`, "", "", ""},
		{"text", `{"response_format":{"type":"text"}}`, "", "", ""},
		{"json_object", `{"response_format":{"type":"json_object"}}`, "json", "response_format", ""},
		{"json_schema", `{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}`, "json_schema", "response_format.json_schema.schema", ""},
		{"json_schema without schema", `{"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "json", "response_format.json_schema.schema", ""},
		{"json_schema missing", `{"response_format":{"type":"json_schema"}}`, "", "", "response_format.json_schema"},
		{"bad name", `{"response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}}}`, "", "", "response_format.json_schema.name"},
		{"bad type", `{"response_format":{"type":"xml"}}`, "", "", "response_format.type"},
		{"guided_json object", `{"guided_json":{"type":"integer"}}`, "json_schema", "guided_json", ""},
		{"guided_json string", `{"guided_json":"{\"type\":\"integer\"}"}`, "json_schema", "guided_json", ""},
		{"guided_json not a schema", `{"guided_json":"nope"}`, "", "", "guided_json"},
		{"guided_regex", `{"guided_regex":"[a-z]+"}`, "regex", "guided_regex", ""},
		{"guided_regex empty", `{"guided_regex":""}`, "", "", "guided_regex"},
		{"guided_choice", `{"guided_choice":["a","b"]}`, "choice", "guided_choice", ""},
		{"guided_choice with an empty one", `{"guided_choice":["a",""]}`, "", "", "guided_choice[1]"},
		{"guided_grammar", `{"guided_grammar":"root ::= \"a\""}`, "grammar", "guided_grammar", ""},
		{"structured_outputs", `{"structured_outputs":{"choice":["x"]}}`, "choice", "structured_outputs.choice", ""},
		{"structured_outputs empty", `{"structured_outputs":{}}`, "", "", "structured_outputs"},
		{"llama-server json_schema", `{"json_schema":{"type":"string"}}`, "json_schema", "json_schema", ""},
		{"llama-server grammar", `{"grammar":"root ::= [0-9]+"}`, "grammar", "grammar", ""},
		{"two at once", `{"guided_regex":"a","grammar":"root ::= \"a\""}`, "", "", "grammar"},
		{"null is unset", `{"response_format":null,"guided_json":null}`, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var f Fields
			if err := json.Unmarshal([]byte(tc.body), &f); err != nil {
				t.Fatal(err)
			}
			s, err := f.Spec()
			if tc.errParam != "" {
				var fe *apierr.Field
				if !errors.As(err, &fe) || fe.Param != tc.errParam {
					t.Fatalf("got %v, want an error on %s", err, tc.errParam)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.kind == "" {
				if s != nil {
					t.Fatalf("got %+v, want none", s)
				}
				return
			}
			if s == nil || s.Kind() != tc.kind || s.Field != tc.field {
				t.Fatalf("got %+v, want kind %s on %s", s, tc.kind, tc.field)
			}
		})
	}
}

// TestTextFormat: Responses' text.format.
func TestTextFormat(t *testing.T) {
	for _, tc := range []struct{ body, kind, errParam string }{
		{`{"type":"text"}`, "", ""},
		{`{"type":"json_object"}`, "json", ""},
		{`{"type":"json_schema","name":"x","schema":{"type":"object"}}`, "json_schema", ""},
		{`{"type":"json_schema","schema":{}}`, "", "text.format.name"},
		{`{"type":"json_schema","name":"x"}`, "", "text.format.schema"},
		{`{"type":"yaml"}`, "", "text.format.type"},
	} {
		s, err := TextFormat(json.RawMessage(tc.body))
		var fe *apierr.Field
		switch {
		case tc.errParam != "":
			if !errors.As(err, &fe) || fe.Param != tc.errParam {
				t.Errorf("%s: got %v, want an error on %s", tc.body, err, tc.errParam)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.body, err)
		case tc.kind == "" && s != nil, tc.kind != "" && (s == nil || s.Kind() != tc.kind):
			t.Errorf("%s: got %+v, want %q", tc.body, s, tc.kind)
		}
	}
}

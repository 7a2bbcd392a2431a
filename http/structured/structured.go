// Package structured reads the structured-output fields of each API into
// one grammar.Spec: OpenAI's response_format (chat completions) and
// text.format (Responses), vLLM's guided_json, guided_regex, guided_choice,
// guided_grammar and structured_outputs, and llama-server's json_schema and
// grammar. Every translator calls it, so a request means the same
// constraint whichever field carries it, and one that asks for two is
// refused rather than silently choosing.
package structured

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/http/apierr"
)

// Fields are the structured-output fields a request may carry, raw.
type Fields struct {
	// OpenAI chat completions.
	ResponseFormat json.RawMessage `json:"response_format"`
	// vLLM's guided decoding (older and newer names).
	GuidedJSON        json.RawMessage `json:"guided_json"`
	GuidedRegex       json.RawMessage `json:"guided_regex"`
	GuidedChoice      json.RawMessage `json:"guided_choice"`
	GuidedGrammar     json.RawMessage `json:"guided_grammar"`
	StructuredOutputs json.RawMessage `json:"structured_outputs"`
	// llama-server's.
	JSONSchema json.RawMessage `json:"json_schema"`
	Grammar    json.RawMessage `json:"grammar"`
}

func set(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// Spec returns the constraint the fields ask for, nil when none.
func (f *Fields) Spec() (*grammar.Spec, error) {
	var out *grammar.Spec
	from := ""
	take := func(field string, s *grammar.Spec, err error) error {
		if err != nil || s == nil {
			return err
		}
		if out != nil {
			return apierr.Bad(field, "%s and %s both constrain the output; send one", from, field)
		}
		out, from = s, field
		return nil
	}
	for _, c := range []struct {
		field string
		raw   json.RawMessage
		read  func(string, json.RawMessage) (*grammar.Spec, error)
	}{
		{"response_format", f.ResponseFormat, responseFormat},
		{"guided_json", f.GuidedJSON, schemaField},
		{"guided_regex", f.GuidedRegex, regexField},
		{"guided_choice", f.GuidedChoice, choiceField},
		{"guided_grammar", f.GuidedGrammar, grammarField},
		{"structured_outputs", f.StructuredOutputs, structuredOutputs},
		{"json_schema", f.JSONSchema, schemaField},
		{"grammar", f.Grammar, grammarField},
	} {
		if !set(c.raw) {
			continue
		}
		s, err := c.read(c.field, c.raw)
		if err := take(c.field, s, err); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// schemaField: a JSON schema as an object (or boolean), or as a string
// holding one (vLLM accepts both).
func schemaField(field string, raw json.RawMessage) (*grammar.Spec, error) {
	schema := bytes.TrimSpace(raw)
	if schema[0] == '"' {
		var s string
		if err := json.Unmarshal(schema, &s); err != nil {
			return nil, apierr.Bad(field, "%s: %v", field, err)
		}
		schema = bytes.TrimSpace([]byte(s))
		if !json.Valid(schema) {
			return nil, apierr.Bad(field, "%s: the string is not a JSON schema", field)
		}
	}
	if len(schema) == 0 || (schema[0] != '{' && !bytes.Equal(schema, []byte("true")) && !bytes.Equal(schema, []byte("false"))) {
		return nil, apierr.Bad(field, "%s must be a JSON schema (an object)", field)
	}
	return &grammar.Spec{JSONSchema: schema, Field: field}, nil
}

func stringField(field string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", apierr.Bad(field, "%s must be a string", field)
	}
	if s == "" {
		return "", apierr.Bad(field, "%s must not be empty", field)
	}
	return s, nil
}

func regexField(field string, raw json.RawMessage) (*grammar.Spec, error) {
	s, err := stringField(field, raw)
	if err != nil {
		return nil, err
	}
	return &grammar.Spec{Regex: s, Field: field}, nil
}

func grammarField(field string, raw json.RawMessage) (*grammar.Spec, error) {
	s, err := stringField(field, raw)
	if err != nil {
		return nil, err
	}
	return &grammar.Spec{GBNF: s, Field: field}, nil
}

func choiceField(field string, raw json.RawMessage) (*grammar.Spec, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, apierr.Bad(field, "%s must be an array of strings", field)
	}
	if len(list) == 0 {
		return nil, apierr.Bad(field, "%s must not be empty", field)
	}
	for i, c := range list {
		if c == "" {
			return nil, apierr.Bad(fmt.Sprintf("%s[%d]", field, i), "%s[%d] must not be empty", field, i)
		}
	}
	return &grammar.Spec{Choice: list, Field: field}, nil
}

// structuredOutputs: vLLM's {"json" | "regex" | "choice" | "grammar": ...}.
func structuredOutputs(field string, raw json.RawMessage) (*grammar.Spec, error) {
	var so struct {
		JSON    json.RawMessage `json:"json"`
		Regex   json.RawMessage `json:"regex"`
		Choice  json.RawMessage `json:"choice"`
		Grammar json.RawMessage `json:"grammar"`
	}
	if err := json.Unmarshal(raw, &so); err != nil {
		return nil, apierr.Bad(field, "%s must be an object", field)
	}
	f := Fields{GuidedJSON: so.JSON, GuidedRegex: so.Regex, GuidedChoice: so.Choice, GuidedGrammar: so.Grammar}
	s, err := f.Spec()
	if err != nil {
		return nil, err
	}
	if s == nil {
		return nil, apierr.Bad(field, "%s needs one of json, regex, choice or grammar", field)
	}
	s.Field = field + "." + map[string]string{"guided_json": "json", "guided_regex": "regex", "guided_choice": "choice", "guided_grammar": "grammar"}[s.Field]
	return s, nil
}

// responseFormat: OpenAI chat completions' response_format.
func responseFormat(field string, raw json.RawMessage) (*grammar.Spec, error) {
	var rf struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, apierr.Bad(field, "%s must be an object like {\"type\": \"json_object\"}", field)
	}
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return &grammar.Spec{JSON: true, Object: true, Field: field}, nil
	case "json_schema":
		if !set(rf.JSONSchema) {
			return nil, apierr.Bad(field+".json_schema", "%s.json_schema is required for type json_schema", field)
		}
		var js struct {
			Name   *string         `json:"name"`
			Schema json.RawMessage `json:"schema"`
		}
		if err := json.Unmarshal(rf.JSONSchema, &js); err != nil {
			return nil, apierr.Bad(field+".json_schema", "%s.json_schema must be an object with name and schema", field)
		}
		if js.Name != nil && !validName(*js.Name) {
			return nil, apierr.Bad(field+".json_schema.name", "%s.json_schema.name must be 1 to 64 letters, digits, underscores or dashes", field)
		}
		return Schema(field+".json_schema.schema", js.Schema)
	}
	return nil, apierr.Bad(field+".type", "%s.type must be \"text\", \"json_object\" or \"json_schema\", got %q", field, rf.Type)
}

// Schema is the constraint of a json_schema format whose schema is raw
// (absent: any JSON object, as OpenAI's schema field is optional).
func Schema(field string, raw json.RawMessage) (*grammar.Spec, error) {
	if !set(raw) {
		return &grammar.Spec{JSON: true, Object: true, Field: field}, nil
	}
	return schemaField(field, raw)
}

// TextFormat reads Responses' text.format ({"type": "text" | "json_object"
// | "json_schema", "name", "schema", "strict"}): its constraint (nil for
// text) and the format to echo in the response object.
func TextFormat(raw json.RawMessage) (*grammar.Spec, error) {
	const field = "text.format"
	var tf struct {
		Type   string          `json:"type"`
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &tf); err != nil {
		return nil, apierr.Bad(field, "%s must be an object like {\"type\": \"json_schema\", \"name\": ..., \"schema\": {...}}", field)
	}
	switch tf.Type {
	case "text", "":
		return nil, nil
	case "json_object":
		return &grammar.Spec{JSON: true, Object: true, Field: field}, nil
	case "json_schema":
		if tf.Name == nil || !validName(*tf.Name) {
			return nil, apierr.Bad(field+".name", "%s.name is required: 1 to 64 letters, digits, underscores or dashes", field)
		}
		if !set(tf.Schema) {
			return nil, apierr.Bad(field+".schema", "%s.schema is required for type json_schema", field)
		}
		return schemaField(field+".schema", tf.Schema)
	}
	return nil, apierr.Bad(field+".type", "%s.type must be \"text\", \"json_object\" or \"json_schema\", got %q", field, tf.Type)
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// StrictTools names the tools of a raw tools list (Responses' flat
// function tools, Anthropic's custom tools) declared "strict": true: a
// call the model opens follows the tool's schema. Only an explicit true
// counts (the Responses API's default is true; here a schema is enforced
// on such calls only when the request says so, and always when
// tool_choice forces the call).
func StrictTools(raw json.RawMessage) map[string]bool {
	var list []struct {
		Name   string `json:"name"`
		Strict *bool  `json:"strict"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var out map[string]bool
	for _, t := range list {
		if t.Strict != nil && *t.Strict {
			if out == nil {
				out = map[string]bool{}
			}
			out[t.Name] = true
		}
	}
	return out
}

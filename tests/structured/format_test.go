package structured

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/grammar"
)

// TestFormatKnownBugs (known bugs, runs with TROUPE_KNOWN_BUGS=1): values
// troupe's format grammars accept that the reference validator
// (santhosh-tekuri/jsonschema, formats asserted) refuses; both came out
// of TestSchemaProperty (TROUPE_SCHEMA_ALL=1: leap seconds in 7 replies,
// e.g. Github_medium---o57437.json "8582-04-04T20:41:60.1Z",
// JsonSchemaStore---chart-lock.json "4931-11-11t20:21:60-04:20"; a
// 65-plus-octet local part in Github_easy---o12176.json). A date-time's second 60 is a leap second,
// which RFC 3339 allows only at 23:59:60 UTC (the JSON Schema test suite's
// optional format tests refuse "1998-12-31T23:58:60Z"); an email's address
// local part is at most 64 octets (RFC 5321 section 4.5.3.1).
func TestFormatKnownBugs(t *testing.T) {
	if os.Getenv(envKnownBugs) == "" {
		t.Skip("known bugs (format grammars wider than RFC 3339 / RFC 5321); set " + envKnownBugs + "=1 to run")
	}
	for _, tc := range []struct {
		format, value string
	}{
		{"date-time", "8882-11-30T23:22:60z"},
		{"date-time", "1998-12-31T23:58:60Z"},
		{"email", strings.Repeat("a", 65) + "@example.com"},
	} {
		schema := json.RawMessage(`{"type":"string","format":"` + tc.format + `"}`)
		text, _ := json.Marshal(tc.value)
		g, err := grammar.CompileSchema(schema)
		if err != nil {
			t.Fatal(err)
		}
		m := grammar.NewMatcher(g)
		accepted := m.AdvanceBytes(text) && m.CanEnd()
		v, err := compileValidator(schema)
		if err != nil {
			t.Fatal(err)
		}
		valid := check(v, string(text)) == nil
		if accepted != valid {
			t.Errorf("format %s, %.80s: troupe accepts %v, the validator %v", tc.format, text, accepted, valid)
		}
	}
}

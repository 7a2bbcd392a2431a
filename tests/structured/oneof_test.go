package structured

import (
	"encoding/json"
	"testing"

	"github.com/troupe-ai/troupe/grammar"
)

// TestOneOfSiblingPropertiesKnownBug (known bug, runs with
// TROUPE_KNOWN_BUGS=1): an object schema with properties beside a oneOf
// whose branches constrain the same property further compiles each
// branch with the outer property's schema instead of both: here "type"
// may be "b" in the branch whose "type" is the const "a", so
// {"type":"b","x":1} is accepted though it matches no branch (an
// invalidation error). Found by TestSchemaProperty on every fixture:
// JsonSchemaStore---livelyPropertiesSchema.json, seeds 3599001 and
// 3599002 (a "button" setting with the slider's properties).
func TestOneOfSiblingProperties(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"type":{"enum":["a","b"]},"value":{}},"oneOf":[` +
		`{"type":"object","properties":{"type":{"const":"a"},"value":{"type":"number"},"x":{"type":"number"}},"required":["x"],"additionalProperties":false},` +
		`{"type":"object","properties":{"type":{"const":"b"},"value":{"type":"string"}},"additionalProperties":false}]}`)
	g, err := grammar.CompileSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	v, err := compileValidator(schema)
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []string{`{"type":"a","x":1}`, `{"x":1}`, `{"type":"b"}`, `{"type":"b","x":1}`, `{"type":"b","value":1,"x":1}`, `{"type":"a","value":"s","x":1}`} {
		m := grammar.NewMatcher(g)
		accepted := m.AdvanceBytes([]byte(inst)) && m.CanEnd()
		if valid := check(v, inst) == nil; accepted != valid {
			t.Errorf("%s: troupe accepts %v, the validator %v", inst, accepted, valid)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestConstrain: the CLI compiles each schema (or says why not), accepts
// the texts the schema allows token by token and refuses the others, and
// reports one mask time per token checked (plus the final EOS check).
func TestConstrain(t *testing.T) {
	dir := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--arch", "mamba", "--byte-tokenizer", "--out", dir); err != nil {
		t.Fatal(err)
	}
	in := strings.Join([]string{
		`{"schema":{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"],"additionalProperties":false},"texts":["{\"n\":12}","{\"n\":0}","{\"n\":12","{\"m\":1}"]}`,
		`{"schema":{"if":{"type":"string"}},"texts":["1"]}`,
		`{"schema":{"enum":["a","b"]}}`,
		`{"texts":["x"]}`,
	}, "\n") + "\n"
	var out, errOut bytes.Buffer
	if err := cmdConstrain(context.Background(), []string{"--tokenizer", dir}, strings.NewReader(in), &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d output lines for 4 inputs:\n%s", len(lines), out.String())
	}
	var r constrainResponse
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Compiled || r.CompileUS <= 0 || len(r.Accepted) != 4 || !r.Accepted[0] || r.Accepted[1] || r.Accepted[2] || r.Accepted[3] {
		t.Fatalf("line 1: %s", lines[0])
	}
	// The byte tokenizer has one token per byte: "{\"n\":12}" is 8 masks
	// and the final EOS check; the refused texts stop at their first
	// refused token.
	if len(r.MaskUS) < 9 {
		t.Fatalf("line 1: %d mask times", len(r.MaskUS))
	}
	r = constrainResponse{}
	if err := json.Unmarshal([]byte(lines[1]), &r); err != nil || r.Compiled || !strings.Contains(r.Error, "if") {
		t.Fatalf("line 2 (an unsupported keyword): %s", lines[1])
	}
	if !strings.Contains(lines[2], `"compiled":true`) || !strings.Contains(lines[3], `"error"`) {
		t.Fatalf("lines 3 and 4: %s / %s", lines[2], lines[3])
	}
}

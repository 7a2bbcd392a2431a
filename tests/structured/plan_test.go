package structured

import (
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/grammar"
)

// TestPlanLeadingSpace: a plan that waits for the end of a reasoning block
// takes a little whitespace before its Spec ("\n\n" after </think>), but
// not without bound: a random-weight Qwen3 model, which favours
// whitespace tokens, used to write thousands of them before a forced tool
// call (and could run out of tokens before making it).
func TestPlanLeadingSpace(t *testing.T) {
	g, err := grammar.CompilePlan(&grammar.Plan{Spec: grammar.Spec{JSON: true, Object: true}, After: "</think>", Open: "<think>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{`{}`, true},
		{"\n\n{}", true},
		{strings.Repeat(" ", grammar.MaxLeadingSpace) + "{}", true},
		{strings.Repeat(" ", grammar.MaxLeadingSpace+1) + "{}", false},
		{strings.Repeat("\r\n", 100) + "{}", false},
	} {
		m := grammar.NewMatcher(g)
		if got := m.AdvanceBytes([]byte(tc.text)) && m.CanEnd(); got != tc.ok {
			t.Errorf("%q: accepted %v, want %v", tc.text, got, tc.ok)
		}
	}
}

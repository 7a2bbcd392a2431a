package templates_test

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// fixtureEncoder encodes with the family's real tokenizer from the shared
// fixtures (no special tokens added: the template writes them), so
// TestHistoryBoundaryTokens checks every token-level fact of the fixtures
// (h_tokens, f_tokens, lcp_tokens, h_tokens_prefix_of_f_tokens) through
// templates.HistoryBoundary.
func fixtureEncoder(t *testing.T, family string) templates.EncodeFunc {
	t.Helper()
	tok, err := tokenizer.Load(fixtures.Path(t, "tokenizers", family), tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return func(s string) []int32 { return tok.EncodeIDs(s, false) }
}

// TestHistoryBoundaryTokens checks the token-level history-boundary facts
// of the fixtures through the EncodeFunc seam. It skips until
// fixtureEncoder returns a real tokenizer.
func TestHistoryBoundaryTokens(t *testing.T) {
	set := loadFixtures(t)
	checked := 0
	encoders := map[string]templates.EncodeFunc{} // loading a tokenizer is slow: once per family
	for _, c := range set.cases {
		hb := c.Boundary
		if hb == nil || c.Tokenizer == "" {
			continue
		}
		if _, ok := hb.Get("h_tokens"); !ok {
			continue
		}
		encode, ok := encoders[c.Tokenizer]
		if !ok {
			encode = fixtureEncoder(t, c.Tokenizer)
			encoders[c.Tokenizer] = encode
		}
		if encode == nil {
			continue
		}
		// The encoder itself must reproduce the fixture's ids.
		if c.ExpectedIDs != nil && !slices.Equal(encode(c.Expected), c.ExpectedIDs) {
			t.Fatalf("%s: the %s encoder does not reproduce expected_ids", c.ID, c.Tokenizer)
		}
		tpl := set.compile(t, c.Template)
		followup, _ := hb.Get("followup_message")
		last := templates.LastAssistant(c.In.Messages)
		fin := c.In
		fin.Messages = append(append([]any{}, c.In.Messages[:last+1]...), followup)
		fin.AddGenerationPrompt = true
		f, err := tpl.RenderChat(fin)
		if err != nil {
			t.Fatalf("%s: %v", c.ID, err)
		}
		b, ok, err := tpl.HistoryBoundary(fin, f, nil, encode)
		if err != nil || !ok {
			t.Fatalf("%s: ok=%v err=%v", c.ID, ok, err)
		}
		want := func(k string) any { v, _ := hb.Get(k); return v }
		if int64(len(b.HistoryIDs)) != want("h_tokens").(int64) || int64(b.CommonTokens) != want("lcp_tokens").(int64) ||
			b.TokenPrefix != want("h_tokens_prefix_of_f_tokens").(bool) || int64(len(encode(f))) != want("f_tokens").(int64) {
			t.Errorf("%s: tokens h=%d lcp=%d prefix=%v, want h=%v lcp=%v prefix=%v", c.ID,
				len(b.HistoryIDs), b.CommonTokens, b.TokenPrefix, want("h_tokens"), want("lcp_tokens"), want("h_tokens_prefix_of_f_tokens"))
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no tokenizer wired into fixtureEncoder yet: token-level boundary facts not checked")
	}
	t.Logf("checked token-level boundary facts of %d cases", checked)
}

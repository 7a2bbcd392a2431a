package responses

import (
	"encoding/json"
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/internal/reqcheck"
	"github.com/troupe-ai/troupe/templates"
)

// FuzzResponses: any body for POST /v1/responses (and input_tokens) either
// fails with a 4xx naming the problem or becomes a well-formed
// chat.Request that prepares without a server error; never a panic.
// withPrior continues a stored conversation (what previous_response_id
// resolves to). Seeds are in testdata/fuzz/FuzzResponses.
func FuzzResponses(f *testing.F) {
	chk := reqcheck.New(f)
	f.Fuzz(func(t *testing.T, withPrior bool, input []byte) {
		check := func(body []byte) {
			var prior []any
			if withPrior {
				prior = []any{message("user", "What is 2+2?"), message("assistant", "4")}
			}
			var req request
			err := apierr.Decode(body, &req)
			var r *chat.Request
			var conv []any
			if err == nil {
				var items []any
				// No stored responses: every item_reference is unknown.
				items, _, err = inputItems(req.Input, func(string) (json.RawMessage, bool) { return nil, false })
				if err == nil {
					r, conv, err = translate(&req, prior, items)
				}
			}
			chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxOutputCap})
			if err != nil {
				return
			}
			// The stored conversation starts with the prior one and holds only
			// message dicts.
			if len(conv) < len(prior) {
				t.Fatalf("body %q: conversation of %d messages lost the %d prior ones", body, len(conv), len(prior))
			}
			for i, m := range conv {
				if _, ok := m.(*templates.Dict); !ok {
					t.Fatalf("body %q: conversation[%d] is %T", body, i, m)
				}
			}
		}
		check(input)
		check(reqcheck.Compose(input))
	})
}

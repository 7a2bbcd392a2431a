package anthropic

import (
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/internal/reqcheck"
)

// FuzzMessages: any body for POST /v1/messages (requireMax) or
// /v1/messages/count_tokens either fails with a 4xx naming the problem or
// becomes a well-formed chat.Request that prepares without a server error;
// never a panic. Seeds are in testdata/fuzz/FuzzMessages.
func FuzzMessages(f *testing.F) {
	chk := reqcheck.New(f)
	f.Fuzz(func(t *testing.T, requireMax bool, input []byte) {
		check := func(body []byte) {
			var req messagesRequest
			err := apierr.Decode(body, &req)
			var r *chat.Request
			if err == nil {
				r, err = toRequest(&req, requireMax)
			}
			chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxTokensCap})
			if err == nil && requireMax && req.MaxTokens == nil {
				t.Fatalf("body %q: accepted without max_tokens", body)
			}
		}
		check(input)
		check(reqcheck.Compose(input))
	})
}

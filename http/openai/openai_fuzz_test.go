package openai

import (
	"testing"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/internal/reqcheck"
)

// The translators' fuzz targets: any body either fails with a 4xx naming
// the problem or becomes a well-formed chat.Request that prepares without
// a server error; never a panic. Each input is tried as the body itself and
// as the choices of reqcheck.Compose (well-formed JSON built from the APIs'
// field names), which reaches the field checks mutated raw bytes seldom
// get to. Seeds are in testdata/fuzz/<FuzzName>.

// parseChatBody is what ChatCompletions does with a body before the model
// check (which needs a runtime): decode, then translate.
func parseChatBody(body []byte) (*chat.Request, error) {
	var req chatRequest
	if err := apierr.Decode(body, &req); err != nil {
		return nil, err
	}
	return chatFromRequest(&req)
}

func FuzzChatCompletions(f *testing.F) {
	chk := reqcheck.New(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		check := func(body []byte) {
			r, err := parseChatBody(body)
			chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxTokensCap, MaxStops: 4})
		}
		check(input)
		check(reqcheck.Compose(input))
	})
}

func FuzzCompletions(f *testing.F) {
	chk := reqcheck.New(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		check := func(body []byte) {
			var req completionRequest
			err := apierr.Decode(body, &req)
			var r *chat.Request
			if err == nil {
				r, err = completionFromRequest(&req)
			}
			chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxTokensCap, MaxStops: 4})
		}
		check(input)
		check(reqcheck.Compose(input))
	})
}

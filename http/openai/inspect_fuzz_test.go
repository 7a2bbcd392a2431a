package openai

import (
	"testing"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/internal/reqcheck"
)

// Inspection routes, chosen by route: 0 /tokenize, 1 /detokenize, 2
// /apply-template. Each body goes through the route's own decoding and
// validation, then through the tokenizer or the preparer as the handler
// does (without a runtime).
const (
	routeTokenize = iota
	routeDetokenize
	routeApplyTemplate
	routeCount
)

func FuzzInspect(f *testing.F) {
	chk := reqcheck.New(f)
	tok := chk.Assets().Tokenizer
	f.Fuzz(func(t *testing.T, route uint8, input []byte) {
		check := func(body []byte) {
			switch route % routeCount {
			case routeTokenize:
				var req tokenizeRequest
				if err := apierr.Decode(body, &req); err != nil {
					chk.Check(t, body, nil, err, reqcheck.Limits{})
					return
				}
				var text *string
				switch {
				case req.Content != nil:
					text = req.Content
				case req.Prompt != nil:
					text = req.Prompt
				case len(req.Messages) > 0:
					r, err := chatFromRequest(&chatRequest{Messages: req.Messages, Tools: req.Tools})
					chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxTokensCap, MaxStops: 4})
					return
				default:
					return // the handler answers 400
				}
				ids := tok.EncodeIDs(*text, req.AddSpecial == nil || *req.AddSpecial)
				for _, id := range ids {
					if _, ok := tok.IDToken(id); !ok {
						t.Fatalf("body %q: id %d has no piece", body, id)
					}
				}
			case routeDetokenize:
				var req struct {
					Tokens []int32 `json:"tokens"`
				}
				if err := apierr.Decode(body, &req); err != nil {
					chk.Check(t, body, nil, err, reqcheck.Limits{})
					return
				}
				for _, id := range req.Tokens {
					if id < 0 || int(id) >= tok.VocabSize() {
						return // the handler answers 400 naming tokens[i]
					}
				}
				if s := tok.Decode(req.Tokens, false); !utf8.ValidString(s) {
					t.Fatalf("body %q: invalid UTF-8 %q", body, s)
				}
			case routeApplyTemplate:
				var req chatRequest
				err := apierr.Decode(body, &req)
				var r *chat.Request
				if err == nil {
					r, err = chatFromRequest(&req)
				}
				chk.Check(t, body, r, err, reqcheck.Limits{MaxTokens: maxTokensCap, MaxStops: 4})
			}
		}
		check(input)
		check(reqcheck.Compose(input))
	})
}

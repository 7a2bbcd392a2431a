package openai

import (
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/turn"
)

// Prompt inspection: the same preparer (render + encode, capability gate
// included) the generating routes use, answering with what they would
// prefill instead of generating.

type tokenizeRequest struct {
	Content    *string         `json:"content"` // llama.cpp
	Prompt     *string         `json:"prompt"`  // vLLM
	Messages   json.RawMessage `json:"messages"`
	Tools      json.RawMessage `json:"tools"`
	AddSpecial *bool           `json:"add_special"`
	WithPieces bool            `json:"with_pieces"`
}

// Tokenize serves POST /tokenize: text (content or prompt) or chat messages
// to token ids, optionally with their pieces.
func (a *API) Tokenize(c *fiber.Ctx) error {
	var req tokenizeRequest
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return a.fail(c, err)
	}
	var text *string
	switch {
	case req.Content != nil:
		text = req.Content
	case req.Prompt != nil:
		text = req.Prompt
	case len(req.Messages) > 0:
		r, err := chatFromRequest(&chatRequest{Messages: req.Messages, Tools: req.Tools})
		if err != nil {
			return a.fail(c, err)
		}
		p, err := turn.Prepare(a.rt, r)
		if err != nil {
			return a.fail(c, err)
		}
		return c.JSON(fiber.Map{"tokens": a.tokens(p, p.Prepared.IDs, req.WithPieces)})
	default:
		return a.fail(c, bad("content", "give content (or prompt) text, or messages"))
	}
	// Text: the tokenizer alone, special tokens added unless add_special is false.
	p, err := turn.Prepare(a.rt, &chat.Request{PromptIDs: []int32{0}})
	if err != nil {
		return a.fail(c, err)
	}
	addSpecial := req.AddSpecial == nil || *req.AddSpecial
	ids := p.Assets.Tokenizer.EncodeIDs(*text, addSpecial)
	return c.JSON(fiber.Map{"tokens": a.tokens(p, ids, req.WithPieces)})
}

func (a *API) tokens(p *actors.Prepared, ids []int32, pieces bool) any {
	if !pieces {
		if ids == nil {
			return []int32{}
		}
		return ids
	}
	out := make([]fiber.Map, len(ids))
	for i, id := range ids {
		piece, _ := p.Assets.Tokenizer.IDToken(id)
		out[i] = fiber.Map{"id": id, "piece": piece}
	}
	return out
}

// Detokenize serves POST /detokenize: token ids to text.
func (a *API) Detokenize(c *fiber.Ctx) error {
	var req struct {
		Tokens *[]int32 `json:"tokens"`
	}
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return a.fail(c, err)
	}
	if req.Tokens == nil {
		return a.fail(c, bad("tokens", "tokens is required: an array of token ids"))
	}
	tokens := *req.Tokens
	p, err := turn.Prepare(a.rt, &chat.Request{PromptIDs: []int32{0}})
	if err != nil {
		return a.fail(c, err)
	}
	vocab := p.Assets.Tokenizer.VocabSize()
	for i, id := range tokens {
		if id < 0 || int(id) >= vocab {
			return a.fail(c, bad(fmt.Sprintf("tokens[%d]", i), "token %d is outside the vocabulary of %d", id, vocab))
		}
	}
	return c.JSON(fiber.Map{"content": p.Assets.Tokenizer.Decode(tokens, false)})
}

// ApplyTemplate serves POST /apply-template: messages to the prompt text.
func (a *API) ApplyTemplate(c *fiber.Ctx) error {
	var req chatRequest
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return a.fail(c, err)
	}
	r, err := chatFromRequest(&req)
	if err != nil {
		return a.fail(c, err)
	}
	p, err := turn.Prepare(a.rt, r)
	if err != nil {
		return a.fail(c, err)
	}
	return c.JSON(fiber.Map{"prompt": p.Prepared.Prompt})
}

// ChatInputTokens serves POST /v1/chat/completions/input_tokens: exactly
// what the generating route would prefill for the same body, whether the
// history boundary was rendered (and why not), and how many tokens the
// prompt cache would reuse right now.
func (a *API) ChatInputTokens(c *fiber.Ctx) error {
	_, r, err := a.parseChat(c.Body())
	if err != nil {
		return a.fail(c, err)
	}
	in, err := turn.Inspect(a.rt, r)
	if err != nil {
		return a.fail(c, err)
	}
	body := in.Body()
	body["object"], body["model"] = "input_tokens", a.rt.Name()
	return c.JSON(body)
}

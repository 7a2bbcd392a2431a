package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/turn"
	"github.com/troupe-ai/troupe/tokenizer"
)

// Prompt inspection: the same preparer (render + encode, capability gate
// included) the generating routes use, answering with what they would
// prefill instead of generating. Each request holds one of the runtime's
// inspection slots while it runs (429 past them), its input is bounded by
// the runtime's inspection input limit and its answer by the output limit
// (413 past either).

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
	release, err := turn.Admit(a.rt)
	if err != nil {
		return a.fail(c, err)
	}
	defer release()
	var req tokenizeRequest
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return a.fail(c, err)
	}
	var text *string
	field := "content"
	switch {
	case req.Content != nil:
		text = req.Content
	case req.Prompt != nil:
		text, field = req.Prompt, "prompt"
	case len(req.Messages) > 0:
		r, err := chatFromRequest(&chatRequest{Messages: req.Messages, Tools: req.Tools})
		if err != nil {
			return a.fail(c, err)
		}
		p, err := turn.PrepareAdmitted(a.rt, r)
		if err != nil {
			return a.fail(c, err)
		}
		return a.writeTokens(c, p.Assets.Tokenizer, p.Prepared.IDs, req.WithPieces)
	default:
		return a.fail(c, bad("content", "give content (or prompt) text, or messages"))
	}
	// Text: the tokenizer alone, special tokens added unless add_special is false.
	if limit := a.rt.InspectLimits().MaxInput; len(*text) > limit {
		return a.failOn(c, &actors.TooLarge{What: field, Size: len(*text), Limit: limit, Unit: "bytes"}, field)
	}
	p, err := turn.PrepareAdmitted(a.rt, &chat.Request{PromptIDs: []int32{0}})
	if err != nil {
		return a.fail(c, err)
	}
	addSpecial := req.AddSpecial == nil || *req.AddSpecial
	ids := p.Assets.Tokenizer.EncodeIDs(*text, addSpecial)
	return a.writeTokens(c, p.Assets.Tokenizer, ids, req.WithPieces)
}

// writeTokens answers {"tokens": [...]}: ids, or {"id", "piece"} objects
// with pieces. It writes the JSON straight into one buffer (no value per
// token) and stops with a 413 once the answer passes the output limit.
func (a *API) writeTokens(c *fiber.Ctx, tok *tokenizer.Tokenizer, ids []int32, pieces bool) error {
	limit := a.rt.InspectLimits().MaxOutput
	per := 8
	if pieces {
		per = 24
	}
	var buf bytes.Buffer
	buf.Grow(min(limit, 16+per*len(ids)) + 64)
	buf.WriteString(`{"tokens":[`)
	var num []byte
	for i, id := range ids {
		if buf.Len() > limit {
			param, hint := "content", "send less text"
			if pieces {
				param, hint = "with_pieces", "send less text or leave out with_pieces"
			}
			return a.fail(c, &apierr.Field{Status: fiber.StatusRequestEntityTooLarge, Param: param,
				Msg: fmt.Sprintf("the answer (%d tokens) would pass the inspection output limit of %d bytes; %s", len(ids), limit, hint)})
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		num = strconv.AppendInt(num[:0], int64(id), 10)
		if !pieces {
			buf.Write(num)
			continue
		}
		buf.WriteString(`{"id":`)
		buf.Write(num)
		buf.WriteString(`,"piece":`)
		piece, _ := tok.IDToken(id)
		writeJSONString(&buf, piece)
		buf.WriteByte('}')
	}
	buf.WriteString("]}")
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(buf.Bytes())
}

// writeJSONString writes s as a JSON string: control characters, quotes
// and backslashes escaped, invalid UTF-8 replaced by U+FFFD (as
// encoding/json does), U+2028 and U+2029 escaped for JavaScript readers.
func writeJSONString(buf *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	buf.WriteByte('"')
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				buf.WriteByte('\\')
				buf.WriteByte(b)
			case b == '\n':
				buf.WriteString(`\n`)
			case b == '\r':
				buf.WriteString(`\r`)
			case b == '\t':
				buf.WriteString(`\t`)
			case b < 0x20:
				buf.WriteString(`\u00`)
				buf.WriteByte(hex[b>>4])
				buf.WriteByte(hex[b&0xf])
			default:
				buf.WriteByte(b)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			buf.WriteString(`\u202`)
			buf.WriteByte(hex[r&0xf])
		default:
			buf.WriteString(s[i : i+size])
		}
		i += size
	}
	buf.WriteByte('"')
}

// Detokenize serves POST /detokenize: token ids to text.
func (a *API) Detokenize(c *fiber.Ctx) error {
	release, err := turn.Admit(a.rt)
	if err != nil {
		return a.fail(c, err)
	}
	defer release()
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
	limits := a.rt.InspectLimits()
	if len(tokens) > limits.MaxInput {
		return a.failOn(c, &actors.TooLarge{What: "tokens", Size: len(tokens), Limit: limits.MaxInput, Unit: "tokens"}, "tokens")
	}
	p, err := turn.PrepareAdmitted(a.rt, &chat.Request{PromptIDs: []int32{0}})
	if err != nil {
		return a.fail(c, err)
	}
	vocab := p.Assets.Tokenizer.VocabSize()
	for i, id := range tokens {
		if id < 0 || int(id) >= vocab {
			return a.fail(c, bad(fmt.Sprintf("tokens[%d]", i), "token %d is outside the vocabulary of %d", id, vocab))
		}
	}
	text := p.Assets.Tokenizer.Decode(tokens, false)
	if len(text) > limits.MaxOutput {
		return a.fail(c, tooLargeAnswer("tokens", len(text), limits.MaxOutput))
	}
	return c.JSON(fiber.Map{"content": text})
}

func tooLargeAnswer(param string, size, limit int) error {
	return &apierr.Field{Status: fiber.StatusRequestEntityTooLarge, Param: param,
		Msg: fmt.Sprintf("the answer (%d bytes) would pass the inspection output limit of %d bytes", size, limit)}
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
	if limit := a.rt.InspectLimits().MaxOutput; len(p.Prepared.Prompt) > limit {
		return a.fail(c, tooLargeAnswer("messages", len(p.Prepared.Prompt), limit))
	}
	return c.JSON(fiber.Map{"prompt": p.Prepared.Prompt, "preserve_thinking": p.Prepared.PreserveThinking})
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
	turn.Scope(c, r)
	in, err := turn.Inspect(a.rt, r)
	if err != nil {
		return a.fail(c, err)
	}
	if limit := a.rt.InspectLimits().MaxOutput; len(in.Prepared.Prepared.Prompt) > limit {
		return a.fail(c, tooLargeAnswer("messages", len(in.Prepared.Prepared.Prompt), limit))
	}
	body := in.Body()
	body["object"], body["model"] = "input_tokens", a.rt.Name()
	return c.JSON(body)
}

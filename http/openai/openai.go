// Package openai translates the OpenAI chat-completions and completions APIs
// into troupe's internal chat request and streams the answers back, in
// OpenAI's shapes, as JSON or server-sent events.
//
// n > 1 asks for n choices, as OpenAI and vLLM serve them: choice i samples
// with seed+i when a seed is given (vLLM's derivation), the prompt is
// prefilled once and shared through the prompt cache, a stream carries each
// choice's chunks under its index with its own finish chunk, and usage
// counts the prompt once and the tokens of every choice. Each choice takes
// a place under the server's queue bound, and n may not exceed its
// running-sequence cap. echo (completions) puts the prompt text before each
// choice's text, first in a stream; echo with logprobs is refused, as the
// prompt tokens' logprobs (vLLM's answer) are not computed.
package openai

import (
	"bufio"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/turn"
	"github.com/troupe-ai/troupe/output"
)

// Config tunes the handlers.
type Config struct {
	// KeepAlive is the period of SSE keep-alive comments while no token
	// arrives (long prefills); a failed write ends the generation.
	KeepAlive time.Duration
}

// API serves the OpenAI routes of one runtime.
type API struct {
	rt  *troupe.Runtime
	cfg Config
	ids atomic.Uint64
}

// New returns the handlers.
func New(rt *troupe.Runtime, cfg Config) *API { return &API{rt: rt, cfg: cfg} }

// For returns the handlers of another runtime (a model served beside a's)
// with a's configuration.
func (a *API) For(rt *troupe.Runtime) *API { return New(rt, a.cfg) }

func (a *API) fail(c *fiber.Ctx, err error) error {
	return a.failOn(c, err, "messages")
}

// failOn answers err, naming promptParam when the prompt is at fault.
func (a *API) failOn(c *fiber.Ctx, err error, promptParam string) error {
	return apierr.ReplyOpenAI(c, a.rt.Logger(), err, apierr.Params{Prompt: promptParam, MaxTokens: "max_tokens"})
}

// checkModel rejects a request naming another model (404).
func (a *API) checkModel(m *string) error {
	if m != nil && *m != "" && *m != a.rt.Name() {
		return apierr.NotFound("model", "the model %q does not exist; this server serves %q", *m, a.rt.Name())
	}
	return nil
}

// parseChat decodes a chat-completions body, checks the model it names and
// translates it into the internal request.
func (a *API) parseChat(body []byte) (*chatRequest, *chat.Request, error) {
	var req chatRequest
	if err := apierr.Decode(body, &req); err != nil {
		return nil, nil, err
	}
	if err := a.checkModel(req.Model); err != nil {
		return nil, nil, err
	}
	r, err := chatFromRequest(&req)
	return &req, r, err
}

// ChatCompletions serves POST /v1/chat/completions.
func (a *API) ChatCompletions(c *fiber.Ctx) error {
	req, r, err := a.parseChat(c.Body())
	if err != nil {
		return a.fail(c, err)
	}
	return a.run(c, r, answer{common: &req.common, isChat: true})
}

// Completions serves POST /v1/completions.
func (a *API) Completions(c *fiber.Ctx) error {
	var req completionRequest
	if err := apierr.Decode(c.Body(), &req); err != nil {
		return a.fail(c, err)
	}
	if err := a.checkModel(req.Model); err != nil {
		return a.fail(c, err)
	}
	r, err := completionFromRequest(&req)
	if err != nil {
		return a.fail(c, err)
	}
	return a.run(c, r, answer{common: &req.common, echo: req.Echo})
}

// answer is how a request wants its answer shaped.
type answer struct {
	*common
	isChat bool
	echo   bool // completions: the prompt text comes before each choice's text
}

// choices is the request's n, checked against the server's running-sequence
// cap (the choices run at once; the translator bounded n by MaxChoices).
func (a *API) choices(n *int) (int, error) {
	if n == nil {
		return 1, nil
	}
	if limit := a.rt.Parallel(); *n > limit {
		return 0, bad("n", "n must be at most %d on this server (its running-sequence cap, --parallel), got %d", limit, *n)
	}
	return *n, nil
}

func (a *API) run(c *fiber.Ctx, r *chat.Request, ans answer) error {
	isChat := ans.isChat
	failOn := func(err error) error {
		if !isChat {
			return a.failOn(c, err, "prompt")
		}
		return a.fail(c, err)
	}
	n, err := a.choices(ans.N)
	if err != nil {
		return a.fail(c, err)
	}
	if err := turn.Claim(c, n-1); err != nil {
		return a.fail(c, err)
	}
	turn.Scope(c, r)
	g, err := turn.StartN(a.rt, r, n, turn.Options{Reasoning: isChat, Arrival: turn.Arrival(c), Context: turn.Context(c)})
	if err != nil {
		return failOn(err)
	}
	id := "chatcmpl-" + strconv.FormatUint(a.ids.Add(1), 36) + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if !isChat {
		id = "cmpl-" + id[len("chatcmpl-"):]
	}
	created := time.Now().Unix()
	echo := ""
	if ans.echo {
		echo = promptText(g.Turns[0])
	}
	logprobs := make([][]fiber.Map, n) // per choice; each only touched by its own choice's calls
	lp := func(i int, tok *actors.TokenEvent) fiber.Map {
		if tok == nil || !r.Logprobs {
			return nil
		}
		e := g.Turns[i].Logprob(tok)
		logprobs[i] = append(logprobs[i], e)
		return e
	}
	if !ans.Stream {
		defer g.Close()
		g.Run(func(i int, _ output.Delta, tok *actors.TokenEvent) bool { lp(i, tok); return true }, nil, 0, nil)
		if msg, t := g.Err(); msg != "" {
			return apierr.OpenAI(c, t.ErrStatus(), msg, "")
		}
		g.Turns[0].WarmUp()
		return c.JSON(a.final(id, created, g, logprobs, isChat, echo))
	}
	includeUsage := ans.StreamOptions != nil && ans.StreamOptions.IncludeUsage
	return turn.SSEGroup(c, g, func(w *bufio.Writer) {
		write := func(v any) bool { return turn.WriteEvent(w, "", v) == nil }
		text := func(i int, s string, finish any) fiber.Map {
			return fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(),
				"choices": []fiber.Map{{"index": i, "text": s, "logprobs": nil, "finish_reason": finish}}}
		}
		for i := range n {
			// Each choice opens with its role (chat) or the echoed prompt.
			if isChat && !write(a.chunk(id, created, i, fiber.Map{"role": "assistant", "content": ""}, nil, nil)) {
				return
			}
			if ans.echo && !write(text(i, echo, nil)) {
				return
			}
		}
		// Tool calls stream as they are generated, one chunk per piece.
		writeTools := func(i int, tds []output.ToolDelta) bool {
			for _, td := range tds {
				for _, tc := range toolCallChunks(td) {
					if !write(a.chunk(id, created, i, fiber.Map{"tool_calls": []fiber.Map{tc}}, nil, nil)) {
						return false
					}
				}
			}
			return true
		}
		emit := func(i int, d output.Delta, tok *actors.TokenEvent) bool {
			entry := lp(i, tok)
			if d.Content == "" && d.Reasoning == "" {
				return writeTools(i, d.Tools)
			}
			if !isChat {
				return write(text(i, d.Content, nil))
			}
			delta := fiber.Map{}
			if d.Content != "" {
				delta["content"] = d.Content
			}
			if d.Reasoning != "" {
				delta["reasoning_content"] = d.Reasoning
			}
			var lps any
			if entry != nil {
				lps = fiber.Map{"content": []fiber.Map{entry}}
			}
			return write(a.chunk(id, created, i, delta, nil, lps)) && writeTools(i, d.Tools)
		}
		// Each choice ends with its own finish reason as soon as it is done.
		done := func(i int) bool {
			t := g.Turns[i]
			if t.Err != "" {
				return true // the stream ends with the error instead
			}
			if !isChat {
				return write(text(i, "", t.Finish))
			}
			last := a.chunk(id, created, i, fiber.Map{}, t.Finish, nil)
			if includeUsage {
				last["usage"] = nil
			}
			return write(last)
		}
		ping := func() bool {
			// A comment line alone: with a blank line after it, openai-go
			// (v1) dispatches an empty event and fails the stream.
			_, err := w.WriteString(": keep-alive\n")
			return err == nil && w.Flush() == nil
		}
		if g.Run(emit, done, a.cfg.KeepAlive, ping) {
			a.finishStream(w, id, created, g, isChat, includeUsage)
			g.Turns[0].WarmUp()
		}
	})
}

// promptText is what echo puts before a completion: the prompt as sent,
// or the text of a token-id prompt (special tokens left out, as the output
// is decoded).
func promptText(t *turn.Turn) string {
	if t.Request.PromptIDs == nil {
		return t.Request.Prompt
	}
	return t.Stream.Prepared.Assets.Tokenizer.Decode(t.Request.PromptIDs, true)
}

// usage counts the prompt once and the tokens of every choice, as OpenAI
// does for n > 1; cached tokens are the first choice's (what was reused
// from before this request).
func (a *API) usage(g *turn.Group) fiber.Map {
	t := g.Turns[0]
	gen := g.Tokens()
	return fiber.Map{"prompt_tokens": t.PromptTokens, "completion_tokens": gen,
		"total_tokens": t.PromptTokens + gen, "prompt_tokens_details": fiber.Map{"cached_tokens": t.CachedTokens}}
}

// callID is a tool call's id in OpenAI's shape: call_ and 24 random
// base62 characters, the same in the stream and the final object.
func callID(id string) string { return "call_" + id }

func toolCalls(calls []output.ToolCall) []fiber.Map {
	out := make([]fiber.Map, len(calls))
	for i, c := range calls {
		out[i] = fiber.Map{"id": callID(c.ID), "type": "function", "index": i,
			"function": fiber.Map{"name": c.Name, "arguments": c.Arguments}}
	}
	return out
}

// toolCallChunks are the delta.tool_calls entries of one tool-call piece,
// as OpenAI streams them: a call's first entry has its id, type and name
// with empty arguments, the next ones pieces of the arguments.
func toolCallChunks(td output.ToolDelta) []fiber.Map {
	var out []fiber.Map
	if td.ID != "" {
		out = append(out, fiber.Map{"index": td.Index, "id": callID(td.ID), "type": "function",
			"function": fiber.Map{"name": td.Name, "arguments": ""}})
	}
	if td.Arguments != "" {
		out = append(out, fiber.Map{"index": td.Index, "function": fiber.Map{"arguments": td.Arguments}})
	}
	return out
}

func (a *API) final(id string, created int64, g *turn.Group, logprobs [][]fiber.Map, isChat bool, echo string) fiber.Map {
	choices := make([]fiber.Map, len(g.Turns))
	for i, t := range g.Turns {
		var lp any
		if !isChat {
			if t.Request.Logprobs {
				lp = completionLogprobs(logprobs[i])
			}
			choices[i] = fiber.Map{"index": i, "text": echo + t.Content.String(), "logprobs": lp, "finish_reason": t.Finish}
			continue
		}
		msg := fiber.Map{"role": "assistant", "content": t.Content.String()}
		if t.Reasoning.Len() > 0 {
			msg["reasoning_content"] = t.Reasoning.String()
		}
		if t.Calls != nil {
			msg["tool_calls"] = toolCalls(t.Calls)
			if t.Content.Len() == 0 {
				msg["content"] = nil
			}
		}
		if t.Request.Logprobs {
			lp = fiber.Map{"content": logprobs[i]}
		}
		choices[i] = fiber.Map{"index": i, "message": msg, "logprobs": lp, "finish_reason": t.Finish}
	}
	object := "chat.completion"
	if !isChat {
		object = "text_completion"
	}
	return fiber.Map{"id": id, "object": object, "created": created, "model": a.rt.Name(), "choices": choices, "usage": a.usage(g)}
}

// completionLogprobs is the legacy completions logprobs shape.
func completionLogprobs(entries []fiber.Map) fiber.Map {
	tokens, lps, tops := []any{}, []any{}, []any{}
	for _, e := range entries {
		tokens = append(tokens, e["token"])
		lps = append(lps, e["logprob"])
		top := fiber.Map{}
		for _, t := range e["top_logprobs"].([]fiber.Map) {
			top[t["token"].(string)] = t["logprob"]
		}
		tops = append(tops, top)
	}
	return fiber.Map{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops}
}

func (a *API) chunk(id string, created int64, index int, delta fiber.Map, finish any, logprobs any) fiber.Map {
	return fiber.Map{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.rt.Name(),
		"choices": []fiber.Map{{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}}}
}

// finishStream ends a stream whose choices have sent their finish chunks:
// with the error that failed it, or the usage once (when asked for).
func (a *API) finishStream(w *bufio.Writer, id string, created int64, g *turn.Group, isChat, includeUsage bool) {
	if msg, t := g.Err(); msg != "" {
		typ := "invalid_request_error"
		if t.ErrStatus() >= 500 {
			typ = "server_error" // the server's failure (shutting down, model not loaded)
		}
		turn.WriteEvent(w, "", fiber.Map{"error": fiber.Map{"message": msg, "type": typ, "param": nil, "code": nil}})
	} else if includeUsage {
		object := "chat.completion.chunk"
		if !isChat {
			object = "text_completion"
		}
		turn.WriteEvent(w, "", fiber.Map{"id": id, "object": object, "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{}, "usage": a.usage(g)})
	}
	w.WriteString("data: [DONE]\n\n")
	w.Flush()
}

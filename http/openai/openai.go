// Package openai translates the OpenAI chat-completions and completions APIs
// into troupe's internal chat request and streams the answers back, in
// OpenAI's shapes, as JSON or server-sent events.
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
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return a.run(c, r, req.Stream, includeUsage, true)
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
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return a.run(c, r, req.Stream, includeUsage, false)
}

func (a *API) run(c *fiber.Ctx, r *chat.Request, stream, includeUsage, isChat bool) error {
	turn.Scope(c, r)
	t, err := turn.Start(a.rt, r, turn.Options{Reasoning: isChat, Arrival: turn.Arrival(c), Context: turn.Context(c)})
	if err != nil {
		if !isChat {
			return a.failOn(c, err, "prompt")
		}
		return a.fail(c, err)
	}
	id := "chatcmpl-" + strconv.FormatUint(a.ids.Add(1), 36) + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if !isChat {
		id = "cmpl-" + id[len("chatcmpl-"):]
	}
	created := time.Now().Unix()
	var logprobs []fiber.Map
	lp := func(tok *actors.TokenEvent) fiber.Map {
		if tok == nil || !r.Logprobs {
			return nil
		}
		e := logprobEntry(t.Stream, tok)
		logprobs = append(logprobs, e)
		return e
	}
	if !stream {
		defer t.Close()
		t.Run(func(_ output.Delta, tok *actors.TokenEvent) bool { lp(tok); return true }, 0, nil)
		if t.Err != "" {
			return apierr.OpenAI(c, t.ErrStatus(), t.Err, "")
		}
		t.WarmUp()
		return c.JSON(a.final(id, created, t, logprobs, isChat))
	}
	return turn.SSE(c, t, func(w *bufio.Writer) {
		write := func(v any) bool { return turn.WriteEvent(w, "", v) == nil }
		if isChat && !write(a.chunk(id, created, fiber.Map{"role": "assistant", "content": ""}, nil, nil)) {
			return
		}
		// Tool calls stream as they are generated, one chunk per piece.
		writeTools := func(tds []output.ToolDelta) bool {
			for _, td := range tds {
				for _, c := range toolCallChunks(td) {
					if !write(a.chunk(id, created, fiber.Map{"tool_calls": []fiber.Map{c}}, nil, nil)) {
						return false
					}
				}
			}
			return true
		}
		emit := func(d output.Delta, tok *actors.TokenEvent) bool {
			entry := lp(tok)
			if d.Content == "" && d.Reasoning == "" {
				return writeTools(d.Tools)
			}
			if !isChat {
				choice := fiber.Map{"index": 0, "text": d.Content, "logprobs": nil, "finish_reason": nil}
				return write(fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(), "choices": []fiber.Map{choice}})
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
			return write(a.chunk(id, created, delta, nil, lps)) && writeTools(d.Tools)
		}
		ping := func() bool {
			_, err := w.WriteString(": keep-alive\n\n")
			return err == nil && w.Flush() == nil
		}
		if t.Run(emit, a.cfg.KeepAlive, ping) {
			a.finishStream(w, id, created, t, isChat, includeUsage)
			t.WarmUp()
		}
	})
}

func logprobEntry(s *troupe.Stream, ev *actors.TokenEvent) fiber.Map {
	tok := s.Prepared.Assets.Tokenizer
	piece := func(id int32) (string, []int) {
		t := tok.Decode([]int32{id}, false)
		b := make([]int, len(t))
		for i := range t {
			b[i] = int(t[i])
		}
		return t, b
	}
	text, bytes := piece(ev.Token)
	top := []fiber.Map{}
	for _, t := range ev.TopLogprobs {
		tt, tb := piece(t.Token)
		top = append(top, fiber.Map{"token": tt, "logprob": t.Logprob, "bytes": tb})
	}
	return fiber.Map{"token": text, "logprob": ev.Logprob, "bytes": bytes, "top_logprobs": top}
}

func (a *API) usage(t *turn.Turn) fiber.Map {
	return fiber.Map{"prompt_tokens": t.PromptTokens, "completion_tokens": t.Tokens,
		"total_tokens": t.PromptTokens + t.Tokens, "prompt_tokens_details": fiber.Map{"cached_tokens": t.CachedTokens}}
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

func (a *API) final(id string, created int64, t *turn.Turn, logprobs []fiber.Map, isChat bool) fiber.Map {
	res, r := t, t.Request
	if !isChat {
		var lp any
		if r.Logprobs {
			lp = completionLogprobs(logprobs)
		}
		return fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{{"index": 0, "text": res.Content.String(), "logprobs": lp, "finish_reason": res.Finish}},
			"usage":   a.usage(res)}
	}
	msg := fiber.Map{"role": "assistant", "content": res.Content.String()}
	if res.Reasoning.Len() > 0 {
		msg["reasoning_content"] = res.Reasoning.String()
	}
	if res.Calls != nil {
		msg["tool_calls"] = toolCalls(res.Calls)
		if res.Content.Len() == 0 {
			msg["content"] = nil
		}
	}
	var lp any
	if r.Logprobs {
		lp = fiber.Map{"content": logprobs}
	}
	return fiber.Map{"id": id, "object": "chat.completion", "created": created, "model": a.rt.Name(),
		"choices": []fiber.Map{{"index": 0, "message": msg, "logprobs": lp, "finish_reason": res.Finish}},
		"usage":   a.usage(res)}
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

func (a *API) chunk(id string, created int64, delta fiber.Map, finish any, logprobs any) fiber.Map {
	return fiber.Map{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.rt.Name(),
		"choices": []fiber.Map{{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}}}
}

func (a *API) finishStream(w *bufio.Writer, id string, created int64, t *turn.Turn, isChat, includeUsage bool) {
	if t.Err != "" {
		typ := "invalid_request_error"
		if t.ErrStatus() >= 500 {
			typ = "server_error" // the server's failure (shutting down, model not loaded)
		}
		turn.WriteEvent(w, "", fiber.Map{"error": fiber.Map{"message": t.Err, "type": typ, "param": nil, "code": nil}})
	} else if isChat {
		last := a.chunk(id, created, fiber.Map{}, t.Finish, nil)
		if includeUsage {
			last["usage"] = nil
		}
		turn.WriteEvent(w, "", last)
	} else {
		turn.WriteEvent(w, "", fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{{"index": 0, "text": "", "logprobs": nil, "finish_reason": t.Finish}}})
	}
	if includeUsage && t.Err == "" {
		object := "chat.completion.chunk"
		if !isChat {
			object = "text_completion"
		}
		turn.WriteEvent(w, "", fiber.Map{"id": id, "object": object, "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{}, "usage": a.usage(t)})
	}
	w.WriteString("data: [DONE]\n\n")
	w.Flush()
}

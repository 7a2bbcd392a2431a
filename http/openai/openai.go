// Package openai translates the OpenAI chat-completions and completions APIs
// into troupe's internal chat request and streams the answers back, in
// OpenAI's shapes, as JSON or server-sent events.
package openai

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/http/apierr"
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

const (
	localRelease   = "troupe.release"
	localStreaming = "troupe.streaming"
)

// SetRelease registers the function that frees the request's queue slot.
func SetRelease(c *fiber.Ctx, f func()) { c.Locals(localRelease, f) }

// ReleaseIfNotStreaming frees the slot of a request that answered without a
// stream (a stream frees it when it ends).
func ReleaseIfNotStreaming(c *fiber.Ctx) {
	if s, _ := c.Locals(localStreaming).(bool); !s {
		release(c)()
	}
}

func release(c *fiber.Ctx) func() {
	f, _ := c.Locals(localRelease).(func())
	if f == nil {
		return func() {}
	}
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			f()
		}
	}
}

const localArrival = "troupe.arrival"

// MarkArrival records when a request arrived (for time to first token).
func MarkArrival(c *fiber.Ctx) { c.Locals(localArrival, time.Now()) }

func arrival(c *fiber.Ctx) time.Time {
	if t, ok := c.Locals(localArrival).(time.Time); ok {
		return t
	}
	return time.Now()
}

func (a *API) fail(c *fiber.Ctx, err error) error {
	var fe *fieldError
	var br *chat.BadRequest
	switch {
	case errors.As(err, &fe):
		status := fe.status
		if status == 0 {
			status = fiber.StatusBadRequest
		}
		return apierr.OpenAI(c, status, fe.msg, fe.param)
	case errors.As(err, &br), errors.Is(err, chat.ErrNoTemplate):
		return apierr.OpenAI(c, fiber.StatusBadRequest, err.Error(), "messages")
	}
	return apierr.OpenAI(c, fiber.StatusInternalServerError, err.Error(), "")
}

// checkModel rejects a request naming another model (404).
func (a *API) checkModel(m *string) error {
	if m != nil && *m != "" && *m != a.rt.Name() {
		return &fieldError{status: fiber.StatusNotFound, param: "model",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", *m, a.rt.Name())}
	}
	return nil
}

// parseChat decodes a chat-completions body, checks the model it names and
// translates it into the internal request.
func (a *API) parseChat(body []byte) (*chatRequest, *chat.Request, error) {
	var req chatRequest
	if err := decode(body, &req); err != nil {
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
	if err := decode(c.Body(), &req); err != nil {
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

// result accumulates one generation.
type result struct {
	content, reasoning strings.Builder
	tokens             int
	promptTokens       int
	cachedTokens       int
	finish             string
	logprobs           []fiber.Map
	calls              []output.ToolCall
	err                string
	start, last        time.Time // request arrival, previous token
}

func (a *API) run(c *fiber.Ctx, r *chat.Request, stream, includeUsage, isChat bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := a.rt.Generate(ctx, r)
	if err != nil {
		cancel()
		return a.fail(c, err)
	}
	prep := s.Prepared.Prepared
	proc := output.New(s.Prepared.Assets.Tokenizer, output.Options{
		Stop: r.Stop, Prompt: prep.Prompt, Reasoning: isChat && prep.Reasoning, Tools: r.Tools != nil,
	})
	id := "chatcmpl-" + strconv.FormatUint(a.ids.Add(1), 36) + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if !isChat {
		id = "cmpl-" + id[len("chatcmpl-"):]
	}
	created := time.Now().Unix()
	res := &result{promptTokens: len(prep.IDs), start: arrival(c)}
	if !stream {
		defer cancel()
		for ev := range s.Events {
			a.absorb(s, proc, res, ev, r, nil)
		}
		if res.err != "" {
			return apierr.OpenAI(c, fiber.StatusBadRequest, res.err, "")
		}
		a.warmUp(s, r, res)
		return c.JSON(a.final(id, created, res, isChat, r))
	}
	c.Locals(localStreaming, true)
	done := release(c)
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer done()
		defer cancel()
		write := func(v any) bool {
			if err := writeEvent(w, v); err != nil {
				s.Cancel() // client gone: stop generating now
				return false
			}
			return true
		}
		if isChat && !write(a.chunk(id, created, fiber.Map{"role": "assistant", "content": ""}, nil, nil)) {
			return
		}
		tick := time.NewTicker(a.cfg.KeepAlive)
		defer tick.Stop()
		for {
			select {
			case ev, ok := <-s.Events:
				if !ok {
					a.finishStream(w, id, created, res, isChat, includeUsage, r)
					if res.err == "" {
						a.warmUp(s, r, res)
					}
					return
				}
				okWrite := a.absorb(s, proc, res, ev, r, func(d output.Delta, lp fiber.Map) bool {
					if d.Content == "" && d.Reasoning == "" {
						return true
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
					if lp != nil {
						lps = fiber.Map{"content": []fiber.Map{lp}}
					}
					return write(a.chunk(id, created, delta, nil, lps))
				})
				if !okWrite {
					return
				}
			case <-tick.C:
				if _, err := w.WriteString(": keep-alive\n\n"); err != nil || w.Flush() != nil {
					s.Cancel()
					return
				}
			}
		}
	})
	return nil
}

// warmUp asks for the next turn's history to be prefilled ahead, as the
// next turn will render it with this reply in it: templates re-render
// earlier assistant turns (and a generated reply may not re-tokenize to the
// ids it was generated as), so the state of the last turn alone does not
// cover it. Tool-call turns are left alone.
func (a *API) warmUp(s *troupe.Stream, r *chat.Request, res *result) {
	if !r.IsChat() || !a.rt.PromptCache() || res.calls != nil {
		return
	}
	go a.rt.WarmUp(context.Background(), r, res.content.String())
}

// absorb processes one token event into res; emit (streaming) receives the
// text that became final. It reports false when the client is gone.
func (a *API) absorb(s *troupe.Stream, proc *output.Processor, res *result, ev *actors.TokenEvent, r *chat.Request, emit func(output.Delta, fiber.Map) bool) bool {
	if ev.Error != "" {
		res.err = ev.Error
	}
	if ev.PromptTokens > 0 {
		res.cachedTokens = int(ev.CachedTokens)
	}
	var d output.Delta
	var lp fiber.Map
	if ev.HasToken && !proc.Stopped() {
		now := time.Now()
		m := a.rt.Metrics()
		if res.tokens == 0 {
			m.TTFT.Observe(now.Sub(res.start).Seconds())
		} else {
			m.InterToken.Observe(now.Sub(res.last).Seconds())
		}
		res.last = now
		res.tokens++
		d = proc.Add(ev.Token)
		if r.Logprobs {
			lp = logprobEntry(s, ev)
			res.logprobs = append(res.logprobs, lp)
		}
		if proc.Stopped() {
			res.finish = "stop"
			s.Cancel()
		}
	}
	if ev.FinishReason != "" || proc.Stopped() {
		f := proc.Finish()
		d.Content += f.Content
		d.Reasoning += f.Reasoning
		if res.finish == "" {
			switch ev.FinishReason {
			case "length":
				res.finish = "length"
			default:
				res.finish = "stop"
			}
		}
		if calls, ok := proc.ToolCalls(); ok {
			res.calls = calls
			res.finish = "tool_calls"
		}
	}
	res.content.WriteString(d.Content)
	res.reasoning.WriteString(d.Reasoning)
	if emit != nil {
		return emit(d, lp)
	}
	return true
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

func (a *API) usage(res *result) fiber.Map {
	return fiber.Map{"prompt_tokens": res.promptTokens, "completion_tokens": res.tokens,
		"total_tokens": res.promptTokens + res.tokens, "prompt_tokens_details": fiber.Map{"cached_tokens": res.cachedTokens}}
}

func toolCalls(calls []output.ToolCall) []fiber.Map {
	out := make([]fiber.Map, len(calls))
	for i, c := range calls {
		out[i] = fiber.Map{"id": fmt.Sprintf("call_%d", i), "type": "function", "index": i,
			"function": fiber.Map{"name": c.Name, "arguments": c.Arguments}}
	}
	return out
}

func (a *API) final(id string, created int64, res *result, isChat bool, r *chat.Request) fiber.Map {
	if !isChat {
		var lp any
		if r.Logprobs {
			lp = completionLogprobs(res.logprobs)
		}
		return fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{{"index": 0, "text": res.content.String(), "logprobs": lp, "finish_reason": res.finish}},
			"usage":   a.usage(res)}
	}
	msg := fiber.Map{"role": "assistant", "content": res.content.String()}
	if res.reasoning.Len() > 0 {
		msg["reasoning_content"] = res.reasoning.String()
	}
	if res.calls != nil {
		msg["tool_calls"] = toolCalls(res.calls)
		if res.content.Len() == 0 {
			msg["content"] = nil
		}
	}
	var lp any
	if r.Logprobs {
		lp = fiber.Map{"content": res.logprobs}
	}
	return fiber.Map{"id": id, "object": "chat.completion", "created": created, "model": a.rt.Name(),
		"choices": []fiber.Map{{"index": 0, "message": msg, "logprobs": lp, "finish_reason": res.finish}},
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

func (a *API) finishStream(w *bufio.Writer, id string, created int64, res *result, isChat, includeUsage bool, r *chat.Request) {
	if res.err != "" {
		writeEvent(w, fiber.Map{"error": fiber.Map{"message": res.err, "type": "invalid_request_error", "param": nil, "code": nil}})
	} else if isChat {
		delta := fiber.Map{}
		if res.calls != nil {
			delta["tool_calls"] = toolCalls(res.calls)
		}
		last := a.chunk(id, created, delta, res.finish, nil)
		if includeUsage {
			last["usage"] = nil
		}
		writeEvent(w, last)
	} else {
		writeEvent(w, fiber.Map{"id": id, "object": "text_completion", "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{{"index": 0, "text": "", "logprobs": nil, "finish_reason": res.finish}}})
	}
	if includeUsage && res.err == "" {
		object := "chat.completion.chunk"
		if !isChat {
			object = "text_completion"
		}
		writeEvent(w, fiber.Map{"id": id, "object": object, "created": created, "model": a.rt.Name(),
			"choices": []fiber.Map{}, "usage": a.usage(res)})
	}
	w.WriteString("data: [DONE]\n\n")
	w.Flush()
}

package anthropic

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
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
	// KeepAlive is the period of ping events while no token arrives (long
	// prefills); a failed write ends the generation.
	KeepAlive time.Duration
}

// API serves the Anthropic routes of one runtime.
type API struct {
	rt  *troupe.Runtime
	cfg Config
}

// New returns the handlers.
func New(rt *troupe.Runtime, cfg Config) *API { return &API{rt: rt, cfg: cfg} }

// For returns the handlers of another runtime (a model served beside a's)
// with a's configuration.
func (a *API) For(rt *troupe.Runtime) *API { return New(rt, a.cfg) }

func (a *API) fail(c *fiber.Ctx, err error) error {
	return apierr.ReplyAnthropic(c, a.rt.Logger(), err)
}

// parse decodes a Messages body, checks the model it names and translates
// it.
func (a *API) parse(body []byte, requireMax bool) (*messagesRequest, *chat.Request, error) {
	var req messagesRequest
	if err := apierr.Decode(body, &req); err != nil {
		return nil, nil, err
	}
	if m := req.Model; m != nil && *m != "" && *m != a.rt.Name() {
		return nil, nil, apierr.NotFound("model", "model: %q does not exist; this server serves %q", *m, a.rt.Name())
	}
	r, err := toRequest(&req, requireMax)
	return &req, r, err
}

// Messages serves POST /v1/messages.
func (a *API) Messages(c *fiber.Ctx) error {
	req, r, err := a.parse(c.Body(), true)
	if err != nil {
		return a.fail(c, err)
	}
	turn.Scope(c, r)
	t, err := turn.Start(a.rt, r, turn.Options{Reasoning: true, Arrival: turn.Arrival(c), Context: turn.Context(c)})
	if err != nil {
		return a.fail(c, err)
	}
	id := "msg_" + rand.Text()
	if !req.Stream {
		defer t.Close()
		t.Run(nil, 0, nil)
		if t.Err != "" {
			return apierr.Anthropic(c, t.ErrStatus(), t.Err)
		}
		t.WarmUp()
		return c.JSON(a.message(id, t))
	}
	return turn.SSE(c, t, func(w *bufio.Writer) {
		s := &streamer{a: a, t: t, w: w, id: id}
		if t.Run(s.emit, a.cfg.KeepAlive, s.ping) {
			s.finish()
		}
	})
}

// CountTokens serves POST /v1/messages/count_tokens: the prompt tokens
// /v1/messages would prefill for the same body, through the same preparer.
func (a *API) CountTokens(c *fiber.Ctx) error {
	_, r, err := a.parse(c.Body(), false)
	if err != nil {
		return a.fail(c, err)
	}
	p, err := turn.Prepare(a.rt, r)
	if err != nil {
		return a.fail(c, err)
	}
	return c.JSON(fiber.Map{"input_tokens": len(p.Prepared.IDs)})
}

// usage is Anthropic's usage object. cache_read_input_tokens are the
// prompt tokens served from the prompt cache; cache_creation_input_tokens
// those this request writes to it at its cache_control breakpoints (up to
// the last breakpoint, less what was read; 0 without breakpoints);
// input_tokens the rest, so that the three add up to the prompt.
func usage(t *turn.Turn) fiber.Map {
	read := t.CachedTokens
	created := 0
	if t.Prepared != nil {
		created = max(0, t.Prepared.CacheEnd()-read)
	}
	return fiber.Map{"input_tokens": max(0, t.PromptTokens-read-created), "output_tokens": t.Tokens,
		"cache_creation_input_tokens": created, "cache_read_input_tokens": read}
}

// stopReason maps the turn's end to Anthropic's stop_reason and
// stop_sequence.
func stopReason(t *turn.Turn) (reason string, sequence any) {
	switch {
	case t.Finish == turn.ToolCalls:
		return "tool_use", nil
	case t.Finish == turn.Length:
		return "max_tokens", nil
	case t.StopString != "":
		return "stop_sequence", t.StopString
	}
	return "end_turn", nil
}

// signature is the opaque signature of a thinking block: a digest of its
// text. Anthropic's clients send thinking blocks back with their
// signature; any signature is accepted on input.
func signature(thinking string) string {
	sum := sha256.Sum256([]byte("troupe-thinking\x00" + thinking))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// toolInput is a call's arguments as the JSON object Anthropic's input is;
// arguments that are not an object become {}.
func toolInput(args string) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(args)) == nil && buf.Len() > 0 && buf.Bytes()[0] == '{' {
		return buf.Bytes()
	}
	return json.RawMessage("{}")
}

// toolUseID is a tool call's id in Anthropic's shape: toolu_ and 24
// random base62 characters, the same in the stream and the message.
func toolUseID(id string) string { return "toolu_" + id }

func toolUseBlock(id, name string, input any) fiber.Map {
	return fiber.Map{"type": "tool_use", "id": toolUseID(id), "name": name, "input": input}
}

func (a *API) envelope(id string, content []fiber.Map) fiber.Map {
	return fiber.Map{"id": id, "type": "message", "role": "assistant", "model": a.rt.Name(), "content": content,
		"stop_reason": nil, "stop_sequence": nil}
}

// message is the whole answer: thinking, then text (left out when empty
// and the answer is tool calls), then the tool calls.
func (a *API) message(id string, t *turn.Turn) fiber.Map {
	content := []fiber.Map{}
	if t.Reasoning.Len() > 0 {
		th := t.Reasoning.String()
		content = append(content, fiber.Map{"type": "thinking", "thinking": th, "signature": signature(th)})
	}
	if t.Content.Len() > 0 || t.Calls == nil {
		content = append(content, fiber.Map{"type": "text", "text": t.Content.String()})
	}
	for _, call := range t.Calls {
		content = append(content, toolUseBlock(call.ID, call.Name, toolInput(call.Arguments)))
	}
	m := a.envelope(id, content)
	m["stop_reason"], m["stop_sequence"] = stopReason(t)
	m["usage"] = usage(t)
	return m
}

// streamer writes one answer as Anthropic's event stream: message_start
// (held back until the first token, so its usage knows the cached prompt
// tokens, or until the first keep-alive), ping, then each content block as
// content_block_start, deltas and content_block_stop, then message_delta
// and message_stop.
type streamer struct {
	a       *API
	t       *turn.Turn
	w       *bufio.Writer
	id      string
	started bool
	index   int    // the open block's index, or the next block's
	open    string // the open block's type ("" when none)
	thought strings.Builder
	texts   bool // a text block was opened
	// The open tool_use block's arguments so far; they stream as
	// input_json_delta once they are seen to be an object (the input of a
	// tool_use is one), else they are sent whole, as toolInput, at its end.
	args           strings.Builder
	argsDecided    bool
	argsStreamable bool
}

func (s *streamer) event(name string, v fiber.Map) bool {
	v["type"] = name
	return turn.WriteEvent(s.w, name, v) == nil
}

func (s *streamer) start() bool {
	if s.started {
		return true
	}
	s.started = true
	m := s.a.envelope(s.id, []fiber.Map{})
	m["usage"] = usage(s.t)
	return s.event("message_start", fiber.Map{"message": m}) && s.event("ping", fiber.Map{})
}

// emit writes one delta of final text: reasoning before content, each in
// its own block.
func (s *streamer) emit(d output.Delta, _ *actors.TokenEvent) bool {
	if s.t.Err != "" && !s.started {
		return true // only the error event, at the end
	}
	if !s.start() {
		return false
	}
	if d.Reasoning != "" {
		if !s.openBlock("thinking") {
			return false
		}
		s.thought.WriteString(d.Reasoning)
		if !s.delta(fiber.Map{"type": "thinking_delta", "thinking": d.Reasoning}) {
			return false
		}
	}
	if d.Content != "" {
		if !s.openBlock("text") || !s.delta(fiber.Map{"type": "text_delta", "text": d.Content}) {
			return false
		}
	}
	for _, td := range d.Tools {
		if td.ID != "" && !s.openToolUse(td) {
			return false
		}
		if td.Arguments != "" && !s.toolArgs(td.Arguments) {
			return false
		}
	}
	return true
}

// openToolUse starts a tool_use block for a call as it is announced: its
// id and name, an empty input.
func (s *streamer) openToolUse(td output.ToolDelta) bool {
	if !s.closeBlock() {
		return false
	}
	s.open = "tool_use"
	s.args.Reset()
	s.argsDecided, s.argsStreamable = false, false
	return s.event("content_block_start", fiber.Map{"index": s.index, "content_block": toolUseBlock(td.ID, td.Name, fiber.Map{})})
}

// toolArgs sends a piece of the open tool_use block's arguments.
func (s *streamer) toolArgs(piece string) bool {
	s.args.WriteString(piece)
	if !s.argsDecided {
		text := strings.TrimLeft(s.args.String(), " \t\r\n")
		if text == "" {
			return true
		}
		s.argsDecided, s.argsStreamable = true, text[0] == '{'
		piece = s.args.String()
	}
	if !s.argsStreamable {
		return true
	}
	return s.delta(fiber.Map{"type": "input_json_delta", "partial_json": piece})
}

func (s *streamer) ping() bool {
	if !s.started && s.t.Err == "" {
		return s.start()
	}
	return s.event("ping", fiber.Map{})
}

func (s *streamer) delta(d fiber.Map) bool {
	return s.event("content_block_delta", fiber.Map{"index": s.index, "delta": d})
}

func (s *streamer) openBlock(kind string) bool {
	if s.open == kind {
		return true
	}
	if !s.closeBlock() {
		return false
	}
	var block fiber.Map
	switch kind {
	case "thinking":
		s.thought.Reset()
		block = fiber.Map{"type": "thinking", "thinking": "", "signature": ""}
	default:
		s.texts = true
		block = fiber.Map{"type": "text", "text": ""}
	}
	s.open = kind
	return s.event("content_block_start", fiber.Map{"index": s.index, "content_block": block})
}

func (s *streamer) closeBlock() bool {
	if s.open == "" {
		return true
	}
	if s.open == "thinking" && !s.delta(fiber.Map{"type": "signature_delta", "signature": signature(s.thought.String())}) {
		return false
	}
	if s.open == "tool_use" && !s.argsStreamable &&
		!s.delta(fiber.Map{"type": "input_json_delta", "partial_json": string(toolInput(s.args.String()))}) {
		return false
	}
	ok := s.event("content_block_stop", fiber.Map{"index": s.index})
	s.open = ""
	s.index++
	return ok
}

// finish closes the stream after the generation ended: an error event, or
// the last block (an empty text block when there was no text nor tool
// call, as in the non-streamed message), the stop reason and the final
// usage.
func (s *streamer) finish() {
	t := s.t
	if t.Err != "" {
		turn.WriteEvent(s.w, "error", apierr.AnthropicBody(t.ErrStatus(), t.Err))
		return
	}
	if !s.start() {
		return
	}
	if !s.texts && t.Calls == nil && !s.openBlock("text") {
		return
	}
	if !s.closeBlock() { // the tool_use blocks streamed as they were generated
		return
	}
	reason, seq := stopReason(t)
	if !s.event("message_delta", fiber.Map{"delta": fiber.Map{"stop_reason": reason, "stop_sequence": seq}, "usage": usage(t)}) ||
		!s.event("message_stop", fiber.Map{}) {
		return
	}
	t.WarmUp()
}

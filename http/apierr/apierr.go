// Package apierr holds what every API translator shares about client
// errors: the Field error that names the offending field and its status,
// strict JSON decoding that turns type errors into Field errors, and the
// writers of each API's own error shape (OpenAI's and Anthropic's).
package apierr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/templates"
)

// Field is a client error naming the offending field; Status is 400 when
// zero.
type Field struct {
	Status     int
	Param, Msg string
}

func (e *Field) Error() string { return e.Msg }

// Bad is a 400 Field error.
func Bad(param, format string, args ...any) error {
	return &Field{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 Field error.
func NotFound(param, format string, args ...any) error {
	return &Field{Status: fiber.StatusNotFound, Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Params names the fields of an API that errors about the request as a
// whole point at.
type Params struct {
	// Prompt is the field holding the prompt (messages, prompt, input).
	Prompt string
	// MaxTokens is the generation bound's field (max_tokens,
	// max_output_tokens).
	MaxTokens string
}

// Classify maps an error to its HTTP status and the field it names (see
// Describe); defaultParam is the prompt's field.
func Classify(err error, defaultParam string) (status int, param string) {
	status, param, _ = Describe(err, Params{Prompt: defaultParam, MaxTokens: "max_tokens"})
	return status, param
}

// Describe maps an error to its HTTP status, the field it names and the
// message a client sees. Field errors carry their status and field; errors
// about the request's content (a template raising, no chat template) are
// 400 on the prompt's field, with the template's reason but never its file
// path; a request too long for the model is 400 on the prompt's field when
// the prompt alone is too long, else on the max-tokens field; an input over
// an inspection limit is 413; a runtime at a concurrency bound is 429, one
// too busy to prepare in time or whose model failed to load is 503;
// anything else is 500.
func Describe(err error, p Params) (status int, param, msg string) {
	var (
		fe  *Field
		br  *chat.BadRequest
		un  *actors.Unavailable
		te  *templates.Error
		tl  *engine.TooLongError
		ov  *actors.Overloaded
		to  *actors.TimedOut
		big *actors.TooLarge
		cp  *chat.ContentParam
		se  *grammar.SpecError
	)
	switch {
	case errors.As(err, &un):
		return fiber.StatusServiceUnavailable, "", err.Error()
	case errors.As(err, &ov):
		return fiber.StatusTooManyRequests, "", err.Error()
	case errors.As(err, &to):
		return fiber.StatusServiceUnavailable, "", err.Error()
	case errors.As(err, &big):
		return fiber.StatusRequestEntityTooLarge, p.Prompt, err.Error()
	case errors.As(err, &se):
		return fiber.StatusBadRequest, se.Field, err.Error()
	case errors.As(err, &fe):
		if fe.Status == 0 {
			return fiber.StatusBadRequest, fe.Param, fe.Msg
		}
		return fe.Status, fe.Param, fe.Msg
	case errors.As(err, &tl):
		return fiber.StatusBadRequest, tooLongParam(tl, p), tooLongMessage(tl, p)
	case errors.As(err, &te):
		// The template's name is its file on the server: keep it in the log.
		msg := "chat template: " + te.Type + ": " + te.Message
		if te.Line > 0 {
			msg += " (template line " + strconv.Itoa(te.Line) + ")"
		}
		return fiber.StatusBadRequest, p.Prompt, msg
	case errors.As(err, &cp):
		return fiber.StatusBadRequest, cp.Param, err.Error()
	case errors.As(err, &br), errors.Is(err, chat.ErrNoTemplate):
		return fiber.StatusBadRequest, p.Prompt, err.Error()
	}
	return fiber.StatusInternalServerError, "", err.Error()
}

func tooLongParam(e *engine.TooLongError, p Params) string {
	if e.PromptOnly {
		return p.Prompt
	}
	return p.MaxTokens
}

func tooLongMessage(e *engine.TooLongError, p Params) string {
	what := "the model's " + strconv.Itoa(e.Limit) + " positions"
	switch {
	case e.Pages > 0:
		what = "the KV cache's " + strconv.Itoa(e.Limit) + " positions"
	case e.Capped:
		what = "the server's context length of " + strconv.Itoa(e.Limit)
	}
	if e.PromptOnly {
		return fmt.Sprintf("%s: the prompt is %d tokens, which leaves no room for output within %s", p.Prompt, e.Prompt, what)
	}
	return fmt.Sprintf("%s: the prompt (%d tokens) + %s (%d) exceeds %s", p.MaxTokens, e.Prompt, p.MaxTokens, e.MaxTokens, what)
}

// retryAfter is the Retry-After of an error the client may retry, in whole
// seconds (0 when it is not one).
func retryAfter(err error) int {
	var (
		ov *actors.Overloaded
		to *actors.TimedOut
	)
	d := time.Duration(0)
	switch {
	case errors.As(err, &ov):
		d = ov.RetryAfter
	case errors.As(err, &to):
		d = to.RetryAfter
	default:
		return 0
	}
	return max(1, int((d+time.Second-1)/time.Second))
}

// report logs what the client is not told: server errors, requests the
// runtime was too busy to prepare, and the full error (file paths
// included) of a template failure, whose message to the client leaves them
// out.
func report(c *fiber.Ctx, log *slog.Logger, err error, status int, msg string) {
	if log == nil {
		return
	}
	var (
		te *templates.Error
		to *actors.TimedOut
	)
	switch {
	case status >= 500 && status != fiber.StatusServiceUnavailable:
		log.Error("request failed", "route", c.Path(), "status", status, "err", err)
	case errors.As(err, &to):
		log.Warn("request not prepared in time", "route", c.Path(), "status", status, "err", err)
	case errors.As(err, &te):
		log.Info("chat template refused the request", "route", c.Path(), "status", status, "err", err)
	case msg != err.Error():
		log.Debug("request refused", "route", c.Path(), "status", status, "err", err)
	}
}

// ReplyOpenAI answers err in OpenAI's error shape (see Describe), with
// Retry-After when the client may retry, and logs what the message leaves
// out.
func ReplyOpenAI(c *fiber.Ctx, log *slog.Logger, err error, p Params) error {
	status, param, msg := Describe(err, p)
	report(c, log, err, status, msg)
	if s := retryAfter(err); s > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(s))
	}
	return OpenAI(c, status, msg, param)
}

// ReplyAnthropic answers err in Anthropic's error shape (see Describe),
// with Retry-After when the client may retry, and logs what the message
// leaves out.
func ReplyAnthropic(c *fiber.Ctx, log *slog.Logger, err error) error {
	status, _, msg := Describe(err, Params{Prompt: "messages", MaxTokens: "max_tokens"})
	report(c, log, err, status, msg)
	if s := retryAfter(err); s > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(s))
	}
	return Anthropic(c, status, msg)
}

// MaxPromptCacheKey bounds prompt_cache_key in characters on every API: the
// key becomes part of the scope every cached snapshot is stored under.
const MaxPromptCacheKey = 1024

// PromptCacheKey checks a prompt_cache_key's length.
func PromptCacheKey(key string) error {
	if n := utf8.RuneCountInString(key); n > MaxPromptCacheKey {
		return Bad("prompt_cache_key", "prompt_cache_key may have at most %d characters, got %d", MaxPromptCacheKey, n)
	}
	return nil
}

// Number checks an optional number field against [lo, hi] and, when set,
// stores it in dst.
func Number(name string, v *float64, lo, hi float64, dst *float32) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || *v < lo || *v > hi {
		return Bad(name, "%s must be between %g and %g, got %g", name, lo, hi, *v)
	}
	*dst = float32(*v)
	return nil
}

// MaxTopK bounds top_k: the engine carries it as an int32, and no
// vocabulary comes near it (a larger top_k would keep every token anyway).
const MaxTopK = math.MaxInt32

// TopK checks an optional top_k against [-1, MaxTopK] before it is
// narrowed anywhere; -1 (vLLM's spelling) and 0 keep every token.
func TopK(v *int, dst *int) error {
	if v == nil {
		return nil
	}
	if *v < -1 || *v > MaxTopK {
		return Bad("top_k", "top_k must be between -1 and %d (-1 and 0 keep every token), got %d", MaxTopK, *v)
	}
	*dst = max(*v, 0)
	return nil
}

// Array decodes an optional JSON array field into template values
// (templates.DecodeJSON keeps key order and the int/float distinction for
// the chat template). It returns nil, nil when the field is absent or null,
// and a non-nil slice for a present one, even when it is empty.
func Array(raw json.RawMessage, param string) ([]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	v, err := templates.DecodeJSON(raw)
	if err != nil {
		return nil, Bad(param, "%s: %v", param, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, Bad(param, "%s must be an array", param)
	}
	return list, nil
}

// Decode unmarshals a JSON body into v, turning type errors into Field
// errors that name the field.
func Decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Bad("", "the request body is empty; send a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			// Embedded structs prefix their name; the wire has none.
			if i := strings.LastIndex(field, "common."); i >= 0 {
				field = field[i+len("common."):]
			}
			return Bad(field, "field %q must be %s, got JSON %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return Bad("", "invalid JSON at byte %d: %v", se.Offset, err)
		}
		return Bad("", "invalid JSON: %v", err)
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "int", "int32", "int64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "bool":
		return "a boolean"
	case "string":
		return "a string"
	case "struct", "map":
		return "an object"
	case "slice":
		return "an array"
	}
	return "of type " + k
}

// OpenAI writes {"error": {"message", "type", "param", "code"}} with status.
func OpenAI(c *fiber.Ctx, status int, message, param string) error {
	typ := "invalid_request_error"
	code := any(nil)
	switch {
	case status == fiber.StatusUnauthorized:
		typ, code = "authentication_error", "invalid_api_key"
	case status == fiber.StatusNotFound && param == "model":
		code = "model_not_found"
	case status == fiber.StatusNotFound:
		code = "not_found"
	case status == fiber.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	var p any
	if param != "" {
		p = param
	}
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"message": message, "type": typ, "param": p, "code": code}})
}

// AnthropicType is the error type Anthropic's API gives a status.
func AnthropicType(status int) string {
	switch status {
	case fiber.StatusUnauthorized:
		return "authentication_error"
	case fiber.StatusForbidden:
		return "permission_error"
	case fiber.StatusNotFound:
		return "not_found_error"
	case fiber.StatusRequestEntityTooLarge:
		return "request_too_large"
	case fiber.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// AnthropicBody is Anthropic's error object: {"type": "error", "error":
// {"type", "message"}} (also the data of a stream's error event).
func AnthropicBody(status int, message string) fiber.Map {
	return fiber.Map{"type": "error", "error": fiber.Map{"type": AnthropicType(status), "message": message}}
}

// Anthropic writes Anthropic's error shape with status.
func Anthropic(c *fiber.Ctx, status int, message string) error {
	return c.Status(status).JSON(AnthropicBody(status, message))
}

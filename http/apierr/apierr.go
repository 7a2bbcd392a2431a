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
	"math"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
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

// Classify maps an error to its HTTP status and the field it names:
// Field errors carry both, errors about the request's content (a template
// raising, no chat template) are 400 on defaultParam, a model that failed
// to load is 503, anything else is 500.
func Classify(err error, defaultParam string) (status int, param string) {
	var fe *Field
	var cp *chat.ContentParam
	var br *chat.BadRequest
	var un *actors.Unavailable
	switch {
	case errors.As(err, &un):
		return fiber.StatusServiceUnavailable, ""
	case errors.As(err, &fe):
		if fe.Status == 0 {
			return fiber.StatusBadRequest, fe.Param
		}
		return fe.Status, fe.Param
	case errors.As(err, &cp):
		return fiber.StatusBadRequest, cp.Param
	case errors.As(err, &br), errors.Is(err, chat.ErrNoTemplate):
		return fiber.StatusBadRequest, defaultParam
	}
	return fiber.StatusInternalServerError, ""
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

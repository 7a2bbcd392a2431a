// Package apierr writes errors in each API's own shape.
package apierr

import (
	"github.com/gofiber/fiber/v2"
)

// OpenAI writes {"error": {"message", "type", "param", "code"}} with status.
func OpenAI(c *fiber.Ctx, status int, message, param string) error {
	typ := "invalid_request_error"
	code := any(nil)
	switch {
	case status == fiber.StatusUnauthorized:
		typ, code = "authentication_error", "invalid_api_key"
	case status == fiber.StatusNotFound:
		code = "model_not_found"
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

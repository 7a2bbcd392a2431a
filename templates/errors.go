package templates

import (
	"errors"
	"fmt"
	"strconv"
)

// Error is a template failure: a syntax error found by Compile, or an
// exception raised while rendering. Type names the Python exception class
// jinja2 raises for the same failure, so that callers (and the render CLI)
// can report what transformers would report.
type Error struct {
	// Type is the jinja2/Python exception class: "TemplateSyntaxError",
	// "TemplateAssertionError", "TemplateError" (raise_exception),
	// "UndefinedError", "TypeError", "ValueError", "SecurityError",
	// "TemplateRuntimeError", "ZeroDivisionError", "OverflowError",
	// "RecursionError", "IndexError", "KeyError", and, for limits this
	// package adds, "LimitError".
	Type string
	// Message is the exception message, worded as jinja2 and Python word it
	// for the failures the fixture templates exercise.
	Message string
	// Raised reports that the template called raise_exception(Message):
	// the model's own refusal of the conversation, as opposed to a bug in
	// the template or the input.
	Raised bool
	// Name is the template's name (WithName) and Line the 1-based source
	// line where the failure happened, 0 when unknown.
	Name string
	Line int
}

// ErrRaised matches (with errors.Is) every *Error raised by the template's
// raise_exception call.
var ErrRaised = errors.New("templates: raise_exception called")

// ErrNoTemplate is returned (wrapped) when a model has no chat template.
var ErrNoTemplate = errors.New("templates: model has no chat template")

// Error formats the error as "NAME:LINE: Type: message".
func (e *Error) Error() string {
	where := e.Name
	if where == "" {
		where = "template"
	}
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	return fmt.Sprintf("%s: %s: %s", where, e.Type, e.Message)
}

// Is reports whether target is ErrRaised and the template raised e.
func (e *Error) Is(target error) bool { return target == ErrRaised && e.Raised }

// Python exception class names used in errors.
const (
	excTemplateError  = "TemplateError"
	excSyntax         = "TemplateSyntaxError"
	excAssertion      = "TemplateAssertionError"
	excRuntime        = "TemplateRuntimeError"
	excUndefined      = "UndefinedError"
	excType           = "TypeError"
	excValue          = "ValueError"
	excSecurity       = "SecurityError"
	excZeroDivision   = "ZeroDivisionError"
	excOverflow       = "OverflowError"
	excRecursion      = "RecursionError"
	excIndex          = "IndexError"
	excKey            = "KeyError"
	excAttribute      = "AttributeError"
	excLimit          = "LimitError"
	excInternal       = "InternalError"
	excNotImplemented = "NotImplementedError"
)

// throw aborts the render with a Python-style exception. The renderer
// recovers it at the Render boundary (as text/template does) and returns it
// as an *Error; nothing else is recovered as a template error.
func throw(typ, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	panic(&Error{Type: typ, Message: msg})
}

func typeError(format string, args ...any) { throw(excType, format, args...) }

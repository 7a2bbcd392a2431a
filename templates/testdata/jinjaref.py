"""Reference renderer: jinja2 configured as transformers configures it.

Used only to (re)generate the golden files in this folder; the Go tests
read the golden files and never run Python. Needs jinja2 3.1.x.

It mirrors transformers' chat_template_utils._compile_jinja_template:
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, loopcontrols]), tojson = json.dumps with
ensure_ascii=False, raise_exception -> TemplateError, strftime_now with a
fixed "now" (2025-01-15T10:30:00, as the shared fixtures use).
"""
import json
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime(2025, 1, 15, 10, 30, 0)


class AssistantTracker(Extension):
    # transformers' {% generation %} block; renders its body unchanged.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return NOW.strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def render(source, variables):
    """Returns {"expected": str} or {"expected_error": {"type", "message"}}."""
    try:
        tpl = ENV.from_string(source)
        return {"expected": tpl.render(**variables)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"expected_error": {"type": type(e).__name__, "message": e.message or ""}}
    except Exception as e:  # noqa: BLE001 - we record what jinja2 raises
        msg = e.message if isinstance(e, jinja2.exceptions.TemplateError) and e.message is not None else e
        msg = str(msg)
        return {"expected_error": {"type": type(e).__name__, "message": msg}}

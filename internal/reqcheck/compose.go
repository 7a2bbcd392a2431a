package reqcheck

import (
	"bytes"
	"encoding/json"
)

// keys are the field names of every translator's body (top level, messages,
// content blocks, tools, input items), so composed bodies reach deep
// validation instead of stopping at a syntax error.
var keys = []string{
	"model", "messages", "role", "content", "type", "text", "max_tokens", "max_completion_tokens",
	"max_output_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "n", "stop", "stop_sequences",
	"stream", "stream_options", "include_usage", "logprobs", "top_logprobs", "tools", "tool_choice",
	"function", "name", "description", "parameters", "arguments", "tool_calls", "tool_call_id", "id",
	"chat_template_kwargs", "enable_thinking", "prompt", "echo", "input", "instructions", "call_id",
	"output", "reasoning", "effort", "summary", "background", "format", "truncation", "store",
	"previous_response_id", "metadata", "system", "thinking", "budget_tokens", "signature", "tool_use_id",
	"input_schema", "is_error", "source", "cache_control", "reasoning_content", "tokens", "add_special",
	"with_pieces", "image_url", "url", "properties", "required", "prompt_cache_key", "ignore_eos",
	"include",
}

var stringValues = []string{
	"user", "assistant", "system", "developer", "tool", "function", "text", "tool_use", "tool_result",
	"thinking", "redacted_thinking", "image", "image_url", "input_text", "output_text", "input_image",
	"function_call", "function_call_output", "message", "reasoning", "enabled", "disabled", "auto", "none",
	"required", "any", "low", "high", "json_schema", "object", "f", "get_weather", "call_1", "toolu_1", "",
	"Hello!", "<|im_start|>user\n", "{{ messages }}{% raw %}", "\x00\u2028é\u0301", "troupe-demo",
	"message.output_text.logprobs",
}

var numberValues = []string{
	"0", "1", "-1", "2", "16", "0.5", "1.5", "20", "21", "1024", "4096", "1048576", "1048577", "-0.0",
	"1e300", "2147483647", "2147483648", "9223372036854775807", "1e-9", "100000",
}

// Compose turns fuzz bytes into a JSON object body: each byte picks the
// next structural choice (a key, a kind of value, a value from the lists
// above, a length), so a mutated input stays well-formed JSON that
// exercises the translators' field checks. Running out of bytes closes
// everything.
func Compose(data []byte) []byte {
	g := &gen{data: data}
	var b bytes.Buffer
	g.object(&b, 0, 1+int(g.next()%8))
	return b.Bytes()
}

type gen struct {
	data []byte
	pos  int
}

func (g *gen) next() byte {
	if g.pos >= len(g.data) {
		return 0
	}
	c := g.data[g.pos]
	g.pos++
	return c
}

func (g *gen) more() bool { return g.pos < len(g.data) }

func quote(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s)
	b.Write(q)
}

func (g *gen) object(b *bytes.Buffer, depth, n int) {
	b.WriteByte('{')
	for i := 0; i < n && g.more(); i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		quote(b, keys[int(g.next())%len(keys)])
		b.WriteByte(':')
		g.value(b, depth+1)
	}
	b.WriteByte('}')
}

func (g *gen) value(b *bytes.Buffer, depth int) {
	c := g.next()
	if depth > 6 {
		// Scalars only (cases 2 to 6). A JSON document inside a string
		// (case 7) must stop here too: each level of it doubles the
		// escapes, so unbounded nesting grew a 34-byte input into a body
		// of hundreds of megabytes.
		c = 2 + c%5
	}
	switch c % 8 {
	case 0:
		g.object(b, depth, int(g.next()%5))
	case 1:
		n := int(g.next() % 4)
		b.WriteByte('[')
		for i := 0; i < n && g.more(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			g.value(b, depth+1)
		}
		b.WriteByte(']')
	case 2, 3:
		quote(b, stringValues[int(g.next())%len(stringValues)])
	case 4:
		b.WriteString(numberValues[int(g.next())%len(numberValues)])
	case 5:
		if g.next()%2 == 0 {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case 6:
		b.WriteString("null")
	case 7:
		// A JSON document inside a string (tool-call arguments).
		var inner bytes.Buffer
		g.value(&inner, depth+1)
		quote(b, inner.String())
	}
}

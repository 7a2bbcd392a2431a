package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// BenchmarkGonjaQwen3 renders the qwen3 template (extended configuration)
// over the 20-turn conversation troupe's templates benchmark uses.
func BenchmarkGonjaQwen3(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "fixtures", "templates", "templates", "qwen3.jinja"))
	if err != nil {
		b.Skip(err)
	}
	tpl, err := compile(string(src), true)
	if err != nil {
		b.Fatal(err)
	}
	msgs := `[{"role": "system", "content": "You are a helpful assistant. Answer briefly and use the tools when they help."}`
	for i := range 20 {
		msgs += fmt.Sprintf(`, {"role": "user", "content": "Turn %d: what is the weather like in city number %d, and should I take an umbrella?"}`, i, i)
		if i%5 == 4 {
			msgs += fmt.Sprintf(`, {"role": "assistant", "content": "", "tool_calls": [{"id": "call%05d", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "City %d", "unit": "celsius", "days": 1}}}]}`, i, i)
			msgs += fmt.Sprintf(`, {"role": "tool", "tool_call_id": "call%05d", "content": "{\"temperature\": 21.5, \"sky\": \"cloudy\"}"}`, i)
		}
		msgs += fmt.Sprintf(`, {"role": "assistant", "content": "In city %d it is 21.5 degrees and cloudy; an umbrella is a good idea just in case."}`, i)
	}
	msgs += `]`
	tools := `[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}}]`
	m, _ := decodeOrdered(json.RawMessage(msgs))
	tl, _ := decodeOrdered(json.RawMessage(tools))
	for b.Loop() {
		if _, err := tpl.ExecuteToString(exec.NewContext(map[string]any{"messages": m, "tools": tl, "add_generation_prompt": true})); err != nil {
			b.Fatal(err)
		}
	}
}

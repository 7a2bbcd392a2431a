package templates_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// benchConversation is a 20-turn chat with two tools: a system message,
// then 20 user turns, each answered by the assistant; every fifth turn the
// assistant calls a tool (object arguments, one call) and gets a result.
func benchConversation(tb testing.TB) templates.ChatInput {
	tb.Helper()
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
	tools := `[{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer", "description": "Forecast days"}}, "required": ["city"]}}},
	           {"type": "function", "function": {"name": "search", "description": "Search the web.", "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "Query"}, "limit": {"type": "integer", "description": "Max results"}}, "required": ["query"]}}}]`
	m, err := templates.DecodeJSON([]byte(msgs))
	if err != nil {
		tb.Fatal(err)
	}
	tl, err := templates.DecodeJSON([]byte(tools))
	if err != nil {
		tb.Fatal(err)
	}
	st := templates.NewDict(2)
	st.Set("bos_token", "<|begin_of_text|>")
	st.Set("eos_token", "<|eot_id|>")
	return templates.ChatInput{Messages: m.([]any), Tools: tl, AddGenerationPrompt: true, SpecialTokens: st,
		Now: time.Date(2025, 1, 15, 10, 30, 0, 0, time.Local)}
}

func benchTemplate(b *testing.B, name string) (*templates.Template, templates.ChatInput) {
	set := loadFixtures(b)
	tpl := set.compile(b, name)
	in := benchConversation(b)
	if _, err := tpl.RenderChat(in); err != nil {
		b.Fatal(err)
	}
	return tpl, in
}

// BenchmarkRender20Turns measures one render of a compiled template
// (target: under 100 µs).
func BenchmarkRender20Turns(b *testing.B) {
	for _, name := range []string{"qwen3", "llama3.1", "gpt-oss", "hermes3", "mistral-nemo"} {
		b.Run(name, func(b *testing.B) {
			tpl, in := benchTemplate(b, name)
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, err := tpl.RenderChat(in); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// reportCPU reports the process CPU time per op since start (render plus
// its share of GC), which a busy machine inflates far less than wall time.
func reportCPU(b *testing.B, start int64) {
	if end := processCPU(); end > 0 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkRenderParallel renders one compiled template from all cores.
func BenchmarkRenderParallel(b *testing.B) {
	tpl, in := benchTemplate(b, "qwen3")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tpl.RenderChat(in); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHistoryBoundary is the second render a snapshot-reuse model
// pays per request (character comparison only; tokenizing is the
// tokenizer's cost).
func BenchmarkHistoryBoundary(b *testing.B) {
	for _, name := range []string{"qwen3", "llama3.1"} {
		b.Run(name, func(b *testing.B) {
			tpl, in := benchTemplate(b, name)
			in.Messages = append(in.Messages, map[string]any{"role": "user", "content": "And tomorrow?"})
			prompt, err := tpl.RenderChat(in)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				if _, _, err := tpl.HistoryBoundary(in, prompt, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkCompile measures compiling the largest fixture template.
func BenchmarkCompile(b *testing.B) {
	set := loadFixtures(b)
	src := set.sources["gpt-oss"]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := templates.Compile(src); err != nil {
			b.Fatal(err)
		}
	}
}

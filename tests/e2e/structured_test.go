package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"github.com/openai/openai-go/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// tripParams is the forced tool's parameters: a nested object, enums,
// bounded integers, an array with maxItems, required fields and bounded
// strings (every value bounded, so a random-weight model's call ends).
func tripParams() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"city":   map[string]any{"type": "string", "minLength": 1, "maxLength": 16},
			"days":   map[string]any{"type": "integer", "minimum": 1, "maximum": 14},
			"mode":   map[string]any{"enum": []any{"car", "train", "plane"}},
			"stops":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "maxLength": 8}, "maxItems": 3},
			"pets":   map[string]any{"type": "boolean"},
			"budget": map[string]any{"type": "object", "properties": map[string]any{"amount": map[string]any{"type": "integer", "minimum": 0, "maximum": 100000}, "currency": map[string]any{"enum": []any{"EUR", "USD"}}}, "required": []any{"amount", "currency"}, "additionalProperties": false},
		},
		"required":             []any{"city", "days", "mode", "budget"},
		"additionalProperties": false,
	}
}

// noteParams is the second tool, so that "required" has a choice.
func noteParams() map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"text": map[string]any{"type": "string", "maxLength": 24}, "level": map[string]any{"type": "integer", "minimum": -3, "maximum": 3}},
		"required":             []any{"text", "level"},
		"additionalProperties": false,
	}
}

// formatSchema is the response_format / text.format schema.
func formatSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"answer": map[string]any{"type": "string", "maxLength": 20},
			"score":  map[string]any{"type": "integer", "minimum": 0, "maximum": 10},
			"tags":   map[string]any{"type": "array", "items": map[string]any{"enum": []any{"a", "b", "c"}}, "maxItems": 4},
		},
		"required":             []any{"answer", "score", "tags"},
		"additionalProperties": false,
	}
}

// schemaValidator compiles a schema with santhosh-tekuri/jsonschema.
func schemaValidator(t *testing.T, schema map[string]any) *jsonschema.Schema {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem://schema.json", doc); err != nil {
		t.Fatal(err)
	}
	v, err := c.Compile("mem://schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validJSON reports why text is not one JSON value valid against v.
func validJSON(v *jsonschema.Schema, text string) error {
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return v.Validate(inst)
}

// structCase is one model and thinking setting the structured-output
// tests run against.
type structCase struct {
	name  string
	model string
	url   string
	// thinking: the template thinks and the request leaves it on, so the
	// model may open a reasoning block before the constrained output.
	thinking bool
	// syntax is how the raw text of a forced call starts (after optional
	// whitespace): the template's tool-call syntax.
	syntax string
}

// callCheck validates forced tool calls: each call's tool is one of the
// declared ones (want, when named) and its arguments validate.
type callCheck struct {
	tools map[string]*jsonschema.Schema
}

func (cc callCheck) check(name, args, want string) error {
	if want != "" && name != want {
		return fmt.Errorf("call to %q, want %q", name, want)
	}
	v := cc.tools[name]
	if v == nil {
		return fmt.Errorf("call to undeclared tool %q", name)
	}
	if err := validJSON(v, args); err != nil {
		return fmt.Errorf("%s arguments %s: %v", name, args, err)
	}
	return nil
}

// TestStructuredSDK: with random-weight models (the real Qwen3 and Llama
// 3.1 tokenizers and templates: Hermes <tool_call> tags with a reasoning
// block, Llama's JSON calls) forced tool calls through the official
// clients are tool calls whose arguments validate against the tool's
// schema (santhosh-tekuri/jsonschema): chat completions tool_choice
// "required" and named (seeded, streamed and not: the streamed argument
// deltas add up to the final arguments), Responses tool_choice
// "required", Anthropic tool_choice any and tool; and response_format /
// text.format json_schema content validates. Qwen3 runs with its
// reasoning on and off (chat_template_kwargs enable_thinking, Responses
// reasoning.effort, Anthropic thinking). One server per model.
func TestStructuredSDK(t *testing.T) {
	qwen := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen")
	llama := serve(t, "--model", modelDir(t, "--preset", "tiny", "--seed", "5", "--tokenizer", fixtures.Path(t, "tokenizers", "llama3_1")),
		"--served-model-name", "tiny-llama", "--chat-template", fixtures.Path(t, "templates", "templates", "llama3.1.jinja"))
	qwen.waitReady(t)
	llama.waitReady(t)
	cc := callCheck{tools: map[string]*jsonschema.Schema{"plan_trip": schemaValidator(t, tripParams()), "take_note": schemaValidator(t, noteParams())}}
	format := schemaValidator(t, formatSchema())
	for _, sc := range []structCase{
		{name: "qwen3-thinking", model: "tiny-qwen", url: qwen.url, thinking: true, syntax: "<tool_call>\n{\"name\": "},
		{name: "qwen3-no-thinking", model: "tiny-qwen", url: qwen.url, syntax: "<tool_call>\n{\"name\": "},
		{name: "llama3.1", model: "tiny-llama", url: llama.url, syntax: `{"name": `},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			t.Run("chat", func(t *testing.T) { structChat(t, sc, cc, format) })
			t.Run("responses", func(t *testing.T) { structResponses(t, sc, cc, format) })
			t.Run("anthropic", func(t *testing.T) { structAnthropic(t, sc, cc) })
		})
	}
}

// maxStructTokens bounds each reply: a forced call here takes about 100
// tokens; several calls (chat "required" allows parallel calls) more.
const maxStructTokens = 400

func oaTools() []openai.ChatCompletionToolParam {
	return []openai.ChatCompletionToolParam{
		{Function: shared.FunctionDefinitionParam{Name: "plan_trip", Parameters: tripParams()}},
		{Function: shared.FunctionDefinitionParam{Name: "take_note", Parameters: noteParams()}},
	}
}

// reasoningCut reports a reply that is still reasoning when it reaches
// max_tokens: with the reasoning on, a random-weight model that opens a
// reasoning block never closes it, and the constraint only starts after
// it. It is not a failure of the constraint, but it is not a pass either.
func reasoningCut(t *testing.T, sc structCase, finish, reasoning, content string, calls int) bool {
	if sc.thinking && finish == "length" && reasoning != "" && content == "" && calls == 0 {
		t.Logf("reply still reasoning at max_tokens (%d bytes of reasoning): not counted", len(reasoning))
		return true
	}
	return false
}

// parallelCut reports a reply cut at max_tokens after several calls: a
// forced "required" / "any" reply may hold any number of calls
// (parallel_tool_calls is not enforced), and a random-weight model may go
// on opening calls until max_tokens. The complete calls are still checked;
// the last, cut, is not. It is not counted as a pass.
func parallelCut(t *testing.T, want string, cut bool, calls int) bool {
	if want == "" && cut && calls >= 2 {
		t.Logf("cut at max_tokens in call %d: the first %d checked, not counted as a pass", calls, calls-1)
		return true
	}
	return false
}

func structChat(t *testing.T, sc structCase, cc callCheck, format *jsonschema.Schema) {
	c := client(&serverProc{url: sc.url})
	var opts []option.RequestOption
	if !sc.thinking {
		opts = append(opts, option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
	}
	base := openai.ChatCompletionNewParams{
		Model:       sc.model,
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Plan a trip, or take a note.")},
		Tools:       oaTools(),
		MaxTokens:   openai.Int(maxStructTokens),
		Temperature: openai.Float(1),
	}
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ""},
		{"named", openai.ChatCompletionToolChoiceOptionParamOfChatCompletionNamedToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "take_note"}), "take_note"},
	} {
		for seed := int64(1); seed <= 2; seed++ {
			params := base
			params.ToolChoice = tc.choice
			params.Seed = openai.Int(seed)
			stream := seed == 2
			if !stream {
				params.Logprobs = openai.Bool(true) // the raw text, to check the call syntax
			}
			t.Run(fmt.Sprintf("%s/seed%d/stream=%v", tc.name, seed, stream), func(t *testing.T) {
				msg, finish, raw := chatOnce(t, c, params, stream, opts)
				if !stream && len(msg.ToolCalls) > 0 && !strings.HasPrefix(strings.TrimLeft(raw, " \t\r\n"), sc.syntax) {
					t.Errorf("raw reply %.200q does not start with %q", raw, sc.syntax)
				}
				if reasoningCut(t, sc, finish, reasoningOf(msg), msg.Content, len(msg.ToolCalls)) {
					return
				}
				calls := msg.ToolCalls
				if parallelCut(t, tc.want, finish == "length", len(calls)) {
					calls = calls[:len(calls)-1]
				} else if finish != "tool_calls" || len(calls) == 0 || (tc.want != "" && len(calls) != 1) || strings.TrimSpace(msg.Content) != "" {
					t.Fatalf("finish %q, message %s", finish, msg.RawJSON())
				}
				for _, call := range calls {
					if err := cc.check(call.Function.Name, call.Function.Arguments, tc.want); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
	for seed := int64(1); seed <= 2; seed++ {
		params := base
		params.Tools = nil
		params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Rate this trip.")}
		params.Seed = openai.Int(seed)
		params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "rating", Schema: formatSchema(), Strict: openai.Bool(true)}}}
		stream := seed == 2
		t.Run(fmt.Sprintf("response_format/seed%d/stream=%v", seed, stream), func(t *testing.T) {
			msg, finish, _ := chatOnce(t, c, params, stream, opts)
			if reasoningCut(t, sc, finish, reasoningOf(msg), msg.Content, len(msg.ToolCalls)) {
				return
			}
			if finish != "stop" {
				t.Fatalf("finish %q, message %s", finish, msg.RawJSON())
			}
			if err := validJSON(format, msg.Content); err != nil {
				t.Fatalf("content %q: %v", msg.Content, err)
			}
		})
	}
}

// reasoningOf is a chat message's reasoning_content (an extra field).
func reasoningOf(m openai.ChatCompletionMessage) string {
	var r struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	_ = json.Unmarshal([]byte(m.RawJSON()), &r)
	return r.ReasoningContent
}

// chatOnce sends params, streamed or not; streamed, it checks that each
// call's argument deltas add up to what the SDK's accumulator reports.
// Not streamed, it also returns the reply's raw text, from its logprobs
// when the request asks for them.
func chatOnce(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, stream bool, opts []option.RequestOption) (openai.ChatCompletionMessage, string, string) {
	t.Helper()
	if !stream {
		r, err := c.Chat.Completions.New(ctx(t), params, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) != 1 {
			t.Fatalf("reply %s", r.RawJSON())
		}
		var raw strings.Builder
		for _, lp := range r.Choices[0].Logprobs.Content {
			raw.WriteString(lp.Token)
		}
		return r.Choices[0].Message, r.Choices[0].FinishReason, raw.String()
	}
	s := c.Chat.Completions.NewStreaming(ctx(t), params, opts...)
	acc := openai.ChatCompletionAccumulator{}
	deltas := map[int64]*strings.Builder{}
	var finish string
	for s.Next() {
		chunk := s.Current()
		acc.AddChunk(chunk)
		for _, ch := range chunk.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if deltas[tc.Index] == nil {
					deltas[tc.Index] = &strings.Builder{}
				}
				deltas[tc.Index].WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if err := s.Err(); err != nil {
		streamErr(t, err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("accumulated %d choices", len(acc.Choices))
	}
	msg := acc.Choices[0].Message
	if len(deltas) != len(msg.ToolCalls) {
		t.Fatalf("argument deltas for %d calls, %d calls accumulated", len(deltas), len(msg.ToolCalls))
	}
	for i, call := range msg.ToolCalls {
		if got := deltas[int64(i)]; got == nil || got.String() != call.Function.Arguments {
			t.Fatalf("call %d: argument deltas %v, accumulated %q", i, got, call.Function.Arguments)
		}
	}
	return msg, finish, ""
}

// streamErr fails the test on a streaming error. (SSE keep-alive comments
// once broke openai-go streams: tests/structured TestOpenAISDKKeepAlive.)
func streamErr(t *testing.T, err error) {
	t.Helper()
	t.Fatal(err)
}

func structResponses(t *testing.T, sc structCase, cc callCheck, format *jsonschema.Schema) {
	c := client(&serverProc{url: sc.url})
	base := responses.ResponseNewParams{
		Model:           sc.model,
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Plan a trip, or take a note.")},
		MaxOutputTokens: openai.Int(maxStructTokens),
		Temperature:     openai.Float(1),
	}
	if !sc.thinking {
		base.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort("none")}
	}
	for i := range 2 {
		params := base
		params.Tools = []responses.ToolUnionParam{
			responses.ToolParamOfFunction("plan_trip", tripParams(), false),
			responses.ToolParamOfFunction("take_note", noteParams(), false),
		}
		params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}
		stream := i == 1
		t.Run(fmt.Sprintf("required/%d/stream=%v", i, stream), func(t *testing.T) {
			r := responsesOnce(t, c, params, stream)
			var calls []responses.ResponseOutputItemUnion
			var reasoning string
			for _, item := range r.Output {
				switch item.Type {
				case "function_call":
					calls = append(calls, item)
				case "reasoning":
					reasoning += reasoningText(t, item)
				}
			}
			cut := r.Status == "incomplete"
			if cut && reasoningCut(t, sc, "length", reasoning, r.OutputText(), len(calls)) {
				return
			}
			if parallelCut(t, "", cut, len(calls)) {
				calls = calls[:len(calls)-1]
			} else if r.Status != "completed" || len(calls) == 0 || strings.TrimSpace(r.OutputText()) != "" {
				t.Fatalf("response %s", r.RawJSON())
			}
			for _, item := range calls {
				if err := cc.check(item.Name, item.Arguments, ""); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range 2 {
		params := base
		params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("Rate this trip.")}
		params.Text = responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
			OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "rating", Schema: formatSchema(), Strict: openai.Bool(true)}}}
		stream := i == 1
		t.Run(fmt.Sprintf("text.format/%d/stream=%v", i, stream), func(t *testing.T) {
			r := responsesOnce(t, c, params, stream)
			if r.Status != "completed" {
				t.Fatalf("response %s", r.RawJSON())
			}
			if err := validJSON(format, r.OutputText()); err != nil {
				t.Fatalf("output text %q: %v", r.OutputText(), err)
			}
		})
	}
}

// responsesOnce sends params, streamed or not; streamed, the argument
// deltas of each function call add up to its final arguments.
func responsesOnce(t *testing.T, c openai.Client, params responses.ResponseNewParams, stream bool) *responses.Response {
	t.Helper()
	if !stream {
		r, err := c.Responses.New(ctx(t), params)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	s := c.Responses.NewStreaming(ctx(t), params)
	deltas := map[string]*strings.Builder{}
	var final responses.Response
	for s.Next() {
		ev := s.Current()
		switch ev.Type {
		case "response.function_call_arguments.delta":
			if deltas[ev.ItemID] == nil {
				deltas[ev.ItemID] = &strings.Builder{}
			}
			deltas[ev.ItemID].WriteString(ev.Delta.OfString)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := s.Err(); err != nil {
		streamErr(t, err)
	}
	for _, item := range final.Output {
		if item.Type != "function_call" {
			continue
		}
		if got := deltas[item.ID]; got == nil || got.String() != item.Arguments {
			t.Fatalf("function call %s: argument deltas %v, final %q", item.ID, got, item.Arguments)
		}
	}
	return &final
}

func structAnthropic(t *testing.T, sc structCase, cc callCheck) {
	c := anthropicClient(&serverProc{url: sc.url})
	base := anthropic.MessageNewParams{
		Model:       anthropic.Model(sc.model),
		MaxTokens:   maxStructTokens,
		Temperature: anthropic.Float(1),
		Messages:    []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Plan a trip, or take a note."))},
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "plan_trip", InputSchema: inputSchema(tripParams())}},
			{OfTool: &anthropic.ToolParam{Name: "take_note", InputSchema: inputSchema(noteParams())}},
		},
	}
	if !sc.thinking {
		base.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	}
	for _, tc := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		want   string
	}{
		{"any", anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}, ""},
		{"tool", anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "plan_trip"}}, "plan_trip"},
	} {
		for i := range 2 {
			params := base
			params.ToolChoice = tc.choice
			stream := i == 1
			t.Run(fmt.Sprintf("%s/%d/stream=%v", tc.name, i, stream), func(t *testing.T) {
				var m anthropic.Message
				if stream {
					m = anthStream(t, c, params)
				} else {
					r, err := c.Messages.New(ctx(t), params)
					if err != nil {
						t.Fatal(err)
					}
					m = *r
				}
				var calls []anthropic.ContentBlockUnion
				var thinking, text string
				for _, b := range m.Content {
					switch b.Type {
					case "tool_use":
						calls = append(calls, b)
					case "thinking":
						thinking += b.Thinking
					case "text":
						text += b.Text
					}
				}
				cut := m.StopReason == anthropic.StopReasonMaxTokens
				if cut && reasoningCut(t, sc, "length", thinking, text, len(calls)) {
					return
				}
				if parallelCut(t, tc.want, cut, len(calls)) {
					calls = calls[:len(calls)-1]
				} else if m.StopReason != anthropic.StopReasonToolUse || len(calls) == 0 || strings.TrimSpace(text) != "" || (tc.want != "" && len(calls) != 1) {
					t.Fatalf("message %s", m.RawJSON())
				}
				for _, b := range calls {
					if err := cc.check(b.Name, string(b.Input), tc.want); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
}

// inputSchema is an Anthropic tool's input_schema from a JSON schema.
func inputSchema(s map[string]any) anthropic.ToolInputSchemaParam {
	p := anthropic.ToolInputSchemaParam{Properties: s["properties"]}
	if r, ok := s["required"].([]any); ok {
		for _, v := range r {
			p.Required = append(p.Required, v.(string))
		}
	}
	p.ExtraFields = map[string]any{"additionalProperties": s["additionalProperties"]}
	return p
}

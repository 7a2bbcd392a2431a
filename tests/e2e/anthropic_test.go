package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

func anthropicClient(s *serverProc, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{option.WithBaseURL(s.url + "/"), option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
}

var anthStopReasons = map[anthropic.StopReason]bool{
	anthropic.StopReasonEndTurn: true, anthropic.StopReasonMaxTokens: true, anthropic.StopReasonStopSequence: true, anthropic.StopReasonToolUse: true,
}

// checkMessage asserts what any answer must be, whatever the random
// weights said: a message with valid blocks, a stop reason and usage.
func anthCheck(t *testing.T, m *anthropic.Message, model string, maxTokens int64) {
	t.Helper()
	if !strings.HasPrefix(m.ID, "msg_") || m.Role != "assistant" || string(m.Model) != model || !anthStopReasons[m.StopReason] ||
		m.Usage.InputTokens+m.Usage.CacheReadInputTokens < 1 || m.Usage.OutputTokens < 1 || m.Usage.OutputTokens > maxTokens || len(m.Content) == 0 {
		t.Fatalf("message: %s", m.RawJSON())
	}
	if (m.StopReason == anthropic.StopReasonStopSequence) != (m.StopSequence != "") {
		t.Fatalf("stop_reason %q with stop_sequence %q", m.StopReason, m.StopSequence)
	}
	tools := 0
	for i, b := range m.Content {
		switch b.Type {
		case "thinking":
			if i != 0 || b.Thinking == "" || b.Signature == "" {
				t.Fatalf("thinking block %d: %s", i, b.RawJSON())
			}
		case "text":
		case "tool_use":
			tools++
			if !strings.HasPrefix(b.ID, "toolu_") || b.Name == "" || !json.Valid(b.Input) || !strings.HasPrefix(string(b.Input), "{") {
				t.Fatalf("tool_use block %d: %s", i, b.RawJSON())
			}
		default:
			t.Fatalf("block %d of type %q: %s", i, b.Type, m.RawJSON())
		}
	}
	if (tools > 0) != (m.StopReason == anthropic.StopReasonToolUse) {
		t.Fatalf("%d tool_use blocks with stop_reason %q", tools, m.StopReason)
	}
}

// stream runs a streaming request through the SDK's accumulator and
// checks the accumulated message against the events themselves.
func anthStream(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) anthropic.Message {
	t.Helper()
	m, _ := anthStreamKinds(t, c, params)
	return m
}

// anthStreamKinds is anthStream that also returns how many events of each
// type it saw, and of each delta type under "delta:TYPE".
func anthStreamKinds(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, map[string]int) {
	t.Helper()
	s := c.Messages.NewStreaming(ctx(t), params)
	var acc anthropic.Message
	var texts, thoughts strings.Builder
	kinds := map[string]int{}
	var stop anthropic.StopReason
	for s.Next() {
		ev := s.Current()
		kinds[ev.Type]++
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case "content_block_delta":
			kinds["delta:"+ev.Delta.Type]++
			texts.WriteString(ev.Delta.Text)
			thoughts.WriteString(ev.Delta.Thinking)
		case "message_delta":
			stop = ev.Delta.StopReason
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if kinds["message_start"] != 1 || kinds["message_delta"] != 1 || kinds["message_stop"] != 1 ||
		kinds["content_block_start"] != len(acc.Content) || kinds["content_block_stop"] != len(acc.Content) {
		t.Fatalf("events %v for %d blocks", kinds, len(acc.Content))
	}
	var accText, accThought strings.Builder
	for _, b := range acc.Content {
		accText.WriteString(b.Text)
		accThought.WriteString(b.Thinking)
	}
	if acc.StopReason == "" || acc.StopReason != stop || accText.String() != texts.String() || accThought.String() != thoughts.String() {
		t.Fatalf("accumulated %s; events said stop %q, text %q", acc.RawJSON(), stop, texts.String())
	}
	return acc, kinds
}

func anthText(m anthropic.Message) string {
	var b strings.Builder
	for _, c := range m.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// TestAnthropicSDK: Anthropic's official client against a tiny model with
// Qwen3's real tokenizer and chat template (which thinks and calls tools):
// messages with a system prompt, tools and thinking, streamed and not,
// token counting, and errors as the SDK's *anthropic.Error.
func TestAnthropicSDK(t *testing.T) {
	dir := qwen3Model(t)
	s := serve(t, "--model", dir, "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := anthropicClient(s)

	params := anthropic.MessageNewParams{
		Model: "tiny-qwen", MaxTokens: 12, Temperature: anthropic.Float(0),
		System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is a troupe?"))},
	}
	m, err := c.Messages.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	anthCheck(t, m, "tiny-qwen", 12)
	count, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{
		Model: "tiny-qwen", Messages: params.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System},
	})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens != m.Usage.InputTokens+m.Usage.CacheReadInputTokens {
		t.Fatalf("count_tokens %d; the message's usage %d + %d cached", count.InputTokens, m.Usage.InputTokens, m.Usage.CacheReadInputTokens)
	}

	// Streaming, greedy: the same answer as the message.
	acc := anthStream(t, c, params)
	anthCheck(t, &acc, "tiny-qwen", 12)
	if anthText(acc) != anthText(*m) || acc.StopReason != m.StopReason || acc.Usage.OutputTokens != m.Usage.OutputTokens ||
		acc.Usage.InputTokens+acc.Usage.CacheReadInputTokens != count.InputTokens {
		t.Fatalf("streamed %s\nnon-streamed %s", acc.RawJSON(), m.RawJSON())
	}

	// Tools, and a conversation that already called one.
	weather := anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name: "get_weather", Description: anthropic.String("The weather in a city now"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
	}}
	tools := params
	tools.MaxTokens = 24
	tools.Tools = []anthropic.ToolUnionParam{weather}
	tools.ToolChoice = anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
	tools.Messages = []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("Let me check."), anthropic.NewToolUseBlock("toolu_01", map[string]any{"city": "Paris"}, "get_weather")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_01", "18C and sunny", false), anthropic.NewTextBlock("And tomorrow?")),
	}
	m, err = c.Messages.New(ctx(t), tools)
	if err != nil {
		t.Fatal(err)
	}
	anthCheck(t, m, "tiny-qwen", 24)
	acc = anthStream(t, c, tools)
	anthCheck(t, &acc, "tiny-qwen", 24)
	withTools, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "tiny-qwen", Messages: tools.Messages,
		Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: weather.OfTool}}})
	if err != nil {
		t.Fatal(err)
	}
	without, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "tiny-qwen", Messages: tools.Messages})
	if err != nil {
		t.Fatal(err)
	}
	if withTools.InputTokens <= without.InputTokens+20 {
		t.Fatalf("the tools add %d tokens to the prompt", withTools.InputTokens-without.InputTokens)
	}

	// Thinking reaches the template's switch: Qwen3 disabled writes an
	// empty think block into the prompt, enabled leaves the model to think.
	countThinking := func(th anthropic.ThinkingConfigParamUnion) int64 {
		n, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "tiny-qwen", Messages: params.Messages, Thinking: th})
		if err != nil {
			t.Fatal(err)
		}
		return n.InputTokens
	}
	enabled := countThinking(anthropic.ThinkingConfigParamOfEnabled(1024))
	disabled := countThinking(anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}})
	if disabled <= enabled {
		t.Fatalf("thinking disabled %d prompt tokens, enabled %d: want the empty think block", disabled, enabled)
	}
	think := params
	think.MaxTokens = 1025
	think.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	think.Temperature = anthropic.Float(1)
	think.StopSequences = []string{"\n", "e", "a", "o"} // keep the noise short
	m, err = c.Messages.New(ctx(t), think)
	if err != nil {
		t.Fatal(err)
	}
	anthCheck(t, m, "tiny-qwen", 1025)

	// Errors are the SDK's *anthropic.Error with status and type.
	var apiErr *anthropic.Error
	bad := params
	bad.Model = "nope"
	if _, err = c.Messages.New(ctx(t), bad); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown model: %v", err)
	}
	bad = params
	bad.Temperature = anthropic.Float(1.5)
	if _, err = c.Messages.New(ctx(t), bad); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != "invalid_request_error" || !strings.Contains(err.Error(), "temperature") {
		t.Fatalf("temperature 1.5: %v", err)
	}
	st := c.Messages.NewStreaming(ctx(t), bad)
	for st.Next() {
	}
	if err := st.Err(); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("streaming with temperature 1.5: %v", err)
	}
}

// anthThinkingTemplate is a ChatML template whose generation prompt opens a
// <think> block, so that even a random-weight model's answer is reasoning.
const anthThinkingTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{% if m.reasoning_content %}<think>
{{ m.reasoning_content }}
</think>

{% endif %}{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
<think>
`

// TestAnthropicThinkingRoundTrip: thinking blocks as the SDK sees them,
// streamed (thinking_delta, then signature_delta) and not, and sent back
// in the next turn with their signature, as Anthropic's clients do.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "think.jinja")
	if err := os.WriteFile(tmpl, []byte(anthThinkingTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen", "--chat-template", tmpl)
	s.waitReady(t)
	c := anthropicClient(s)
	params := anthropic.MessageNewParams{
		Model: "tiny-qwen", MaxTokens: 8, Temperature: anthropic.Float(0),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Think first."))},
	}
	m, err := c.Messages.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	anthCheck(t, m, "tiny-qwen", 8)
	if m.Content[0].Type != "thinking" {
		t.Fatalf("no thinking block: %s", m.RawJSON())
	}
	acc := anthStream(t, c, params)
	if acc.Content[0].Type != "thinking" || acc.Content[0].Thinking != m.Content[0].Thinking || acc.Content[0].Signature != m.Content[0].Signature {
		t.Fatalf("streamed %s\nnon-streamed %s", acc.RawJSON(), m.RawJSON())
	}
	// The answer goes back as it came (thinking block and signature
	// included) and is rendered as the turn's reasoning.
	next := params
	next.Messages = append(next.Messages, acc.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("Go on.")))
	if _, err := c.Messages.New(ctx(t), next); err != nil {
		t.Fatal(err)
	}
	plain := []anthropic.MessageParam{params.Messages[0], anthropic.NewAssistantMessage(anthropic.NewTextBlock(anthText(acc))), next.Messages[2]}
	count := func(c anthropic.Client, msgs []anthropic.MessageParam) int64 {
		t.Helper()
		n, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "tiny-qwen", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return n.InputTokens
	}
	// A server that never produced the answer renders the turn sent back
	// without its thinking as it came.
	fresh := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen", "--chat-template", tmpl)
	fresh.waitReady(t)
	fc := anthropicClient(fresh)
	if with, without := count(fc, next.Messages), count(fc, plain); with <= without {
		t.Fatalf("the thinking sent back adds nothing to the prompt (%d vs %d tokens)", with, without)
	}
	// The server that produced it kept its reasoning and re-attaches it
	// (preserve_thinking, on with the prompt cache): the same prompt.
	if with, without := count(c, next.Messages), count(c, plain); with != without {
		t.Fatalf("the thinking dropped from the answer was not re-attached (%d vs %d tokens)", with, without)
	}
}

// TestAnthropicAPIKey: a server started with --api-key accepts the SDK's
// x-api-key and answers a wrong one with authentication_error.
func TestAnthropicAPIKey(t *testing.T) {
	s := serve(t, "--api-key", "sekret")
	s.waitReady(t)
	params := anthropic.MessageNewParams{Model: "troupe-demo", MaxTokens: 2,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hi"))}}
	good, wrong := anthropicClient(s, option.WithAPIKey("sekret")), anthropicClient(s, option.WithAPIKey("wrong"))
	m, err := good.Messages.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	anthCheck(t, m, "troupe-demo", 2)
	var apiErr *anthropic.Error
	_, err = wrong.Messages.New(ctx(t), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Fatalf("wrong key: %v", err)
	}
}

// anthJSONEqual says whether two JSON texts are the same value.
func anthJSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// anthCheckToolUse asserts the script model's answer to a request with
// the weather tool: a signed thinking block, the text "Sure" and a
// get_weather tool_use with {"city": "Paris"}, stopped for tool_use.
func anthCheckToolUse(t *testing.T, m *anthropic.Message) {
	t.Helper()
	anthCheck(t, m, "tiny-qwen", 1100)
	if len(m.Content) != 3 || m.StopReason != anthropic.StopReasonToolUse || m.StopSequence != "" {
		t.Fatalf("message: %s", m.RawJSON())
	}
	th, text, tu := m.Content[0], m.Content[1], m.Content[2]
	if th.Type != "thinking" || th.Thinking != "Plan: call the tool." || th.Signature == "" {
		t.Fatalf("thinking block: %s", th.RawJSON())
	}
	if text.Type != "text" || text.Text != "Sure" {
		t.Fatalf("text block: %s", text.RawJSON())
	}
	if tu.Type != "tool_use" || tu.Name != "get_weather" || !strings.HasPrefix(tu.ID, "toolu_") || !anthJSONEqual(tu.Input, []byte(`{"city": "Paris"}`)) {
		t.Fatalf("tool_use block: %s", tu.RawJSON())
	}
}

// TestAnthropicToolUse: Anthropic's client against a script model (Qwen3's
// tokenizer and template, output known in advance): thinking, text and a
// tool call come back as thinking, text and tool_use blocks, streamed
// (input_json_delta for the input) and not, and the assistant message goes
// back as the SDK makes it, followed by the tool's result.
func TestAnthropicToolUse(t *testing.T) {
	s := serve(t, "--model", scriptModel(t, toolScript), "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := anthropicClient(s)
	params := anthropic.MessageNewParams{
		Model: "tiny-qwen", MaxTokens: 1100,
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name: "get_weather", Description: anthropic.String("The weather in a city now"),
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}},
		}}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
	}
	m, err := c.Messages.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	anthCheckToolUse(t, m)

	acc, kinds := anthStreamKinds(t, c, params)
	anthCheckToolUse(t, &acc)
	if kinds["delta:thinking_delta"] == 0 || kinds["delta:signature_delta"] != 1 || kinds["delta:text_delta"] == 0 || kinds["delta:input_json_delta"] == 0 {
		t.Fatalf("events %v", kinds)
	}
	for i, b := range acc.Content {
		want := m.Content[i]
		// tool_use ids are fresh per answer; everything else is the same.
		if b.Type != want.Type || b.Text != want.Text || b.Thinking != want.Thinking || b.Signature != want.Signature ||
			b.Name != want.Name || !bytesOrBothEmptyJSON(b.Input, want.Input) {
			t.Fatalf("streamed block %d %s\nnon-streamed %s", i, b.RawJSON(), want.RawJSON())
		}
	}
	if acc.Usage.OutputTokens != m.Usage.OutputTokens || acc.Usage.InputTokens+acc.Usage.CacheReadInputTokens != m.Usage.InputTokens+m.Usage.CacheReadInputTokens {
		t.Fatalf("streamed usage %s, non-streamed %s", acc.Usage.RawJSON(), m.Usage.RawJSON())
	}

	// The answer goes back as the SDK makes it (thinking with its
	// signature, text, tool_use), then the tool's result.
	next := params
	next.Messages = append(next.Messages, acc.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(acc.Content[2].ID, "18C and sunny", false)))
	m2, err := c.Messages.New(ctx(t), next)
	if err != nil {
		t.Fatal(err)
	}
	anthCheckToolUse(t, m2) // the script says the same again
	// The tool's result is in the prompt.
	count := func(result string) int64 {
		msgs := append(append([]anthropic.MessageParam{}, next.Messages[:2]...),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(acc.Content[2].ID, result, false)))
		n, err := c.Messages.CountTokens(ctx(t), anthropic.MessageCountTokensParams{Model: "tiny-qwen", Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return n.InputTokens
	}
	if with, without := count("18C and sunny"), count(""); with <= without {
		t.Fatalf("the tool_result adds nothing to the prompt (%d vs %d tokens)", with, without)
	}
	if m2.Usage.CacheReadInputTokens < 1 || m2.Usage.InputTokens+m2.Usage.CacheReadInputTokens <= m.Usage.InputTokens+m.Usage.CacheReadInputTokens {
		t.Fatalf("turn 2 usage %s, turn 1 %s", m2.Usage.RawJSON(), m.Usage.RawJSON())
	}
}

// bytesOrBothEmptyJSON compares two optional JSON values (a block's input).
func bytesOrBothEmptyJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return anthJSONEqual(a, b)
}

package e2e

import (
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/shared"
)

// callOnlyScript is a reply that is only a tool call (no reasoning, no
// text): OpenAI's message then has content null.
const callOnlyScript = "assistant\n<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\": \"Paris\"}}</tool_call><|im_end|>"

// TestOpenAISDKToolCalls: the official client streams a tool call's
// arguments in pieces (its accumulator reports the finished call with the
// arguments the non-streamed reply has), and the assistant message it
// builds from our reply (ToParam, which leaves the null content out) is
// accepted back as history with the tool's answer, streamed or not.
func TestOpenAISDKToolCalls(t *testing.T) {
	s := serve(t, "--model", scriptModel(t, callOnlyScript), "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := client(s)
	params := openai.ChatCompletionNewParams{
		Model:    "tiny-qwen",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolParam{{Function: shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("Weather of a city"),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
		}}},
		MaxTokens: openai.Int(64),
	}
	want, err := c.Chat.Completions.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	msg := want.Choices[0].Message
	if want.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.Content != "" ||
		msg.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || !strings.HasPrefix(msg.ToolCalls[0].ID, "call_") {
		t.Fatalf("reply %s", want.RawJSON())
	}

	stream := c.Chat.Completions.NewStreaming(ctx(t), params)
	acc := openai.ChatCompletionAccumulator{}
	pieces := 0
	var finished []openai.FinishedChatCompletionToolCall
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, ch := range chunk.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Function.Arguments != "" {
					pieces++
				}
			}
		}
		if tc, ok := acc.JustFinishedToolCall(); ok {
			finished = append(finished, tc)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0].Message
	if pieces < 2 || len(finished) != 1 || finished[0].Name != "get_weather" || finished[0].Arguments != `{"city": "Paris"}` ||
		len(got.ToolCalls) != 1 || got.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || got.ToolCalls[0].ID == msg.ToolCalls[0].ID {
		t.Fatalf("streamed in %d pieces, finished %+v, accumulated %+v", pieces, finished, got)
	}

	// Both messages, as the SDK sends them back, continue the conversation.
	for _, m := range []openai.ChatCompletionMessage{msg, got} {
		next := params
		next.Messages = append(append([]openai.ChatCompletionMessageParamUnion{}, params.Messages...),
			m.ToParam(), openai.ToolMessage("18C and sunny", m.ToolCalls[0].ID))
		next.MaxTokens = openai.Int(2)
		if _, err := c.Chat.Completions.New(ctx(t), next); err != nil {
			t.Fatalf("history with our tool call: %v", err)
		}
	}
}

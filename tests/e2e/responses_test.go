package e2e

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/responses"
	"github.com/openai/openai-go/shared"
)

// weatherTool is the function tool the script model calls.
func weatherTool() responses.ToolUnionParam {
	tool := responses.ToolParamOfFunction("get_weather", map[string]any{
		"type":       "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required":   []string{"city"},
	}, false)
	tool.OfFunction.Description = openai.String("The weather in a city now")
	return tool
}

// reasoningText is a reasoning item's content text, read from its raw JSON:
// the v1.12 SDK's output item has no content field for reasoning.
func reasoningText(t *testing.T, item responses.ResponseOutputItemUnion) string {
	t.Helper()
	var rs struct {
		Content []struct{ Type, Text string }
	}
	if err := json.Unmarshal([]byte(item.RawJSON()), &rs); err != nil {
		t.Fatalf("reasoning item %s: %v", item.RawJSON(), err)
	}
	var b strings.Builder
	for _, c := range rs.Content {
		if c.Type != "reasoning_text" {
			t.Fatalf("reasoning content part of type %q: %s", c.Type, item.RawJSON())
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

// checkToolResponse asserts what the script model answers to a request
// with the weather tool and reasoning on: a reasoning item, a message
// "Sure" and a get_weather call, in that order, with the reasoning counted
// in usage. It returns the call's call_id.
func checkToolResponse(t *testing.T, r *responses.Response) string {
	t.Helper()
	if r.Status != "completed" || !strings.HasPrefix(r.ID, "resp_") || len(r.Output) != 3 {
		t.Fatalf("response: %s", r.RawJSON())
	}
	rs, msg, fc := r.Output[0], r.Output[1], r.Output[2]
	if rs.Type != "reasoning" || !strings.HasPrefix(rs.ID, "rs_") || reasoningText(t, rs) != "Plan: call the tool." {
		t.Fatalf("reasoning item: %s", rs.RawJSON())
	}
	if msg.Type != "message" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") || len(msg.Content) != 1 || r.OutputText() != "Sure" {
		t.Fatalf("message item: %s (output text %q)", msg.RawJSON(), r.OutputText())
	}
	if fc.Type != "function_call" || fc.Name != "get_weather" || fc.Arguments != `{"city": "Paris"}` ||
		!strings.HasPrefix(fc.CallID, "call_") || !strings.HasPrefix(fc.ID, "fc_") || fc.Status != "completed" {
		t.Fatalf("function_call item: %s", fc.RawJSON())
	}
	u := r.Usage
	if u.InputTokens < 1 || u.OutputTokens < 1 || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		u.OutputTokensDetails.ReasoningTokens <= 0 || u.OutputTokensDetails.ReasoningTokens >= u.OutputTokens {
		t.Fatalf("usage: %s", u.RawJSON())
	}
	return fc.CallID
}

func outputIDs(r *responses.Response) []string {
	ids := make([]string, len(r.Output))
	for i, it := range r.Output {
		ids[i] = it.ID
	}
	return ids
}

// TestResponsesSDK: the OpenAI SDK's Responses client against a script
// model (Qwen3's tokenizer and template, output known in advance): the
// reasoning, the text and the function call come back as reasoning,
// message and function_call items, streamed as the documented events; the
// stored response is what GET returns; the call's output continues the
// conversation through previous_response_id with the history read from the
// prompt cache; errors are *openai.Error with status and param.
func TestResponsesSDK(t *testing.T) {
	s := serve(t, "--model", scriptModel(t, toolScript), "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := client(s)

	params := responses.ResponseNewParams{
		Model:     "tiny-qwen",
		Input:     responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")},
		Tools:     []responses.ToolUnionParam{weatherTool()},
		Reasoning: shared.ReasoningParam{Effort: shared.ReasoningEffortHigh},
	}
	r, err := c.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	checkToolResponse(t, r)
	if r.Model != "tiny-qwen" || r.Reasoning.Effort != shared.ReasoningEffortHigh || len(r.Tools) != 1 || r.Tools[0].Name != "get_weather" {
		t.Fatalf("request fields not echoed: %s", r.RawJSON())
	}

	// Streaming: the documented events in order, numbered from 0, with
	// deltas that add up to the final items.
	stream := c.Responses.NewStreaming(ctx(t), params)
	var names []string
	var final responses.Response
	added := map[string]string{}  // item id -> type, from output_item.added
	deltas := map[string]string{} // item id -> joined deltas
	var argsDone []string
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(names)) {
			t.Fatalf("event %d (%s) has sequence_number %d", len(names), ev.Type, ev.SequenceNumber)
		}
		names = append(names, ev.Type)
		switch ev.Type {
		case "response.created", "response.in_progress":
			if ev.Response.Status != "in_progress" || len(ev.Response.Output) != 0 {
				t.Fatalf("%s: %s", ev.Type, ev.Response.RawJSON())
			}
		case "response.output_item.added":
			added[ev.Item.ID] = ev.Item.Type
		case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
			if added[ev.ItemID] == "" {
				t.Fatalf("%s for item %q never added", ev.Type, ev.ItemID)
			}
			deltas[ev.ItemID] += ev.Delta.OfString
		case "response.function_call_arguments.done":
			argsDone = append(argsDone, ev.Arguments)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(names) < 3 || names[0] != "response.created" || names[1] != "response.in_progress" || names[len(names)-1] != "response.completed" {
		t.Fatalf("events %v", names)
	}
	checkToolResponse(t, &final)
	rs, msg, fc := final.Output[0], final.Output[1], final.Output[2]
	if added[rs.ID] != "reasoning" || added[msg.ID] != "message" || added[fc.ID] != "function_call" || len(added) != 3 {
		t.Fatalf("items added %v, final output %v", added, outputIDs(&final))
	}
	if deltas[rs.ID] != "Plan: call the tool." || deltas[msg.ID] != "Sure" || deltas[fc.ID] != `{"city": "Paris"}` {
		t.Fatalf("deltas per item %v", deltas)
	}
	if len(argsDone) != 1 || argsDone[0] != fc.Arguments {
		t.Fatalf("function_call_arguments.done %q, item arguments %q", argsDone, fc.Arguments)
	}
	for _, n := range []string{"response.reasoning_text.done", "response.output_text.done", "response.content_part.done", "response.output_item.done"} {
		if !strings.Contains(strings.Join(names, " "), n) {
			t.Fatalf("no %s in %v", n, names)
		}
	}
	// What GET returns is the completed event's response.
	got, err := c.Responses.Get(ctx(t), final.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != final.ID || got.Status != final.Status || strings.Join(outputIDs(got), ",") != strings.Join(outputIDs(&final), ",") ||
		got.Output[2].CallID != fc.CallID || got.Usage.RawJSON() != final.Usage.RawJSON() {
		t.Fatalf("GET %s\ncompleted event %s", got.RawJSON(), final.RawJSON())
	}

	// The tool's output continues the stored conversation; the history
	// comes from the prompt cache (on by default in serve).
	next := params
	next.PreviousResponseID = openai.String(final.ID)
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfFunctionCallOutput(fc.CallID, "18C and sunny"),
	}}
	r2, err := c.Responses.New(ctx(t), next)
	if err != nil {
		t.Fatal(err)
	}
	if r2.PreviousResponseID != final.ID || r2.Usage.InputTokens <= final.Usage.InputTokens {
		t.Fatalf("continued response: %s", r2.RawJSON())
	}
	if r2.Usage.InputTokensDetails.CachedTokens <= 0 {
		t.Fatalf("the continued turn read no cached tokens: %s", r2.Usage.RawJSON())
	}
	checkToolResponse(t, r2) // the script says the same again

	// Errors.
	var apiErr *openai.Error
	bad := params
	bad.PreviousResponseID = openai.String("resp_nope")
	if _, err := c.Responses.New(ctx(t), bad); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Param != "previous_response_id" {
		t.Fatalf("unknown previous_response_id: %v", err)
	}
	if err := c.Responses.Delete(ctx(t), r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Responses.Get(ctx(t), r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("GET of a deleted response: %v", err)
	}
	if err := c.Responses.Delete(ctx(t), r.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("DELETE of a deleted response: %v", err)
	}
	bad = params
	bad.Temperature = openai.Float(3)
	if _, err := c.Responses.New(ctx(t), bad); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "temperature" {
		t.Fatalf("temperature 3: %v", err)
	}
}

// TestResponsesSDKText: the ordinary path on random weights: a greedy
// answer streamed through the SDK is the same as the non-streamed one,
// deltas and completed event alike.
func TestResponsesSDKText(t *testing.T) {
	s := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := client(s)
	params := responses.ResponseNewParams{
		Model:           "tiny-qwen",
		Instructions:    openai.String("Be brief."),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("What is a troupe?")},
		MaxOutputTokens: openai.Int(12),
		Temperature:     openai.Float(0),
	}
	want, err := c.Responses.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if want.OutputText() == "" || want.Usage.OutputTokens < 1 || want.Usage.OutputTokens > 12 || want.Instructions.OfString != "Be brief." {
		t.Fatalf("response: %s", want.RawJSON())
	}
	stream := c.Responses.NewStreaming(ctx(t), params)
	var text strings.Builder
	var final responses.Response
	var last string
	for stream.Next() {
		ev := stream.Current()
		last = ev.Type
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta.OfString)
		case "response.completed", "response.incomplete":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if last != "response."+string(want.Status) || final.Status != want.Status {
		t.Fatalf("stream ended with %s (status %q); non-streamed status %q", last, final.Status, want.Status)
	}
	if text.String() != want.OutputText() || final.OutputText() != want.OutputText() || final.Usage.OutputTokens != want.Usage.OutputTokens {
		t.Fatalf("streamed deltas %q, completed %q (%d tokens); non-streamed %q (%d tokens)",
			text.String(), final.OutputText(), final.Usage.OutputTokens, want.OutputText(), want.Usage.OutputTokens)
	}
}

package e2e

import (
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/responses"
)

// TestOpenAISDKChoicesAndLogprobs: what the official client reads of n > 1
// (chat, streamed through its accumulator and not), echo on completions,
// and the Responses API's output-text logprobs (the object's and the
// stream's delta events').
func TestOpenAISDKChoicesAndLogprobs(t *testing.T) {
	s := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen")
	s.waitReady(t)
	c := client(s)

	params := openai.ChatCompletionNewParams{
		Model:    "tiny-qwen",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name three colours.")},
		N:        openai.Int(3), MaxTokens: openai.Int(6), Seed: openai.Int(11), Temperature: openai.Float(1.2),
	}
	want, err := c.Chat.Completions.New(ctx(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Choices) != 3 || want.Usage.CompletionTokens < 3 {
		t.Fatalf("n=3: %s", want.RawJSON())
	}
	stream := c.Chat.Completions.NewStreaming(ctx(t), params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 3 {
		t.Fatalf("the stream accumulated %d choices", len(acc.Choices))
	}
	for i, ch := range want.Choices {
		if int(ch.Index) != i || acc.Choices[i].Message.Content != ch.Message.Content || acc.Choices[i].FinishReason != ch.FinishReason {
			t.Errorf("choice %d: streamed %q (%s), non-streamed %q (%s)", i, acc.Choices[i].Message.Content, acc.Choices[i].FinishReason, ch.Message.Content, ch.FinishReason)
		}
	}

	comp, err := c.Completions.New(ctx(t), openai.CompletionNewParams{
		Model: "tiny-qwen", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(4), Temperature: openai.Float(0), Echo: openai.Bool(true), N: openai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(comp.Choices) != 2 || comp.Choices[0].Text != comp.Choices[1].Text || len(comp.Choices[0].Text) <= len("Once upon a time") ||
		comp.Choices[0].Text[:len("Once upon a time")] != "Once upon a time" {
		t.Fatalf("echo: %s", comp.RawJSON())
	}

	rp := responses.ResponseNewParams{
		Model: "tiny-qwen", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Name three colours.")},
		MaxOutputTokens: openai.Int(6), Temperature: openai.Float(0), TopLogprobs: openai.Int(2),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs},
	}
	r, err := c.Responses.New(ctx(t), rp)
	if err != nil {
		t.Fatal(err)
	}
	var lps []responses.ResponseOutputTextLogprob
	for _, it := range r.Output {
		for _, p := range it.Content {
			lps = append(lps, p.Logprobs...)
		}
	}
	if len(lps) == 0 {
		t.Fatalf("no logprobs: %s", r.RawJSON())
	}
	for i, lp := range lps {
		if len(lp.TopLogprobs) != 2 || lp.Logprob > 0 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[1].Logprob {
			t.Fatalf("logprob %d: %+v", i, lp)
		}
	}
	rs := c.Responses.NewStreaming(ctx(t), rp)
	var streamed []string
	for rs.Next() {
		if ev := rs.Current(); ev.Type == "response.output_text.delta" {
			for _, lp := range ev.AsResponseOutputTextDelta().Logprobs {
				streamed = append(streamed, lp.Token)
			}
		}
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(streamed) != len(lps) {
		t.Fatalf("%d logprobs in the stream's deltas, %d in the object", len(streamed), len(lps))
	}
	for i := range lps {
		if streamed[i] != lps[i].Token {
			t.Fatalf("delta logprob %d is %q, the object's %q", i, streamed[i], lps[i].Token)
		}
	}
}

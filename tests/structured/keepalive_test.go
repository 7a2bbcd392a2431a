package structured

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// TestOpenAISDKKeepAlive: the SSE keep-alive comments of the OpenAI routes
// (sent when no token came for a while, every 2 s by default; here every
// 1 ms so that they fall between tokens) keep the official Go client's
// streams working. They once ended with a blank line, which openai-go
// v1.12's decoder dispatches as an event with no data and Stream.Next
// fails to decode ("unexpected end of JSON input"): every Responses stream
// longer than 2 s failed in the client. A comment line alone dispatches
// nothing.
func TestOpenAISDKKeepAlive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := troupe.Start(ctx, troupe.Options{Threads: 1, KVBudget: 64 << 20, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	srv := troupehttp.New(rt, troupehttp.Config{Parallel: 4, KeepAlive: time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.App.Listener(ln)
	defer srv.App.Shutdown()
	c := openai.NewClient(option.WithBaseURL("http://"+ln.Addr().String()+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	t.Run("chat completions", func(t *testing.T) {
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model: "troupe-demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			MaxTokens: openai.Int(200), Temperature: openai.Float(1), Seed: openai.Int(1),
		})
		n := 0
		for s.Next() {
			n++
		}
		if err := s.Err(); err != nil {
			t.Fatalf("after %d chunks: %v", n, err)
		}
	})
	t.Run("responses", func(t *testing.T) {
		s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "troupe-demo", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
			MaxOutputTokens: openai.Int(200), Temperature: openai.Float(1),
		})
		n := 0
		for s.Next() {
			n++
		}
		if err := s.Err(); err != nil {
			t.Fatalf("after %d events: %v", n, err)
		}
	})
}

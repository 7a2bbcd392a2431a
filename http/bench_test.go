package http_test

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/cpu"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// BenchmarkTTFTOverhead measures what the HTTP + actor path adds to time to
// first token: the same one-message chat prompt on the demo model, prefilled
// and sampled by the engine directly (prompt already tokenized), and sent as
// a streaming request through the server (parse, prepare, render, encode,
// schedule, first SSE event) on each API: chat completions, Responses and
// Anthropic Messages. The difference of the ms/op figures is the overhead.
func BenchmarkTTFTOverhead(b *testing.B) {
	dir, err := checkpoint.Demo()
	if err != nil {
		b.Fatal(err)
	}
	prompt := "<|im_start|>user\nHello there, how are you?<|im_end|>\n<|im_start|>assistant\n"
	b.Run("engine", func(b *testing.B) {
		m, err := model.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		tok, err := tokenizer.Load(dir, tokenizer.Options{})
		if err != nil {
			b.Fatal(err)
		}
		dev, err := cpu.New(cpu.Options{Threads: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer dev.Close()
		pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 64, 1)
		if err != nil {
			b.Fatal(err)
		}
		ids := tok.EncodeIDs(prompt, false)
		for b.Loop() {
			if _, err := engine.Generate(context.Background(), m, dev, pool, []engine.Request{{Prompt: ids, MaxTokens: 1}}, engine.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Each API's streaming route, until the event that carries the first
	// token (or ends a reply that decoded to nothing).
	apis := []struct{ name, path, body, first string }{
		{"http/chat", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1,"ignore_eos":true,"stream":true}`,
			`"content":"`},
		{"http/responses", "/v1/responses",
			`{"input":"Hello there, how are you?","max_output_tokens":1,"stream":true}`,
			`"response.output_text.delta"`},
		{"http/messages", "/v1/messages",
			`{"messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1,"stream":true}`,
			`"content_block_delta"`},
	}
	var base string
	outer := b // the server outlives each sub-benchmark
	serve := func(b *testing.B) string {
		if base != "" {
			return base
		}
		rt, err := troupe.Start(context.Background(), troupe.Options{Threads: 1, Parallel: 2, KVBudget: 64 << 20, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		outer.Cleanup(rt.Close)
		srv := troupehttp.New(rt, troupehttp.Config{Parallel: 2})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.App.Listener(ln)
		outer.Cleanup(func() { srv.Shutdown(time.Second) })
		for {
			if st, err := rt.Status(context.Background()); err == nil && st.Ready {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		base = "http://" + ln.Addr().String()
		return base
	}
	for _, api := range apis {
		b.Run(api.name, func(b *testing.B) {
			url := serve(b) + api.path
			for b.Loop() {
				resp, err := nethttp.Post(url, "application/json", strings.NewReader(api.body))
				if err != nil {
					b.Fatal(err)
				}
				r := bufio.NewReader(resp.Body)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if (strings.HasPrefix(line, "data: ") && strings.Contains(line, api.first) && !strings.Contains(line, `"role"`)) ||
						strings.Contains(line, `"finish_reason":"length"`) || strings.Contains(line, "response.incomplete") || strings.Contains(line, "message_delta") {
						break
					}
				}
				resp.Body.Close()
			}
		})
	}
}

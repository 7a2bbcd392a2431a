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
// schedule, first SSE chunk). The difference of the two ms/op figures is the
// overhead.
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
	b.Run("http", func(b *testing.B) {
		rt, err := troupe.Start(context.Background(), troupe.Options{Threads: 1, Parallel: 2, KVBudget: 64 << 20, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		defer rt.Close()
		srv := troupehttp.New(rt, troupehttp.Config{Parallel: 2})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.App.Listener(ln)
		defer srv.Shutdown(time.Second)
		url := "http://" + ln.Addr().String() + "/v1/chat/completions"
		body := `{"messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1,"ignore_eos":true,"stream":true}`
		for {
			if st, err := rt.Status(context.Background()); err == nil && st.Ready {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		for b.Loop() {
			resp, err := nethttp.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReader(resp.Body)
			for {
				line, err := r.ReadString('\n')
				if err != nil {
					b.Fatal(err)
				}
				// The first chunk after the role chunk carries the token
				// (or the finish chunk when it decoded to nothing).
				if strings.Contains(line, `"finish_reason":"length"`) || (strings.Contains(line, `"content":"`) && !strings.Contains(line, `"role"`)) {
					break
				}
			}
			resp.Body.Close()
		}
	})
}

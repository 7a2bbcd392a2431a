// Command embed shows troupe as a library: start the runtime in-process on
// the built-in demo model, stream a chat answer through the Go API, then
// talk to the same actors by message from a host actor system.
//
//	go run ./examples/embed
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/templates"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// 1. The Go API: Start, Generate, read the stream.
	rt, err := troupe.Start(ctx, troupe.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	msgs, err := templates.DecodeJSON([]byte(`[{"role": "user", "content": "Say hello."}]`))
	if err != nil {
		log.Fatal(err)
	}
	req := &chat.Request{Messages: msgs.([]any), MaxTokens: 16}
	stream, err := rt.Generate(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	out := output.New(stream.Prepared.Assets.Tokenizer, output.Options{Prompt: stream.Prepared.Prepared.Prompt, PromptIDs: stream.Prepared.Prepared.IDs})
	fmt.Printf("prompt (%d tokens): %q\n", len(stream.Prepared.Prepared.IDs), stream.Prepared.Prepared.Prompt)
	fmt.Print("answer (the demo model's words are noise): ")
	for ev := range stream.Events {
		if ev.HasToken {
			fmt.Printf("%q", out.Add(ev.Token).Content)
		}
		if ev.FinishReason != "" {
			fmt.Printf("%q\nfinish: %s\n", out.Finish().Content, ev.FinishReason)
		}
	}

	// 2. By message, from a host application's own actor system: spawn the
	// pipeline into it, ask a preparer for a job, and hand the job to the
	// scheduler from an actor that receives the token events.
	system := actor.NewActorSystem()
	hosted, err := troupe.Spawn(system, troupe.Options{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	defer hosted.Close()
	pids := hosted.Pids()
	res, err := system.Root.RequestFuture(pids.Preparers[0], &actors.Prepare{ID: "host-1", Request: req}, 30*time.Second).Result()
	if err != nil {
		log.Fatal(err)
	}
	prepared := res.(*actors.Prepared)
	if prepared.Err != nil {
		log.Fatal(prepared.Err)
	}
	done := make(chan int)
	tokens := 0
	system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(pids.Scheduler, prepared.Job)
		case *actors.TokenEvent:
			if m.HasToken {
				tokens++
			}
			if m.FinishReason != "" {
				done <- tokens
			}
		}
	}))
	fmt.Printf("host actor received %d token events\n", <-done)
}

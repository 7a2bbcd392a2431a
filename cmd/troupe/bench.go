package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/troupe-ai/troupe/loadgen"
)

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c loadgen.Config
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "server base URL")
	fs.StringVar(&c.Model, "model", "", "model name to request (default: the server's)")
	fs.StringVar(&c.APIKey, "api-key", os.Getenv("TROUPE_API_KEY"), "bearer token")
	fs.IntVar(&c.Concurrency, "concurrency", 1, "requests in flight")
	fs.IntVar(&c.Requests, "requests", 8, "conversations to run")
	fs.IntVar(&c.PromptTokens, "prompt-tokens", 256, "approximate prompt length (words ~ tokens)")
	fs.IntVar(&c.MaxTokens, "max-tokens", 64, "tokens to generate per request (EOS ignored)")
	fs.IntVar(&c.SharedPrefixTokens, "shared-prefix-tokens", 0, "length of a system prompt shared by all requests")
	fs.IntVar(&c.MultiTurn, "multi-turn", 1, "turns per conversation (each resends the history)")
	seed := fs.Uint64("seed", 1, "seed of the prompt text")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.Seed = *seed
	rep, err := loadgen.Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, rep.Table())
	if *jsonOut != "" {
		data, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if rep.Errors == rep.Requests {
		return fmt.Errorf("bench: every request failed: %s", rep.FirstError)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	agentSteps := fs.Int("agent-loop", 0, "run an agent loop of this many steps instead: each reply a tool call, answered by a tool result in the next request; reports prompt, cached and computed tokens per step")
	agentAPIs := fs.String("agent-api", "chat,responses,messages", "agent loop: the APIs to loop over, comma-separated (chat, responses, messages)")
	toolDelay := fs.Duration("tool-delay", 100*time.Millisecond, "agent loop: the simulated tool's latency before each next step")
	keepReasoning := fs.Bool("keep-reasoning", false, "agent loop: send each reply's reasoning back (the official SDKs drop it)")
	forceTool := fs.Bool("force-tool", false, "agent loop: require a tool call every step (tool_choice required), for models that would not call one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *agentSteps > 0 {
		return agentBench(ctx, c, loadgen.AgentConfig{Steps: *agentSteps, ToolDelay: *toolDelay, KeepReasoning: *keepReasoning,
			ForceTool: *forceTool}, *agentAPIs, *jsonOut, stdout)
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

// agentBench runs the agent loop ac over each API in apis and prints each
// one's table (and writes them all as JSON to jsonOut).
func agentBench(ctx context.Context, c loadgen.Config, ac loadgen.AgentConfig, apis string, jsonOut string, stdout io.Writer) error {
	var reps []*loadgen.AgentReport
	ac.URL, ac.Model, ac.APIKey = c.URL, c.Model, c.APIKey
	for _, api := range strings.Split(apis, ",") {
		ac.API = strings.TrimSpace(api)
		rep, err := loadgen.AgentLoop(ctx, ac)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		fmt.Fprint(stdout, rep.Table())
		reps = append(reps, rep)
	}
	if jsonOut != "" {
		data, _ := json.MarshalIndent(reps, "", "  ")
		if err := os.WriteFile(jsonOut, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return nil
}

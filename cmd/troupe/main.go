// Command troupe serves and runs Hugging Face checkpoints.
//
//	troupe chat [DIR | --url URL [NAME]] [flags]
//	troupe generate [--model DIR] (--prompt TEXT | --prompt-ids 1,2,3) [flags]
//	troupe model init (--preset NAME | --config FILE) --out DIR [flags]
//
// Without --model, troupe uses its built-in demo model: a small
// deterministic random-weight Llama. Its words are noise; it exists so that
// every code path runs without downloading anything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if len(os.Args) > 1 && os.Args[1] == "chat" {
		sigs = sigs[1:] // chat takes Ctrl-C itself: it stops a reply, not the command
	}
	ctx, stop := signal.NotifyContext(context.Background(), sigs...)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if code := exitCode(err); code != 0 {
		fmt.Fprintln(os.Stderr, "troupe:", err)
		os.Exit(code)
	}
}

// exitCode is the process's exit status for run's error: 0 for success and
// for a help request (-h), 1 otherwise.
func exitCode(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 1
}

// version names this build: the module version and, when built from a git
// checkout, the commit.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "troupe (unknown build)"
	}
	v := "troupe " + info.Main.Version
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v + " " + info.GoVersion
}

const usage = `usage: troupe <command> [flags]

commands:
  serve        serve the OpenAI-compatible HTTP API (built-in demo model without --model)
  chat         chat in the terminal with a model loaded here (demo model without one) or a server (--url)
  pull         download a Hugging Face Hub model (org/name) into the Hugging Face cache
  bench        load-test a running server with streamed chat requests
  generate     generate tokens from a prompt (built-in demo model without --model)
  model init   write a random-weight checkpoint in the Hugging Face layout
  quantize     write a checkpoint folder as a GGUF file (--type q4_k_m|q8_0|bf16|... --in DIR --out FILE.gguf)
  tokenize     JSON lines {"text"} on stdin -> ids, tokens, byte offsets (--tokenizer DIR|FILE.gguf)
  detokenize   JSON lines {"ids"} on stdin -> text (--tokenizer DIR|FILE.gguf)
  constrain    JSON lines {"schema","texts"} on stdin -> compiled?, accepted, mask times
               (--tokenizer DIR|FILE.gguf; the structured-output engine alone)
  render       JSON lines {"messages", ...} on stdin -> chat-template prompt (--template FILE | --model DIR)
  health       exit 0 when a server's /health is 200 (container healthchecks)
  version      print the build's version

Run 'troupe <command> -h' for a command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "chat":
		return cmdChat(ctx, args[1:], os.Stdin, stdout, stderr)
	case "pull":
		return cmdPull(ctx, args[1:], stdout, stderr)
	case "bench":
		return cmdBench(ctx, args[1:], stdout, stderr)
	case "generate":
		return cmdGenerate(ctx, args[1:], stdout, stderr)
	case "tokenize":
		return cmdTokenize(ctx, args[1:], os.Stdin, stdout, stderr)
	case "detokenize":
		return cmdDetokenize(ctx, args[1:], os.Stdin, stdout, stderr)
	case "constrain":
		return cmdConstrain(ctx, args[1:], os.Stdin, stdout, stderr)
	case "health":
		return cmdHealth(ctx, args[1:], stdout, stderr)
	case "quantize":
		return cmdQuantize(ctx, args[1:], stdout, stderr)
	case "render":
		return cmdRender(ctx, args[1:], os.Stdin, stdout, stderr)
	case "model":
		if len(args) < 2 || args[1] != "init" {
			return errors.New("usage: troupe model init (--preset NAME | --config FILE) --out DIR")
		}
		return cmdModelInit(args[2:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments (serve DIR --port 9000, as vllm serve and ollama run
// take it): Go's flag parsing stops at the first argument, so it parses
// again after each one. It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return nil, err
		}
		if rest = fs.Args(); len(rest) == 0 {
			return positional, nil
		}
		positional, rest = append(positional, rest[0]), rest[1:]
	}
}

// Command troupe serves and runs Hugging Face checkpoints.
//
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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "troupe:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: troupe <command> [flags]

commands:
  serve        serve the OpenAI-compatible HTTP API (built-in demo model without --model)
  bench        load-test a running server with streamed chat requests
  generate     generate tokens from a prompt (built-in demo model without --model)
  model init   write a random-weight checkpoint in the Hugging Face layout
  tokenize     JSON lines {"text"} on stdin -> ids, tokens, byte offsets (--tokenizer DIR)
  detokenize   JSON lines {"ids"} on stdin -> text (--tokenizer DIR)
  render       JSON lines {"messages", ...} on stdin -> chat-template prompt (--template FILE | --model DIR)

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
	case "bench":
		return cmdBench(ctx, args[1:], stdout, stderr)
	case "generate":
		return cmdGenerate(ctx, args[1:], stdout, stderr)
	case "tokenize":
		return cmdTokenize(ctx, args[1:], os.Stdin, stdout, stderr)
	case "detokenize":
		return cmdDetokenize(ctx, args[1:], os.Stdin, stdout, stderr)
	case "render":
		return cmdRender(ctx, args[1:], os.Stdin, stdout, stderr)
	case "model":
		if len(args) < 2 || args[1] != "init" {
			return errors.New("usage: troupe model init (--preset NAME | --config FILE) --out DIR")
		}
		return cmdModelInit(args[2:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	code := cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr, sigs)
	signal.Stop(sigs)
	os.Exit(code)
}

// defaultArgs is what the runner passes to go test when given no
// arguments: README's test command.
func defaultArgs() []string {
	return []string{"-race", "-count=1", "./...", "./tests/..."}
}

// cli parses the runner's arguments, runs go test and returns the exit
// status.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fs := flag.NewFlagSet("testrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("v", false, "also list each test skipped for missing fixtures")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go tool testrun [-v] [-- go test flags and packages]\n\n"+
			"Runs go test -json with the given arguments (default: %s),\n"+
			"prints what go test prints, and ends with one line about parity tests\n"+
			"skipped for missing fixtures. Put go test flags after --.\n\n",
			strings.Join(defaultArgs(), " "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	goArgs := fs.Args()
	if len(goArgs) == 0 {
		goArgs = defaultArgs()
	}
	code, err := run(ctx, config{
		Args:    goArgs,
		Stdout:  stdout,
		Stderr:  stderr,
		Signals: sigs,
		Options: options{verbose: hasFlag(goArgs, "v"), bench: hasFlag(goArgs, "bench"), listSkips: *list},
	})
	if err != nil {
		fmt.Fprintf(stderr, "testrun: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// hasFlag reports whether go test's arguments turn on flag name (-name,
// --name or -test.name, alone or with a value other than "" and "false").
// What follows -args goes to the test binaries, not go test.
func hasFlag(args []string, name string) bool {
	on := false
	for _, a := range args {
		if a == "-args" || a == "--args" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		key, val, hasVal := strings.Cut(strings.TrimPrefix(a, "test."), "=")
		if key == name {
			on = !hasVal || (val != "" && val != "false")
		}
	}
	return on
}

// config is one run of go test.
type config struct {
	// Go is the go command; "go" (from PATH) when empty.
	Go string
	// Dir is the directory go test runs in; the current one when empty.
	Dir string
	// Env is go test's environment; the runner's own when nil.
	Env []string
	// Args follow "go test -json".
	Args []string
	// Stdout receives the report, Stderr go test's own stderr.
	Stdout, Stderr io.Writer
	// Signals received here are forwarded to go test.
	Signals <-chan os.Signal
	// Options says what to print beyond go test's output.
	Options options
}

// run runs go test -json and reports on it. It returns go test's exit
// status (128+N when a signal N ended it). When ctx ends, go test is sent
// an interrupt and, 10 s later, killed.
func run(ctx context.Context, cfg config) (int, error) {
	goCmd := cfg.Go
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, append([]string{"test", "-json"}, cfg.Args...)...)
	cmd.Dir = cfg.Dir
	cmd.Env = cfg.Env
	cmd.Stderr = cfg.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 1, fmt.Errorf("go test: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("starting go test: %w", err)
	}

	done := make(chan struct{})
	forwarded := make(chan struct{})
	go func() {
		defer close(forwarded)
		for {
			select {
			case s := <-cfg.Signals:
				// go test passes the interrupt on to the test binaries;
				// keep reading so that their output is still shown.
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()

	rep := newReporter(cfg.Stdout, cfg.Options)
	readErr := rep.consume(out)
	if readErr != nil {
		// Drain the rest so go test is not blocked writing to a full pipe.
		_, _ = io.Copy(io.Discard, out)
	}
	finishErr := rep.finish()
	waitErr := cmd.Wait()
	close(done)
	<-forwarded

	code := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(waitErr, &exitErr):
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		waitErr = nil
	case waitErr != nil:
		code = 1
		waitErr = fmt.Errorf("go test: %w", waitErr)
	}
	return code, errors.Join(readErr, finishErr, waitErr)
}

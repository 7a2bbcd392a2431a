package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// cmdHealth implements "troupe health": GET a server's /health and exit 0
// on 200, 1 otherwise. Container images have no curl; their healthcheck
// runs this (Dockerfile, compose.yaml).
func cmdHealth(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := os.Getenv("TROUPE_PORT")
	if port == "" {
		port = "8080"
	}
	url := fs.String("url", "http://127.0.0.1:"+port+"/health", "the health URL (default: this machine, port $TROUPE_PORT or 8080)")
	timeout := fs.Duration("timeout", 3*time.Second, "longest wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("health: unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health: %s: %d %s", *url, resp.StatusCode, body)
	}
	fmt.Fprintf(stdout, "%s", body)
	if len(body) > 0 && body[len(body)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	return nil
}

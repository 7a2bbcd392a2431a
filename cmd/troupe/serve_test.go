package main

import (
	"context"
	"flag"
	"strings"
	"testing"
)

func TestEnvFlags(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	port := fs.Int("port", 8080, "")
	kv := fs.String("kv-budget", "1GiB", "")
	cache := fs.Bool("prompt-cache", true, "")
	if err := fs.Parse([]string{"--port", "9000"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TROUPE_PORT", "7000")      // the command line wins
	t.Setenv("TROUPE_KV_BUDGET", "2GiB") // dashes become underscores
	t.Setenv("TROUPE_PROMPT_CACHE", "false")
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := envFlags(fs, set); err != nil {
		t.Fatal(err)
	}
	if *port != 9000 || *kv != "2GiB" || *cache {
		t.Fatalf("port %d kv %s cache %v", *port, *kv, *cache)
	}
	t.Setenv("TROUPE_PROMPT_CACHE", "maybe")
	if err := envFlags(fs, set); err == nil {
		t.Fatal("a bad boolean in the environment was accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"1GiB", 1 << 30, true}, {"512MiB", 512 << 20, true}, {"1048576", 1 << 20, true}, {"1.5GB", 1.5e9, true}, {"-1", 0, false}, {"lots", 0, false}} {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %d, %v", tc.in, got, err)
		}
	}
}

// TestServeResponsesMaxBytes: --responses-max-bytes (and its environment
// variable) must be a size; a bad one stops serve before it starts.
func TestServeResponsesMaxBytes(t *testing.T) {
	var out strings.Builder
	err := cmdServe(context.Background(), []string{"--responses-max-bytes", "lots"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--responses-max-bytes") {
		t.Fatalf("bad --responses-max-bytes: %v", err)
	}
	t.Setenv("TROUPE_RESPONSES_MAX_BYTES", "0")
	err = cmdServe(context.Background(), nil, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--responses-max-bytes") {
		t.Fatalf("TROUPE_RESPONSES_MAX_BYTES=0: %v", err)
	}
}

// TestServeConnectionFlags: the connection-layer flags refuse values that
// would turn a limit off or make it unusable, before anything starts.
func TestServeConnectionFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--read-timeout", "0s"},
		{"--write-timeout", "-1s"},
		{"--idle-timeout", "0s"},
		{"--stream-stall-timeout", "0s"},
		{"--shutdown-timeout", "-1s"},
		{"--max-header-bytes", "100"},
		{"--max-conns", "-1"},
		{"--prepare-timeout", "0s"},
		{"--max-inspections", "-1"},
		{"--inspect-max-input", "0"},
		{"--inspect-max-output", "lots"},
	} {
		_, err := runCLI(t, append([]string{"serve", "--port", "0"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v, want one naming %s", args, err, args[0])
		}
	}
}

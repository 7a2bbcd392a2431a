package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/troupe-ai/troupe/internal/syncbuf"
	nethttp "net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		{"--step-stretch", "0.5"},
	} {
		_, err := runCLI(t, append([]string{"serve", "--port", "0"}, args...)...)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: error %v, want one naming %s", args, err, args[0])
		}
	}
}

// TestServeRefusesBadModels: a model that cannot load stops serve with a
// non-zero exit and a message naming the real problem, before it listens
// (a missing folder, a file that is no GGUF, a folder without config.json or
// tokenizer.json) or once the load fails (no weights).
func TestServeRefusesBadModels(t *testing.T) {
	tmp := t.TempDir()
	noTok := filepath.Join(tmp, "no-tokenizer")
	os.MkdirAll(noTok, 0o755)
	os.WriteFile(filepath.Join(noTok, "config.json"), []byte(`{}`), 0o644)
	noCfg := filepath.Join(tmp, "no-config")
	os.MkdirAll(noCfg, 0o755)
	gguf := filepath.Join(tmp, "model.bin")
	os.WriteFile(gguf, []byte("GGUF\x03\x00\x00\x00"), 0o644)
	weights := filepath.Join(tmp, "model.safetensors")
	os.WriteFile(weights, []byte("{}"), 0o644)
	noWeights := filepath.Join(tmp, "no-weights")
	os.MkdirAll(noWeights, 0o755)
	model := servableDir(t)
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(model, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(noWeights, f), b, 0o644)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing folder", []string{"--model", filepath.Join(tmp, "nope")}, "does not exist"},
		{"missing folder as the argument", []string{filepath.Join(tmp, "nope")}, "does not exist"},
		{"no tokenizer.json", []string{noTok}, "no tokenizer.json"},
		{"no config.json", []string{noCfg}, "no config.json"},
		{"a cut GGUF file: the load fails", []string{gguf}, "truncated file"},
		{"the weights file", []string{weights}, "give the folder"},
		{"no weights: the load fails", []string{noWeights}, "failed to load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() {
				_, err := runCLI(t, append([]string{"serve", "--port", "0", "--threads", "1", "--kv-budget", "8MiB"}, tc.args...)...)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("serve %v: %v, want an error mentioning %q", tc.args, err, tc.want)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("serve %v still running after 60s", tc.args)
			}
		})
	}
}

// TestServeModelArgument: the model may be the argument, with flags before
// or after it (serve DIR --port N, as vllm serve and ollama run take it);
// a second argument, or a different --model beside it, is refused.
func TestServeModelArgument(t *testing.T) {
	model := servableDir(t)
	for _, tc := range []struct {
		name string
		args []string
		want string // "" = it serves
	}{
		{"flags after the model", []string{model, "--port", "0", "--threads", "1"}, ""},
		{"flags before and after", []string{"--threads", "1", model, "--port", "0"}, ""},
		{"the same model twice", []string{"--model", model, model, "--port", "0"}, ""},
		{"two models", []string{model, "--port", "0", "other"}, `unexpected argument "other"`},
		{"a different --model", []string{"--model", t.TempDir(), model}, "two models"},
		{"-m, as llama-server takes it", []string{"-m", model, "--port", "0", "-c", "256"}, ""},
		{"a different -m", []string{"-m", t.TempDir(), model}, "two models"},
		{"a negative --ctx-size", []string{model, "--ctx-size", "-1"}, "--max-model-len"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncbuf.Buffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, append([]string{"serve"}, tc.args...), &out, &errOut) }()
			if tc.want != "" {
				err := <-done
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("serve %v: %v, want an error mentioning %q", tc.args, err, tc.want)
				}
				return
			}
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(errOut.String(), "troupe listening") {
				select {
				case err := <-done:
					t.Fatalf("serve %v ended: %v\n%s", tc.args, err, errOut.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("serve %v did not listen:\n%s", tc.args, errOut.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !strings.Contains(errOut.String(), "model="+filepath.Base(model)) {
				t.Errorf("serve %v did not serve %s:\n%s", tc.args, model, errOut.String())
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve %v after shutdown: %v", tc.args, err)
			}
		})
	}
}

// servableDir is a tiny model with a byte-level tokenizer: a complete
// model folder.
func servableDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, err := runCLI(t, "model", "init", "--preset", "tiny", "--byte-tokenizer", "--seed", "3", "--out", dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServeBanner: once the model is loaded, serve logs one line saying
// what it runs with (weights, kernels, threads, KV pool in tokens, context,
// prompt-cache mode), and the load phases stay out of the info log.
func TestServeBanner(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", servableDir(t), "--port", "0", "--threads", "1", "--kv-budget", "16MiB", "-c", "100"}, &out, &errOut)
	}()
	waitBanner(t, &errOut, done)
	cancel()
	<-done
	var banner string
	for _, l := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(l, `msg="model loaded"`) {
			banner = l
		}
	}
	for _, want := range []string{"arch=LlamaForCausalLM", "weights=", "dtype=", `kernels="cpu/`, "threads=1", `kv_budget="16.0 MiB"`, `kv_pool="`, "kv_committed=true", "context=100", `prompt_cache="prefix pages"`} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner %q lacks %s", banner, want)
		}
	}
	if strings.Contains(errOut.String(), "phase=") {
		t.Errorf("load phases logged at info:\n%s", errOut.String())
	}
}

// TestServeGenerationConfig: --generation-config chooses whether the
// model's generation_config.json sets the sampling defaults, and serve
// says at startup which apply; an unknown mode stops serve before it
// starts.
func TestServeGenerationConfig(t *testing.T) {
	model := servableDir(t)
	gen := `{"temperature": 0.6, "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1}`
	if err := os.WriteFile(filepath.Join(model, "generation_config.json"), []byte(gen), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode, want string
	}{
		{"auto", "generation_config=auto defaults.temperature=0.6 defaults.top_p=0.9 defaults.top_k=20 defaults.repetition_penalty=1.1"},
		{"none", "generation_config=none"},
		{"vllm", "generation_config=none"},
		{"bogus", `generation config "bogus"`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncbuf.Buffer
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", model, "--port", "0", "--threads", "1", "--generation-config", tc.mode}, &out, &errOut)
			}()
			if tc.mode == "bogus" {
				if err := <-done; err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("serve --generation-config bogus: %v, want an error mentioning %q", err, tc.want)
				}
				return
			}
			deadline := time.Now().Add(60 * time.Second)
			for !strings.Contains(errOut.String(), `msg="sampling defaults`) {
				select {
				case err := <-done:
					t.Fatalf("serve ended: %v\n%s", err, errOut.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("serve logged no sampling defaults:\n%s", errOut.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if line := grepLine(errOut.String(), `msg="sampling defaults`); !strings.Contains(line, "level=INFO") || !strings.Contains(line, tc.want) {
				t.Errorf("startup log %q, want an info line with %q", line, tc.want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve after shutdown: %v", err)
			}
		})
	}
}

// grepLine is the first line of s holding sub.
func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestHealthCommand: troupe health (the containers' healthcheck) exits 0
// for a 200 and fails for a 503 or no server.
func TestHealthCommand(t *testing.T) {
	status := 503
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.URL.Path != "/health" {
			nethttp.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		fmt.Fprint(w, `{"status":"loading"}`)
	}))
	defer srv.Close()
	if _, err := runCLI(t, "health", "--url", srv.URL+"/health"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("health of a loading server: %v", err)
	}
	status = 200
	if out, err := runCLI(t, "health", "--url", srv.URL+"/health"); err != nil || !strings.Contains(out, "loading") {
		t.Fatalf("health of a ready server: %q %v", out, err)
	}
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	t.Setenv("TROUPE_PORT", port)
	if _, err := runCLI(t, "health"); err != nil {
		t.Fatalf("health on TROUPE_PORT: %v", err)
	}
	srv.Close()
	if _, err := runCLI(t, "health"); err == nil {
		t.Fatal("health with no server succeeded")
	}
}

// TestServeClusterFlags: the cluster flags are refused, naming the
// problem, before anything starts: without a provider, an unknown
// provider, automanaged without its peers or port; TROUPE_CLUSTER_* set
// them as the other flags.
func TestServeClusterFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gateway"}, "need --cluster-provider"},
		{[]string{"--cluster-peers", "127.0.0.1:7001"}, "need --cluster-provider"},
		{[]string{"--cluster-provider", "zk"}, "want one of automanaged, etcd, k8s"},
		{[]string{"--cluster-provider", "etcd"}, "needs --etcd-endpoints"},
		{[]string{"--cluster-provider", "automanaged", "--cluster-peers", "a:1", "--cluster-provider-port", "1", "--etcd-endpoints", "127.0.0.1:2379"}, "applies to --cluster-provider etcd"},
		{[]string{"--cluster-provider", "automanaged", "--cluster-provider-port", "7001"}, "needs --cluster-peers"},
		{[]string{"--cluster-provider", "automanaged", "--cluster-peers", "127.0.0.1:7001"}, "needs --cluster-peers and --cluster-provider-port"},
		{[]string{"--cluster-provider", "automanaged", "--cluster-peers", "a:1", "--cluster-provider-port", "1", "--cluster-port", "70000"}, "--cluster-port"},
	} {
		_, err := runCLI(t, append([]string{"serve", "--port", "0"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one with %q", c.args, err, c.want)
		}
	}
	// Outside a pod the k8s provider cannot start, and says why.
	t.Setenv("TROUPE_CLUSTER_PROVIDER", "k8s")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := runCLI(t, "serve", "--port", "0", "--threads", "1", "--kv-budget", "8MiB"); err == nil || !strings.Contains(err.Error(), "only inside a Kubernetes pod") {
		t.Errorf("TROUPE_CLUSTER_PROVIDER=k8s outside a pod: error %v, want the provider's explanation", err)
	}
}

// TestServeBoundarySnapshots: --boundary-snapshots auto|off, default from
// TROUPE_BOUNDARY_SNAPSHOTS (the command line wins), reaches the runtime
// (the startup banner says which applies); an invalid value, on the command
// line or in the environment, stops serve before it starts, naming where it
// came from; serve -h documents the flag.
func TestServeBoundarySnapshots(t *testing.T) {
	model := servableDir(t)
	for _, tc := range []struct {
		name string
		args []string
		env  string // TROUPE_BOUNDARY_SNAPSHOTS ("" is unset in effect: auto)
		want string // the banner's boundary_snapshots, or the error's text
		bad  bool
	}{
		{name: "default", want: "boundary_snapshots=auto"},
		{name: "flag off", args: []string{"--boundary-snapshots", "off"}, want: "boundary_snapshots=off"},
		{name: "flag auto", args: []string{"--boundary-snapshots=auto"}, want: "boundary_snapshots=auto"},
		{name: "env off", env: "off", want: "boundary_snapshots=off"},
		{name: "flag wins over env", args: []string{"--boundary-snapshots", "auto"}, env: "off", want: "boundary_snapshots=auto"},
		{name: "bad flag", args: []string{"--boundary-snapshots", "maybe"}, want: `-boundary-snapshots: boundary snapshots "maybe": want "auto" or "off"`, bad: true},
		{name: "bad env", env: "disabled", want: `TROUPE_BOUNDARY_SNAPSHOTS="disabled": boundary snapshots "disabled": want "auto" or "off"`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TROUPE_BOUNDARY_SNAPSHOTS", tc.env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncbuf.Buffer
			done := make(chan error, 1)
			go func() {
				args := append([]string{"serve", model, "--port", "0", "--threads", "1", "--kv-budget", "16MiB"}, tc.args...)
				done <- run(ctx, args, &out, &errOut)
			}()
			if tc.bad {
				if err := <-done; err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("serve: %v, want an error with %q", err, tc.want)
				}
				return
			}
			waitBanner(t, &errOut, done)
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve after shutdown: %v", err)
			}
			if banner := grepLine(errOut.String(), `msg="model loaded"`); !strings.Contains(banner, tc.want) {
				t.Errorf("banner %q lacks %s", banner, tc.want)
			}
		})
	}
	var out, errOut syncbuf.Buffer
	if err := run(context.Background(), []string{"serve", "-h"}, &out, &errOut); exitCode(err) != 0 {
		t.Fatal(err)
	}
	for _, want := range []string{"-boundary-snapshots auto|off", "TROUPE_BOUNDARY_SNAPSHOTS=off"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("serve -h lacks %q:\n%s", want, errOut.String())
		}
	}
}

// waitBanner waits (up to a minute) for a serve run's log to say the model
// loaded; done delivers the run's end, which fails the test.
func waitBanner(t *testing.T, errOut *syncbuf.Buffer, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errOut.String(), `msg="model loaded"`) {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner:\n%s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Command benchpeer measures troupe side by side with llama.cpp on the same
// weights in one run and prints the ratios (`task bench:peer`).
//
//	benchpeer [--serving] [--json FILE] [flags]
//
// It prepares SmolLM2-135M-shaped random weights once in a cache folder
// ($TROUPE_PEER_MODELS, default ${XDG_CACHE_HOME:-~/.cache}/troupe/peer) as
// a Hugging Face bf16 checkpoint and a bf16 GGUF, checks they hold the same
// values, then runs llama-bench and troupe generate back to back (and with
// --serving llama-server and troupe serve under the same load generator),
// and prints one table of troupe, llama.cpp and their ratio, with the load
// averages around the run. See package internal/peerbench.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/troupe-ai/troupe/internal/peerbench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "benchpeer:", err)
		os.Exit(1)
	}
}

// envOr is the environment variable's value, or def where it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultCache is $TROUPE_PEER_MODELS, else ${XDG_CACHE_HOME:-~/.cache}/troupe/peer.
func defaultCache() string {
	if v := os.Getenv("TROUPE_PEER_MODELS"); v != "" {
		return v
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return filepath.Join(os.TempDir(), "troupe-peer")
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "troupe", "peer")
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchpeer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bench := envOr("TROUPE_PEER_BENCH", "/work/shared/bench")
	troupe := fs.String("troupe", "bin/troupe", "troupe binary to measure")
	llamaBin := fs.String("llama-bin", envOr("LLAMA_BIN", filepath.Join(bench, "llamacpp")), "folder holding llama-bench and llama-server ($LLAMA_BIN)")
	script := fs.String("make-script", filepath.Join(bench, "make_smollm_random.py"), "make_smollm_random.py")
	loadgenSrc := fs.String("loadgen", filepath.Join(bench, "loadgen"), "bench/loadgen source folder")
	tokJSON := fs.String("tokenizer-json", filepath.Join(filepath.Dir(bench), "fixtures", "tokenizers", "qwen3", "tokenizer.json"), "tokenizer.json the model script truncates")
	cache := fs.String("models", defaultCache(), "cache folder for the peer models ($TROUPE_PEER_MODELS)")
	python := fs.String("python", "/usr/bin/python3", "python with numpy, for the model script")
	ggufPy := fs.String("gguf-py", "", "folder holding llama.cpp's gguf package (default: exported into the cache from --llama-git)")
	llamaGit := fs.String("llama-git", os.Getenv("LLAMA_CPP_GIT"), "llama.cpp git directory holding commit "+peerbench.LlamaCommit+", to export gguf-py from ($LLAMA_CPP_GIT)")
	seed := fs.Int("seed", 1234, "weight seed")
	threads := fs.Int("threads", 2, "threads on both sides")
	reps := fs.Int("reps", 3, "repetitions of each kernel measurement (medians are reported)")
	kernels := fs.Bool("kernels", true, "run the kernel comparison (llama-bench vs troupe generate)")
	serving := fs.Bool("serving", false, "also run the serving comparison (llama-server vs troupe serve; several minutes)")
	copyMiB := fs.Int("copy-mib", 1024, "buffer size of the memory copy measurement in MiB (0: skip it)")
	genFlags := fs.String("generate-flags", "", "extra flags for troupe generate, space-separated (e.g. --fast-bf16)")
	types := fs.String("types", "", "also compare on GGUF files of these comma-separated types (troupe quantize --type: q8_0,q4_k_m,q6_k,...), written by troupe from the same checkpoint into the cache; both sides run the same file")
	outDir := fs.String("out", "", "folder for logs and loadgen output (default: MODELS/runs/TIMESTAMP)")
	jsonOut := fs.String("json", "", "write every raw number as JSON to this file")
	fromJSON := fs.String("from-json", "", "measure nothing: print the table of a JSON an earlier run wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *fromJSON != "" {
		b, err := os.ReadFile(*fromJSON)
		if err != nil {
			return err
		}
		rep, err := peerbench.ReadReport(b)
		if err != nil {
			return fmt.Errorf("%s: %w", *fromJSON, err)
		}
		return rep.WriteTable(stdout)
	}
	if *threads <= 0 || *reps <= 0 || *copyMiB < 0 {
		return errors.New("--threads and --reps must be positive, --copy-mib not negative")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	bin, err := filepath.Abs(*troupe)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("troupe binary: %w (build it: go build -o bin/troupe ./cmd/troupe)", err)
	}
	if *outDir == "" {
		*outDir = filepath.Join(*cache, "runs", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}

	rep := &peerbench.Report{
		StartedAt: time.Now().UTC().Format(time.RFC3339),
		Host:      hostLine(),
		Threads:   *threads,
		Cores:     runtime.NumCPU(),
	}
	if v, err := exec.CommandContext(ctx, bin, "version").Output(); err == nil {
		rep.TroupeVersion = strings.TrimSpace(string(v))
	}
	rep.Loads = append(rep.Loads, peerbench.LoadMark{At: "start", LoadAvg: peerbench.LoadAvg(), Time: rep.StartedAt})

	models, err := peerbench.Prepare(ctx, peerbench.PrepareConfig{
		CacheDir: *cache, Script: *script, TokenizerJSON: *tokJSON, Python: *python,
		GGUFPy: *ggufPy, LlamaGit: *llamaGit, Seed: *seed, Log: log,
	})
	if err != nil {
		return err
	}
	rep.Models = models
	log.Info("peer models ready, same weights in both", "hf", models.HF, "gguf", models.GGUF, "tensors", models.Check.Tensors)

	if *copyMiB > 0 && *kernels {
		log.Info("measuring memory copy bandwidth", "MiB", *copyMiB)
		cb, err := peerbench.MeasureCopy(ctx, int64(*copyMiB)<<20, *threads, 5)
		if err != nil {
			return err
		}
		rep.Bandwidth = &peerbench.Bandwidth{Copy: cb}
	}
	if *kernels {
		log.Info("kernels: llama-bench, then troupe generate", "reps", *reps, "threads", *threads)
		k, err := peerbench.RunKernels(ctx, peerbench.KernelConfig{
			Troupe: bin, LlamaBin: *llamaBin, Models: models, Threads: *threads, Reps: *reps,
			Prompt: 512, Gen: 128, Vocab: models.Check.Vocab, GenerateFlags: strings.Fields(*genFlags),
		})
		if err != nil {
			return err
		}
		rep.Kernels = k
	}
	for _, typ := range strings.FieldsFunc(*types, func(r rune) bool { return r == ',' }) {
		file := filepath.Join(*cache, "smollm2-135m-random-"+typ+".gguf")
		if _, err := os.Stat(file); err != nil {
			log.Info("quantize: writing a GGUF file from the checkpoint", "type", typ, "file", file)
			if out, err := exec.CommandContext(ctx, bin, "quantize", "--type", typ, "--in", models.HF, "--out", file).CombinedOutput(); err != nil {
				return fmt.Errorf("troupe quantize --type %s: %w: %s", typ, err, out)
			}
		}
		st, err := os.Stat(file)
		if err != nil {
			return err
		}
		log.Info("kernels on a quantized file: llama-bench, then troupe generate", "type", typ, "reps", *reps)
		k, err := peerbench.RunKernels(ctx, peerbench.KernelConfig{
			Troupe: bin, LlamaBin: *llamaBin, Models: models, TroupeModel: file, LlamaModel: file, Threads: *threads, Reps: *reps,
			Prompt: 512, Gen: 128, Vocab: models.Check.Vocab, GenerateFlags: strings.Fields(*genFlags),
		})
		if err != nil {
			return err
		}
		rep.Quant = append(rep.Quant, peerbench.QuantResult{Type: typ, File: file, Bytes: st.Size(), Kernels: k})
	}
	if *serving {
		log.Info("serving: llama-server, then troupe serve, under bench/loadgen", "out", *outDir)
		s, err := peerbench.RunServing(ctx, peerbench.ServingConfig{
			Troupe: bin, LlamaBin: *llamaBin, LoadgenSrc: *loadgenSrc, Models: models,
			Threads: *threads, OutDir: *outDir, ModelName: peerbench.ModelName,
		})
		if err != nil {
			return err
		}
		rep.Serving = s
	}
	rep.Loads = append(rep.Loads, peerbench.LoadMark{At: "end", LoadAvg: peerbench.LoadAvg(), Time: time.Now().UTC().Format(time.RFC3339)})
	rep.Finish()
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if *jsonOut != "" {
		b, err := rep.JSON()
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	return nil
}

// hostLine names the CPU and its core count.
func hostLine() string {
	cpu := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores", cpu, runtime.NumCPU())
}

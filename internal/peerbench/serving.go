package peerbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ServingConfig says what to run for the serving comparison.
type ServingConfig struct {
	Troupe     string // troupe binary
	LlamaBin   string // folder holding llama-server
	LoadgenSrc string // bench/loadgen source folder
	Models     Models
	Threads    int
	OutDir     string // logs and loadgen JSON go here
	ModelName  string // served model name on both sides
}

// ServerRun is one server's loadgen runs.
type ServerRun struct {
	C1 LoadLevel `json:"c1"`
	C8 LoadLevel `json:"c8"`
	// C8Long is the c=8 run again while a second client sends long
	// prompts (MixedLongTokens each) one after the other: how smooth the
	// streams stay while prompts are prefilled beside them.
	C8Long LoadLevel `json:"c8_long_prompts"`
	Multi  MultiTurn `json:"multi_turn"`
	Log    string    `json:"log"`
}

// MixedLongTokens is the length of the long prompts sent beside the c=8
// streams in the mixed run.
const MixedLongTokens = 1500

// ServingResult holds both servers' results.
type ServingResult struct {
	LlamaArgs  []string   `json:"llama_server_args"`
	TroupeArgs []string   `json:"troupe_serve_args"`
	Llama      ServerRun  `json:"llama"`
	Troupe     ServerRun  `json:"troupe"`
	Loads      []LoadMark `json:"loadavg"`
}

// RunServing follows bench/side-by-side.sh: llama-server first, then troupe
// serve, on the same port and weights, one at a time, each driven by
// bench/loadgen at concurrency 1 (8 requests) and 8 (32 requests), the
// c=8 run again beside a client sending MixedLongTokens-token prompts one
// after another (beyond side-by-side.sh: how smooth streams stay while
// long prompts are prefilled), and then the multi-turn scenario (8
// conversations). troupe also gets --threads so that both use the same
// number of cores on any machine.
func RunServing(ctx context.Context, c ServingConfig) (*ServingResult, error) {
	if err := os.MkdirAll(c.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	lg := filepath.Join(c.OutDir, "loadgen")
	// loadgen is its own module outside this workspace: build it with GOWORK off.
	if _, err := runOutput(ctx, []string{"GOWORK=off"}, c.LoadgenSrc, "go", "build", "-o", lg, "."); err != nil {
		return nil, fmt.Errorf("serving: build loadgen: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("serving: %w", err)
	}
	p := strconv.Itoa(port)
	base := "http://127.0.0.1:" + p
	threads := strconv.Itoa(c.Threads)
	res := &ServingResult{
		LlamaArgs: []string{"-m", c.Models.GGUF, "-a", c.ModelName, "--host", "127.0.0.1", "--port", p,
			"-t", threads, "-tb", threads, "-c", "8192", "-np", "8", "-cb", "--no-webui", "--metrics"},
		TroupeArgs: []string{"serve", "--model", c.Models.HF, "--served-model-name", c.ModelName,
			"--host", "127.0.0.1", "--port", p, "--parallel", "8", "--threads", threads},
	}
	res.Loads = append(res.Loads, mark("serving start"))
	sides := []struct {
		name, bin, ready string
		args             []string
		run              *ServerRun
	}{
		{"llama", filepath.Join(c.LlamaBin, "llama-server"), "/health", res.LlamaArgs, &res.Llama},
		{"troupe", c.Troupe, "/ready", res.TroupeArgs, &res.Troupe},
	}
	for _, s := range sides {
		s.run.Log = filepath.Join(c.OutDir, s.name+"-server.log")
		srv, err := startServer(s.name+" server", s.run.Log, s.bin, s.args...)
		if err != nil {
			return nil, fmt.Errorf("serving: %w", err)
		}
		err = srv.waitReady(ctx, base+s.ready, 3*time.Minute)
		if err == nil {
			err = runLoads(ctx, lg, base, c.ModelName, s.name, c.OutDir, s.run)
		}
		srv.stop(15 * time.Second)
		if err != nil {
			return nil, fmt.Errorf("serving: %w", err)
		}
		res.Loads = append(res.Loads, mark("after "+s.name))
	}
	return res, nil
}

// runLoads runs side-by-side.sh's three loadgen invocations against one server.
func runLoads(ctx context.Context, lg, base, model, name, outDir string, run *ServerRun) error {
	common := []string{"--url", base, "--model", model, "--prompt-tokens", "256", "--shared-prefix-tokens", "200", "--max-tokens", "64"}
	nonce := strconv.FormatInt(time.Now().UnixNano()%1_000_000, 10)
	for _, c := range []int{1, 8} {
		reqs := 32
		if c == 1 {
			reqs = 8
		}
		out := filepath.Join(outDir, fmt.Sprintf("load-%s-c%d.json", name, c))
		args := append(append([]string(nil), common...), "--concurrency", strconv.Itoa(c), "--requests", strconv.Itoa(reqs),
			"--run-id", fmt.Sprintf("%s-c%d-%s", name, c, nonce), "--out", out)
		lvl, err := loadgenRun(ctx, lg, args, out)
		if err != nil {
			return err
		}
		if len(lvl.Load) != 1 {
			return fmt.Errorf("%s: loadgen wrote %d load levels, want 1", out, len(lvl.Load))
		}
		if c == 1 {
			run.C1 = lvl.Load[0]
		} else {
			run.C8 = lvl.Load[0]
		}
	}
	// The c=8 run again, with long prompts arriving beside it.
	out := filepath.Join(outDir, fmt.Sprintf("load-%s-c8-long.json", name))
	longCtx, stopLong := context.WithCancel(ctx)
	longDone := make(chan struct{})
	go func() {
		defer close(longDone)
		args := []string{"--url", base, "--model", model, "--prompt-tokens", strconv.Itoa(MixedLongTokens), "--shared-prefix-tokens", "0",
			"--max-tokens", "1", "--concurrency", "1", "--requests", "1000", "--no-calibrate",
			"--run-id", fmt.Sprintf("%s-long-%s", name, nonce), "--out", filepath.Join(outDir, fmt.Sprintf("load-%s-long.json", name))}
		runOutput(longCtx, nil, "", lg, args...) // stopped when the c=8 run ends
	}()
	args := append(append([]string(nil), common...), "--concurrency", "8", "--requests", "32",
		"--run-id", fmt.Sprintf("%s-c8l-%s", name, nonce), "--out", out)
	lvl, err := loadgenRun(ctx, lg, args, out)
	stopLong()
	<-longDone
	if err != nil {
		return err
	}
	if len(lvl.Load) != 1 {
		return fmt.Errorf("%s: loadgen wrote %d load levels, want 1", out, len(lvl.Load))
	}
	run.C8Long = lvl.Load[0]
	out = filepath.Join(outDir, "multi-"+name+".json")
	args = append(append([]string(nil), common...), "--multi-turn", "--concurrency", "1", "--requests", "8",
		"--turn2-tokens", "64", "--run-id", fmt.Sprintf("%s-m-%s", name, nonce), "--out", out)
	s, err := loadgenRun(ctx, lg, args, out)
	if err != nil {
		return err
	}
	if len(s.MultiTurn) != 1 {
		return fmt.Errorf("%s: loadgen wrote %d multi-turn results, want 1", out, len(s.MultiTurn))
	}
	run.Multi = s.MultiTurn[0]
	return nil
}

func loadgenRun(ctx context.Context, lg string, args []string, out string) (LoadgenSummary, error) {
	if _, err := runOutput(ctx, nil, "", lg, args...); err != nil {
		return LoadgenSummary{}, err
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return LoadgenSummary{}, fmt.Errorf("loadgen: %w", err)
	}
	return ParseLoadgen(b)
}

// Rows are the serving rows of the table.
func (r *ServingResult) Rows() []Row {
	l, t := r.Llama, r.Troupe
	return []Row{
		{Metric: "c=1 TTFT p50", Unit: "ms", Lower: true, Troupe: t.C1.TTFTms.P50, Llama: l.C1.TTFTms.P50},
		{Metric: "c=1 inter-token p50", Unit: "ms", Lower: true, Troupe: t.C1.ITLms.P50, Llama: l.C1.ITLms.P50},
		{Metric: "c=1 output", Unit: "tok/s", Troupe: t.C1.OutputTokPerS, Llama: l.C1.OutputTokPerS},
		{Metric: "c=8 output", Unit: "tok/s", Troupe: t.C8.OutputTokPerS, Llama: l.C8.OutputTokPerS},
		{Metric: "c=8 requests", Unit: "req/s", Troupe: t.C8.RequestsPerS, Llama: l.C8.RequestsPerS},
		{Metric: "c=8 TTFT p50", Unit: "ms", Lower: true, Troupe: t.C8.TTFTms.P50, Llama: l.C8.TTFTms.P50},
		{Metric: "c=8 inter-token p50", Unit: "ms", Lower: true, Troupe: t.C8.ITLms.P50, Llama: l.C8.ITLms.P50},
		{Metric: "c=8 inter-token p99", Unit: "ms", Lower: true, Troupe: t.C8.ITLms.P99, Llama: l.C8.ITLms.P99},
		{Metric: "c=8 + long prompts output", Unit: "tok/s", Troupe: t.C8Long.OutputTokPerS, Llama: l.C8Long.OutputTokPerS},
		{Metric: "c=8 + long prompts inter-token p50", Unit: "ms", Lower: true, Troupe: t.C8Long.ITLms.P50, Llama: l.C8Long.ITLms.P50},
		{Metric: "c=8 + long prompts inter-token p99", Unit: "ms", Lower: true, Troupe: t.C8Long.ITLms.P99, Llama: l.C8Long.ITLms.P99},
		{Metric: "multi-turn turn-2 TTFT p50", Unit: "ms", Lower: true, Troupe: t.Multi.Turn2TTFTms.P50, Llama: l.Multi.Turn2TTFTms.P50},
		{Metric: "multi-turn cold TTFT p50", Unit: "ms", Lower: true, Troupe: t.Multi.ColdTTFTms.P50, Llama: l.Multi.ColdTTFTms.P50},
		{Metric: "multi-turn turn-2 / cold TTFT", Unit: "", Lower: true, Troupe: quotient(t.Multi.Turn2TTFTms.P50, t.Multi.ColdTTFTms.P50),
			Llama: quotient(l.Multi.Turn2TTFTms.P50, l.Multi.ColdTTFTms.P50)},
	}
}

// quotient is a/b, 0 when b is 0 (a run that did not happen).
func quotient(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Errors counts failed requests on each side (they make a row meaningless).
func (r *ServingResult) Errors() (troupe, llama int) {
	t, l := r.Troupe, r.Llama
	return t.C1.Errors + t.C8.Errors + t.C8Long.Errors + t.Multi.Errors, l.C1.Errors + l.C8.Errors + l.C8Long.Errors + l.Multi.Errors
}

package peerbench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
)

// KernelConfig says what to run for the kernel comparison.
type KernelConfig struct {
	Troupe   string // troupe binary
	LlamaBin string // folder holding llama-bench
	Models   Models
	// TroupeModel and LlamaModel are the model each side runs (default:
	// Models.HF and Models.GGUF); a quantized comparison gives both the
	// same GGUF file.
	TroupeModel, LlamaModel string
	Threads                 int // -t for llama-bench, --threads for troupe
	Reps                    int // repetitions on each side (llama-bench -r)
	Prompt                  int // prompt length for prefill and the deep decode (512)
	Gen                     int // generated tokens (128)
	Vocab                   int // prompt ids are drawn below this
	// GenerateFlags are extra flags for every troupe generate run (e.g. --fast-bf16).
	GenerateFlags []string
}

// KernelResult holds every raw number of the kernel comparison.
type KernelResult struct {
	LlamaBenchArgs []string         `json:"llama_bench_args"`
	LlamaBench     []LlamaBenchTest `json:"llama_bench"`
	// TroupeArgs is one run of each troupe shape (prompt ids elided).
	TroupeArgs [][]string `json:"troupe_args"`
	// TroupeLong are the runs with a Prompt-token prompt and Gen tokens:
	// prefill ppPrompt and decode at depth Prompt.
	TroupeLong []GenerateTimings `json:"troupe_long"`
	// TroupeShort are the runs with a 1-token prompt and Gen+1 tokens:
	// decode from depth 0.
	TroupeShort []GenerateTimings `json:"troupe_short"`
	Loads       []LoadMark        `json:"loadavg"`

	// Medians, tokens/s.
	TroupePrefill float64 `json:"troupe_prefill_tok_s"`
	TroupeDecode0 float64 `json:"troupe_decode_d0_tok_s"`
	TroupeDecodeN float64 `json:"troupe_decode_dN_tok_s"`
	LlamaPrefill  float64 `json:"llama_prefill_tok_s"`
	LlamaDecode0  float64 `json:"llama_decode_d0_tok_s"`
	LlamaDecodeN  float64 `json:"llama_decode_dN_tok_s"`
	Prompt        int     `json:"prompt"`
	Gen           int     `json:"gen"`
}

// promptIDs is a fixed pseudo-random prompt of n ids below vocab (llama-bench
// also times random tokens): the same every run, so runs compare.
func promptIDs(n, vocab int) string {
	r := rand.New(rand.NewPCG(1, 2))
	parts := make([]string, n)
	for i := range parts {
		parts[i] = strconv.Itoa(r.IntN(vocab))
	}
	return strings.Join(parts, ",")
}

// RunKernels runs llama-bench once (it repeats Reps times itself), then
// troupe generate Reps times for each shape, and takes medians.
func RunKernels(ctx context.Context, c KernelConfig) (*KernelResult, error) {
	if c.Vocab <= 0 || c.Prompt <= 0 || c.Gen <= 0 || c.Reps <= 0 {
		return nil, fmt.Errorf("kernels: vocab %d, prompt %d, gen %d, reps %d must be positive", c.Vocab, c.Prompt, c.Gen, c.Reps)
	}
	res := &KernelResult{Prompt: c.Prompt, Gen: c.Gen}
	res.Loads = append(res.Loads, mark("kernels start"))
	if c.TroupeModel == "" {
		c.TroupeModel = c.Models.HF
	}
	if c.LlamaModel == "" {
		c.LlamaModel = c.Models.GGUF
	}
	res.LlamaBenchArgs = []string{"-m", c.LlamaModel, "-p", strconv.Itoa(c.Prompt), "-n", strconv.Itoa(c.Gen),
		"-d", "0," + strconv.Itoa(c.Prompt), "-t", strconv.Itoa(c.Threads), "-r", strconv.Itoa(c.Reps), "-o", "json"}
	out, err := runOutput(ctx, nil, "", filepath.Join(c.LlamaBin, "llama-bench"), res.LlamaBenchArgs...)
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	if res.LlamaBench, err = ParseLlamaBench(out); err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	res.Loads = append(res.Loads, mark("after llama-bench"))

	base := []string{"generate", "--model", c.TroupeModel, "--temperature", "0", "--ignore-eos", "--json",
		"--threads", strconv.Itoa(c.Threads)}
	base = append(base, c.GenerateFlags...)
	long := append(append([]string(nil), base...), "--prompt-ids", promptIDs(c.Prompt, c.Vocab), "--max-tokens", strconv.Itoa(c.Gen))
	short := append(append([]string(nil), base...), "--prompt-ids", promptIDs(1, c.Vocab), "--max-tokens", strconv.Itoa(c.Gen+1))
	res.TroupeArgs = [][]string{shorten(long), short}
	// One unmeasured run first, as llama-bench warms up before it times:
	// it faults the weights into memory.
	warm := append(append([]string(nil), base...), "--prompt-ids", promptIDs(8, c.Vocab), "--max-tokens", "8")
	if _, err := runOutput(ctx, nil, "", c.Troupe, warm...); err != nil {
		return nil, fmt.Errorf("kernels: warm-up: %w", err)
	}
	for range c.Reps {
		out, err := runOutput(ctx, nil, "", c.Troupe, long...)
		if err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		t, err := ParseGenerate(out, c.Prompt, c.Gen)
		if err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		res.TroupeLong = append(res.TroupeLong, t)
		if out, err = runOutput(ctx, nil, "", c.Troupe, short...); err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		if t, err = ParseGenerate(out, 1, c.Gen+1); err != nil {
			return nil, fmt.Errorf("kernels: %w", err)
		}
		res.TroupeShort = append(res.TroupeShort, t)
	}
	res.Loads = append(res.Loads, mark("after troupe generate"))
	if err := res.summarize(); err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	return res, nil
}

// summarize fills the medians from the raw runs.
func (r *KernelResult) summarize() error {
	pp, err := FindLlamaBench(r.LlamaBench, r.Prompt, 0, 0)
	if err != nil {
		return err
	}
	tg0, err := FindLlamaBench(r.LlamaBench, 0, r.Gen, 0)
	if err != nil {
		return err
	}
	tgN, err := FindLlamaBench(r.LlamaBench, 0, r.Gen, r.Prompt)
	if err != nil {
		return err
	}
	r.LlamaPrefill, r.LlamaDecode0, r.LlamaDecodeN = pp.MedianTS(), tg0.MedianTS(), tgN.MedianTS()
	ts, _ := r.samples()
	r.TroupePrefill, r.TroupeDecode0, r.TroupeDecodeN = Median(ts[0]), Median(ts[1]), Median(ts[2])
	return nil
}

// samples are each side's per-repetition tokens/s for the three rows.
func (r *KernelResult) samples() (troupe, llama [3][]float64) {
	for _, t := range r.TroupeLong {
		troupe[0] = append(troupe[0], t.PrefillTokPerS())
		troupe[2] = append(troupe[2], t.DecodeTokPerS())
	}
	for _, t := range r.TroupeShort {
		troupe[1] = append(troupe[1], t.DecodeTokPerS())
	}
	for i, k := range [][3]int{{r.Prompt, 0, 0}, {0, r.Gen, 0}, {0, r.Gen, r.Prompt}} {
		if t, err := FindLlamaBench(r.LlamaBench, k[0], k[1], k[2]); err == nil {
			llama[i] = t.SamplesTS
		}
	}
	return troupe, llama
}

// Rows are the kernel rows of the table.
func (r *KernelResult) Rows() []Row {
	ts, ls := r.samples()
	rows := []Row{
		{Metric: fmt.Sprintf("prefill pp%d", r.Prompt), Unit: "tok/s", Troupe: r.TroupePrefill, Llama: r.LlamaPrefill},
		{Metric: fmt.Sprintf("decode tg%d @ depth 0", r.Gen), Unit: "tok/s", Troupe: r.TroupeDecode0, Llama: r.LlamaDecode0},
		{Metric: fmt.Sprintf("decode tg%d @ depth %d", r.Gen, r.Prompt), Unit: "tok/s", Troupe: r.TroupeDecodeN, Llama: r.LlamaDecodeN},
	}
	for i := range rows {
		rows[i].TroupeSpread, rows[i].LlamaSpread = Spread(ts[i]), Spread(ls[i])
	}
	return rows
}

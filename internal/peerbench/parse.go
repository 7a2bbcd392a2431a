package peerbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Median is the middle of xs (the mean of the two middle values for an even
// count); 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Spread is (max - min) / median of xs: how far apart repetitions landed
// (0.2 = the slowest and fastest differ by 20% of the median). 0 for fewer
// than two values or a median that is not positive.
func Spread(xs []float64) float64 {
	m := Median(xs)
	if len(xs) < 2 || !(m > 0) {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / m
}

// LlamaBenchTest is one test of `llama-bench -o json`: a prompt-processing
// test (NPrompt > 0, NGen == 0) or a generation test (NGen > 0) at a KV
// depth, with its per-repetition speeds.
type LlamaBenchTest struct {
	NPrompt   int       `json:"n_prompt"`
	NGen      int       `json:"n_gen"`
	NDepth    int       `json:"n_depth"`
	NThreads  int       `json:"n_threads"`
	AvgTS     float64   `json:"avg_ts"`
	StddevTS  float64   `json:"stddev_ts"`
	SamplesTS []float64 `json:"samples_ts"`
	ModelType string    `json:"model_type"`
	ModelSize int64     `json:"model_size"`
	Build     string    `json:"build_commit"`
	CPU       string    `json:"cpu_info"`
	FlashAttn any       `json:"flash_attn"`
}

// MedianTS is the median of the repetitions' tokens/s (avg_ts when the
// samples are missing).
func (t LlamaBenchTest) MedianTS() float64 {
	if len(t.SamplesTS) == 0 {
		return t.AvgTS
	}
	return Median(t.SamplesTS)
}

// ParseLlamaBench reads llama-bench's JSON output (-o json): an array of tests.
func ParseLlamaBench(b []byte) ([]LlamaBenchTest, error) {
	var ts []LlamaBenchTest
	if err := json.Unmarshal(b, &ts); err != nil {
		return nil, fmt.Errorf("llama-bench output: %w", err)
	}
	if len(ts) == 0 {
		return nil, errors.New("llama-bench output: no tests")
	}
	return ts, nil
}

// FindLlamaBench returns the prompt test of nPrompt tokens (nGen == 0) or
// the generation test of nGen tokens (nPrompt == 0) at the given depth.
func FindLlamaBench(ts []LlamaBenchTest, nPrompt, nGen, depth int) (LlamaBenchTest, error) {
	for _, t := range ts {
		if t.NPrompt == nPrompt && t.NGen == nGen && t.NDepth == depth {
			return t, nil
		}
	}
	return LlamaBenchTest{}, fmt.Errorf("llama-bench output has no test pp%d tg%d at depth %d", nPrompt, nGen, depth)
}

// GenerateTimings is the "timings" object of `troupe generate --json`. The
// first generated token comes out of the prefill, so PromptMS covers the
// prompt and that token, and GenerateMS the remaining DecodeSteps steps.
type GenerateTimings struct {
	PromptTokens    int     `json:"prompt_tokens"`
	PromptMS        float64 `json:"prompt_ms"`
	GeneratedTokens int     `json:"generated_tokens"`
	GenerateMS      float64 `json:"generate_ms"`
	DecodeSteps     int     `json:"decode_steps"`
	Backend         string  `json:"backend"`
}

// PrefillTokPerS is prompt_tokens / prompt_ms, in tokens per second.
func (g GenerateTimings) PrefillTokPerS() float64 {
	return perSecond(g.PromptTokens, g.PromptMS)
}

// DecodeTokPerS is decode_steps / generate_ms, in tokens per second.
func (g GenerateTimings) DecodeTokPerS() float64 {
	return perSecond(g.DecodeSteps, g.GenerateMS)
}

func perSecond(n int, ms float64) float64 {
	if n <= 0 || ms <= 0 {
		return 0
	}
	return float64(n) / ms * 1000
}

// ParseGenerate reads the timings out of `troupe generate --json` output
// (one JSON object; its ids and logits are not kept). It checks that the
// run did what was asked: the prompt length and the number of tokens.
func ParseGenerate(b []byte, wantPrompt, wantGenerated int) (GenerateTimings, error) {
	var out struct {
		Timings *GenerateTimings `json:"timings"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return GenerateTimings{}, fmt.Errorf("troupe generate output: %w", err)
	}
	if out.Timings == nil {
		return GenerateTimings{}, errors.New("troupe generate output: no timings")
	}
	t := *out.Timings
	if t.PromptTokens != wantPrompt || t.GeneratedTokens != wantGenerated {
		return t, fmt.Errorf("troupe generate ran %d prompt tokens and generated %d, want %d and %d",
			t.PromptTokens, t.GeneratedTokens, wantPrompt, wantGenerated)
	}
	return t, nil
}

// Dist is a latency distribution as bench/loadgen writes it, in ms.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// LoadLevel is one concurrency level of a bench/loadgen load run.
type LoadLevel struct {
	Concurrency      int     `json:"concurrency"`
	Requests         int     `json:"requests"`
	Errors           int     `json:"errors"`
	FirstError       string  `json:"first_error"`
	WallS            float64 `json:"wall_s"`
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokPerS    float64 `json:"output_tok_per_s"`
	PromptTokensMean float64 `json:"prompt_tokens_mean"`
	OutputTokensMean float64 `json:"output_tokens_mean"`
	CachedTokensMean float64 `json:"cached_tokens_mean"`
	TTFTms           Dist    `json:"ttft_ms"`
	ITLms            Dist    `json:"itl_ms"`
	TPOTms           Dist    `json:"tpot_ms"`
	E2Ems            Dist    `json:"e2e_ms"`
}

// MultiTurn is bench/loadgen's multi-turn result: turn 2 resends turn 1 and
// its reply, the cold request is as long with all-new text.
type MultiTurn struct {
	Concurrency       int     `json:"concurrency"`
	Conversations     int     `json:"conversations"`
	Errors            int     `json:"errors"`
	FirstError        string  `json:"first_error"`
	Turn1TTFTms       Dist    `json:"turn1_ttft_ms"`
	Turn2TTFTms       Dist    `json:"turn2_ttft_ms"`
	ColdTTFTms        Dist    `json:"cold_ttft_ms"`
	Turn2PromptTokens float64 `json:"turn2_prompt_tokens_mean"`
	Turn2CachedTokens float64 `json:"turn2_cached_tokens_mean"`
	ColdPromptTokens  float64 `json:"cold_prompt_tokens_mean"`
}

// LoadgenSummary is the part of bench/loadgen's --out JSON the report uses.
type LoadgenSummary struct {
	Load      []LoadLevel `json:"load"`
	MultiTurn []MultiTurn `json:"multi_turn"`
}

// ParseLoadgen reads bench/loadgen's JSON summary.
func ParseLoadgen(b []byte) (LoadgenSummary, error) {
	var s LoadgenSummary
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("loadgen output: %w", err)
	}
	if len(s.Load) == 0 && len(s.MultiTurn) == 0 {
		return s, errors.New("loadgen output: neither load nor multi_turn results")
	}
	return s, nil
}

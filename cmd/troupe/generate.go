package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/tokenizer"
)

func cmdGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "model folder (config.json, model.safetensors), GGUF file (or a folder holding one), or ollama:NAME; default: the built-in demo model")
	prompt := fs.String("prompt", "", "prompt text, encoded with the model's tokenizer.json (special tokens such as BOS added as the tokenizer does)")
	promptIDs := fs.String("prompt-ids", "", "prompt as comma-separated token ids")
	maxTokens := fs.Int("max-tokens", 32, "tokens to generate")
	temp := fs.Float64("temperature", 0, "sampling temperature (0 = greedy)")
	topK := fs.Int("top-k", 0, "top-k filtering (0 = off)")
	topP := fs.Float64("top-p", 0, "nucleus filtering (0 = off)")
	minP := fs.Float64("min-p", 0, "min-p filtering (0 = off)")
	rep := fs.Float64("repetition-penalty", 0, "repetition penalty (0 or 1 = off)")
	seed := fs.Int64("seed", -1, "sampling seed (-1 = random)")
	threads := fs.Int("threads", 0, "compute threads (0 = all cores)")
	quantize := fs.String("quantize", "", "quantize the weight matrices at load: "+quantizeTypes+" (default: keep their types)")
	mmapWeights := fs.Bool("mmap", false, "keep the weights memory-mapped from the checkpoint instead of copying them into huge-page memory (slower decode, no private copy)")
	kernels := fs.String("kernels", "", "force a kernel set: avx512bf16, avx2, portable (default: best available)")
	fastBF16 := fs.Bool("fast-bf16", false, "round activations to bf16 in bf16 matmuls (faster prefill, ~3 significant digits)")
	ignoreEOS := fs.Bool("ignore-eos", false, "do not stop at the model's EOS ids")
	asJSON := fs.Bool("json", false, "print one JSON object with ids, last prompt logits and timings")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("generate: unexpected argument %q", fs.Arg(0))
	}
	var ids []int32
	switch {
	case *prompt != "" && *promptIDs != "":
		return errors.New("generate: give --prompt or --prompt-ids, not both")
	case *promptIDs != "":
		var err error
		if ids, err = parseIDs(*promptIDs); err != nil {
			return fmt.Errorf("generate: --prompt-ids: %w", err)
		}
	case *prompt != "":
	default:
		return errors.New("generate: give --prompt TEXT or --prompt-ids (comma-separated token ids)")
	}
	if *maxTokens < 0 {
		return fmt.Errorf("generate: --max-tokens must be >= 0, got %d", *maxTokens)
	}
	if *threads < 0 {
		return fmt.Errorf("generate: --threads must be >= 0, got %d", *threads)
	}
	path, err := resolveModel(*dir)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	if path == "" {
		var err error
		if path, err = checkpoint.Demo(); err != nil {
			return err
		}
	}
	// Read the weights now (as serve does), not during the first forward.
	qtype, err := parseQuantize(*quantize)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	m, err := model.LoadWith(ctx, path, model.LoadOptions{Prefault: true, Mmap: *mmapWeights, Quantize: qtype})
	if err != nil {
		return err
	}
	defer m.Close()
	info := m.Info()
	// With --prompt the text is encoded and the answer decoded by the
	// model's own tokenizer; --prompt-ids needs none.
	var tok *tokenizer.Tokenizer
	if *prompt != "" {
		if tok, err = tokenizer.LoadPath(path, tokenizer.Options{}); err != nil {
			return fmt.Errorf("generate: --prompt: %w (use --prompt-ids for a model without tokenizer.json)", err)
		}
		if ids = tok.EncodeIDs(*prompt, true); len(ids) == 0 {
			return errors.New("generate: --prompt encodes to no tokens")
		}
	}
	for _, id := range ids {
		if int(id) >= info.Vocab {
			return fmt.Errorf("generate: prompt id %d is outside the vocabulary of %d", id, info.Vocab)
		}
	}
	if *threads == 0 {
		*threads = runtime.NumCPU()
	}
	dev, err := cpu.New(cpu.Options{Threads: *threads, Kernels: *kernels, FastBF16: *fastBF16})
	if err != nil {
		return err
	}
	defer dev.Close()
	// Setup that a server does once, before the timed run: weights packed
	// for the prefill kernels, step buffers and KV pool (below) committed.
	if _, err := model.PackWeights(m, dev); err != nil {
		return err
	}
	model.Reserve(m, len(ids))

	params := sample.Params{
		Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP),
		RepetitionPenalty: float32(*rep),
	}
	if *seed >= 0 {
		params.Seed, params.HasSeed = uint64(*seed), true
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	req := engine.Request{Prompt: ids, MaxTokens: *maxTokens, Sample: params, WantPromptLogits: true}
	if !*ignoreEOS {
		for _, e := range info.EOS {
			req.StopIDs = append(req.StopIDs, int32(e))
		}
	}
	total := len(ids) + *maxTokens
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, (total+15)/16, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	pool.Prefault()
	res, err := engine.Generate(ctx, m, dev, pool, []engine.Request{req}, engine.Options{StepTokens: len(ids)})
	if err != nil {
		return err
	}
	r := res[0]
	var text *string
	if tok != nil {
		// A continuation decoder keeps the first token's leading space
		// (SentencePiece's "▁a" after "Lily was" is " a").
		dec := tok.NewContinuationDecoder(true)
		var b strings.Builder
		for _, id := range r.IDs {
			b.WriteString(dec.Add(id))
		}
		b.WriteString(dec.Flush())
		s := b.String()
		text = &s
	}
	if !*asJSON {
		if text != nil {
			fmt.Fprintln(stdout, *prompt+*text)
		} else {
			fmt.Fprintln(stdout, joinIDs(r.IDs))
		}
		fmt.Fprintf(stderr, "%s · %s · prompt %d tokens in %.1f ms · %d generated in %.1f ms\n",
			info.Arch, dev.Name(), len(ids), ms(r.Prefill), len(r.IDs), ms(r.Decode))
		return nil
	}
	out := generateJSON{IDs: r.IDs, Text: text, PromptLastLogits: jsonFloats(r.PromptLastLogits)}
	if out.IDs == nil {
		out.IDs = []int32{}
	}
	out.Timings.PromptTokens = len(ids)
	out.Timings.PromptMS = ms(r.Prefill)
	out.Timings.GeneratedTokens = len(r.IDs)
	out.Timings.GenerateMS = ms(r.Decode)
	out.Timings.DecodeSteps = max(len(r.IDs)-1, 0)
	out.Timings.Backend = dev.Name()
	enc := json.NewEncoder(stdout)
	return enc.Encode(out)
}

// generateJSON is the --json output. The first generated token comes out of
// the prefill, so prompt_ms covers the prompt forward pass and that token,
// and generate_ms the remaining decode_steps single-token steps.
type generateJSON struct {
	IDs              []int32    `json:"ids"`
	Text             *string    `json:"text,omitempty"` // with --prompt: the generated text
	PromptLastLogits jsonFloats `json:"prompt_last_logits"`
	Timings          struct {
		PromptTokens    int     `json:"prompt_tokens"`
		PromptMS        float64 `json:"prompt_ms"`
		GeneratedTokens int     `json:"generated_tokens"`
		GenerateMS      float64 `json:"generate_ms"`
		DecodeSteps     int     `json:"decode_steps"`
		Backend         string  `json:"backend"`
	} `json:"timings"`
}

// jsonFloats encodes float32 values as the shortest decimal that reads back
// as the same float32 (non-finite values, which JSON cannot hold, as null).
type jsonFloats []float32

func (f jsonFloats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 12*len(f)+2)
	b = append(b, '[')
	for i, v := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	}
	return append(b, ']'), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("no token ids")
	}
	return ids, nil
}

func joinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, " ")
}

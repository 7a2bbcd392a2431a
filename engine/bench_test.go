package engine_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/tokenizer"
)

// benchModel writes (once per machine, in the temp dir) and loads a
// random-weight checkpoint with SmolLM2-135M's shapes.
func benchModel(b *testing.B, dtype gpu.DType) model.Model {
	return presetModel(b, "smollm2-135m", dtype)
}

// presetModel writes (once per machine, in the temp dir) and loads a
// random-weight checkpoint of a preset. A quantized dtype loads the bf16
// checkpoint with its matrices quantized to it (serve --quantize).
func presetModel(b *testing.B, preset string, dtype gpu.DType) model.Model {
	b.Helper()
	var opts model.LoadOptions
	if dtype.Quantized() {
		opts.Quantize, dtype = dtype, gpu.BF16
	}
	dir := filepath.Join(os.TempDir(), "troupe-bench", preset+"-"+dtype.String())
	if _, err := os.Stat(filepath.Join(dir, "model.safetensors")); err != nil {
		cfg, err := checkpoint.Preset(preset)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkpoint.Write(dir, cfg, checkpoint.Options{DType: dtype, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	return loadModel(b, dir, opts)
}

// loadModel loads the model at path (a folder or a GGUF file) for the rest
// of b.
func loadModel(b *testing.B, path string, opts model.LoadOptions) model.Model {
	b.Helper()
	m, err := model.LoadWith(context.Background(), path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

func benchDevice(b *testing.B, fast bool) gpu.Device {
	d, err := cpu.New(cpu.Options{FastBF16: fast})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(d.Close)
	return d
}

func prompt(n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(1 + (i*7919)%49000)
	}
	return p
}

// benchPool is a pool for 8 sequences of up to 1024 positions; benchmarks
// make one per model and reuse it (every run frees its pages).
func benchPool(b *testing.B, m model.Model) *kvcache.Pool {
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 512, 8)
	if err != nil {
		b.Fatal(err)
	}
	return pool
}

func run(b *testing.B, m model.Model, dev gpu.Device, pool *kvcache.Pool, reqs []engine.Request) []engine.Result {
	res, err := engine.Generate(context.Background(), m, dev, pool, reqs, engine.Options{StepTokens: 512})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// BenchmarkDecode measures decode tokens per second on smollm2-135m shapes
// (bf16, f32, and bf16 quantized at load to Q8_0 and Q4_0) and mamba-130m
// shapes (f32), and on the GGUF files named in $TROUPE_BENCH_GGUF
// (comma-separated; e.g. the Q4_K_M file `task bench:peer -- --types
// q4_k_m` writes into its cache): single stream, and the aggregate of 8
// sequences decoding in one batch. Each iteration prefills a 16-token
// prompt per sequence, then times 64 decode steps. Weights are packed as
// troupe serve packs them (model.PackWeights).
func BenchmarkDecode(b *testing.B) {
	// each model is built or loaded inside its own sub-benchmark, so that a
	// -bench filter on one skips the others' setup
	type bench struct {
		name string
		load func(b *testing.B) model.Model
	}
	var ms []bench
	for _, mc := range []struct {
		preset string
		dt     gpu.DType
	}{{"smollm2-135m", gpu.BF16}, {"smollm2-135m", gpu.F32}, {"smollm2-135m", gpu.Q8_0}, {"smollm2-135m", gpu.Q4_0}, {"mamba-130m", gpu.F32}} {
		ms = append(ms, bench{mc.preset + "-" + mc.dt.String(), func(b *testing.B) model.Model { return presetModel(b, mc.preset, mc.dt) }})
	}
	for _, f := range strings.Split(os.Getenv("TROUPE_BENCH_GGUF"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		ms = append(ms, bench{strings.TrimSuffix(filepath.Base(f), ".gguf"), func(b *testing.B) model.Model {
			return loadModel(b, f, model.LoadOptions{})
		}})
	}
	for _, mc := range ms {
		b.Run(mc.name, func(b *testing.B) {
			m := mc.load(b)
			dev := packedDevice(b, m, 0)
			pool := benchPool(b, m)
			for _, batch := range []int{1, 8} {
				b.Run("batch"+strconv.Itoa(batch), func(b *testing.B) {
					const steps = 64
					var decode time.Duration
					for b.Loop() {
						reqs := make([]engine.Request, batch)
						for i := range reqs {
							reqs[i] = engine.Request{Prompt: prompt(16 + i), MaxTokens: steps + 1}
						}
						res := run(b, m, dev, pool, reqs)
						var longest time.Duration
						for _, r := range res {
							longest = max(longest, r.Decode)
						}
						decode += longest
					}
					b.ReportMetric(float64(batch*steps*b.N)/decode.Seconds(), "tok/s")
				})
			}
		})
	}
}

// BenchmarkPrefill measures prompt tokens per second for a 512-token prompt
// (one chunk), in the default precision and with FastBF16.
func BenchmarkPrefill(b *testing.B) {
	for _, mc := range []struct {
		preset string
		dt     gpu.DType
	}{{"smollm2-135m", gpu.BF16}, {"smollm2-135m", gpu.F32}, {"mamba-130m", gpu.F32}} {
		m := presetModel(b, mc.preset, mc.dt)
		pool := benchPool(b, m)
		dt := mc.dt
		for _, fast := range []bool{false, true} {
			if fast && dt != gpu.BF16 {
				continue
			}
			name := mc.preset + "-" + dt.String()
			if fast {
				name += "-fast"
			}
			dev := benchDevice(b, fast)
			b.Run(name+"/pp512", func(b *testing.B) {
				var prefill time.Duration
				for b.Loop() {
					res := run(b, m, dev, pool, []engine.Request{{Prompt: prompt(512), MaxTokens: 1}})
					prefill += res[0].Prefill
				}
				b.ReportMetric(float64(512*b.N)/prefill.Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkSnapshot measures taking and restoring the whole state of a
// sequence after a 512-token prompt (mamba-130m: recurrent state only;
// smollm2-135m: 512 positions of KV), and reports its size.
func BenchmarkSnapshot(b *testing.B) {
	for _, preset := range []string{"mamba-130m", "smollm2-135m"} {
		m := presetModel(b, preset, gpu.F32)
		dev := benchDevice(b, false)
		pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 64, 2)
		if err != nil {
			b.Fatal(err)
		}
		p := prompt(512)
		var seq kvcache.Seq
		if err := pool.Reserve(&seq, len(p)); err != nil {
			b.Fatal(err)
		}
		if err := pool.EnsureSlot(&seq); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Forward(dev, pool, []model.Seq{{Tokens: p, Pages: seq.Pages, Slot: seq.Slot}}); err != nil {
			b.Fatal(err)
		}
		seq.Len = len(p)
		b.Run(preset+"/snapshot", func(b *testing.B) {
			var bytes int64
			for b.Loop() {
				s, err := m.Snapshot(pool, &seq, p)
				if err != nil {
					b.Fatal(err)
				}
				bytes = s.Bytes
			}
			b.ReportMetric(float64(bytes), "bytes")
		})
		snap, err := m.Snapshot(pool, &seq, p)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(preset+"/restore", func(b *testing.B) {
			for b.Loop() {
				r, err := snap.Restore(pool)
				if err != nil {
					b.Fatal(err)
				}
				pool.Free(r)
			}
			b.ReportMetric(float64(snap.Bytes), "bytes")
		})
	}
}

// BenchmarkPrefixCacheNoReuse measures what the prefix cache costs when
// nothing is reused: 16 requests with random 256-token prompts (no common
// page), 16 tokens each, 8 at a time, on smollm2-135m bf16, in a pool that
// holds 9 running sequences, so the cache must evict what finished
// sequences left to admit the second half. Each b.N iteration is one round
// of cache on and cache off, alternating which goes first, so both see the
// same machine load; it reports the median prompt tokens per second of
// each and their ratio (on/off; 1 means the cache costs nothing).
func BenchmarkPrefixCacheNoReuse(b *testing.B) {
	m := benchModel(b, gpu.BF16)
	dev := benchDevice(b, false)
	vocab := m.Info().Vocab
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 9*18, 8)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	round := func(cache bool) float64 {
		e := engine.New(m, dev, pool, engine.Options{StepTokens: 512, MaxRunning: 8, PrefixCache: cache})
		for range 16 {
			p := make([]int32, 256)
			for i := range p {
				p[i] = int32(rng.IntN(vocab))
			}
			if _, err := e.Submit(engine.Request{Prompt: p, MaxTokens: 16}); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		for !e.Idle() {
			if _, err := e.Step(); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		if st := e.Stats(); cache && st.Cache.Evictions == 0 {
			b.Fatalf("the cache evicted nothing: %+v", st.Cache)
		}
		e.ResetCache()
		return 16 * 256 / took.Seconds()
	}
	round(true) // first-use costs out of the rounds
	var on, off []float64
	loads := []string{loadAvg()}
	for i := 0; b.Loop(); i++ {
		for j := range 2 {
			if (i+j)%2 == 0 {
				on = append(on, round(true))
			} else {
				off = append(off, round(false))
			}
		}
	}
	loads = append(loads, loadAvg())
	mon, moff := median(on), median(off)
	b.ReportMetric(mon, "on-tok/s")
	b.ReportMetric(moff, "off-tok/s")
	b.ReportMetric(mon/moff, "on/off")
	b.Logf("%d rounds, load %s: cache on %.0f, off %.0f prompt tok/s: on/off %.3f", len(on), strings.Join(loads, " -> "), mon, moff, mon/moff)
}

// constrainedSchema is what BenchmarkConstrainedDecode's outputs follow: an
// extraction schema with free strings, an enum, bounded integers and an
// array, eight or more in an array so that 64 tokens never reach its end.
const constrainedSchema = `{"type":"array","items":{"type":"object","properties":{
 "name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150},
 "role":{"enum":["admin","user","guest"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
 "required":["name","age","role","tags"],"additionalProperties":false},"minItems":8}`

// BenchmarkConstrainedDecode compares decode tokens per second with and
// without a JSON-schema constraint on smollm2-135m shapes (bf16), single
// stream and 8 in a batch: the masks are computed while the forward pass
// runs, so the constrained figure should match the free one. The
// vocabulary is Llama 3.1's first 49,152 tokens (the model's vocabulary
// size; the fixtures have no SmolLM2 tokenizer).
func BenchmarkConstrainedDecode(b *testing.B) {
	m := benchModel(b, gpu.BF16)
	dev := benchDevice(b, false)
	pool := benchPool(b, m)
	tk, err := tokenizer.Load(fixtures.Path(b, "tokenizers", "llama3_1"), tokenizer.Options{})
	if err != nil {
		b.Fatal(err)
	}
	guides := grammar.NewGuides(tk.AllTokenBytes()[:m.Info().Vocab])
	plan := (&grammar.Plan{Spec: grammar.Spec{JSONSchema: []byte(constrainedSchema)}}).Marshal()
	if err := guides.Check(plan); err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 8} {
		for _, constrained := range []bool{false, true} {
			name := "free"
			if constrained {
				name = "json"
			}
			b.Run("batch"+strconv.Itoa(batch)+"/"+name, func(b *testing.B) {
				const steps = 64
				var decode time.Duration
				for b.Loop() {
					reqs := make([]engine.Request, batch)
					for i := range reqs {
						reqs[i] = engine.Request{Prompt: prompt(16 + i), MaxTokens: steps + 1,
							Sample: sample.Params{Temperature: 1, Seed: uint64(i), HasSeed: true}}
						if constrained {
							gd, err := guides.Guide(plan, nil)
							if err != nil {
								b.Fatal(err)
							}
							reqs[i].Constraint = gd
						}
					}
					res := run(b, m, dev, pool, reqs)
					var longest time.Duration
					for _, r := range res {
						if len(r.IDs) != steps+1 {
							b.Fatalf("%d tokens, want %d", len(r.IDs), steps+1)
						}
						longest = max(longest, r.Decode)
					}
					decode += longest
				}
				b.ReportMetric(float64(batch*steps*b.N)/decode.Seconds(), "tok/s")
			})
		}
	}
}

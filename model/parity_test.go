package model_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// Tolerance on logits against transformers (README of the fixtures: 1e-3 is
// comfortable for a float32 implementation).
const logitTol = 1e-3

// parityFixtures are the random-weight checkpoints and whether their family
// needs whole-state snapshots for prefix reuse.
var parityFixtures = []struct {
	name          string
	snapshotReuse bool
}{
	{"llama_gqa", false}, {"llama_tied", false}, {"qwen2", false}, {"qwen3", false},
	{"mistral_swa", false}, {"phi3", false}, {"gemma2", false}, {"gemma3_text", false},
	{"mamba", true}, {"mamba2", true}, {"jamba", true}, {"bamba", true},
}

type reference struct {
	Prompt struct {
		IDs          []int32 `json:"ids"`
		ChunkSplitAt int     `json:"chunk_split_at"`
	} `json:"prompt"`
	PromptLogits struct {
		LastPosition []float32     `json:"last_position"`
		Top20        [][][]float64 `json:"top20_per_position"`
	} `json:"prompt_logits"`
	Greedy        struct{ IDs []int32 } `json:"greedy"`
	GreedyChunked struct{ IDs []int32 } `json:"greedy_chunked"`
	Generation    struct {
		Prompts []struct {
			PromptIDs  []int32   `json:"prompt_ids"`
			GreedyIDs  []int32   `json:"greedy_ids"`
			LastLogits []float32 `json:"last_prompt_position_logits"`
		} `json:"prompts"`
	} `json:"generation"`
}

func readReference(t *testing.T, dir string) *reference {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r reference
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("reference.json: %v", err)
	}
	return &r
}

type backend struct {
	name string
	dev  gpu.Device
	// pack: pack the model's weights for dev (model.PackWeights) before
	// using it; from then on every cpu device uses the packed copies, so
	// this backend comes last.
	pack bool
}

// backends are the devices the parity tests run each model on: the
// reference, the CPU, the GPUs of a build with one (gpuBackends: -tags
// cuda) and the CPU with packed weights.
func backends(t *testing.T) []backend {
	t.Helper()
	d, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	out := []backend{{"ref", ref.Device{}, false}, {"cpu", d, false}}
	out = append(out, gpuBackends(t)...) // before cpu-packed, which packs the model's weights for good
	return append(out, backend{"cpu-packed", d, true})
}

// use readies b for m: it packs m's weights when b asks for it.
func (b backend) use(t *testing.T, m model.Model) gpu.Device {
	t.Helper()
	if p, ok := b.dev.(gpu.Packer); ok && b.pack {
		if _, err := model.PackWeights(m, p); err != nil {
			t.Fatal(err)
		}
	}
	return b.dev
}

func newPool(t *testing.T, m model.Model) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 64, 8)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

func TestParity(t *testing.T) {
	root := fixtures.Dir(t)
	for _, fx := range parityFixtures {
		name := fx.name
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(root, "models", name)
			refs := readReference(t, dir)
			lf, err := safetensors.OpenFile(filepath.Join(dir, "reference_logits.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer lf.Close()
			pl, err := lf.Tensor("prompt_logits")
			if err != nil {
				t.Fatal(err)
			}
			want := (&gpu.Weight{DType: gpu.F32, Rows: pl.Shape[0], Cols: pl.Shape[1], Data: pl.Data}).Float32s()
			m, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := model.SnapshotReuse(m.Cache()); got != fx.snapshotReuse {
				t.Errorf("%s reports SnapshotReuse %v, want %v", name, got, fx.snapshotReuse)
			}
			for _, b := range backends(t) {
				t.Run(b.name, func(t *testing.T) {
					dev := b.use(t, m)
					checkPromptLogits(t, m, dev, refs, want)
					checkGreedy(t, m, dev, refs)
					checkChunked(t, m, dev, refs)
					checkBatched(t, m, dev, refs)
				})
			}
		})
	}
}

// checkPromptLogits: one forward over the prompt, logits at every position
// against transformers' (all of them, and the top-20 lists by id).
func checkPromptLogits(t *testing.T, m model.Model, dev gpu.Device, r *reference, want []float32) {
	pool := newPool(t, m)
	ids := r.Prompt.IDs
	seq := newSeq(t, pool, len(ids))
	logits, err := m.Forward(dev, pool, []model.Seq{{Tokens: ids, Pages: seq.Pages, Slot: seq.Slot, Logits: model.AllLogits}})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Info().Vocab
	if d := maxAbsDiff(logits, want); d > logitTol {
		t.Errorf("prompt logits differ from transformers by %.3g (tolerance %g)", d, logitTol)
	}
	if d := maxAbsDiff(logits[(len(ids)-1)*V:], r.PromptLogits.LastPosition); d > logitTol {
		t.Errorf("last-position logits differ by %.3g", d)
	}
	for pos, top := range r.PromptLogits.Top20 {
		for _, e := range top {
			id, v := int(e[0]), e[1]
			if d := math.Abs(float64(logits[pos*V+id]) - v); d > logitTol {
				t.Fatalf("position %d token %d: logit %g, transformers %g", pos, id, logits[pos*V+id], v)
			}
		}
	}
}

// newSeq reserves pages for n positions and a state slot.
func newSeq(t *testing.T, pool *kvcache.Pool, n int) *kvcache.Seq {
	t.Helper()
	var seq kvcache.Seq
	if err := pool.Reserve(&seq, n); err != nil {
		t.Fatal(err)
	}
	if err := pool.EnsureSlot(&seq); err != nil {
		t.Fatal(err)
	}
	return &seq
}

func greedyReq(prompt []int32, n int) engine.Request {
	return engine.Request{Prompt: prompt, MaxTokens: n, WantPromptLogits: true}
}

func checkGreedy(t *testing.T, m model.Model, dev gpu.Device, r *reference) {
	pool := newPool(t, m)
	res, err := engine.Generate(context.Background(), m, dev, pool, []engine.Request{greedyReq(r.Prompt.IDs, len(r.Greedy.IDs))}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0].IDs, r.Greedy.IDs) {
		t.Errorf("greedy ids\n got %v\nwant %v", res[0].IDs, r.Greedy.IDs)
	}
	if d := maxAbsDiff(res[0].PromptLastLogits, r.PromptLogits.LastPosition); d > logitTol {
		t.Errorf("prompt_last_logits differ by %.3g", d)
	}
	if pool.FreePages() != pool.NumPages() {
		t.Errorf("generation leaked %d KV pages", pool.NumPages()-pool.FreePages())
	}
}

// checkChunked prefills chunk_split_at tokens, then the rest as one chunk,
// then decodes: the continuation must equal the uninterrupted one.
func checkChunked(t *testing.T, m model.Model, dev gpu.Device, r *reference) {
	pool := newPool(t, m)
	ids, split := r.Prompt.IDs, r.Prompt.ChunkSplitAt
	seq := newSeq(t, pool, len(ids)+len(r.GreedyChunked.IDs))
	if _, err := m.Forward(dev, pool, []model.Seq{{Tokens: ids[:split], Pages: seq.Pages, Slot: seq.Slot}}); err != nil {
		t.Fatal(err)
	}
	logits, err := m.Forward(dev, pool, []model.Seq{{Tokens: ids[split:], Pos: split, Pages: seq.Pages, Slot: seq.Slot, Logits: model.LastLogits}})
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	pos := len(ids)
	for len(got) < len(r.GreedyChunked.IDs) {
		id := argmax(logits)
		got = append(got, id)
		if logits, err = m.Forward(dev, pool, []model.Seq{{Tokens: []int32{id}, Pos: pos, Pages: seq.Pages, Slot: seq.Slot, Logits: model.LastLogits}}); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	if !slices.Equal(got, r.GreedyChunked.IDs) {
		t.Errorf("chunked continuation\n got %v\nwant %v", got, r.GreedyChunked.IDs)
	}
}

// checkBatched runs the prompt three times in one generation: whole, and
// twice more with small prefill budgets so that steps mix prefill chunks of
// one sequence with decodes of another. Each must give the reference ids.
func checkBatched(t *testing.T, m model.Model, dev gpu.Device, r *reference) {
	for _, budget := range []int{7, 64} {
		pool := newPool(t, m)
		n := len(r.Greedy.IDs)
		reqs := []engine.Request{greedyReq(r.Prompt.IDs, n), greedyReq(r.Prompt.IDs, n), greedyReq(r.Prompt.IDs[:r.Prompt.ChunkSplitAt], 3)}
		res, err := engine.Generate(context.Background(), m, dev, pool, reqs, engine.Options{StepTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if !slices.Equal(res[i].IDs, r.Greedy.IDs) {
				t.Errorf("budget %d, batched request %d\n got %v\nwant %v", budget, i, res[i].IDs, r.Greedy.IDs)
			}
		}
		if len(res[2].IDs) != 3 {
			t.Errorf("budget %d: short request gave %d tokens, want 3", budget, len(res[2].IDs))
		}
	}
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// TestStories260k checks the one trained model: three prompts batched in one
// generation, each giving llama2.c's and transformers' 64 greedy ids.
func TestStories260k(t *testing.T) {
	dir := fixtures.Path(t, "models", "stories260k")
	r := readReference(t, dir)
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			var reqs []engine.Request
			for _, p := range r.Generation.Prompts {
				reqs = append(reqs, greedyReq(p.PromptIDs, len(p.GreedyIDs)))
			}
			pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 16, 64, 8)
			if err != nil {
				t.Fatal(err)
			}
			res, err := engine.Generate(context.Background(), m, b.use(t, m), pool, reqs, engine.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range r.Generation.Prompts {
				if !slices.Equal(res[i].IDs, p.GreedyIDs) {
					t.Errorf("prompt %d\n got %v\nwant %v", i, res[i].IDs, p.GreedyIDs)
				}
				if d := maxAbsDiff(res[i].PromptLastLogits, p.LastLogits); d > logitTol {
					t.Errorf("prompt %d: last prompt logits differ by %.3g", i, d)
				}
			}
		})
	}
}

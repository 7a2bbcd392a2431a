package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// timedModel runs the real forward pass and moves a fake clock by a cost
// model of a CPU step: base for the step (the weights are read once) plus
// perToken for each prefill token. It records each step's shape.
type timedModel struct {
	model.Model
	now            *time.Time
	base, perToken time.Duration
	steps          *[][2]int // decode tokens, prefill tokens
}

func (m timedModel) Forward(dev gpu.Device, pool *kvcache.Pool, batch []model.Seq) ([]float32, error) {
	decode, prefill := 0, 0
	for _, b := range batch {
		if len(b.Tokens) == 1 && b.Pos > 0 {
			decode++
		} else {
			prefill += len(b.Tokens)
		}
	}
	*m.now = m.now.Add(m.base + time.Duration(prefill)*m.perToken)
	*m.steps = append(*m.steps, [2]int{decode, prefill})
	return m.Model.Forward(dev, pool, batch)
}

// TestSmoothStreams: a long prompt arriving while streams decode is fed in
// chunks that keep each step within StepStretch decode steps (here 2: a
// 40 ms decode step and 1 ms a prefill token give 40-token chunks), every
// ninth step decodes only to measure the decode cost again, and every
// output is what the request generates alone.
func TestSmoothStreams(t *testing.T) {
	dir := t.TempDir()
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg["max_position_embeddings"] = 1024
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 7, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	real, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	now := time.Unix(0, 0)
	var steps [][2]int
	m := timedModel{Model: real, now: &now, base: 40 * time.Millisecond, perToken: time.Millisecond, steps: &steps}
	pool, err := kvcache.NewPool(model.PoolLayout(real.Cache()), 16, 128, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	e := engine.New(m, ref.Device{}, pool, engine.Options{StepTokens: 512, Now: func() time.Time { return now }})
	vocab := int32(real.Info().Vocab)
	ids := func(n int) []int32 {
		p := prompt(n)
		for i := range p {
			p[i] %= vocab
		}
		return p
	}
	streams := []engine.Request{
		{Prompt: ids(20), MaxTokens: 120},
		{Prompt: ids(24), MaxTokens: 120},
	}
	long := engine.Request{Prompt: ids(600), MaxTokens: 4}
	out := map[engine.SeqID][]int32{}
	done := map[engine.SeqID]bool{}
	var seqs []engine.SeqID
	for _, r := range streams {
		id, err := e.Submit(r)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, id)
	}
	for range 10 { // the streams are decoding, both costs measured
		collect(t, stepWithin(t, e, 10*time.Second), out, done, nil)
	}
	arrived := len(steps)
	id, err := e.Submit(long)
	if err != nil {
		t.Fatal(err)
	}
	seqs = append(seqs, id)
	for n := 0; !e.Idle(); n++ {
		if n == 1000 {
			t.Fatal("not idle after 1000 steps")
		}
		collect(t, stepWithin(t, e, 10*time.Second), out, done, nil)
	}
	fed := steps[arrived:]
	for len(fed) > 0 && fed[len(fed)-1][1] == 0 {
		fed = fed[:len(fed)-1] // after the long prompt's prefill
	}
	mixed, decodeOnly := 0, 0
	for i, s := range fed {
		if s[1] > 40 {
			t.Errorf("step %d after the long prompt arrived: %d prefill tokens beside %d streams, want at most 40", i, s[1], s[0])
		}
		if s[1] == 0 {
			decodeOnly++
		} else {
			mixed++
		}
	}
	if mixed < 10 || decodeOnly == 0 || decodeOnly > mixed/8+1 {
		t.Errorf("%d mixed and %d decode-only steps while the prompt was fed: %v", mixed, decodeOnly, fed)
	}
	for i, r := range append(slices.Clone(streams), long) {
		alone, err := kvcache.NewPool(model.PoolLayout(real.Cache()), 16, 64, 1)
		if err != nil {
			t.Fatal(err)
		}
		defer alone.Close()
		want := drive(t, engine.New(real, ref.Device{}, alone, engine.Options{}), []engine.Request{r}, 1000)[0]
		if got := out[seqs[i]]; !slices.Equal(got, want) {
			t.Errorf("request %d: %v, alone %v", i, got, want)
		}
	}
}

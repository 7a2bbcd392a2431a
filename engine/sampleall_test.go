package engine

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
)

// TestSampleAllInTurnOrParallel: whether a step's sequences are sampled in
// turn or spread over goroutines (by parallelSample), every sequence gets
// the tokens its own seeded sampler draws.
func TestSampleAllInTurnOrParallel(t *testing.T) {
	dir := t.TempDir()
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 7, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 256, 8)
	if err != nil {
		t.Fatal(err)
	}
	run := func(parallel int) [][]int32 {
		e := New(m, ref.Device{}, pool, Options{})
		e.parallelSample = parallel
		var ids []SeqID
		for i := range 6 {
			id, err := e.Submit(Request{Prompt: []int32{1, int32(2 + i), 3}, MaxTokens: 12,
				Sample: sample.Params{Temperature: 1.5, Seed: uint64(10 + i), HasSeed: true}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		out := make([][]int32, len(ids))
		for !e.Idle() {
			evs, err := e.Step()
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.HasToken {
					out[slices.Index(ids, ev.Seq)] = append(out[slices.Index(ids, ev.Seq)], ev.Token)
				}
			}
		}
		return out
	}
	inTurn, parallel := run(1<<62), run(0)
	for i := range inTurn {
		if len(inTurn[i]) != 12 || !slices.Equal(inTurn[i], parallel[i]) {
			t.Fatalf("sequence %d: in turn %v, in parallel %v", i, inTurn[i], parallel[i])
		}
	}
	if slices.Equal(inTurn[0], inTurn[1]) {
		t.Fatalf("two seeds drew the same tokens %v: the test cannot tell the samplers apart", inTurn[0])
	}
}

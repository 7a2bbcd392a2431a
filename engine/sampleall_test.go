package engine_test

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/sample"
)

// TestSampleAllInTurnOrParallel: whether a step's sequences are sampled in
// turn or spread over goroutines, every sequence gets the tokens its own
// seeded sampler draws.
func TestSampleAllInTurnOrParallel(t *testing.T) {
	m := tinyModel(t)
	run := func(parallel int) [][]int32 {
		e := engine.New(m, ref.Device{}, tinyPool(t, m, 256), engine.Options{})
		engine.SetParallelSample(e, parallel)
		var ids []engine.SeqID
		for i := range 6 {
			id, err := e.Submit(engine.Request{Prompt: []int32{1, int32(2 + i), 3}, MaxTokens: 12,
				Sample: sample.Params{Temperature: 1.5, Seed: uint64(10 + i), HasSeed: true}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		got := drain(t, e)
		out := make([][]int32, len(ids))
		for i, id := range ids {
			out[i] = got[id]
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

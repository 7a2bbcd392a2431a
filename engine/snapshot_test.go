package engine_test

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

func archModel(t *testing.T, arch string) model.Model {
	t.Helper()
	cfg, err := checkpoint.Tiny(arch)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 3, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestSnapshotCacheKeepsOutputs: for every snapshot family, a 5-turn
// conversation gives the same greedy tokens with the cache on and off, and
// from turn 2 on reuses the previous turn's final state.
func TestSnapshotCacheKeepsOutputs(t *testing.T) {
	for _, arch := range []string{"mamba", "mamba2", "jamba", "bamba"} {
		t.Run(arch, func(t *testing.T) {
			m := archModel(t, arch)
			newPool := func() *kvcache.Pool {
				p, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			// Build the conversation without the cache.
			off := engine.New(m, ref.Device{}, newPool(), engine.Options{})
			prompt := []int32{1, 40, 41, 42, 43, 44, 45, 60, 61}
			var prompts [][]int32
			for turn := 0; turn < 5; turn++ {
				prompts = append(prompts, slices.Clone(prompt))
				out, _ := runTurns(t, off, [][]int32{prompt}, 4)
				prompt = append(append(prompt, out[0]...), int32(70+turn), int32(80+turn))
			}
			want, _ := runTurns(t, engine.New(m, ref.Device{}, newPool(), engine.Options{}), prompts, 4)
			pool := newPool()
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true})
			got, cached := runTurns(t, e, prompts, 4)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("turn %d: cache on %v, off %v", i, got[i], want[i])
				}
				if i > 0 && cached[i] != len(prompts[i-1])+3 {
					// the previous prompt and its reply but the last reply token
					t.Errorf("turn %d reused %d tokens, want %d", i, cached[i], len(prompts[i-1])+3)
				}
			}
			st := e.Stats().Snapshots
			if st.Hits != 4 || st.Supersedes == 0 {
				t.Errorf("snapshot stats %+v", st)
			}
			// A budget of about one snapshot evicts all the time and never
			// changes the outputs.
			small := engine.New(m, ref.Device{}, newPool(), engine.Options{PrefixCache: true, SnapshotBudget: st.Bytes / max(st.Entries, 1) * 3 / 2})
			got, _ = runTurns(t, small, prompts, 4)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("small budget, turn %d: %v, want %v", i, got[i], want[i])
				}
			}
			if small.Stats().Snapshots.Evictions == 0 {
				t.Errorf("the small budget never evicted: %+v", small.Stats().Snapshots)
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() || pool.FreeSlots() != 4 {
				t.Fatalf("leak: %d pages, %d slots free", pool.FreePages(), pool.FreeSlots())
			}
		})
	}
}

// TestBoundarySnapshot: a request that carries its history boundary leaves a
// snapshot exactly there, so a different next message reuses the history
// even when the first request's own reply is never resent.
func TestBoundarySnapshot(t *testing.T) {
	m := archModel(t, "mamba2")
	pool, _ := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4)
	e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true})
	history := []int32{1, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	if cached := boundaryThenNext(t, e, history); cached != len(history) {
		t.Fatalf("reused %d tokens, want the %d of the history", cached, len(history))
	}
}

// boundaryThenNext runs a request of history and a message with its history
// boundary, then a next turn of history and another message, and returns
// the prompt tokens that turn reused.
func boundaryThenNext(t *testing.T, e *engine.Engine, history []int32) int {
	t.Helper()
	first := append(slices.Clone(history), 20, 21)
	if _, err := e.Submit(engine.Request{Prompt: first, MaxTokens: 2, Boundary: len(history)}); err != nil {
		t.Fatal(err)
	}
	for !e.Idle() {
		if _, err := e.Step(); err != nil {
			t.Fatal(err)
		}
	}
	_, cached := runTurns(t, e, [][]int32{append(slices.Clone(history), 30, 31, 32)}, 2)
	return cached[0]
}

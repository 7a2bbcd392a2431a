package engine_test

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
)

// runAll submits requests one after another (each waits for the previous,
// as turns of a conversation do) and returns their tokens and cached counts.
func runTurns(t *testing.T, e *engine.Engine, prompts [][]int32, maxTokens int) ([][]int32, []int) {
	t.Helper()
	var outs [][]int32
	var cached []int
	for _, p := range prompts {
		out, c := runOne(t, e, engine.Request{Prompt: p, MaxTokens: maxTokens})
		outs = append(outs, out)
		cached = append(cached, c)
	}
	return outs, cached
}

// conversation builds a 4-turn conversation: each turn resends the previous
// prompt, its reply and a new message (the reply comes from a run without
// the cache, so both runs see the same prompts).
func conversation(t *testing.T, e *engine.Engine) [][]int32 {
	t.Helper()
	sys := []int32{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51}
	prompt := append(slices.Clone(sys), 60, 61, 62)
	var prompts [][]int32
	for turn := 0; turn < 4; turn++ {
		prompts = append(prompts, slices.Clone(prompt))
		out, _ := runTurns(t, e, [][]int32{prompt}, 5)
		prompt = append(append(prompt, out[0]...), int32(70+turn), int32(80+turn))
	}
	return prompts
}

// TestPrefixCacheKeepsOutputs: a multi-turn conversation gives the same
// greedy tokens with the prefix cache on and off, reuses the history from
// turn 2 on, and gives every page back.
func TestPrefixCacheKeepsOutputs(t *testing.T) {
	for _, arch := range []string{"llama", "qwen3"} {
		t.Run(arch, func(t *testing.T) { prefixCacheKeepsOutputs(t, arch) })
	}
}

func prefixCacheKeepsOutputs(t *testing.T, arch string) {
	m := tinyModel(t)
	if arch != "llama" {
		m = archModel(t, arch)
	}
	prompts := conversation(t, engine.New(m, ref.Device{}, tinyPool(t, m, 64), engine.Options{}))
	// Then an unrelated request, which needs the cached conversation's pages
	// back in the tiny pool.
	var other []int32
	for i := int32(0); i < 30; i++ {
		other = append(other, 100+i)
	}
	prompts = append(prompts, other)
	for _, tc := range []struct {
		name  string
		pages int
	}{{"roomy pool", 64}, {"tiny pool (evictions)", 12}} {
		t.Run(tc.name, func(t *testing.T) {
			off, _ := runTurns(t, engine.New(m, ref.Device{}, tinyPool(t, m, tc.pages), engine.Options{}), prompts, 5)
			pool := tinyPool(t, m, tc.pages)
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true})
			on, cached := runTurns(t, e, prompts, 5)
			for i := range off {
				if !slices.Equal(on[i], off[i]) {
					t.Errorf("turn %d: cache on %v, off %v", i, on[i], off[i])
				}
			}
			if cached[0] != 0 {
				t.Errorf("turn 1 reported %d cached tokens", cached[0])
			}
			if tc.pages == 64 {
				for i := 1; i < len(prompts)-1; i++ {
					// Everything but the new message (and the last reply token,
					// never fed) comes from the cache.
					if want := len(prompts[i-1]) + 5 - 1; cached[i] < want-4 || cached[i] >= len(prompts[i]) {
						t.Errorf("turn %d: %d cached of %d prompt tokens, want about %d", i, cached[i], len(prompts[i]), want)
					}
				}
			}
			st := e.Stats()
			if st.Cache.Hits == 0 {
				t.Errorf("no cache hits: %+v", st.Cache)
			}
			if tc.pages == 12 && st.Cache.Evictions == 0 {
				t.Errorf("the tiny pool never evicted: %+v", st.Cache)
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() {
				t.Fatalf("%d pages still held after the conversation and a cache reset", pool.NumPages()-pool.FreePages())
			}
		})
	}
}

// TestPrefixCacheSharesPages: concurrent requests with a common system
// prompt after a first one finished reuse its pages.
func TestPrefixCacheSharesPages(t *testing.T) {
	m := tinyModel(t)
	pool := tinyPool(t, m, 64)
	e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true})
	sys := []int32{1, 9, 8, 7, 6, 5, 4, 3, 2, 10, 11, 12, 13, 14, 15, 16, 17}
	runTurns(t, e, [][]int32{append(slices.Clone(sys), 20)}, 2)
	var ids []engine.SeqID
	for i := 0; i < 3; i++ {
		id, err := e.Submit(engine.Request{Prompt: append(slices.Clone(sys), int32(30+i), int32(40+i)), MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	cached := map[engine.SeqID]int{}
	for !e.Idle() {
		evs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if _, ok := cached[ev.Seq]; !ok {
				cached[ev.Seq] = ev.CachedTokens
			}
		}
	}
	for _, id := range ids {
		if cached[id] != len(sys) {
			t.Errorf("request %d reused %d tokens, want the %d of the system prompt", id, cached[id], len(sys))
		}
	}
}

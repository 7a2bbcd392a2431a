package engine_test

import (
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// TestBoundarySharesRunningPrompt is how the n choices of one request share
// their prompt: the first, submitted with its boundary at the prompt less
// its last token, stores that state as soon as it is computed; the others,
// submitted once it has produced its first token (while it still runs),
// reuse it and compute one prompt token each, and greedy decoding gives all
// of them the first one's tokens. For a dense-KV model (pages shared from
// the index) and a state-space one (a snapshot stored mid-prefill).
func TestBoundarySharesRunningPrompt(t *testing.T) {
	for _, arch := range []string{"llama", "mamba"} {
		t.Run(arch, func(t *testing.T) {
			var m model.Model
			var pool *kvcache.Pool
			var err error
			if arch == "llama" {
				m = tinyModel(t)
				pool = tinyPool(t, m, 64)
			} else {
				m = archModel(t, arch)
				if pool, err = kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4); err != nil {
					t.Fatal(err)
				}
			}
			// Two steps of prefill (StepTokens 8), so the boundary falls
			// inside the prompt's last chunk, mid-page.
			prompt := []int32{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52}
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true, StepTokens: 8})
			first, err := e.Submit(engine.Request{Prompt: prompt, MaxTokens: 6, Boundary: len(prompt) - 1})
			if err != nil {
				t.Fatal(err)
			}
			out := map[engine.SeqID][]int32{}
			cached := map[engine.SeqID]int{}
			var others []engine.SeqID
			for !e.Idle() {
				evs, err := e.Step()
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if ev.PromptTokens > 0 {
						cached[ev.Seq] = ev.CachedTokens
					}
					if ev.HasToken {
						out[ev.Seq] = append(out[ev.Seq], ev.Token)
					}
				}
				if len(out[first]) == 1 && others == nil {
					for range 2 {
						id, err := e.Submit(engine.Request{Prompt: prompt, MaxTokens: 6})
						if err != nil {
							t.Fatal(err)
						}
						others = append(others, id)
					}
				}
			}
			if len(out[first]) != 6 {
				t.Fatalf("the first choice generated %v", out[first])
			}
			for _, id := range others {
				if cached[id] != len(prompt)-1 {
					t.Errorf("choice %d reused %d prompt tokens, want %d", id, cached[id], len(prompt)-1)
				}
				if !slices.Equal(out[id], out[first]) {
					t.Errorf("choice %d generated %v, the first %v", id, out[id], out[first])
				}
			}
			// The prompt was computed once, plus one token per further choice.
			if got, want := e.Stats().PromptTokens, int64(len(prompt)+len(others)); got != want {
				t.Errorf("%d prompt tokens prefilled, want %d", got, want)
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() {
				t.Fatalf("%d pages still held after a cache reset", pool.NumPages()-pool.FreePages())
			}
		})
	}
}

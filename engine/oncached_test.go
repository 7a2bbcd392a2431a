package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

type cachedCall struct {
	scope    string
	tokens   []int32
	snapshot bool
}

// TestOnCached: the hook hears of every prefix the prompt cache takes in
// (a finished sequence's computed tokens) and of every prefix it serves (a
// later turn's reused tokens), with the scope and the kind, on a dense-KV
// model and on a snapshot model; with the cache off it hears nothing.
func TestOnCached(t *testing.T) {
	for _, tc := range []struct {
		arch     string
		snapshot bool
	}{{"llama", false}, {"mamba", true}} {
		for _, cache := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/cache=%v", tc.arch, cache), func(t *testing.T) {
				m := archModel(t, tc.arch)
				pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4)
				if err != nil {
					t.Fatal(err)
				}
				var calls []cachedCall
				e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: cache,
					OnCached: func(scope string, tokens []int32, snapshot bool) {
						calls = append(calls, cachedCall{scope, slices.Clone(tokens), snapshot})
					}})
				turn1 := []int32{1, 40, 41, 42, 43, 44, 45, 60, 61}
				run := func(p []int32) []int32 {
					id, err := e.Submit(engine.Request{Prompt: p, MaxTokens: 3, Scope: "t\x00c"})
					if err != nil {
						t.Fatal(err)
					}
					return drain(t, e)[id]
				}
				out := run(turn1)
				if !cache {
					run(turn1)
					if len(calls) != 0 {
						t.Fatalf("cache off, yet %d calls: %+v", len(calls), calls)
					}
					return
				}
				// Turn 1 is cached as its prompt and the tokens fed after it
				// (all generated tokens but the last).
				fed := append(slices.Clone(turn1), out[:len(out)-1]...)
				if len(calls) != 1 || !slices.Equal(calls[0].tokens, fed) || calls[0].scope != "t\x00c" || calls[0].snapshot != tc.snapshot {
					t.Fatalf("after turn 1: %+v, want one call with %v (snapshot %v)", calls, fed, tc.snapshot)
				}
				calls = nil
				run(append(append(slices.Clone(turn1), out...), 70, 71))
				if len(calls) < 2 || !slices.Equal(calls[0].tokens, fed) || calls[0].snapshot != tc.snapshot {
					t.Fatalf("turn 2: %+v, want first the reuse of %v", calls, fed)
				}
			})
		}
	}
}

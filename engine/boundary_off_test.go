package engine_test

import (
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// TestNoBoundarySnapshots: with Options.NoBoundarySnapshots a snapshot
// cache ignores a request's boundary (a job prepared elsewhere, as by a
// cluster gateway, still carries one) and refuses warm-ups; a dense-KV
// prefix cache is untouched.
func TestNoBoundarySnapshots(t *testing.T) {
	history := []int32{1, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	for _, tc := range []struct {
		arch    string
		off     bool
		cached  int // -1: whatever the dense cache reuses, the same with and without the switch
		warmUps bool
	}{
		{"mamba2", false, len(history), true},
		{"mamba2", true, 0, false},
		{"llama", false, -1, true},
		{"llama", true, -1, true},
	} {
		name := tc.arch + "/auto"
		if tc.off {
			name = tc.arch + "/off"
		}
		t.Run(name, func(t *testing.T) {
			run := func(off bool) (*engine.Engine, int) {
				var m model.Model
				var pool *kvcache.Pool
				if tc.arch == "llama" {
					m = tinyModel(t)
					pool = tinyPool(t, m, 64)
				} else {
					m = archModel(t, tc.arch)
					var err error
					if pool, err = kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4); err != nil {
						t.Fatal(err)
					}
				}
				e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true, NoBoundarySnapshots: off})
				return e, boundaryThenNext(t, e, history)
			}
			e, cached := run(tc.off)
			if e.WarmUps() != tc.warmUps {
				t.Errorf("WarmUps() = %v, want %v", e.WarmUps(), tc.warmUps)
			}
			if tc.cached >= 0 {
				if cached != tc.cached {
					t.Fatalf("the next turn reused %d tokens, want %d", cached, tc.cached)
				}
				return
			}
			if _, auto := run(false); cached != auto || cached == 0 {
				t.Fatalf("dense KV reused %d tokens with the switch %v, %d without", cached, tc.off, auto)
			}
		})
	}
}

package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// runOne runs one request to its end and returns its tokens and cached
// prompt tokens.
func runOne(t *testing.T, e *engine.Engine, r engine.Request) ([]int32, int) {
	t.Helper()
	id, err := e.Submit(r)
	if err != nil {
		t.Fatal(err)
	}
	var out []int32
	cached := -1
	for !e.Idle() {
		evs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq != id {
				continue
			}
			if cached < 0 {
				cached = ev.CachedTokens
			}
			if ev.HasToken {
				out = append(out, ev.Token)
			}
		}
	}
	return out, cached
}

// TestBreakpointSnapshots: on a snapshot-reuse model (mamba2) prefill stops
// at each cache breakpoint and stores the state there, so later requests
// sharing only the prefix up to one of them reuse exactly that prefix, with
// the same greedy output as without the cache.
func TestBreakpointSnapshots(t *testing.T) {
	m := archModel(t, "mamba2")
	newPool := func() *kvcache.Pool {
		p, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	prompt := []int32{1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}
	later := [][]int32{
		append(slices.Clone(prompt[:5]), 90, 91, 92),
		append(slices.Clone(prompt[:10]), 93, 94),
	}
	want, _ := runTurns(t, engine.New(m, ref.Device{}, newPool(), engine.Options{}), later, 3)
	tests := []struct {
		name        string
		breakpoints []engine.Breakpoint
		cached      []int
	}{
		{"no breakpoints", nil, []int{0, 0}},
		{"at 5 and 10", []engine.Breakpoint{{Pos: 5}, {Pos: 10, TTL: time.Hour}}, []int{5, 10}},
		{"invalid ones ignored", []engine.Breakpoint{{Pos: 0}, {Pos: 10}, {Pos: 5}, {Pos: 99}}, []int{0, 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool()
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true, StepTokens: 64})
			runOne(t, e, engine.Request{Prompt: prompt, MaxTokens: 1, Breakpoints: tc.breakpoints})
			got, cached := runTurns(t, e, later, 3)
			for i := range later {
				if cached[i] != tc.cached[i] {
					t.Errorf("request %d reused %d tokens, want %d", i, cached[i], tc.cached[i])
				}
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("request %d: %v, without the cache %v", i, got[i], want[i])
				}
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() || pool.FreeSlots() != 4 {
				t.Fatalf("leak: %d pages, %d slots free", pool.FreePages(), pool.FreeSlots())
			}
		})
	}
}

// TestBreakpointPins: on a dense-KV model a breakpoint's prefix is
// inserted and pinned as soon as it is computed, so it survives the LRU
// pressure of a later unrelated request that evicts an unpinned, more
// recently used prefix, until its TTL has passed; the pool never refuses
// work because of a pin.
func TestBreakpointPins(t *testing.T) {
	m := tinyModel(t)
	sys := []int32{1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51}
	first := append(slices.Clone(sys), 60, 61, 62)
	var other, big []int32
	for i := range int32(8) {
		other = append(other, 200+i)
	}
	for i := range int32(30) {
		big = append(big, 100+i)
	}
	next := append(slices.Clone(sys), 70, 71)
	tests := []struct {
		name        string
		breakpoints []engine.Breakpoint
		wait        time.Duration // clock advance before the pressure
		pinned      bool
	}{
		{"no breakpoint", nil, 0, false},
		{"pinned", []engine.Breakpoint{{Pos: len(sys)}}, time.Minute, true},
		{"pin expired", []engine.Breakpoint{{Pos: len(sys)}}, 6 * time.Minute, false},
		{"one hour", []engine.Breakpoint{{Pos: len(sys), TTL: time.Hour}}, 59 * time.Minute, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
			pool := tinyPool(t, m, 14)
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: true, Now: func() time.Time { return now }})
			runOne(t, e, engine.Request{Prompt: first, MaxTokens: 2, Breakpoints: tc.breakpoints})
			runOne(t, e, engine.Request{Prompt: other, MaxTokens: 2}) // unpinned, more recently used
			now = now.Add(tc.wait)
			runOne(t, e, engine.Request{Prompt: big, MaxTokens: 5}) // needs evictions
			_, cached := runOne(t, e, engine.Request{Prompt: next, MaxTokens: 2})
			st := e.Stats().Cache
			if st.Evictions == 0 {
				t.Fatalf("no evictions: %+v", st)
			}
			if tc.pinned != (cached == len(sys)) || cached > len(sys) {
				t.Fatalf("the next request reused %d tokens (pinned %v, the breakpoint's prefix is %d)", cached, tc.pinned, len(sys))
			}
			if st.PinEvictions != 0 {
				t.Fatalf("pinned pages evicted while unpinned ones were left: %+v", st)
			}
			if len(tc.breakpoints) > 0 && st.Pins == 0 {
				t.Fatalf("nothing pinned: %+v", st)
			}
			// A request that needs the whole pool still runs: the pins
			// give way.
			var huge []int32
			for i := range int32(50) {
				huge = append(huge, 300+i)
			}
			now = now.Add(-tc.wait) // pins are live again where they were
			if _, err := e.Submit(engine.Request{Prompt: huge, MaxTokens: 4}); err != nil {
				t.Fatal(err)
			}
			for !e.Idle() {
				if _, err := e.Step(); err != nil {
					t.Fatal(err)
				}
			}
			if st := e.Stats().Cache; tc.pinned && st.PinEvictions == 0 {
				t.Fatalf("the whole pool was needed, yet no pinned page was evicted: %+v", st)
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() {
				t.Fatalf("%d pages still held", pool.NumPages()-pool.FreePages())
			}
		})
	}
}

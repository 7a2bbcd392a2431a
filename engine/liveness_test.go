package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// stepWithin runs one engine step and fails the test when it does not
// return within limit: a step that loops inside the engine wedges the
// scheduler for good, which is the bug this file guards against.
func stepWithin(t *testing.T, e *engine.Engine, limit time.Duration) []engine.Event {
	t.Helper()
	type result struct {
		evs []engine.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		evs, err := e.Step()
		done <- result{slices.Clone(evs), err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("step failed: %v", r.err)
		}
		return r.evs
	case <-time.After(limit):
		t.Fatalf("a step did not return within %v (the engine loops without progress)", limit)
		return nil
	}
}

// TestExhaustedPoolMakesProgress is the wedge of issue 12 in miniature:
// three long generations whose KV together overflows a tiny pool, with the
// prefix cache on (preempted sequences donate their pages, then reclaim
// them when readmitted). Every request must finish with the tokens it gets
// alone, and every step must return.
func TestExhaustedPoolMakesProgress(t *testing.T) {
	m := tinyModel(t) // 64 positions, pages of 4
	for _, cache := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix cache %v", cache), func(t *testing.T) {
			var reqs []engine.Request
			for i := range 3 {
				p := make([]int32, 12)
				for j := range p {
					p[j] = int32(1 + 17*i + j)
				}
				reqs = append(reqs, engine.Request{Prompt: p, MaxTokens: 50})
			}
			want := make([][]int32, len(reqs))
			for i, r := range reqs {
				want[i] = runAlone(t, m, r)
			}
			pool := tinyPool(t, m, 18) // 72 positions; each request needs 62
			e := engine.New(m, ref.Device{}, pool, engine.Options{PrefixCache: cache, StepTokens: 16})
			got := drive(t, e, reqs, 2000)
			for i := range reqs {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("request %d\n got %v\nwant %v", i, got[i], want[i])
				}
			}
			if e.Stats().Preemptions == 0 {
				t.Error("the pool never ran out; the test does not exercise preemption")
			}
			e.ResetCache()
			if pool.FreePages() != pool.NumPages() {
				t.Errorf("%d pages leaked", pool.NumPages()-pool.FreePages())
			}
		})
	}
}

// runAlone is the greedy output of r with a pool to spare.
func runAlone(t *testing.T, m model.Model, r engine.Request) []int32 {
	t.Helper()
	e := engine.New(m, ref.Device{}, tinyPool(t, m, 64), engine.Options{})
	return drive(t, e, []engine.Request{r}, 1000)[0]
}

// drive submits reqs at once and steps until the engine is idle, failing
// when it takes more than maxSteps steps or a request ends in an error.
func drive(t *testing.T, e *engine.Engine, reqs []engine.Request, maxSteps int) [][]int32 {
	t.Helper()
	ids := make([]engine.SeqID, len(reqs))
	for i, r := range reqs {
		id, err := e.Submit(r)
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		ids[i] = id
	}
	out := map[engine.SeqID][]int32{}
	done := map[engine.SeqID]bool{}
	for steps := 0; !e.Idle(); steps++ {
		if steps == maxSteps {
			t.Fatalf("not idle after %d steps: %+v", steps, e.Stats())
		}
		collect(t, stepWithin(t, e, 10*time.Second), out, done, nil)
	}
	res := make([][]int32, len(ids))
	for i, id := range ids {
		if !done[id] {
			t.Errorf("request %d never finished", i)
		}
		res[i] = out[id]
	}
	return res
}

// collect records one step's events: tokens into out, ends into finished.
// An error event, a second end, or an end after a cancellation fails t.
func collect(t *testing.T, evs []engine.Event, out map[engine.SeqID][]int32, finished, cancelled map[engine.SeqID]bool) {
	t.Helper()
	for _, ev := range evs {
		if ev.HasToken {
			out[ev.Seq] = append(out[ev.Seq], ev.Token)
		}
		if ev.Finish == engine.FinishError {
			t.Fatalf("sequence %d failed: %v", ev.Seq, ev.Err)
		}
		if ev.Finish != engine.NotFinished {
			if finished[ev.Seq] || cancelled[ev.Seq] {
				t.Fatalf("sequence %d finished twice or after its cancellation", ev.Seq)
			}
			finished[ev.Seq] = true
		}
	}
}

// TestRandomTrafficAlwaysFinishes drives engines over tiny pools (dense
// and snapshot models, prefix cache on and off) with many overlapping
// requests, arrivals spread over time and random cancellations. Every
// request must be refused at Submit or finish, within a step bound; every
// step must return; no page or state slot may leak; and the greedy
// requests must produce what they produce alone.
func TestRandomTrafficAlwaysFinishes(t *testing.T) {
	models := []struct {
		name string
		m    model.Model
	}{
		{"llama", tinyModel(t)},
		{"mamba", archModel(t, "mamba")},
		{"jamba", archModel(t, "jamba")},
	}
	// TROUPE_STRESS_SEEDS runs more seeds on demand (task stress); CI runs 3.
	seeds := uint64(3)
	if v, err := strconv.ParseUint(os.Getenv("TROUPE_STRESS_SEEDS"), 10, 32); err == nil && v > 0 {
		seeds = v
	}
	for _, mc := range models {
		for _, cache := range []bool{false, true} {
			for seed := range seeds {
				name := fmt.Sprintf("%s/cache=%v/seed=%d", mc.name, cache, seed)
				t.Run(name, func(t *testing.T) { randomTraffic(t, mc.m, cache, seed) })
			}
		}
	}
}

func randomTraffic(t *testing.T, m model.Model, cache bool, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x7e57))
	maxPos := m.Info().MaxPos
	if maxPos <= 0 || maxPos > 64 {
		maxPos = 64
	}
	const pageSize = 4
	pages := 10 + rng.IntN(10) // 40 to 76 positions: a few requests at a time
	slots := 1 + rng.IntN(3)
	pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), pageSize, pages, slots)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(m, ref.Device{}, pool, engine.Options{
		PrefixCache: cache, StepTokens: 1 + rng.IntN(24), MaxRunning: 1 + rng.IntN(6), SnapshotBudget: 1 << 20,
	})
	// A few shared prefixes, so the prefix cache has something to share.
	stems := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {40, 41, 42, 43, 44}, nil}
	type pending struct {
		req    engine.Request
		at     int // step at which it arrives
		cancel int // step at which it is cancelled (-1: never)
	}
	var plan []pending
	n := 12 + rng.IntN(12)
	totalTokens := 0
	for i := range n {
		stem := stems[rng.IntN(len(stems))]
		p := slices.Clone(stem)
		for range 1 + rng.IntN(20) {
			p = append(p, int32(1+rng.IntN(200)))
		}
		// The stem is the history boundary: snapshot models store the
		// state there, and later requests with the same stem restore it.
		r := engine.Request{Prompt: p, MaxTokens: rng.IntN(30), Boundary: len(stem)}
		if i%5 == 4 { // some requests ask for more than the pool or the positions hold
			r.MaxTokens = maxPos + rng.IntN(40)
		}
		c := -1
		if rng.IntN(5) == 0 {
			c = rng.IntN(60)
		}
		plan = append(plan, pending{req: r, at: rng.IntN(40), cancel: c})
		totalTokens += len(p) + r.MaxTokens
	}
	// Generous, but finite: a livelock (sequences preempting each other
	// forever) runs past it.
	maxSteps := 8*totalTokens + 200
	ids := map[engine.SeqID]int{}
	byPlan := map[int]engine.SeqID{}
	finished := map[engine.SeqID]bool{}
	cancelled := map[engine.SeqID]bool{}
	out := map[engine.SeqID][]int32{}
	refused := 0
	for step := 0; ; step++ {
		if step > maxSteps {
			t.Fatalf("not done after %d steps: %+v", step, e.Stats())
		}
		for i, p := range plan {
			if p.at == step {
				id, err := e.Submit(p.req)
				if err != nil {
					if !errors.Is(err, engine.ErrTooLong) {
						t.Fatalf("submit: %v", err)
					}
					if need := pool.PagesFor(len(p.req.Prompt) + p.req.MaxTokens); need <= pool.NumPages() && len(p.req.Prompt)+p.req.MaxTokens <= maxPos {
						t.Fatalf("a request that fits (%d pages of %d) was refused: %v", need, pool.NumPages(), err)
					}
					refused++
					continue
				}
				ids[id] = i
				byPlan[i] = id
			}
			if p.cancel == step {
				if id, ok := byPlan[i]; ok && !finished[id] {
					if e.Cancel(id) {
						cancelled[id] = true
					}
				}
			}
		}
		if step > 60 && e.Idle() {
			break
		}
		collect(t, stepWithin(t, e, 10*time.Second), out, finished, cancelled)
	}
	for id, i := range ids {
		if !finished[id] && !cancelled[id] {
			t.Errorf("request %d (seq %d) neither finished nor was cancelled", i, id)
		}
		if finished[id] && plan[i].req.MaxTokens > 0 && len(out[id]) != plan[i].req.MaxTokens {
			t.Errorf("request %d: %d tokens, want %d", i, len(out[id]), plan[i].req.MaxTokens)
		}
	}
	// Spot-check correctness under preemption and sharing: a few finished
	// requests produce what they produce alone.
	checked := 0
	for id, i := range ids {
		if !finished[id] || checked == 3 {
			continue
		}
		checked++
		alone := engine.New(m, ref.Device{}, tinyPool(t, m, 64), engine.Options{})
		if want := drive(t, alone, []engine.Request{plan[i].req}, 1000)[0]; !slices.Equal(out[id], want) {
			t.Errorf("request %d under traffic\n got %v\nwant %v", i, out[id], want)
		}
	}
	e.ResetCache()
	if pool.FreePages() != pool.NumPages() {
		t.Errorf("%d of %d pages leaked", pool.NumPages()-pool.FreePages(), pool.NumPages())
	}
	if pool.HasState() && pool.FreeSlots() != slots {
		t.Errorf("%d of %d state slots leaked", slots-pool.FreeSlots(), slots)
	}
	t.Logf("%d requests, %d refused, %d cancelled, %+v", n, refused, len(cancelled), e.Stats())
}

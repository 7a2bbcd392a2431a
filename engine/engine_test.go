package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
)

func prompts() [][]int32 {
	return [][]int32{
		{1, 5, 9, 200, 31, 7, 8},
		{1, 300, 301, 302},
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
		{1, 99},
	}
}

// TestPreemptionKeepsOutputs: with a pool too small for every sequence at
// once, the engine preempts and recomputes, and every sequence still gets
// exactly the tokens it gets with room to spare.
func TestPreemptionKeepsOutputs(t *testing.T) {
	m := tinyModel(t)
	run := func(pages, budget int) ([][]int32, engine.Stats) {
		pool := tinyPool(t, m, pages)
		e := engine.New(m, ref.Device{}, pool, engine.Options{StepTokens: budget})
		var ids []engine.SeqID
		for _, p := range prompts() {
			id, err := e.Submit(engine.Request{Prompt: p, MaxTokens: 12})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		out := drain(t, e)
		if pool.FreePages() != pool.NumPages() {
			t.Fatalf("%d pages leaked", pool.NumPages()-pool.FreePages())
		}
		var res [][]int32
		for _, id := range ids {
			res = append(res, out[id])
		}
		return res, e.Stats()
	}
	want, _ := run(64, 512)
	got, st := run(7, 5) // 7 pages of 4 positions: 28 positions for 4 sequences of up to 25
	if st.Preemptions == 0 {
		t.Fatal("the small pool never preempted; the test does not exercise preemption")
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("sequence %d after %d preemptions\n got %v\nwant %v", i, st.Preemptions, got[i], want[i])
		}
	}
}

// TestCancelFreesPagesAndContinuousAdmission: a sequence cancelled mid-run
// gives its pages back at once; requests submitted while others run join the
// batch and finish with the tokens they would get alone.
func TestCancelFreesPagesAndContinuousAdmission(t *testing.T) {
	m := tinyModel(t)
	alone := func(p []int32) []int32 {
		res, err := engine.Generate(context.Background(), m, ref.Device{}, tinyPool(t, m, 64), []engine.Request{{Prompt: p, MaxTokens: 8}}, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].IDs
	}
	pool := tinyPool(t, m, 64)
	e := engine.New(m, ref.Device{}, pool, engine.Options{StepTokens: 3})
	ps := prompts()
	a, err := e.Submit(engine.Request{Prompt: ps[0], MaxTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Submit(engine.Request{Prompt: ps[1], MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	out := map[engine.SeqID][]int32{}
	var late engine.SeqID
	for step := 0; !e.Idle(); step++ {
		if step == 4 {
			if late, err = e.Submit(engine.Request{Prompt: ps[2], MaxTokens: 8}); err != nil {
				t.Fatal(err)
			}
		}
		if step == 6 {
			used := pool.NumPages() - pool.FreePages()
			if !e.Cancel(a) {
				t.Fatal("cancel of a running sequence reported unknown")
			}
			if freed := used - (pool.NumPages() - pool.FreePages()); freed <= 0 {
				t.Fatalf("cancel freed %d pages", freed)
			}
		}
		evs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq == a {
				if step >= 6 {
					t.Fatal("event for a cancelled sequence")
				}
				continue
			}
			if ev.HasToken {
				out[ev.Seq] = append(out[ev.Seq], ev.Token)
			}
		}
	}
	if !slices.Equal(out[b], alone(ps[1])) || !slices.Equal(out[late], alone(ps[2])) {
		t.Fatalf("batched outputs differ from solo runs: %v / %v", out[b], out[late])
	}
	if pool.FreePages() != pool.NumPages() {
		t.Fatalf("%d pages leaked", pool.NumPages()-pool.FreePages())
	}
	if e.Cancel(a) {
		t.Fatal("second cancel reported a known sequence")
	}
}

func TestMaxRunning(t *testing.T) {
	m := tinyModel(t)
	pool := tinyPool(t, m, 64)
	e := engine.New(m, ref.Device{}, pool, engine.Options{MaxRunning: 2})
	for _, p := range prompts() {
		if _, err := e.Submit(engine.Request{Prompt: p, MaxTokens: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Step(); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Running != 2 || st.Waiting != 2 {
		t.Fatalf("running %d waiting %d, want 2 and 2", st.Running, st.Waiting)
	}
}

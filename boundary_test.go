package troupe

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// TestShareChoices: n > 1 choices share one prefill with the prompt cache
// on, unless boundary snapshots are off on a model that may reuse by
// snapshots (where the shared point would be a boundary snapshot).
func TestShareChoices(t *testing.T) {
	for _, tc := range []struct {
		cache bool
		b     actors.BoundarySnapshots
		c     actors.Capability
		share bool
	}{
		{false, actors.BoundarySnapshotsAuto, actors.DenseKV, false},
		{false, actors.BoundarySnapshotsAuto, actors.SnapshotReuse, false},
		{true, "", actors.CapabilityUnknownYet, true},
		{true, actors.BoundarySnapshotsAuto, actors.CapabilityUnknownYet, true},
		{true, actors.BoundarySnapshotsAuto, actors.SnapshotReuse, true},
		{true, actors.BoundarySnapshotsAuto, actors.DenseKV, true},
		{true, actors.BoundarySnapshotsOff, actors.CapabilityUnknownYet, false},
		{true, actors.BoundarySnapshotsOff, actors.SnapshotReuse, false},
		{true, actors.BoundarySnapshotsOff, actors.DenseKV, true},
	} {
		if got := shareChoices(tc.cache, tc.b, tc.c); got != tc.share {
			t.Errorf("cache %v, %v, %v: share %v, want %v", tc.cache, tc.b, tc.c, got, tc.share)
		}
	}
}

// TestBoundarySnapshotsOption: an invalid Options.BoundarySnapshots is a
// startup error; "" is auto.
func TestBoundarySnapshotsOption(t *testing.T) {
	if _, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: &recordingDispatcher{}, BoundarySnapshots: "sometimes"}); err == nil {
		t.Fatal("an invalid BoundarySnapshots was accepted")
	}
	rt, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: &recordingDispatcher{}, Preparers: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if b := rt.BoundarySnapshots(); b != actors.BoundarySnapshotsAuto {
		t.Fatalf("default boundary snapshots %q, want auto", b)
	}
}

// TestChoicesBoundarySnapshots: the n > 1 path end to end (through a
// dispatcher, which sees each choice's job). With sharing, the first choice
// stores its prompt less the last token and the others carry no boundary;
// with boundary snapshots off on a model that may reuse by snapshots
// (capability unknown or snapshot reuse) no job carries a boundary at all,
// while a dense-KV model keeps its prefix sharing.
func TestChoicesBoundarySnapshots(t *testing.T) {
	for _, tc := range []struct {
		name  string
		b     actors.BoundarySnapshots
		adopt *actors.CapabilityReady // nil: the capability stays unknown
		share bool
	}{
		{"unknown/auto", actors.BoundarySnapshotsAuto, nil, true},
		{"unknown/off", actors.BoundarySnapshotsOff, nil, false},
		{"snapshot/auto", actors.BoundarySnapshotsAuto, &actors.CapabilityReady{Model: "x", SnapshotReuse: true}, true},
		{"snapshot/off", actors.BoundarySnapshotsOff, &actors.CapabilityReady{Model: "x", SnapshotReuse: true}, false},
		{"dense/auto", actors.BoundarySnapshotsAuto, &actors.CapabilityReady{Model: "x"}, true},
		{"dense/off", actors.BoundarySnapshotsOff, &actors.CapabilityReady{Model: "x"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &recordingDispatcher{}
			rt, err := Start(context.Background(), Options{NoWeights: true, Dispatcher: d, Preparers: 1, Threads: 1, PromptCache: true, BoundarySnapshots: tc.b})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			waitLoaded(ctx, t, rt)
			req := func() *chat.Request {
				return &chat.Request{Messages: []any{map[string]any{"role": "user", "content": "hi"},
					map[string]any{"role": "assistant", "content": "hello"}, map[string]any{"role": "user", "content": "again"}}, MaxTokens: 2}
			}
			want := actors.CapabilityUnknownYet
			if tc.adopt != nil {
				rt.AdoptCapability(tc.adopt)
				want = actors.DenseKV
				if tc.adopt.SnapshotReuse {
					want = actors.SnapshotReuse
				}
				for i := 0; ; i++ {
					p, err := rt.Prepare(ctx, req(), true)
					if err != nil {
						t.Fatal(err)
					}
					if p.Capability == want {
						break
					}
					if i == 200 {
						t.Fatalf("the preparer did not adopt %v", want)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			const n = 3
			streams, err := rt.GenerateN(ctx, req(), n)
			if err != nil {
				t.Fatal(err)
			}
			if c := streams[0].Prepared.Capability; c != want {
				t.Fatalf("prepared under %v, want %v", c, want)
			}
			for _, s := range streams {
				for range s.Events {
				}
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if len(d.jobs) != n {
				t.Fatalf("%d jobs dispatched, want %d", len(d.jobs), n)
			}
			for _, j := range d.jobs {
				first := j.RequestId == streams[0].Prepared.Job.RequestId
				var wantBoundary int32
				if tc.share && first {
					wantBoundary = int32(len(j.Prompt) - 1)
				}
				if j.HistoryBoundary != wantBoundary {
					t.Errorf("job %s (first %v): boundary %d, want %d", j.RequestId, first, j.HistoryBoundary, wantBoundary)
				}
			}
		})
	}
}

// TestSchedulerWarmUpsBoundarySnapshots: a warm-up job that reaches the
// scheduler without the local preparers (a host's or a gateway's) is
// dropped on a snapshot-reuse model with boundary snapshots off, and runs
// otherwise.
func TestSchedulerWarmUpsBoundarySnapshots(t *testing.T) {
	for _, tc := range []struct {
		arch string
		b    actors.BoundarySnapshots
		runs bool
	}{
		{"mamba", actors.BoundarySnapshotsAuto, true},
		{"mamba", actors.BoundarySnapshotsOff, false},
		{"llama", actors.BoundarySnapshotsOff, true},
	} {
		t.Run(tc.arch+"/"+tc.b.String(), func(t *testing.T) {
			cfg, err := checkpoint.Tiny(tc.arch)
			if err != nil {
				t.Fatal(err)
			}
			cfg["vocab_size"] = checkpoint.ByteVocab
			dir := t.TempDir()
			if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			if err := checkpoint.WriteByteTokenizer(dir); err != nil {
				t.Fatal(err)
			}
			rt, err := Start(context.Background(), Options{Model: dir, Threads: 1, Preparers: 1, KVBudget: 64 << 20, PromptCache: true,
				BoundarySnapshots: tc.b, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer rt.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			waitLoaded(ctx, t, rt)
			rt.system.Root.Send(rt.pids.Scheduler, &actors.PrefillJob{RequestId: "warm-x", Prompt: []int32{1, 72, 105, 33, 72, 105, 33, 72, 105},
				WarmUp: true, Sampling: &actors.SamplingParams{}})
			deadline := time.Now().Add(5 * time.Second)
			if !tc.runs {
				deadline = time.Now().Add(300 * time.Millisecond) // warm-ups start 50 ms into idleness
			}
			var ran int64
			for time.Now().Before(deadline) && ran == 0 {
				st, err := rt.SchedulerStats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				ran = st.WarmUps
				time.Sleep(10 * time.Millisecond)
			}
			if (ran > 0) != tc.runs {
				t.Fatalf("%d warm-ups ran, want any: %v", ran, tc.runs)
			}
		})
	}
}

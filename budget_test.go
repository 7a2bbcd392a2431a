package troupe_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// tinyModel writes a random-weight checkpoint of arch with a byte tokenizer.
func tinyModel(t *testing.T, arch string) string {
	t.Helper()
	cfg, err := checkpoint.Tiny(arch)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 1, Std: 0.1}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizerSized(dir, 512); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startTiny starts a runtime on a tiny arch model and waits until its load
// has ended (ready or failed).
func startTiny(t *testing.T, arch string, opts troupe.Options) (*troupe.Runtime, string) {
	t.Helper()
	opts.Model, opts.Threads, opts.Preparers = tinyModel(t, arch), 1, 1
	opts.Logger = slog.New(slog.DiscardHandler)
	rt, err := troupe.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		st, err := rt.Status(ctx)
		if err == nil && (st.Ready || st.Error != "") {
			return rt, st.Error
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("the model neither loaded nor failed")
	return nil, ""
}

// gauges reads the runtime's gauges by name.
func gauges(t *testing.T, rt *troupe.Runtime) map[string]float64 {
	t.Helper()
	fams, err := rt.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if ms := f.GetMetric(); len(ms) == 1 && ms[0].GetGauge() != nil {
			out[f.GetName()] = ms[0].GetGauge().GetValue()
		}
	}
	return out
}

// TestKVBudgetCoversSnapshots: --kv-budget bounds the KV pool and the
// snapshot cache together: on every kind of model the pool's memory plus
// the snapshot budget stays within it, and the gauges report the split. A
// model without attention KV has no pages (0 used, 0 free) and reports its
// state slots instead.
func TestKVBudgetCoversSnapshots(t *testing.T) {
	const budget = 4 << 20
	tests := []struct {
		arch       string
		snapshots  bool // prompt reuse by snapshots
		pages      bool // attention KV
		stateSlots int
	}{
		{"llama", false, true, 0},
		{"mamba", true, false, 4},
		{"jamba", true, true, 4},
	}
	for _, tc := range tests {
		t.Run(tc.arch, func(t *testing.T) {
			rt, failure := startTiny(t, tc.arch, troupe.Options{KVBudget: budget, Parallel: 4, PromptCache: true})
			if failure != "" {
				t.Fatal(failure)
			}
			g := gauges(t, rt)
			pool, snaps := g["troupe_kv_pool_bytes"], g["troupe_snapshot_budget_bytes"]
			if g["troupe_kv_budget_bytes"] != budget {
				t.Errorf("troupe_kv_budget_bytes %v, want %d", g["troupe_kv_budget_bytes"], budget)
			}
			if pool <= 0 || pool+snaps > budget {
				t.Errorf("pool %v + snapshot budget %v bytes exceed the budget of %d", pool, snaps, budget)
			}
			if want := float64(budget / troupe.DefaultSnapshotShare); tc.snapshots && snaps != want {
				t.Errorf("snapshot budget %v, want %v (the default share)", snaps, want)
			}
			if !tc.snapshots && (snaps != 0 || pool < budget*0.99) {
				t.Errorf("a dense-KV model leaves %v bytes to snapshots and %v to the pool", snaps, pool)
			}
			pagesFree, pagesUsed := g["troupe_kv_pages_free"], g["troupe_kv_pages_used"]
			if tc.pages != (pagesFree > 0) || pagesUsed != 0 {
				t.Errorf("pages: %v free, %v used (model with attention KV: %v)", pagesFree, pagesUsed, tc.pages)
			}
			if g["troupe_state_slots_free"] != float64(tc.stateSlots) || g["troupe_state_slots_used"] != 0 {
				t.Errorf("state slots: %v free, %v used, want %d free", g["troupe_state_slots_free"], g["troupe_state_slots_used"], tc.stateSlots)
			}
			if g["troupe_kv_bytes_in_use"] != 0 || g["troupe_snapshot_bytes"] != 0 {
				t.Errorf("an idle runtime holds %v KV bytes and %v snapshot bytes", g["troupe_kv_bytes_in_use"], g["troupe_snapshot_bytes"])
			}
		})
	}
}

// TestKVBudgetTooSmall: a budget that cannot hold one sequence fails the
// model load with a message naming the least budget that would, and a
// snapshot share of the whole budget is refused at Start.
func TestKVBudgetTooSmall(t *testing.T) {
	_, failure := startTiny(t, "llama", troupe.Options{KVBudget: 1 << 10})
	for _, want := range []string{"KV budget", "1.0 KiB", "cannot hold one sequence", "at least"} {
		if !strings.Contains(failure, want) {
			t.Errorf("load failure %q does not say %q", failure, want)
		}
	}
	_, err := troupe.Start(context.Background(), troupe.Options{Model: t.TempDir(), KVBudget: 1 << 20, SnapshotBudget: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "must be less than the KV budget") {
		t.Errorf("a snapshot budget of the whole KV budget: %v", err)
	}
}

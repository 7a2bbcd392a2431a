package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
)

func tinyModel(t *testing.T) model.Model {
	t.Helper()
	dir := t.TempDir()
	cfg, err := checkpoint.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg["max_position_embeddings"] = 64
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 7, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func tinyPool(t *testing.T, m model.Model, pages int) *kvcache.Pool {
	t.Helper()
	p, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, pages, 8)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// drain steps e until it is idle and returns the tokens each sequence got.
func drain(t *testing.T, e *engine.Engine) map[engine.SeqID][]int32 {
	t.Helper()
	out := map[engine.SeqID][]int32{}
	for !e.Idle() {
		evs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.HasToken {
				out[ev.Seq] = append(out[ev.Seq], ev.Token)
			}
		}
	}
	return out
}

func TestGenerateSeededSamplingIsReproducible(t *testing.T) {
	m := tinyModel(t)
	params := sample.Params{Temperature: 1, TopP: 0.95, Seed: 42, HasSeed: true}
	gen := func(p sample.Params) []int32 {
		res, err := engine.Generate(context.Background(), m, ref.Device{}, tinyPool(t, m, 32),
			[]engine.Request{{Prompt: []int32{1, 5, 9}, MaxTokens: 12, Sample: p}}, engine.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res[0].IDs
	}
	a, b := gen(params), gen(params)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed gave %v and %v", a, b)
	}
	params.Seed = 43
	if c := gen(params); slices.Equal(a, c) {
		t.Fatalf("seeds 42 and 43 gave the same 12 tokens %v", a)
	}
}

func TestGenerateStopsAtStopID(t *testing.T) {
	m := tinyModel(t)
	pool := tinyPool(t, m, 32)
	full, err := engine.Generate(context.Background(), m, ref.Device{}, pool,
		[]engine.Request{{Prompt: []int32{1, 2, 3}, MaxTokens: 10}}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stop := full[0].IDs[4]
	first := slices.Index(full[0].IDs, stop)
	res, err := engine.Generate(context.Background(), m, ref.Device{}, pool,
		[]engine.Request{{Prompt: []int32{1, 2, 3}, MaxTokens: 10, StopIDs: []int32{stop}}}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := full[0].IDs[:first+1]; !slices.Equal(res[0].IDs, want) {
		t.Fatalf("with stop id %d got %v, want %v", stop, res[0].IDs, want)
	}
	if pool.FreePages() != pool.NumPages() {
		t.Fatalf("%d pages leaked", pool.NumPages()-pool.FreePages())
	}
}

func TestGenerateErrors(t *testing.T) {
	m := tinyModel(t)
	tests := []struct {
		name  string
		req   engine.Request
		pages int
		is    error
	}{
		{"empty prompt", engine.Request{MaxTokens: 1}, 32, nil},
		{"past max positions", engine.Request{Prompt: make([]int32, 60), MaxTokens: 10}, 32, nil},
		{"bad sampling", engine.Request{Prompt: []int32{1}, MaxTokens: 1, Sample: sample.Params{TopP: 2}}, 32, nil},
		{"token out of vocabulary", engine.Request{Prompt: []int32{512}, MaxTokens: 1}, 32, nil},
		{"larger than the KV pool", engine.Request{Prompt: make([]int32, 20), MaxTokens: 1}, 2, engine.ErrTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := tinyPool(t, m, tc.pages)
			_, err := engine.Generate(context.Background(), m, ref.Device{}, pool, []engine.Request{tc.req}, engine.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("error %v is not %v", err, tc.is)
			}
			if pool.FreePages() != pool.NumPages() {
				t.Fatalf("%d pages leaked after an error", pool.NumPages()-pool.FreePages())
			}
		})
	}
}

// TestFitMaxTokens: an optional max (FitMaxTokens) is lowered to what the
// model's positions or the KV pool leave after the prompt, never refused
// for it; a prompt that alone does not fit is still refused.
func TestFitMaxTokens(t *testing.T) {
	m := tinyModel(t) // 64 positions
	tests := []struct {
		name   string
		prompt int
		max    int
		pages  int // of 4 positions
		want   int // tokens generated; -1: refused
	}{
		{"within limits", 10, 5, 32, 5},
		{"positions bound", 60, 100, 32, 4},
		{"pool bound", 20, 100, 7, 8},
		{"prompt alone too long", 70, 5, 32, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := tinyPool(t, m, tc.pages)
			prompt := make([]int32, tc.prompt)
			res, err := engine.Generate(context.Background(), m, ref.Device{}, pool,
				[]engine.Request{{Prompt: prompt, MaxTokens: tc.max, FitMaxTokens: true}}, engine.Options{})
			if tc.want < 0 {
				if !errors.Is(err, engine.ErrTooLong) {
					t.Fatalf("error %v, want ErrTooLong", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(res[0].IDs) != tc.want {
				t.Fatalf("%d tokens, want %d", len(res[0].IDs), tc.want)
			}
		})
	}
}

func TestGenerateHonoursCancellation(t *testing.T) {
	m := tinyModel(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pool := tinyPool(t, m, 32)
	_, err := engine.Generate(ctx, m, ref.Device{}, pool, []engine.Request{{Prompt: []int32{1}, MaxTokens: 5}}, engine.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

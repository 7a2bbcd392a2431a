package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu/ref"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/sample"
)

// script is a constraint that allows exactly one token per step, from ids,
// and nothing after them (so the sequence ends); refuse makes Accept fail.
type script struct {
	ids      []int32
	vocab    int
	step     int
	accepted []int32
	refuse   bool
}

func (s *script) Mask() (grammar.Mask, bool) {
	m := grammar.NewMask(s.vocab)
	if s.step < len(s.ids) {
		m.Set(s.ids[s.step])
	}
	return m, true
}

func (s *script) Err() error { return nil }

func (s *script) Accept(id int32) error {
	if s.refuse {
		return errors.New("refused")
	}
	s.accepted = append(s.accepted, id)
	s.step++
	return nil
}

// TestConstraint: a constrained sequence produces exactly what its masks
// allow, whatever the sampling, and ends when its mask is empty; a sequence
// batched beside it is unchanged; every page is freed.
func TestConstraint(t *testing.T) {
	m := tinyModel(t)
	vocab := m.Info().Vocab
	p := sample.Params{Temperature: 1, Seed: 3, HasSeed: true}
	free := engine.Request{Prompt: []int32{2, 4, 6}, MaxTokens: 8, Sample: p}
	pool := tinyPool(t, m, 32)
	alone, err := engine.Generate(context.Background(), m, ref.Device{}, pool, []engine.Request{free}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{7, 9, 11, 9}
	c := &script{ids: want, vocab: vocab}
	guided := engine.Request{Prompt: []int32{1, 5, 9}, MaxTokens: 12, Sample: p, Constraint: c}
	res, err := engine.Generate(context.Background(), m, ref.Device{}, pool, []engine.Request{guided, free}, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res[0].IDs, want) || !slices.Equal(c.accepted, want) {
		t.Fatalf("constrained output %v (accepted %v), want %v", res[0].IDs, c.accepted, want)
	}
	if !slices.Equal(res[1].IDs, alone[0].IDs) {
		t.Fatalf("the unconstrained neighbour changed: %v, alone %v", res[1].IDs, alone[0].IDs)
	}
	if pool.FreePages() != pool.NumPages() {
		t.Fatalf("%d pages leaked", pool.NumPages()-pool.FreePages())
	}
}

// TestConstraintRefusal: a constraint that refuses the token ends the
// sequence with an error event, not a token, and frees its pages.
func TestConstraintRefusal(t *testing.T) {
	m := tinyModel(t)
	pool := tinyPool(t, m, 32)
	e := engine.New(m, ref.Device{}, pool, engine.Options{})
	id, err := e.Submit(engine.Request{Prompt: []int32{1, 2}, MaxTokens: 5,
		Constraint: &script{ids: []int32{3}, vocab: m.Info().Vocab, refuse: true}})
	if err != nil {
		t.Fatal(err)
	}
	var last engine.Event
	for !e.Idle() {
		evs, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Seq == id {
				last = ev
				if ev.HasToken {
					t.Fatalf("a refused token was emitted: %+v", ev)
				}
			}
		}
	}
	if last.Finish != engine.FinishError || last.Err == nil {
		t.Fatalf("last event %+v, want an error finish", last)
	}
	if pool.FreePages() != pool.NumPages() {
		t.Fatalf("%d pages leaked", pool.NumPages()-pool.FreePages())
	}
}

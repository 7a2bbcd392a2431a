package model_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// TestSnapshotRestore: for every family, stopping after p tokens, taking a
// snapshot, letting other work reuse the pool, restoring and continuing must
// be bit-identical to never having stopped — at positions inside pages,
// inside the conv window and at the fixture's chunk split — and the greedy
// continuation must still be transformers'.
func TestSnapshotRestore(t *testing.T) {
	root := fixtures.Dir(t)
	dev, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for _, fx := range parityFixtures {
		t.Run(fx.name, func(t *testing.T) {
			dir := filepath.Join(root, "models", fx.name)
			r := readReference(t, dir)
			m, err := model.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			ids := r.Prompt.IDs
			for _, p := range []int{1, 3, 7, r.Prompt.ChunkSplitAt, len(ids) - 1} {
				pool, err := kvcache.NewPool(model.PoolLayout(m.Cache()), 4, 64, 4)
				if err != nil {
					t.Fatal(err)
				}
				// Uninterrupted: ids[:p] then ids[p:], then greedy decoding.
				want := continueFrom(t, m, dev, pool, newSeq(t, pool, 0), ids[:p], ids[p:], len(r.Greedy.IDs))

				seq := newSeq(t, pool, 0)
				feed(t, m, dev, pool, seq, ids[:p])
				snap, err := m.Snapshot(pool, seq, ids[:p])
				if err != nil {
					t.Fatal(err)
				}
				if snap.Bytes <= 0 {
					t.Fatalf("snapshot at %d reports %d bytes", p, snap.Bytes)
				}
				pool.Free(seq)
				// Other work overwrites the freed pages and slot.
				other := newSeq(t, pool, 0)
				feed(t, m, dev, pool, other, ids[len(ids)/2:])
				pool.Free(other)

				restored, err := snap.Restore(pool)
				if err != nil {
					t.Fatal(err)
				}
				got := continueFrom(t, m, dev, pool, restored, nil, ids[p:], len(r.Greedy.IDs))
				if !slices.Equal(got.logits, want.logits) {
					t.Errorf("restore at %d: logits are not bit-identical to an uninterrupted run", p)
				}
				if !slices.Equal(got.ids, r.Greedy.IDs) {
					t.Errorf("restore at %d: greedy ids %v, want %v", p, got.ids, r.Greedy.IDs)
				}
			}
		})
	}
}

type continuation struct {
	logits []float32 // every step's logits, concatenated
	ids    []int32
}

// feed prefills tokens as one chunk on seq.
func feed(t *testing.T, m model.Model, dev *cpu.Device, pool *kvcache.Pool, seq *kvcache.Seq, tokens []int32) []float32 {
	t.Helper()
	if err := pool.Reserve(seq, seq.Len+len(tokens)); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(dev, pool, []model.Seq{{Tokens: tokens, Pos: seq.Len, Pages: seq.Pages, Slot: seq.Slot, Logits: model.LastLogits}})
	if err != nil {
		t.Fatal(err)
	}
	seq.Len += len(tokens)
	return slices.Clone(out)
}

// continueFrom feeds first and then rest as chunks (first may be empty),
// then decodes n greedy tokens.
func continueFrom(t *testing.T, m model.Model, dev *cpu.Device, pool *kvcache.Pool, seq *kvcache.Seq, first, rest []int32, n int) continuation {
	t.Helper()
	if len(first) > 0 {
		feed(t, m, dev, pool, seq, first)
	}
	var c continuation
	logits := feed(t, m, dev, pool, seq, rest)
	for len(c.ids) < n {
		c.logits = append(c.logits, logits...)
		id := argmax(logits)
		c.ids = append(c.ids, id)
		logits = feed(t, m, dev, pool, seq, []int32{id})
	}
	pool.Free(seq)
	return c
}

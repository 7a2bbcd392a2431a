package model_test

import (
	"errors"
	"path/filepath"
	"runtime"
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

// TestSnapshotOffHeapAndRelease: a snapshot's state does not live on the Go
// heap (the GC neither scans nor doubles it), Size counts the memory it
// maps, restore reproduces the state exactly, and a released snapshot
// cannot be restored.
func TestSnapshotOffHeapAndRelease(t *testing.T) {
	layers := []model.LayerCache{
		{Kind: model.RecurrentState, ConvState: 1 << 10, SSMState: 4 << 20}, // 16 MiB of state
		{Kind: model.FullAttention, KVHeads: 8, HeadDim: 128},               // 8 KiB a position
	}
	newPool := func() *kvcache.Pool {
		p, err := kvcache.NewPool(model.PoolLayout(layers), 16, 64, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	pool := newPool()
	seq := &kvcache.Seq{}
	const n = 1000
	if err := pool.Reserve(seq, n); err != nil {
		t.Fatal(err)
	}
	if err := pool.EnsureSlot(seq); err != nil {
		t.Fatal(err)
	}
	seq.Len = n
	state := pool.State(0, seq.Slot)
	for i := range state {
		state[i] = float32(i % 977)
	}
	kv := pool.Layers()[1]
	for p := 0; p < n; p++ {
		off := kv.Slot(seq.Pages, p)
		kv.K[off], kv.V[off+kv.Dim-1] = float32(p), -float32(p)
	}
	tokens := make([]int32, n)
	before := heapAlloc()
	snap, err := model.TakeSnapshot(pool, layers, seq, tokens)
	if err != nil {
		t.Fatal(err)
	}
	stateBytes := int64(4*len(state) + n*(8<<10))
	if snap.Size() < stateBytes {
		t.Fatalf("snapshot reports %d bytes, its state alone is %d", snap.Size(), stateBytes)
	}
	if grew := heapAlloc() - before; grew > stateBytes/8 {
		t.Errorf("the Go heap grew by %d bytes for a snapshot of %d", grew, stateBytes)
	}
	other := newPool()
	restored, err := snap.Restore(other)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(other.State(0, restored.Slot), state) {
		t.Error("restored recurrent state differs")
	}
	okv := other.Layers()[1]
	for p := 0; p < n; p++ {
		off := okv.Slot(restored.Pages, p)
		if okv.K[off] != float32(p) || okv.V[off+okv.Dim-1] != -float32(p) {
			t.Fatalf("restored KV differs at position %d", p)
		}
	}
	other.Free(restored)
	snap.Release()
	snap.Release() // a no-op
	if !snap.Released() {
		t.Fatal("Released is false after Release")
	}
	if _, err := snap.Restore(other); !errors.Is(err, model.ErrReleased) {
		t.Fatalf("restore after release: %v, want ErrReleased", err)
	}
	if other.FreeSlots() != 1 {
		t.Fatal("a failed restore kept a state slot")
	}
}

func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

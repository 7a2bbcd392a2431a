package model

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/troupe-ai/troupe/internal/offheap"
	"github.com/troupe-ai/troupe/kvcache"
)

// Snapshot is the whole per-sequence state of a model after a known token
// sequence: the recurrent state of every state-space layer and the attention
// KV of every attention layer. It is detached from the pool: it can be held,
// evicted, and Restore puts it back into any pool of the same layout.
//
// The state lives off the Go heap, in one mapping of its own (see the
// kvcache package doc), so that the GC neither scans nor doubles it. Its
// owner calls Release when done with it (kvcache.SnapshotPool does, for
// the snapshots it holds); a snapshot dropped without Release is unmapped
// when the garbage collector finds it unreachable, as a safety net.
type Snapshot struct {
	Tokens []int32 // the exact tokens the state covers, position 0 on
	// Bytes is the memory the snapshot holds: its mapping (rounded up to
	// system pages) and its tokens.
	Bytes int64

	layers  []layerState // indexed like the model's layers; nil once released
	mem     *offheap.Block
	cleanup runtime.Cleanup
}

// layerState is one layer's part of a snapshot.
type layerState struct {
	k, v  []float32 // attention: len(Tokens) x KVDim each
	state []float32 // recurrent: the layer's state slot
}

// ErrReleased is returned when a released snapshot is restored.
var ErrReleased = errors.New("model: snapshot already released")

// TakeSnapshot copies the state of seq, which covers exactly tokens, out of
// the pool.
func TakeSnapshot(pool *kvcache.Pool, layers []LayerCache, seq *kvcache.Seq, tokens []int32) (*Snapshot, error) {
	if seq.Len != len(tokens) {
		return nil, fmt.Errorf("model: snapshot of %d tokens from a sequence of %d positions", len(tokens), seq.Len)
	}
	kv := pool.Layers()
	if len(kv) != len(layers) {
		return nil, errors.New("model: snapshot: the pool's layout does not match the model")
	}
	floats := 0
	for _, l := range layers {
		floats += 2*seq.Len*l.KVDim() + l.StateSize()
		if l.StateSize() > 0 && seq.Slot == 0 {
			return nil, errors.New("model: snapshot of a recurrent model's sequence without a state slot")
		}
	}
	if floats == 0 {
		return nil, errors.New("model: snapshot of an empty state")
	}
	mem, err := offheap.Alloc(floats)
	if err != nil {
		return nil, fmt.Errorf("model: snapshot: %w", err)
	}
	store := mem.Floats()
	take := func(n int) []float32 {
		s := store[:n:n]
		store = store[n:]
		return s
	}
	s := &Snapshot{Tokens: slices.Clone(tokens), layers: make([]layerState, len(layers)), mem: mem}
	s.Bytes = mem.Bytes() + int64(4*len(s.Tokens))
	for i, l := range layers {
		if d := l.KVDim(); d > 0 {
			k, v := take(seq.Len*d), take(seq.Len*d)
			for p := 0; p < seq.Len; p++ {
				off := kv[i].Slot(seq.Pages, p)
				copy(k[p*d:(p+1)*d], kv[i].K[off:off+d])
				copy(v[p*d:(p+1)*d], kv[i].V[off:off+d])
			}
			s.layers[i].k, s.layers[i].v = k, v
		}
		if n := l.StateSize(); n > 0 {
			s.layers[i].state = take(n)
			copy(s.layers[i].state, pool.State(i, seq.Slot))
		}
	}
	// The cleanup holds the block, not the snapshot: it runs once the
	// snapshot is unreachable, and Release cancels it.
	s.cleanup = runtime.AddCleanup(s, func(b *offheap.Block) { _ = b.Free() }, mem)
	return s, nil
}

// Restore allocates a sequence in pool holding the snapshot's state, ready
// to continue at position len(Tokens). The caller frees it with pool.Free.
func (s *Snapshot) Restore(pool *kvcache.Pool) (*kvcache.Seq, error) {
	if s.mem == nil {
		return nil, ErrReleased
	}
	kv := pool.Layers()
	if len(kv) != len(s.layers) {
		return nil, errors.New("model: restore: the pool's layout does not match the snapshot")
	}
	seq := &kvcache.Seq{}
	n := len(s.Tokens)
	if err := pool.Reserve(seq, n); err != nil {
		return nil, fmt.Errorf("model: restore: %w", err)
	}
	if err := pool.EnsureSlot(seq); err != nil {
		pool.Free(seq)
		return nil, fmt.Errorf("model: restore: %w", err)
	}
	for i, l := range s.layers {
		if l.k != nil {
			d := kv[i].Dim
			for p := 0; p < n; p++ {
				off := kv[i].Slot(seq.Pages, p)
				copy(kv[i].K[off:off+d], l.k[p*d:(p+1)*d])
				copy(kv[i].V[off:off+d], l.v[p*d:(p+1)*d])
			}
		}
		if l.state != nil {
			copy(pool.State(i, seq.Slot), l.state)
		}
	}
	runtime.KeepAlive(s) // the state is read through s.layers: s must outlive the copies
	seq.Len = n
	return seq, nil
}

// Release frees the snapshot's state (kvcache.Snapshot). Restore fails
// afterwards; releasing twice is a no-op.
func (s *Snapshot) Release() {
	if s.mem == nil {
		return
	}
	s.cleanup.Stop()
	_ = s.mem.Free()
	s.mem, s.layers = nil, nil
}

// Released reports whether Release was called.
func (s *Snapshot) Released() bool { return s.mem == nil }

// Covered returns the tokens the snapshot covers (kvcache.Snapshot).
func (s *Snapshot) Covered() []int32 { return s.Tokens }

// Size returns the bytes the snapshot holds (kvcache.Snapshot).
func (s *Snapshot) Size() int64 { return s.Bytes }

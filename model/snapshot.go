package model

import (
	"errors"
	"fmt"
	"slices"

	"github.com/troupe-ai/troupe/kvcache"
)

// Snapshot is the whole per-sequence state of a model after a known token
// sequence: the recurrent state of every state-space layer and the attention
// KV of every attention layer. It is plain data, detached from the pool: it
// can be held, evicted, and later serialized, and Restore puts it back into
// any pool of the same layout.
type Snapshot struct {
	Tokens []int32      // the exact tokens the state covers, position 0 on
	Layers []LayerState // indexed like the model's layers
	Bytes  int64        // memory held by the state (4 bytes per float)
}

// LayerState is one layer's part of a snapshot.
type LayerState struct {
	K, V  []float32 // attention: len(Tokens) x KVDim each
	State []float32 // recurrent: the layer's state slot
}

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
	s := &Snapshot{Tokens: slices.Clone(tokens), Layers: make([]LayerState, len(layers))}
	for i, l := range layers {
		if d := l.KVDim(); d > 0 {
			k, v := make([]float32, seq.Len*d), make([]float32, seq.Len*d)
			for p := 0; p < seq.Len; p++ {
				off := kv[i].Slot(seq.Pages, p)
				copy(k[p*d:(p+1)*d], kv[i].K[off:off+d])
				copy(v[p*d:(p+1)*d], kv[i].V[off:off+d])
			}
			s.Layers[i].K, s.Layers[i].V = k, v
			s.Bytes += int64(8 * len(k))
		}
		if l.StateSize() > 0 {
			if seq.Slot == 0 {
				return nil, errors.New("model: snapshot of a recurrent model's sequence without a state slot")
			}
			s.Layers[i].State = slices.Clone(pool.State(i, seq.Slot))
			s.Bytes += int64(4 * len(s.Layers[i].State))
		}
	}
	return s, nil
}

// Restore allocates a sequence in pool holding the snapshot's state, ready
// to continue at position len(Tokens). The caller frees it with pool.Free.
func (s *Snapshot) Restore(pool *kvcache.Pool) (*kvcache.Seq, error) {
	kv := pool.Layers()
	if len(kv) != len(s.Layers) {
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
	for i, l := range s.Layers {
		if l.K != nil {
			d := kv[i].Dim
			for p := 0; p < n; p++ {
				off := kv[i].Slot(seq.Pages, p)
				copy(kv[i].K[off:off+d], l.K[p*d:(p+1)*d])
				copy(kv[i].V[off:off+d], l.V[p*d:(p+1)*d])
			}
		}
		if l.State != nil {
			copy(pool.State(i, seq.Slot), l.State)
		}
	}
	seq.Len = n
	return seq, nil
}

// Covered returns the tokens the snapshot covers (kvcache.Snapshot).
func (s *Snapshot) Covered() []int32 { return s.Tokens }

// Size returns the bytes the snapshot holds (kvcache.Snapshot).
func (s *Snapshot) Size() int64 { return s.Bytes }

package kvcache

import "testing"

type fakeSnap struct {
	toks []int32
	size int64
}

func (f fakeSnap) Covered() []int32 { return f.toks }
func (f fakeSnap) Size() int64      { return f.size }

func TestSnapshotPool(t *testing.T) {
	p := NewSnapshotPool(100)
	a := fakeSnap{[]int32{1, 2, 3}, 30}
	ab := fakeSnap{[]int32{1, 2, 3, 4, 5}, 30}
	other := fakeSnap{[]int32{1, 2, 9}, 30}
	if !p.Put(a, "conv1") || !p.Put(other, "conv2") {
		t.Fatal("put failed")
	}
	if got := p.Lookup([]int32{1, 2, 3, 4, 5, 6}, ""); got == nil || len(got.Covered()) != 3 {
		t.Fatalf("lookup: %v", got)
	}
	// A newer snapshot of the same conversation supersedes the one it
	// extends: it stays findable, but goes first when room is needed.
	p.Put(ab, "conv1")
	st := p.Stats()
	if st.Entries != 3 || st.Supersedes != 1 || st.Bytes != 90 {
		t.Fatalf("after supersede: %+v", st)
	}
	if got := p.Lookup([]int32{1, 2, 3, 7}, ""); got == nil || len(got.Covered()) != 3 {
		t.Fatalf("a superseded snapshot must stay findable: %v", got)
	}
	p.Put(fakeSnap{[]int32{6}, 10}, "conv4") // 100 bytes: fits
	p.Put(fakeSnap{[]int32{6, 6}, 10}, "conv5")
	if st := p.Stats(); st.Evictions != 1 || p.Lookup([]int32{1, 2, 3, 7}, "") != nil {
		t.Fatalf("the superseded snapshot was not evicted first: %+v", st)
	}
	if got := p.Lookup([]int32{1, 2, 3, 4, 5, 6}, ""); got == nil || len(got.Covered()) != 5 {
		t.Fatalf("longest prefix: %v", got)
	}
	// Scoped lookups see only their conversation.
	if got := p.Lookup([]int32{1, 2, 9, 9}, "conv1"); got != nil {
		t.Fatalf("scoped lookup crossed scopes: %v", got.Covered())
	}
	// Misses are classified.
	p.Lookup([]int32{7, 7}, "")
	p.Lookup([]int32{1, 2, 3, 4, 8}, "")
	st = p.Stats()
	if st.NoCandidate != 1 || st.Diverged < 1 || st.LastDivergedAt != 4 || st.LastDivergedOf != 5 {
		t.Fatalf("miss classes: %+v", st)
	}
	// LRU eviction makes room: "other" is the least recently used.
	p.Lookup([]int32{1, 2, 3, 4, 5, 0}, "")
	p.Lookup([]int32{6, 6, 1}, "")
	p.Lookup([]int32{6, 1}, "")
	p.Put(fakeSnap{[]int32{5, 5}, 30}, "conv3")
	st = p.Stats()
	if st.Evictions != 2 || st.Bytes != 80 {
		t.Fatalf("after eviction: %+v", st)
	}
	if p.Lookup([]int32{1, 2, 9, 1}, "") != nil {
		t.Fatal("the least recently used snapshot survived")
	}
	if p.Put(fakeSnap{[]int32{4}, 101}, "") {
		t.Fatal("a snapshot larger than the budget was stored")
	}
	p.Reset()
	if st := p.Stats(); st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

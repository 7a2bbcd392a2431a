package kvcache

import "testing"

type fakeSnap struct {
	toks []int32
	size int64
}

func (f fakeSnap) Covered() []int32 { return f.toks }
func (f fakeSnap) Size() int64      { return f.size }
func (f fakeSnap) Release()         {}

// countedSnap records how often it was released.
type countedSnap struct {
	toks     []int32
	size     int64
	released int
}

func (c *countedSnap) Covered() []int32 { return c.toks }
func (c *countedSnap) Size() int64      { return c.size }
func (c *countedSnap) Release()         { c.released++ }

// TestSnapshotPoolReleases: the pool releases exactly the snapshots it
// drops (evicted, replaced, rejected, reset), each once, and none it keeps:
// snapshot memory lives off the Go heap, so a drop without Release leaks it
// and a Release of a kept snapshot frees memory still in use.
func TestSnapshotPoolReleases(t *testing.T) {
	p := NewSnapshotPool(100)
	a := &countedSnap{toks: []int32{1, 2}, size: 40}
	b := &countedSnap{toks: []int32{3, 4}, size: 40}
	aAgain := &countedSnap{toks: []int32{1, 2}, size: 40}
	big := &countedSnap{toks: []int32{5}, size: 101}
	c := &countedSnap{toks: []int32{6}, size: 40}
	p.Put(a, "")
	p.Put(b, "")
	p.Put(aAgain, "") // replaces a
	p.Put(big, "")    // rejected
	p.Lookup([]int32{1, 2, 9}, "")
	p.Put(c, "") // evicts b, the least recently used
	for _, tc := range []struct {
		name string
		s    *countedSnap
		want int
	}{{"replaced", a, 1}, {"evicted", b, 1}, {"rejected", big, 1}, {"kept", aAgain, 0}, {"kept", c, 0}} {
		if tc.s.released != tc.want {
			t.Errorf("%s snapshot %v released %d times, want %d", tc.name, tc.s.toks, tc.s.released, tc.want)
		}
	}
	p.Reset()
	if aAgain.released != 1 || c.released != 1 || a.released != 1 || b.released != 1 {
		t.Errorf("after Reset: released %d %d (kept), %d %d (dropped before); want 1 each",
			aAgain.released, c.released, a.released, b.released)
	}
}

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

// TestSnapshotPoolKept: a cache breakpoint's snapshot (PutKept) is not
// superseded by a newer snapshot of its conversation that extends it, so
// under budget pressure the least recently used one goes instead of it;
// a plain one is superseded and goes first.
func TestSnapshotPoolKept(t *testing.T) {
	for _, tc := range []struct {
		name       string
		kept       bool
		evicted    []int32 // the snapshot that must be gone
		supersedes int64
	}{
		{"plain", false, []int32{1, 2, 3}, 1},
		{"kept", true, []int32{9}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewSnapshotPool(100)
			p.Put(fakeSnap{[]int32{9}, 30}, "")
			sys := fakeSnap{[]int32{1, 2, 3}, 30}
			if tc.kept {
				p.PutKept(sys, "")
			} else {
				p.Put(sys, "")
			}
			p.Put(fakeSnap{[]int32{1, 2, 3, 4, 5}, 30}, "") // the conversation's end
			p.Put(fakeSnap{[]int32{10}, 30}, "")            // needs room
			if s, ok := p.Lookup(append(tc.evicted, 99), "").(fakeSnap); ok && len(s.toks) == len(tc.evicted) {
				t.Fatalf("%v is still cached", tc.evicted)
			}
			if s, ok := p.Lookup([]int32{1, 2, 3, 7}, "").(fakeSnap); tc.kept && (!ok || len(s.toks) != 3) {
				t.Fatalf("the kept snapshot is gone")
			}
			if st := p.Stats(); st.Supersedes != tc.supersedes || st.Evictions != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

package node

import (
	"slices"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/route"
	"github.com/troupe-ai/troupe/kvcache"
)

func tokens(n, base int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(base + i)
	}
	return t
}

// TestCacheDigestChanges: what a replica publishes is the digest's changes
// since the last publication (an entry added then dropped in between is
// not sent as added), keyed as gateways key requests (tenant of the scope,
// block hashes or snapshot keys), and a full state is the whole digest.
func TestCacheDigestChanges(t *testing.T) {
	c := newCacheDigest(4)
	scope := kvcache.JoinScope("tenant-1", "conversation-9")
	c.record(scope, tokens(40, 0), false) // 2 full blocks
	added, dropped, all := c.take(true)
	want := route.BlockHashes("tenant-1", tokens(40, 0))
	if len(added) != 2 || len(dropped) != 0 || !slices.Contains(added, uint64(want[0])) || !slices.Contains(added, uint64(want[1])) || len(all) != 2 {
		t.Fatalf("after one dense prefix: added %x dropped %x all %x; want the 2 block hashes %x", added, dropped, all, want)
	}
	// A snapshot key, then 4 blocks of another prefix: the bound (4)
	// drops everything before them, the key before it was published.
	c.record(scope, tokens(21, 500), true)
	c.record("", tokens(64, 900), false)
	added, dropped, _ = c.take(false)
	key := uint64(route.SnapshotKey("tenant-1", tokens(21, 500)))
	other := route.BlockHashes("", tokens(64, 900))
	if len(added) != 4 || slices.Contains(added, key) {
		t.Fatalf("added %x: want the 4 new blocks, not the snapshot key dropped before it was published", added)
	}
	for _, h := range other {
		if !slices.Contains(added, uint64(h)) {
			t.Fatalf("added %x lacks %x", added, h)
		}
	}
	if !slices.Contains(dropped, uint64(want[0])) || !slices.Contains(dropped, uint64(want[1])) {
		t.Fatalf("dropped %x: want the first prefix's 2 blocks", dropped)
	}
	if a, d, _ := c.take(false); len(a)+len(d) != 0 {
		t.Fatalf("a second take without changes: %x %x", a, d)
	}
}

// TestPublishedStateApply: a member applies a full state, then deltas in
// sequence; a delta out of sequence makes the digest unusable (it asks for
// a resync) until the next full state.
func TestPublishedStateApply(t *testing.T) {
	var p publishedState
	at := time.Now()
	if p.apply(&actors.ReplicaState{Seq: 3, Added: []uint64{1}}, at) {
		t.Fatal("a delta with no state held was applied")
	}
	if !p.apply(&actors.ReplicaState{Seq: 4, Full: true, Added: []uint64{1, 2, 3}, Waiting: 2, Running: 1, FreePages: 9}, at) {
		t.Fatal("a full state was refused")
	}
	if !p.Contains(2) || p.waiting != 2 || p.running != 1 || p.freePages != 9 {
		t.Fatalf("after the full state: %+v", &p)
	}
	if !p.apply(&actors.ReplicaState{Seq: 5, Added: []uint64{4}, Dropped: []uint64{2}}, at) {
		t.Fatal("the next delta was refused")
	}
	if p.Contains(2) || !p.Contains(4) || !p.Contains(1) {
		t.Fatal("the delta was not applied")
	}
	if p.apply(&actors.ReplicaState{Seq: 7, Added: []uint64{5}}, at) {
		t.Fatal("a delta after a gap was applied")
	}
	if p.Contains(1) || p.Contains(5) {
		t.Fatal("a digest that missed a delta is still used")
	}
	if p.apply(&actors.ReplicaState{Seq: 8, Added: []uint64{6}}, at) {
		t.Fatal("a delta while stale was applied")
	}
	if !p.apply(&actors.ReplicaState{Seq: 9, Full: true, Added: []uint64{7}}, at) || !p.Contains(7) || p.Contains(1) {
		t.Fatal("a full state did not replace the stale digest")
	}
}

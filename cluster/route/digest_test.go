package route

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBlockHashesChain(t *testing.T) {
	a := toks(0, 50)
	h := BlockHashes("", a)
	if len(h) != 3 {
		t.Fatalf("%d hashes for 50 tokens, want 3 full blocks", len(h))
	}
	// Same block content after a different prefix hashes differently.
	b := cat(toks(100, 16), a[16:32])
	if hb := BlockHashes("", b); hb[1] == h[1] {
		t.Fatal("block 1 hash does not depend on block 0")
	}
	// A common prefix has common hashes; divergence changes the rest.
	c := cat(a[:32], toks(7, 20))
	hc := BlockHashes("", c)
	if hc[0] != h[0] || hc[1] != h[1] || hc[2] == h[2] {
		t.Fatalf("prefix hashes %x vs %x", hc, h)
	}
	if BlockHashes("t", a)[0] == h[0] {
		t.Fatal("tenant not in the chain")
	}
	// Appending hashes only the new blocks, with the same result.
	part := BlockHashes("t", a[:20])
	if got, want := AppendBlockHashes(part, "t", a), BlockHashes("t", a); len(got) != len(want) || got[2] != want[2] {
		t.Fatalf("append %x, want %x", got, want)
	}
	for _, n := range []int{0, 5, 16, 33, 50} {
		if SnapshotKeyFromBlocks(h, "", a[:n]) != SnapshotKey("", a[:n]) || SnapshotKeyFromBlocks(h[:1], "", a[:n]) != SnapshotKey("", a[:n]) {
			t.Fatalf("snapshot key of %d tokens differs with precomputed blocks", n)
		}
	}
	if SnapshotKey("", a[:32]) == h[1] || SnapshotKey("", a[:33]) == SnapshotKey("", a[:34]) {
		t.Fatal("snapshot keys collide with block hashes or each other")
	}
}

func TestDigest(t *testing.T) {
	d := NewDigest(6)
	p := toks(0, 64) // 4 blocks
	d.Add("", p)
	if got := MatchBlocks(d, BlockHashes("", cat(p, toks(500, 40)))); got != 4 {
		t.Fatalf("match %d, want 4", got)
	}
	// A second prefix of 4 blocks overflows the bound by 2: the least
	// recently used entries go, deepest blocks of the older prefix first.
	q := toks(1000, 64)
	if dropped := d.AddBlocks(BlockHashes("", q)); dropped != 2 {
		t.Fatalf("dropped %d, want 2", dropped)
	}
	if got := MatchBlocks(d, BlockHashes("", p)); got != 2 {
		t.Fatalf("older prefix keeps %d blocks, want its first 2", got)
	}
	if d.Len() != 6 {
		t.Fatalf("len %d", d.Len())
	}
	// Touching p's blocks makes q's deepest the next to go.
	if n := d.Touch(BlockHashes("", p)); n != 2 {
		t.Fatalf("touch matched %d", n)
	}
	d.AddKey(42)
	if !d.Contains(42) || MatchBlocks(d, BlockHashes("", q)) != 3 {
		t.Fatalf("after touch: q matches %d", MatchBlocks(d, BlockHashes("", q)))
	}
	hs := d.Hashes()
	if len(hs) != 6 || hs[0] != 42 {
		t.Fatalf("hashes %x", hs)
	}
	s := NewHashSet(hs)
	if MatchBlocks(s, BlockHashes("", p)) != 2 || MatchBlocks(nil, hs) != 0 {
		t.Fatal("published set differs from the digest")
	}
	if !d.Remove(42) || d.Remove(42) || d.Contains(42) {
		t.Fatal("remove")
	}
}

// TestDigestReference replays random adds, touches and removes on a Digest
// and on a plain slice LRU and compares their order after every operation.
func TestDigestReference(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const bound = 7
	d := NewDigest(bound)
	var dropped []BlockHash
	present := map[BlockHash]bool{} // maintained from OnAdd and OnDrop
	d.OnDrop = func(h BlockHash) {
		if !present[h] {
			t.Fatalf("OnDrop(%d) for an entry not present", h)
		}
		delete(present, h)
		dropped = append(dropped, h)
	}
	d.OnAdd = func(h BlockHash) {
		if present[h] {
			t.Fatalf("OnAdd(%d) for an entry already present", h)
		}
		present[h] = true
	}
	var ref []BlockHash // most recent first
	refTouch := func(h BlockHash) {
		if i := slices.Index(ref, h); i >= 0 {
			ref = slices.Delete(ref, i, i+1)
		}
		ref = slices.Insert(ref, 0, h)
	}
	for step := range 3000 {
		h := BlockHash(r.IntN(20))
		var wantDropped []BlockHash
		switch op := r.IntN(10); {
		case op < 6:
			blocks := []BlockHash{h, h + 100, h + 200}[:1+r.IntN(3)]
			for i := len(blocks) - 1; i >= 0; i-- {
				refTouch(blocks[i])
				if len(ref) > bound {
					wantDropped = append(wantDropped, ref[bound])
					ref = ref[:bound]
				}
			}
			if n := d.AddBlocks(blocks); n != len(wantDropped) {
				t.Fatalf("step %d: dropped %d, want %d", step, n, len(wantDropped))
			}
		case op < 8:
			n := 0
			for _, b := range []BlockHash{h, h + 100} {
				if !slices.Contains(ref, b) {
					break
				}
				n++
			}
			for i := n - 1; i >= 0; i-- {
				refTouch([]BlockHash{h, h + 100}[i])
			}
			if got := d.Touch([]BlockHash{h, h + 100}); got != n {
				t.Fatalf("step %d: touch %d, want %d", step, got, n)
			}
		default:
			i := slices.Index(ref, h)
			if i >= 0 {
				ref = slices.Delete(ref, i, i+1)
			}
			delete(present, h)
			if d.Remove(h) != (i >= 0) {
				t.Fatalf("step %d: remove %d", step, h)
			}
		}
		if !slices.Equal(dropped, wantDropped) {
			t.Fatalf("step %d: OnDrop got %v, want %v", step, dropped, wantDropped)
		}
		dropped = dropped[:0]
		if got := d.Hashes(); !slices.Equal(got, ref) || d.Len() != len(ref) {
			t.Fatalf("step %d: order %v, want %v", step, got, ref)
		}
		if len(present) != len(ref) {
			t.Fatalf("step %d: OnAdd/OnDrop track %d entries, digest has %d", step, len(present), len(ref))
		}
	}
	if len(d.nodes) > bound+1 {
		t.Fatalf("%d nodes for a bound of %d: freed nodes not reused", len(d.nodes), bound)
	}
}

package kvcache

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// testLayout has two attention layers of different widths and one layer
// without KV.
var testLayout = Layout{KVDims: []int{3, 0, 2}}

func newTestPool(t testing.TB, pageSize, numPages int) *Pool {
	t.Helper()
	p, err := NewPool(testLayout, pageSize, numPages, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// kvVal is the K value the test model computes for token tok at position
// pos of layer layer, element j; V is its negation. It depends on the token
// and the position only, as real KV of a causal prefix does on the prefix.
func kvVal(tok int32, pos, layer, j int) float32 {
	return float32(tok)*1000 + float32(pos)*10 + float32(layer) + float32(j)/8
}

// writeKV "computes" positions [from, len(tokens)) of a sequence with page
// table pages.
func writeKV(p *Pool, pages []int32, tokens []int32, from int) {
	for l, kv := range p.Layers() {
		for pos := from; pos < len(tokens); pos++ {
			off := kv.Slot(pages, pos)
			for j := range kv.Dim {
				kv.K[off+j] = kvVal(tokens[pos], pos, l, j)
				kv.V[off+j] = -kvVal(tokens[pos], pos, l, j)
			}
		}
	}
}

// checkKV verifies that positions [0, len(tokens)) under pages hold the KV
// of tokens.
func checkKV(t testing.TB, p *Pool, pages []int32, tokens []int32) {
	t.Helper()
	for l, kv := range p.Layers() {
		for pos := range tokens {
			off := kv.Slot(pages, pos)
			for j := range kv.Dim {
				if want := kvVal(tokens[pos], pos, l, j); kv.K[off+j] != want || kv.V[off+j] != -want {
					t.Fatalf("layer %d pos %d (page %d): K,V = %v,%v, want %v", l, pos, pages[pos/p.PageSize()], kv.K[off+j], kv.V[off+j], want)
				}
			}
		}
	}
}

// compute allocates a sequence for tokens and writes its KV.
func compute(t testing.TB, p *Pool, tokens []int32) *Seq {
	t.Helper()
	s := &Seq{}
	if err := p.Reserve(s, len(tokens)); err != nil {
		t.Fatal(err)
	}
	writeKV(p, s.Pages, tokens, 0)
	s.Len = len(tokens)
	return s
}

func seqTokens(from, to int32) []int32 {
	var out []int32
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

func refs(p *Pool, pages ...int32) []int32 {
	out := make([]int32, len(pages))
	for i, id := range pages {
		out[i] = p.refs[id]
	}
	return out
}

// checkTree verifies the structure of x and that every page's reference
// count is the index's references plus held's.
func checkTree(t testing.TB, x *Index, held map[int32]int) {
	t.Helper()
	ps := x.pool.PageSize()
	owned := map[int32]int{}
	nodes, tokens := 0, 0
	var walk func(v *node)
	walk = func(v *node) {
		for k, c := range v.children {
			if c.parent != v || c.mapKey != k || string(encodeKey(c.key)) != k {
				t.Fatalf("node page %d: bad parent or key", c.page)
			}
			if len(c.key) == 0 || len(c.key) > ps {
				t.Fatalf("node page %d has %d tokens", c.page, len(c.key))
			}
			if len(c.key) < ps && len(c.children) > 0 {
				t.Fatalf("partial node page %d has children", c.page)
			}
			for _, s := range v.children {
				if s != c && len(c.key) < ps && commonPrefix(c.key, s.key) == len(c.key) {
					t.Fatalf("partial node %v is a prefix of sibling %v", c.key, s.key)
				}
			}
			if c.last > v.last {
				t.Fatalf("node page %d used after its parent (%d > %d)", c.page, c.last, v.last)
			}
			owned[c.page]++
			nodes++
			tokens += len(c.key)
			walk(c)
		}
	}
	for tenant, r := range x.roots {
		if r.parent != nil || r.page != -1 || r.mapKey != tenant || len(r.children) == 0 {
			t.Fatalf("root of tenant %q: parent %v, page %d, key %q, %d children (an empty root must be dropped)", tenant, r.parent, r.page, r.mapKey, len(r.children))
		}
		walk(r)
	}
	if st := x.Stats(); st.Nodes != nodes || st.Pages != nodes || st.Tokens != tokens {
		t.Fatalf("stats %+v, tree has %d nodes, %d tokens", st, nodes, tokens)
	}
	free := 0
	for id := range x.pool.NumPages() {
		id := int32(id)
		if owned[id] > 1 {
			t.Fatalf("page %d in %d nodes", id, owned[id])
		}
		if got, want := x.pool.refs[id], int32(owned[id]+held[id]); got != want {
			t.Fatalf("page %d: refcount %d, want %d (index %d + held %d)", id, got, want, owned[id], held[id])
		}
		if x.pool.refs[id] == 0 {
			free++
		}
	}
	if free != x.pool.FreePages() {
		t.Fatalf("%d pages unreferenced, pool says %d free", free, x.pool.FreePages())
	}
}

func encodeKey(toks []int32) []byte {
	var b []byte
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

// heldBy counts the references the given sequences hold.
func heldBy(seqs ...*Seq) map[int32]int {
	h := map[int32]int{}
	for _, s := range seqs {
		for _, id := range s.Pages {
			h[id]++
		}
	}
	return h
}

func TestIndexLookup(t *testing.T) {
	p := newTestPool(t, 4, 16)
	x := NewIndex(p)
	a := seqTokens(1, 10) // pages: [1 2 3 4] [5 6 7 8] [9 10]
	sa := compute(t, p, a)
	x.Insert(a, sa.Pages, "")
	a0, a1, a2 := sa.Pages[0], sa.Pages[1], sa.Pages[2]
	p.Free(sa) // only the index holds them now

	tests := []struct {
		name       string
		query      []int32
		wantPages  []int32
		wantLen    int
		wantPart   int32
		wantPartLn int
	}{
		{"exact", a, []int32{a0, a1}, 10, a2, 2},
		{"shorter at page boundary", a[:8], []int32{a0, a1}, 8, -1, 0},
		{"shorter inside page", a[:6], []int32{a0}, 6, a1, 2},
		{"shorter inside first page", a[:3], nil, 3, a0, 3},
		{"longer", cat(a, []int32{11, 12, 13}), []int32{a0, a1}, 10, a2, 2},
		{"diverges inside page", cat(a[:5], []int32{99, 7, 8}), []int32{a0}, 5, a1, 1},
		{"diverges inside partial page", cat(a[:9], []int32{99}), []int32{a0, a1}, 9, a2, 1},
		{"diverges at page boundary", cat(a[:4], []int32{99, 6}), []int32{a0}, 4, -1, 0},
		{"diverges at first token", []int32{99, 2, 3, 4}, nil, 0, -1, 0},
		{"empty", nil, nil, 0, -1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pages, n, part, partLen := x.Lookup(tc.query, "")
			if !slices.Equal(pages, tc.wantPages) || n != tc.wantLen || part != tc.wantPart || partLen != tc.wantPartLn {
				t.Fatalf("Lookup = %v, %d, %d, %d; want %v, %d, %d, %d",
					pages, n, part, partLen, tc.wantPages, tc.wantLen, tc.wantPart, tc.wantPartLn)
			}
			if n != len(pages)*p.PageSize()+partLen {
				t.Fatalf("matched %d != %d pages + %d", n, len(pages), partLen)
			}
			held := heldBy(&Seq{Pages: pages})
			if part >= 0 {
				held[part]++
				checkKV(t, p, append(slices.Clone(pages), part), tc.query[:n])
			} else {
				checkKV(t, p, pages, tc.query[:n])
			}
			checkTree(t, x, held)
			p.Release(pages)
			if part >= 0 {
				p.Release([]int32{part})
			}
			checkTree(t, x, nil)
		})
	}
	st := x.Stats()
	if st.Lookups != int64(len(tests)) || st.Hits != 8 || st.HitTokens != 10+8+6+3+10+5+9+4 || st.Inserts != 1 || st.InsertedPages != 3 {
		t.Fatalf("stats %+v", st)
	}
}

// TestIndexCopyOnWrite walks the caller's side of a partial match: a fresh
// page, a copy of the matched positions, the rest computed, and the result
// inserted next to the original.
func TestIndexCopyOnWrite(t *testing.T) {
	p := newTestPool(t, 4, 8)
	x := NewIndex(p)
	a := []int32{1, 2, 3, 4, 5, 6, 7}
	sa := compute(t, p, a)
	x.Insert(a, sa.Pages, "")
	aPages := slices.Clone(sa.Pages)
	p.Free(sa)

	b := []int32{1, 2, 3, 4, 5, 6, 9, 9}
	pages, n, part, partLen := x.Lookup(b, "")
	if n != 6 || len(pages) != 1 || part != aPages[1] || partLen != 2 {
		t.Fatalf("Lookup = %v, %d, %d, %d", pages, n, part, partLen)
	}
	sb := &Seq{Pages: pages}
	fresh, err := p.Alloc(1)
	if err != nil {
		t.Fatal(err)
	}
	CopyPage(p, fresh[0], part, partLen)
	p.Release([]int32{part})
	sb.Pages = append(sb.Pages, fresh[0])
	if err := p.Reserve(sb, len(b)); err != nil {
		t.Fatal(err)
	}
	writeKV(p, sb.Pages, b, n)
	checkKV(t, p, sb.Pages, b)
	x.Insert(b, sb.Pages, "")
	checkTree(t, x, heldBy(sb))
	if st := x.Stats(); st.Nodes != 3 {
		t.Fatalf("want 3 nodes (shared first page, two second pages), got %+v", st)
	}
	// Both continuations are found, each in its own page.
	for _, q := range [][]int32{a, b} {
		pages, n, part, partLen := x.Lookup(q, "")
		if n != len(q) || partLen != len(q)%4 || (part >= 0) != (partLen > 0) {
			t.Fatalf("Lookup(%v) = %v, %d, %d, %d", q, pages, n, part, partLen)
		}
		if part >= 0 {
			pages = append(pages, part)
		}
		checkKV(t, p, pages, q)
		p.Release(pages)
	}
	checkKV(t, p, aPages, a) // the copy did not touch the source
	p.Free(sb)
	checkTree(t, x, nil)
}

func TestIndexSharedSystemPrompt(t *testing.T) {
	p := newTestPool(t, 4, 16)
	x := NewIndex(p)
	sys := seqTokens(100, 107) // two full pages
	a := cat(sys, []int32{1, 2, 3, 4, 5})
	b := cat(sys, []int32{7, 8})

	sa := compute(t, p, a)
	x.Insert(a, sa.Pages, "")
	if got := refs(p, sa.Pages...); !slices.Equal(got, []int32{2, 2, 2, 2}) {
		t.Fatalf("after insert of A: refs %v, want all 2 (A + index)", got)
	}

	pages, n, part, _ := x.Lookup(b, "")
	if n != len(sys) || part != -1 || !slices.Equal(pages, sa.Pages[:2]) {
		t.Fatalf("Lookup(B) = %v, %d, %d; want A's system pages %v", pages, n, part, sa.Pages[:2])
	}
	sb := &Seq{Pages: pages, Len: n}
	if err := p.Reserve(sb, len(b)); err != nil {
		t.Fatal(err)
	}
	writeKV(p, sb.Pages, b, n)
	x.Insert(b, sb.Pages, "")
	if got := refs(p, sys2(sa)...); !slices.Equal(got, []int32{3, 3}) {
		t.Fatalf("system pages refs %v, want 3 (A, B, index)", got)
	}
	if got := refs(p, sb.Pages[2]); got[0] != 2 {
		t.Fatalf("B's own page refs %d, want 2", got[0])
	}
	checkTree(t, x, heldBy(sa, sb))
	if st := x.Stats(); st.Nodes != 5 || st.Tokens != 8+5+2 {
		t.Fatalf("stats %+v, want 5 nodes / 15 tokens", st)
	}

	p.Free(sa)
	checkTree(t, x, heldBy(sb))
	if got := refs(p, sb.Pages...); !slices.Equal(got, []int32{2, 2, 2}) {
		t.Fatalf("after A ends: B's refs %v", got)
	}
	p.Free(sb)
	checkTree(t, x, nil)
	if p.FreePages() != 16-5 {
		t.Fatalf("free pages %d, want 11", p.FreePages())
	}
}

func sys2(s *Seq) []int32 { return s.Pages[:2] }

func TestIndexInsertExisting(t *testing.T) {
	p := newTestPool(t, 4, 32)
	x := NewIndex(p)
	a := seqTokens(1, 10)
	sa := compute(t, p, a)
	x.Insert(a, sa.Pages, "")
	base := x.Stats()

	steps := []struct {
		name     string
		tokens   []int32
		newNodes int // nodes the index should have beyond base
	}{
		{"same tokens, same pages", a, 0},
		{"same tokens, other pages", a, 0},
		{"shorter prefix, other pages", a[:7], 0},
		{"page-aligned prefix", a[:8], 0},
		// The full page [9 10 11 12] replaces the partial [9 10] it subsumes.
		{"longer", cat(a, []int32{11, 12}), 0},
		{"longer still", cat(a, []int32{11, 12, 13}), 1},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			var s *Seq
			if st.name == "same tokens, same pages" {
				s = &Seq{}
				x.Insert(st.tokens, sa.Pages, "")
			} else {
				s = compute(t, p, st.tokens)
				x.Insert(st.tokens, s.Pages, "")
			}
			if got := x.Stats(); got.Nodes != base.Nodes+st.newNodes {
				t.Fatalf("nodes %d, want %d", got.Nodes, base.Nodes+st.newNodes)
			}
			checkTree(t, x, heldBy(sa, s))
			p.Free(s)
			checkTree(t, x, heldBy(sa))
		})
	}
	p.Free(sa)
	x.Reset()
	if p.FreePages() != p.NumPages() {
		t.Fatalf("leak: %d of %d pages free", p.FreePages(), p.NumPages())
	}
}

// TestIndexPartialPages covers partially filled pages: subsumed inserts,
// replacement by a longer page, and a sequence growing its own partial page.
func TestIndexPartialPages(t *testing.T) {
	p := newTestPool(t, 4, 16)
	x := NewIndex(p)
	s := compute(t, p, []int32{1, 2, 3})
	P := s.Pages[0]
	x.Insert([]int32{1, 2, 3}, s.Pages, "")
	if got := refs(p, P); got[0] != 2 {
		t.Fatalf("refs %v", got)
	}

	// A shorter partial page is subsumed: nothing kept.
	o := compute(t, p, []int32{1, 2})
	x.Insert([]int32{1, 2}, o.Pages, "")
	checkTree(t, x, heldBy(s, o))
	if x.Stats().Nodes != 1 {
		t.Fatalf("subsumed partial page was kept: %+v", x.Stats())
	}
	p.Free(o)

	// A sibling that diverges inside the page is kept beside it.
	o = compute(t, p, []int32{1, 2, 9})
	x.Insert([]int32{1, 2, 9}, o.Pages, "")
	checkTree(t, x, heldBy(s, o))
	if x.Stats().Nodes != 2 {
		t.Fatalf("diverging partial page not kept: %+v", x.Stats())
	}
	pages, n, part, partLen := x.Lookup([]int32{1, 2, 9, 9}, "")
	if pages != nil || n != 3 || part != o.Pages[0] || partLen != 3 {
		t.Fatalf("Lookup = %v, %d, %d, %d", pages, n, part, partLen)
	}
	p.Release([]int32{part})
	p.Free(o)

	// The sequence grows in place into its partial page and beyond: the
	// full page replaces the partial node, same page id, one index reference.
	grown := []int32{1, 2, 3, 4, 5}
	if err := p.Reserve(s, len(grown)); err != nil {
		t.Fatal(err)
	}
	writeKV(p, s.Pages, grown, 3)
	x.Insert(grown, s.Pages, "")
	checkTree(t, x, heldBy(s))
	if got := refs(p, s.Pages...); !slices.Equal(got, []int32{2, 2}) {
		t.Fatalf("refs %v, want [2 2]", got)
	}
	if st := x.Stats(); st.Nodes != 3 || st.Tokens != 4+1+3 {
		t.Fatalf("stats %+v, want [1 2 3 4]->[5] and [1 2 9]", st)
	}
	pages, n, part, _ = x.Lookup([]int32{1, 2, 3, 4, 5}, "")
	if !slices.Equal(pages, []int32{P}) || n != 5 || part != s.Pages[1] {
		t.Fatalf("Lookup = %v, %d, %d", pages, n, part)
	}
	p.Release(append(pages, part))
	p.Free(s)
	checkTree(t, x, nil)
}

// lruSetup inserts one two-page sequence per first token, oldest first, and
// releases them so that only the index holds their pages.
func lruSetup(t *testing.T, p *Pool, x *Index, firsts ...int32) map[int32][]int32 {
	out := map[int32][]int32{}
	for _, f := range firsts {
		toks := []int32{f, f, f, f, f, f}
		s := compute(t, p, toks)
		x.Insert(toks, s.Pages, "")
		out[f] = slices.Clone(s.Pages)
		p.Free(s)
	}
	return out
}

// evictOrder evicts one page at a time and returns the pages in the order
// they were freed.
func evictOrder(t *testing.T, p *Pool, x *Index) []int32 {
	var order []int32
	for {
		before := slices.Clone(p.refs)
		if x.Evict(p.FreePages()+1) == 0 {
			return order
		}
		for id := range before {
			if before[id] > 0 && p.refs[id] == 0 {
				order = append(order, int32(id))
			}
		}
	}
}

func TestIndexEvict(t *testing.T) {
	tests := []struct {
		name  string
		touch []int32 // first tokens looked up after the inserts, in order
		hold  []int32 // first tokens whose sequence a caller still holds
		want  []int32 // first tokens in eviction order (each: leaf, then parent)
	}{
		{"insertion order", nil, nil, []int32{1, 2, 3}},
		{"lookup refreshes", []int32{1}, nil, []int32{2, 3, 1}},
		{"lookups reorder all", []int32{3, 1, 2}, nil, []int32{3, 1, 2}},
		{"held never evicted", nil, []int32{2}, []int32{1, 3}},
		{"held and touched", []int32{1}, []int32{3}, []int32{2, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, 4, 8)
			x := NewIndex(p)
			pages := lruSetup(t, p, x, 1, 2, 3)
			for _, f := range tc.touch {
				got, _, part, _ := x.Lookup([]int32{f, f, f, f, f, f}, "")
				p.Release(append(got, part))
			}
			var held []*Seq
			for _, f := range tc.hold {
				// Hold both pages, as the sequence that computed them would.
				got, n, part, _ := x.Lookup([]int32{f, f, f, f, f, f, 0}, "")
				held = append(held, &Seq{Pages: append(got, part), Len: n})
			}
			var want []int32
			for _, f := range tc.want {
				want = append(want, pages[f][1], pages[f][0]) // leaf before parent
			}
			if got := evictOrder(t, p, x); !slices.Equal(got, want) {
				t.Fatalf("eviction order %v, want %v", got, want)
			}
			checkTree(t, x, heldBy(held...))
			if got := x.Stats().Evictions; got != int64(len(want)) {
				t.Fatalf("evictions %d, want %d", got, len(want))
			}
			for _, s := range held {
				p.Free(s)
			}
			// Now only the index holds them: they go too.
			if got := x.Evict(p.NumPages()); got != 2*len(tc.hold) {
				t.Fatalf("evicted %d after release, want %d", got, 2*len(tc.hold))
			}
			if p.FreePages() != p.NumPages() || x.Stats().Nodes != 0 {
				t.Fatalf("%d of %d free, stats %+v", p.FreePages(), p.NumPages(), x.Stats())
			}
		})
	}
}

func TestIndexEvictStopsAtTarget(t *testing.T) {
	p := newTestPool(t, 4, 8)
	x := NewIndex(p)
	lruSetup(t, p, x, 1, 2, 3) // 6 pages in the index, 2 free
	if got := x.Evict(1); got != 0 {
		t.Fatalf("Evict with enough free pages freed %d", got)
	}
	if got := x.Evict(5); got != 3 || p.FreePages() != 5 {
		t.Fatalf("Evict(5) freed %d, %d free", got, p.FreePages())
	}
	if got := x.Evictable(); got != 3 {
		t.Fatalf("Evictable = %d, want 3", got)
	}
	if got := x.Evict(100); got != 3 || p.FreePages() != 8 {
		t.Fatalf("Evict(100) freed %d, %d free", got, p.FreePages())
	}
	checkTree(t, x, nil)
}

// TestIndexEvictChain evicts a long chain from the leaf up, and keeps the
// ancestors of a page a caller holds, even those only the index holds.
func TestIndexEvictChain(t *testing.T) {
	p := newTestPool(t, 2, 8)
	x := NewIndex(p)
	toks := seqTokens(1, 9) // 5 pages, the last partial
	s := compute(t, p, toks)
	x.Insert(toks, s.Pages, "")
	chain := slices.Clone(s.Pages)

	// A caller keeps only the third page (say, a copy of it elsewhere).
	p.Release(slices.Delete(slices.Clone(s.Pages), 2, 3))
	if got := x.Evictable(); got != 2 {
		t.Fatalf("Evictable = %d, want 2 (the pages below the held one)", got)
	}
	if got := evictOrder(t, p, x); !slices.Equal(got, []int32{chain[4], chain[3]}) {
		t.Fatalf("eviction order %v, want %v", got, []int32{chain[4], chain[3]})
	}
	checkTree(t, x, map[int32]int{chain[2]: 1})
	p.Release(chain[2:3])
	if got := evictOrder(t, p, x); !slices.Equal(got, []int32{chain[2], chain[1], chain[0]}) {
		t.Fatalf("eviction order %v, want leaf to root", got)
	}
	checkTree(t, x, nil)
}

func TestIndexReset(t *testing.T) {
	p := newTestPool(t, 4, 16)
	x := NewIndex(p)
	var live []*Seq
	for i, toks := range [][]int32{seqTokens(1, 9), seqTokens(1, 5), seqTokens(20, 27), {5}} {
		s := compute(t, p, toks)
		x.Insert(toks, s.Pages, "")
		if i%2 == 0 {
			live = append(live, s)
		} else {
			p.Free(s)
		}
	}
	pages, _, part, _ := x.Lookup(seqTokens(1, 9), "")
	lookedUp := &Seq{Pages: append(pages, part)}
	x.Reset()
	if st := x.Stats(); st.Nodes != 0 || st.Pages != 0 || st.Tokens != 0 || st.Inserts != 4 || st.Lookups != 1 {
		t.Fatalf("stats after Reset %+v", st)
	}
	checkTree(t, x, heldBy(append(live, lookedUp)...))
	if pages, n, part, _ := x.Lookup(seqTokens(1, 9), ""); pages != nil || n != 0 || part != -1 {
		t.Fatal("lookup hit after Reset")
	}
	for _, s := range append(live, lookedUp) {
		p.Free(s)
	}
	if p.FreePages() != p.NumPages() {
		t.Fatalf("%d of %d pages free after Reset", p.FreePages(), p.NumPages())
	}
}

func TestCopyPage(t *testing.T) {
	const ps, numPages = 4, 3
	for _, n := range []int{0, 1, 3, ps} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			p := newTestPool(t, ps, numPages)
			for l, kv := range p.Layers() {
				for i := range kv.K {
					kv.K[i] = float32(l*10000 + i)
					kv.V[i] = -float32(l*10000 + i)
				}
			}
			orig := make([][2][]float32, len(p.Layers()))
			for l, kv := range p.Layers() {
				orig[l] = [2][]float32{slices.Clone(kv.K), slices.Clone(kv.V)}
			}
			const src, dst = 2, 0
			CopyPage(p, dst, src, n)
			for l, kv := range p.Layers() {
				for i := range kv.K {
					page, pos := i/(ps*kv.Dim), i/kv.Dim%ps
					want := orig[l][0][i]
					if page == dst && pos < n {
						want = orig[l][0][i+(src-dst)*ps*kv.Dim]
					}
					if kv.K[i] != want || kv.V[i] != -want {
						t.Fatalf("layer %d float %d (page %d pos %d): K,V = %v,%v want %v", l, i, page, pos, kv.K[i], kv.V[i], want)
					}
				}
			}
		})
	}
	p := newTestPool(t, ps, numPages)
	defer func() {
		if recover() == nil {
			t.Fatal("CopyPage of more than a page did not panic")
		}
	}()
	CopyPage(p, 0, 1, ps+1)
}

// model is the reference for the property test: the token sequences the
// index caches, each with the page the index holds for each of its pages.
type model struct {
	ps      int
	entries []modelEntry
}

type modelEntry struct {
	tokens []int32
	pages  []int32
}

func (m *model) chunkEnd(i, n int) int { return min((i+1)*m.ps, n) }

// covered reports whether some entry starts with tokens.
func (m *model) covered(tokens []int32) *modelEntry {
	for k := range m.entries {
		e := &m.entries[k]
		if len(e.tokens) >= len(tokens) && slices.Equal(e.tokens[:len(tokens)], tokens) {
			return e
		}
	}
	return nil
}

// truncate cuts every entry that ends in a partial page holding exactly
// tokens[:i*ps+r] with 0 < r < upTo back to i*ps: the index drops such a
// page in favour of a longer one.
func (m *model) dropPartials(tokens []int32, i, upTo int) {
	for k := range m.entries {
		e := &m.entries[k]
		r := len(e.tokens) - i*m.ps
		if r > 0 && r < upTo && r < m.ps && slices.Equal(e.tokens, tokens[:i*m.ps+r]) {
			e.tokens, e.pages = e.tokens[:i*m.ps], e.pages[:i]
		}
	}
}

func (m *model) insert(tokens, pages []int32) {
	var kept []int32
	n := len(tokens)
	for i := 0; i*m.ps < n; i++ {
		end := m.chunkEnd(i, n)
		if e := m.covered(tokens[:end]); e != nil {
			if end-i*m.ps < m.ps { // a partial page already covered by a longer or equal one
				n = i * m.ps
				break
			}
			kept = append(kept, e.pages[i])
			continue
		}
		m.dropPartials(tokens, i, end-i*m.ps)
		kept = append(kept, pages[i])
	}
	if n > 0 {
		m.entries = append(m.entries, modelEntry{slices.Clone(tokens[:n]), kept})
	}
}

// evicted truncates each entry at its first page now free in p.
func (m *model) evicted(p *Pool) {
	for k := range m.entries {
		e := &m.entries[k]
		for i, id := range e.pages {
			if p.refs[id] == 0 {
				e.tokens, e.pages = e.tokens[:min(i*m.ps, len(e.tokens))], e.pages[:i]
				break
			}
		}
	}
	m.entries = slices.DeleteFunc(m.entries, func(e modelEntry) bool { return len(e.tokens) == 0 })
}

// tree is the path-to-page map the entries imply.
func (m *model) tree(t testing.TB) map[string]int32 {
	out := map[string]int32{}
	for _, e := range m.entries {
		for i := range e.pages {
			k := string(encodeKey(e.tokens[:m.chunkEnd(i, len(e.tokens))]))
			if old, ok := out[k]; ok && old != e.pages[i] {
				t.Fatalf("model: path %v in pages %d and %d", e.tokens[:m.chunkEnd(i, len(e.tokens))], old, e.pages[i])
			}
			out[k] = e.pages[i]
		}
	}
	return out
}

func indexTree(x *Index) map[string]int32 {
	out := map[string]int32{}
	var walk func(v *node, path []int32)
	walk = func(v *node, path []int32) {
		for _, c := range v.children {
			p := cat(path, c.key)
			out[string(encodeKey(p))] = c.page
			walk(c, p)
		}
	}
	if r := x.roots[""]; r != nil {
		walk(r, nil)
	}
	return out
}

// expect is the model's answer to a lookup: the match length, the full
// pages, and the candidate partial pages (several siblings may match equally
// far).
func (m *model) expect(q []int32) (matched int, pages []int32, partials []int32) {
	for _, e := range m.entries {
		matched = max(matched, commonPrefix(e.tokens, q))
	}
	for _, e := range m.entries {
		if commonPrefix(e.tokens, q) != matched || matched == 0 {
			continue
		}
		pages = e.pages[:matched/m.ps]
		if matched%m.ps != 0 {
			partials = append(partials, e.pages[matched/m.ps])
		}
	}
	return matched, pages, partials
}

// TestIndexRandom runs random lookups, computes, inserts, extensions,
// releases, evictions and resets against the reference model, checking the
// tree, every page's reference count and the KV a lookup returns after
// every step.
func TestIndexRandom(t *testing.T) {
	seeds, steps := 300, 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		runRandom(t, uint64(seed), steps)
		if t.Failed() {
			return
		}
	}
}

type liveSeq struct {
	seq    *Seq
	tokens []int32
}

func runRandom(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0xcafe))
	ps := 1 + rng.IntN(4)
	p := newTestPool(t, ps, 6+rng.IntN(20))
	x := NewIndex(p)
	m := &model{ps: ps}
	var live []liveSeq
	var history [][]int32
	held := func() map[int32]int {
		h := map[int32]int{}
		for _, l := range live {
			for _, id := range l.seq.Pages {
				h[id]++
			}
		}
		return h
	}
	check := func(what string) {
		t.Helper()
		checkTree(t, x, held())
		if want, got := m.tree(t), indexTree(x); !maps.Equal(want, got) {
			t.Fatalf("seed %d %s: index tree %v, model %v", seed, what, got, want)
		}
	}
	evict := func(n int) int {
		before := p.FreePages()
		got := x.Evict(n)
		m.evicted(p)
		if p.FreePages()-before != got {
			t.Fatalf("seed %d: Evict returned %d, freed %d", seed, got, p.FreePages()-before)
		}
		if p.FreePages() < n && x.Evictable() != 0 {
			t.Fatalf("seed %d: Evict(%d) stopped at %d free with %d evictable", seed, n, p.FreePages(), x.Evictable())
		}
		return got
	}
	alloc := func(s *Seq, total int) bool {
		if need := p.PagesFor(total) - len(s.Pages); need > p.FreePages() {
			evict(need)
		}
		return p.Reserve(s, total) == nil
	}
	genTokens := func() []int32 {
		var toks []int32
		if len(history) > 0 && rng.IntN(3) > 0 {
			h := history[rng.IntN(len(history))]
			toks = slices.Clone(h[:rng.IntN(len(h)+1)])
		}
		for range rng.IntN(3 * ps) {
			toks = append(toks, int32(1+rng.IntN(3)))
		}
		return toks
	}
	for step := range steps {
		switch op := rng.IntN(20); {
		case op < 8: // a new request: lookup, copy on write, compute, insert
			toks := genTokens()
			pages, n, part, partLen := x.Lookup(toks, "")
			wantN, wantPages, partials := m.expect(toks)
			if n != wantN || !slices.Equal(pages, wantPages) || n != len(pages)*ps+partLen ||
				(part < 0) != (len(partials) == 0) || (part >= 0 && !slices.Contains(partials, part)) {
				t.Fatalf("seed %d step %d: Lookup(%v) = %v, %d, %d, %d; model %v, %d, %v",
					seed, step, toks, pages, n, part, partLen, wantPages, wantN, partials)
			}
			s := &Seq{Pages: pages, Len: n}
			if part >= 0 {
				checkKV(t, p, append(slices.Clone(pages), part), toks[:n])
				// part is ours until released, so evicting to make room
				// for the copy cannot take it.
				ok := alloc(s, n)
				if ok {
					CopyPage(p, s.Pages[len(s.Pages)-1], part, partLen)
				}
				p.Release([]int32{part})
				if !ok {
					p.Free(s)
					check("abandoned copy")
					continue
				}
			} else {
				checkKV(t, p, pages, toks[:n])
			}
			if !alloc(s, len(toks)) {
				p.Free(s)
				check("abandoned request")
				continue
			}
			writeKV(p, s.Pages, toks, n)
			s.Len = len(toks)
			if rng.IntN(5) > 0 {
				x.Insert(toks, s.Pages, "")
				m.insert(toks, s.Pages)
				history = append(history, toks)
			}
			if rng.IntN(3) > 0 {
				live = append(live, liveSeq{s, toks})
			} else {
				p.Free(s)
			}
		case op < 11 && len(live) > 0: // a live sequence generates more
			l := &live[rng.IntN(len(live))]
			toks := slices.Clone(l.tokens)
			for range 1 + rng.IntN(2*ps) {
				toks = append(toks, int32(1+rng.IntN(3)))
			}
			if !alloc(l.seq, len(toks)) {
				continue
			}
			writeKV(p, l.seq.Pages, toks, len(l.tokens))
			l.tokens, l.seq.Len = toks, len(toks)
			if rng.IntN(2) == 0 {
				x.Insert(toks, l.seq.Pages, "")
				m.insert(toks, l.seq.Pages)
				history = append(history, toks)
			}
		case op < 15 && len(live) > 0: // a sequence ends
			k := rng.IntN(len(live))
			p.Free(live[k].seq)
			live = slices.Delete(live, k, k+1)
		case op < 18:
			evict(rng.IntN(p.NumPages() + 2))
		case op < 19:
			e := x.Evictable()
			if got := evict(p.NumPages() + 1); got != e {
				t.Fatalf("seed %d: Evictable said %d, Evict freed %d", seed, e, got)
			}
		default:
			if rng.IntN(4) == 0 {
				x.Reset()
				m.entries = nil
			}
		}
		check(fmt.Sprintf("step %d", step))
	}
	for _, l := range live {
		p.Free(l.seq)
	}
	x.Reset()
	if p.FreePages() != p.NumPages() {
		t.Fatalf("seed %d: leak, %d of %d pages free", seed, p.FreePages(), p.NumPages())
	}
}

func TestIndexInsertTooFewPages(t *testing.T) {
	p := newTestPool(t, 4, 4)
	x := NewIndex(p)
	s := compute(t, p, seqTokens(1, 5))
	defer func() {
		if recover() == nil {
			t.Fatal("Insert of 5 tokens with 1 page did not panic")
		}
		checkTree(t, x, heldBy(s))
	}()
	x.Insert(seqTokens(1, 5), s.Pages[:1], "")
}

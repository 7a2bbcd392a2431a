package kvcache

import (
	"container/heap"
	"encoding/binary"
	"fmt"
	"time"
)

// Index maps token-id prefixes to KV pages of a Pool, page-granular: a radix
// tree whose every node is one page, keyed by the token ids of the positions
// that page holds. A node keyed by a full page of tokens may have children; a
// node whose page is only partially filled (fewer than PageSize tokens) is
// always a leaf. The index keeps one reference on the page of every node.
//
// The tree is partitioned by tenant (see JoinScope): each tenant has its own
// root, so a prefix one tenant cached is never matched for another, while
// the conversations (prompt_cache_key) of one tenant share every common
// prefix. Eviction is one LRU order across all tenants.
//
// Prefixes may be pinned until a time (see Pin): eviction takes them only
// after every unpinned page, so that they survive LRU pressure, but still
// takes them rather than let an allocation fail.
//
// Like the Pool, an Index has no locking: whoever owns the pool owns it.
type Index struct {
	pool  *Pool
	roots map[string]*node // by tenant; a root has no page and is dropped when empty
	clock uint64           // monotonic access clock for LRU
	now   func() time.Time // wall clock for pins

	nodes, tokens int
	lookups       int64
	hits          int64
	hitTokens     int64
	inserts       int64
	insertedPages int64
	evictions     int64
	pins          int64
	pinEvictions  int64

	buf []byte // scratch for map keys
}

// node is one page of the tree. A root has no page (page == -1) and no
// parent.
type node struct {
	parent   *node
	mapKey   string  // key under which parent.children holds this node (a root: its tenant)
	key      []int32 // token ids of the positions this page holds (1..PageSize)
	page     int32
	last     uint64    // access clock of the last lookup hit or insert through this node
	pinned   time.Time // kept ahead of LRU eviction until then (zero: not pinned)
	children map[string]*node
}

// IndexStats are the counters and current size of an Index.
type IndexStats struct {
	Nodes         int   // nodes in the tree (one page each)
	Pages         int   // pages the index holds a reference on (== Nodes)
	Tokens        int   // token positions those pages cover
	Lookups       int64 // Lookup calls
	Hits          int64 // lookups that matched at least one token
	HitTokens     int64 // tokens matched, summed over lookups
	Inserts       int64 // Insert calls
	InsertedPages int64 // nodes (pages) added by inserts
	Evictions     int64 // pages evicted by Evict
	Pins          int64 // Pin calls that pinned something
	PinEvictions  int64 // pages evicted while still pinned (nothing else was left)
}

// NewIndex returns an empty prefix index over the pages of pool, timing
// pins by time.Now.
func NewIndex(pool *Pool) *Index { return NewIndexClock(pool, nil) }

// NewIndexClock is NewIndex timing pins by now (nil means time.Now).
func NewIndexClock(pool *Pool, now func() time.Time) *Index {
	if now == nil {
		now = time.Now
	}
	return &Index{pool: pool, roots: map[string]*node{}, now: now}
}

// root returns tenant's root, creating it when create is set (nil
// otherwise when the tenant has nothing cached).
func (x *Index) root(tenant string, create bool) *node {
	r := x.roots[tenant]
	if r == nil && create {
		r = &node{page: -1, mapKey: tenant}
		x.roots[tenant] = r
	}
	return r
}

// Lookup returns the longest cached prefix of tokens among those cached
// under scope's tenant (see JoinScope; the conversation part does not
// matter).
//
// pages are the pages wholly covered by the match, in order; each is
// Retained once for the caller, who shares them by reference (hands them to
// a Seq, or releases them with Pool.Release). matched is the length of the
// match in tokens, including the partial page: matched ==
// len(pages)*PageSize + partialLen.
//
// When the match ends inside a page (the request diverges inside a cached
// page, ends inside it, or the cached page is only partially filled), that
// page cannot be shared, since the caller will write its own positions into
// it: partial is its id (-1 when none) and partialLen > 0 the number of
// leading positions of it that match. The partial page is Retained once too,
// so that it survives an Evict the caller may need to make room; the caller
// Allocs a fresh page, copies with CopyPage(pool, fresh, partial,
// partialLen), and then Releases partial.
//
// A caller that must compute at least one position (to get logits) looks up
// tokens[:len(tokens)-1].
func (x *Index) Lookup(tokens []int32, scope string) (pages []int32, matched int, partial int32, partialLen int) {
	x.lookups++
	pages, last, best, partialLen := x.match(tokens, scope)
	partial = -1
	if best != nil {
		partial = best.page
	}
	matched = len(pages)*x.pool.pageSize + partialLen
	if matched == 0 {
		return nil, 0, -1, 0
	}
	x.hits++
	x.hitTokens += int64(matched)
	x.clock++
	x.touch(last)
	x.pool.Retain(pages)
	if partial >= 0 {
		x.pool.Retain([]int32{partial})
	}
	return pages, matched, partial, partialLen
}

// Peek reports how many leading tokens Lookup would match now, without
// retaining anything or touching the statistics and the LRU order (prompt
// inspection), under scope's tenant.
func (x *Index) Peek(tokens []int32, scope string) int {
	pages, _, _, partialLen := x.match(tokens, scope)
	return len(pages)*x.pool.pageSize + partialLen
}

// match walks scope's tenant's tree: the whole pages that match, the
// deepest node reached, and the best partially matching child with its
// match length.
func (x *Index) match(tokens []int32, scope string) (pages []int32, last, best *node, partialLen int) {
	tenant, _ := SplitScope(scope)
	n := x.root(tenant, false)
	if n == nil {
		return nil, nil, nil, 0
	}
	ps := x.pool.pageSize
	pos := 0
	for len(tokens)-pos >= ps {
		c := n.children[string(x.mapKey(tokens[pos:pos+ps]))]
		if c == nil {
			break
		}
		pages = append(pages, c.page)
		n = c
		pos += ps
	}
	rest := tokens[pos:]
	for _, c := range n.children {
		l := commonPrefix(c.key, rest)
		if l == 0 || l < partialLen {
			continue
		}
		// Prefer the longest match, then the most recently used page, then
		// the lowest page id, so that the result is deterministic.
		if l > partialLen || c.last > best.last || (c.last == best.last && c.page < best.page) {
			best, partialLen = c, l
		}
	}
	last = n
	if best != nil {
		last = best
	}
	return pages, last, best, partialLen
}

// Insert records that pages hold the KV of tokens, under scope's tenant:
// position p in page pages[p/PageSize]; the last page may be partially
// filled. pages must cover len(tokens) positions (extra pages are ignored).
//
// The index Retains each page it keeps, once per node. Where a page of the
// prefix is already cached (same tokens at the same positions), the existing
// node is reused and the caller's page is not kept: it stays the caller's
// alone. A partially filled page whose tokens are a prefix of a cached
// sibling's is not kept either; a cached partial page whose tokens are a
// strict prefix of the new page's is dropped in its favour.
//
// After Insert the caller must not overwrite the positions it recorded
// (appending further positions into a partially filled page is fine; the
// index only vouches for the positions it was given).
func (x *Index) Insert(tokens []int32, pages []int32, scope string) {
	ps := x.pool.pageSize
	if need := (len(tokens) + ps - 1) / ps; len(pages) < need {
		panic(fmt.Sprintf("kvcache: insert of %d tokens with %d pages, need %d", len(tokens), len(pages), need))
	}
	x.inserts++
	if len(tokens) == 0 {
		return
	}
	x.clock++
	tenant, _ := SplitScope(scope)
	n := x.root(tenant, true)
	for i := 0; i*ps < len(tokens); i++ {
		chunk := tokens[i*ps : min((i+1)*ps, len(tokens))]
		k := x.mapKey(chunk)
		if c := n.children[string(k)]; c != nil {
			n = c
			continue
		}
		if len(chunk) < ps {
			if c := n.longerSibling(chunk); c != nil {
				n = c // already cached within a longer page
				break
			}
		}
		c := &node{parent: n, mapKey: string(k), key: append([]int32(nil), chunk...), page: pages[i]}
		x.pool.Retain(pages[i : i+1]) // before dropping a sibling that may hold the same page
		if n.children == nil {
			n.children = make(map[string]*node)
		}
		n.children[c.mapKey] = c
		x.nodes++
		x.tokens += len(c.key)
		x.insertedPages++
		for _, s := range n.children {
			if len(s.key) < len(chunk) && commonPrefix(s.key, chunk) == len(s.key) {
				if s.pinned.After(c.pinned) {
					c.pinned = s.pinned // the pin covers the page that replaces it
				}
				x.remove(s) // a partial page subsumed by the new one
			}
		}
		n = c
	}
	x.touch(n)
}

// Pin keeps the cached prefix of tokens under scope's tenant (as far as
// Lookup would match it) ahead of LRU eviction until until: Evict takes a
// pinned page only when no unpinned (or expired) page is left, the one
// whose pin ends first first. Pinning again extends a pin, never shortens
// it. Pin counts as a use of the prefix for the LRU order. It returns how
// many leading tokens it pinned (0 when none are cached).
func (x *Index) Pin(tokens []int32, scope string, until time.Time) int {
	tenant, _ := SplitScope(scope)
	n := x.root(tenant, false)
	if n == nil {
		return 0
	}
	pages, last, best, partialLen := x.match(tokens, scope)
	if len(pages)+partialLen == 0 {
		return 0
	}
	x.pins++
	x.clock++
	x.touch(last)
	ps := x.pool.pageSize
	for i := range pages {
		n = n.children[string(x.mapKey(tokens[i*ps:(i+1)*ps]))]
		if until.After(n.pinned) {
			n.pinned = until
		}
	}
	if best != nil && until.After(best.pinned) {
		best.pinned = until
	}
	return len(pages)*ps + partialLen
}

// Evict drops leaves whose page only the index holds (reference count 1)
// until at least n pages are free in the pool or nothing more is
// evictable, and returns how many pages it freed: least recently used
// first among the unpinned ones (pins that have expired count as none),
// then, as a last resort rather than let an allocation fail, the pinned
// ones, the pin that ends first first. A parent becomes evictable once its
// children are gone. A page someone else holds (a running sequence, a
// Lookup caller) is never evicted, nor are its ancestors.
func (x *Index) Evict(n int) int {
	if x.pool.FreePages() >= n {
		return 0
	}
	h := lruHeap{now: x.now()}
	var walk func(*node)
	walk = func(v *node) {
		for _, c := range v.children {
			walk(c)
		}
		if x.evictable(v) {
			h.nodes = append(h.nodes, v)
		}
	}
	for _, r := range x.roots {
		walk(r)
	}
	heap.Init(&h)
	freed := 0
	for x.pool.FreePages() < n && h.Len() > 0 {
		v := heap.Pop(&h).(*node)
		p := v.parent
		if v.pinned.After(h.now) {
			x.pinEvictions++
		}
		x.remove(v)
		x.evictions++
		freed++
		if x.evictable(p) {
			heap.Push(&h, p)
		}
	}
	return freed
}

// Evictable reports how many pages Evict could free if asked for
// everything: the nodes whose page, and every descendant's page, only the
// index holds.
func (x *Index) Evictable() int {
	var count func(*node) (int, bool)
	count = func(v *node) (int, bool) {
		total, all := 0, true
		for _, c := range v.children {
			k, ok := count(c)
			total += k
			all = all && ok
		}
		if v.parent == nil || !all || x.pool.refs[v.page] != 1 {
			return total, false
		}
		return total + 1, true
	}
	k := 0
	for _, r := range x.roots {
		n, _ := count(r)
		k += n
	}
	return k
}

// Reset drops every node, releasing the index's reference on each page.
// Pages still held by others stay allocated. The cumulative counters
// (lookups, hits, inserts, evictions) are kept.
func (x *Index) Reset() {
	var walk func(*node)
	walk = func(v *node) {
		for _, c := range v.children {
			walk(c)
		}
		if v.parent != nil {
			x.pool.Release([]int32{v.page})
		}
	}
	for _, r := range x.roots {
		walk(r)
	}
	clear(x.roots)
	x.nodes, x.tokens = 0, 0
}

// Stats returns the index's current size and cumulative counters.
func (x *Index) Stats() IndexStats {
	return IndexStats{
		Nodes:         x.nodes,
		Pages:         x.nodes,
		Tokens:        x.tokens,
		Lookups:       x.lookups,
		Hits:          x.hits,
		HitTokens:     x.hitTokens,
		Inserts:       x.inserts,
		InsertedPages: x.insertedPages,
		Evictions:     x.evictions,
		Pins:          x.pins,
		PinEvictions:  x.pinEvictions,
	}
}

// CopyPage copies the first n positions of page src into page dst, K and V
// of every attention layer of p: the copy-on-write of a partially matched
// page returned by Index.Lookup.
func CopyPage(p *Pool, dst, src int32, n int) {
	if n < 0 || n > p.pageSize {
		panic(fmt.Sprintf("kvcache: copy of %d positions, page size %d", n, p.pageSize))
	}
	if dst == src || n == 0 {
		return
	}
	for _, l := range p.layers {
		if l.Dim == 0 {
			continue
		}
		w := l.PageSize * l.Dim
		so, do := int(src)*w, int(dst)*w
		copy(l.K[do:do+n*l.Dim], l.K[so:so+n*l.Dim])
		copy(l.V[do:do+n*l.Dim], l.V[so:so+n*l.Dim])
	}
}

// evictable reports whether v is a leaf whose page only the index holds.
func (x *Index) evictable(v *node) bool {
	return v.parent != nil && len(v.children) == 0 && x.pool.refs[v.page] == 1
}

// remove detaches leaf v from its parent and releases its page; a root
// left empty is dropped.
func (x *Index) remove(v *node) {
	p := v.parent
	delete(p.children, v.mapKey)
	if p.parent == nil && len(p.children) == 0 && x.roots[p.mapKey] == p {
		delete(x.roots, p.mapKey)
	}
	x.nodes--
	x.tokens -= len(v.key)
	x.pool.Release([]int32{v.page})
	v.parent = nil
}

// touch stamps v and its ancestors with the current clock.
func (x *Index) touch(v *node) {
	for ; v != nil; v = v.parent {
		v.last = x.clock
	}
}

// mapKey encodes toks as the bytes of a children map key, in a scratch
// buffer valid until the next call.
func (x *Index) mapKey(toks []int32) []byte {
	x.buf = x.buf[:0]
	for _, t := range toks {
		x.buf = binary.LittleEndian.AppendUint32(x.buf, uint32(t))
	}
	return x.buf
}

// longerSibling returns a child of n whose tokens start with chunk and are
// longer than it, or nil.
func (n *node) longerSibling(chunk []int32) *node {
	for _, c := range n.children {
		if len(c.key) > len(chunk) && commonPrefix(c.key, chunk) == len(chunk) {
			return c
		}
	}
	return nil
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// lruHeap orders evictable nodes for eviction: those not pinned at now
// first, by last access, oldest first; then the pinned ones, the pin that
// ends first first (page id breaks ties, for determinism).
type lruHeap struct {
	nodes []*node
	now   time.Time
}

func (h *lruHeap) Len() int { return len(h.nodes) }
func (h *lruHeap) Less(i, j int) bool {
	a, b := h.nodes[i], h.nodes[j]
	pa, pb := a.pinned.After(h.now), b.pinned.After(h.now)
	switch {
	case pa != pb:
		return pb
	case pa && !a.pinned.Equal(b.pinned):
		return a.pinned.Before(b.pinned)
	case a.last != b.last:
		return a.last < b.last
	}
	return a.page < b.page
}
func (h *lruHeap) Swap(i, j int) { h.nodes[i], h.nodes[j] = h.nodes[j], h.nodes[i] }
func (h *lruHeap) Push(v any)    { h.nodes = append(h.nodes, v.(*node)) }
func (h *lruHeap) Pop() any {
	v := h.nodes[len(h.nodes)-1]
	h.nodes = h.nodes[:len(h.nodes)-1]
	return v
}

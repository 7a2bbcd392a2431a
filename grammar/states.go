package grammar

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// sig is a 128-bit structural signature of an Earley set (Matcher.setSig).
type sig struct{ lo, hi uint64 }

// selfLo and selfHi stand for "this set" as an item's origin: an item
// predicted in the set refers to the set itself, whose signature is being
// computed.
const selfLo, selfHi = 0x243F6A8885A308D3, 0x13198A2E03707344

// mix64 is SplitMix64's finalizer: a bijection of 64 bits whose output
// bits each depend on every input bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}

// setSig is the structural signature of set k (complete but for its own
// signature): a hash of the multiset of its live items, each as its
// production, its dot and its origin set's signature (selfLo, selfHi for k).
//
// What a set can still accept depends only on its live items and, through
// completion, on the live items of their origin sets, recursively: a
// completed item has done its work when the set closed (the start item,
// which says the match can end, excepted). So two sets whose live items
// have the same productions, dots and (recursively) origin structures accept
// the same continuations, take the same bytes, can end alike and are alike
// inside string content. Equal signatures stand for that equality; two lanes of
// 64 bits make a false match between the states of a grammar a 2^-128 event
// per pair. Items are summed, so the order in which close added them does
// not matter.
func (m *Matcher) setSig(k int32) sig {
	startProd := m.g.byLHS[m.g.start][0]
	var s sig
	n := uint64(0)
	for _, it := range m.items[m.starts[k]:] {
		if int(it.dot) == len(m.g.prods[it.prod].rhs) && it.prod != startProd {
			continue
		}
		o := sig{selfLo, selfHi}
		if it.origin < k {
			o = m.sigs[it.origin]
		}
		a := uint64(uint32(it.prod))<<32 | uint64(uint32(it.dot))
		s.lo += mix64(mix64(a^o.lo) + o.hi)
		s.hi += mix64(mix64(a*0x9E3779B97F4A7C15^o.hi) + o.lo*0xD6E8FEB86659FD93)
		n++
	}
	return sig{mix64(s.lo ^ n), mix64(s.hi + n*0xA0761D6478BD642F)}
}

// A dstate is a state of the grammar as masks meet it: the class of Earley
// sets with one signature. What a mask needs of a set is here (the bytes it
// takes, whether it can end, whether it is inside free text), and the
// states each byte leads to are learnt as walks take them, so that a walk
// over the vocabulary's trie follows pointers where it would run Earley
// steps: together the states are a lazily built DFA of the grammar's
// viable prefixes. Fields but next, mask and used are fixed when the state
// is made.
type dstate struct {
	allowed ByteSet
	// classes are the byte classes (Grammar.cls) of allowed; rank[w] is
	// the number of them below 64*w: next's index for class x is
	// rank[x>>6] plus the classes below x in its word.
	classes ByteSet
	rank    [4]uint16
	canEnd  bool
	// text is the Matcher's TextBudget: inside string content, how many
	// characters of plain text may follow (0: not inside).
	text int32
	// next[i] is the state after the bytes of the i-th allowed class;
	// nil until a walk has taken one of them.
	next []atomic.Pointer[dstate]
	// mask is this state's whole mask over one vocabulary, when cached;
	// used is set when it is read (the CLOCK bit of the mask cache).
	mask atomic.Pointer[cachedMask]
	used atomic.Bool
}

type cachedMask struct {
	v *Vocab
	m Mask
}

// slot is next's index for class x, which s allows.
func (s *dstate) slot(x uint8) int {
	w := x >> 6
	return int(s.rank[w]) + bits.OnesCount64(s.classes[w]&(1<<(x&63)-1))
}

// Bounds of a grammar's state cache. A state costs its struct, a map entry
// and a pointer per allowed byte; masks cost what their vocabulary's masks
// do. Past stateBudget the states are dropped and learnt anew (a grammar
// whose states never repeat, such as deep nesting, would grow them
// forever); past maskBudget the least recently used mask is dropped.
const (
	stateBudget = 8 << 20
	maskBudget  = 4 << 20
	// maskMinVisits is the least number of trie edges a walk takes for its
	// mask to be cached: a mask that cheap is quicker to walk than to copy.
	maskMinVisits = 48
)

// stateCache is a grammar's cache of states (a stateSet, replaced whole
// when it outgrows stateBudget). It is safe for concurrent use.
type stateCache struct {
	cur atomic.Pointer[stateSet]
	// The bounds, stateBudget and maskBudget but for tests; masks off,
	// only transitions are learnt (tests of the walk over learnt states).
	stateBudget, maskBudget int
	noMasks                 bool
}

func newStateCache() *stateCache {
	c := &stateCache{stateBudget: stateBudget, maskBudget: maskBudget}
	c.cur.Store(c.newSet())
	return c
}

func (c *stateCache) newSet() *stateSet {
	return &stateSet{states: map[sig]*dstate{}, stateBudget: c.stateBudget, maskBudget: c.maskBudget, noMasks: c.noMasks}
}

// set returns the current stateSet, a fresh one when the last is full.
func (c *stateCache) set() *stateSet {
	d := c.cur.Load()
	if d.full.Load() {
		fresh := c.newSet()
		if c.cur.CompareAndSwap(d, fresh) {
			return fresh
		}
		return c.cur.Load()
	}
	return d
}

// stateSet holds states by signature, and the ring of states that hold a
// mask.
type stateSet struct {
	stateBudget, maskBudget int
	noMasks                 bool

	mu     sync.Mutex
	states map[sig]*dstate
	bytes  int
	full   atomic.Bool

	maskMu sync.Mutex
	ring   []*dstate
	hand   int
}

// state returns the state of m's last set, made when new.
func (d *stateSet) state(m *Matcher) *dstate {
	k := len(m.sigs) - 1
	key := m.sigs[k]
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.states[key]; s != nil {
		return s
	}
	s := &dstate{allowed: m.allowed[k], canEnd: m.CanEnd(), text: m.TextBudget()}
	for c := range 256 {
		if s.allowed.Has(byte(c)) {
			s.classes.Add(m.g.cls[c])
		}
	}
	n := 0
	for w := range 4 {
		s.rank[w] = uint16(n)
		n += bits.OnesCount64(s.classes[w])
	}
	s.next = make([]atomic.Pointer[dstate], n)
	d.states[key] = s
	if d.bytes += 200 + 8*n; d.bytes > d.stateBudget {
		d.full.Store(true)
	}
	return s
}

// storeMask caches mask (over v) as s's.
func (d *stateSet) storeMask(s *dstate, v *Vocab, mask Mask) {
	capacity := d.maskBudget / (8 * len(mask))
	if capacity == 0 || d.noMasks {
		return
	}
	cm := &cachedMask{v: v, m: append(Mask(nil), mask...)}
	d.maskMu.Lock()
	defer d.maskMu.Unlock()
	if s.mask.Load() != nil {
		s.mask.Store(cm)
		return
	}
	if len(d.ring) < capacity {
		d.ring = append(d.ring, s)
		s.mask.Store(cm)
		return
	}
	// CLOCK: pass over states read since the hand last went by, drop the
	// first that was not.
	for {
		old := d.ring[d.hand]
		if !old.used.Swap(false) {
			old.mask.Store(nil)
			d.ring[d.hand] = s
			d.hand = (d.hand + 1) % len(d.ring)
			s.mask.Store(cm)
			return
		}
		d.hand = (d.hand + 1) % len(d.ring)
	}
}

// CacheStats describes what a grammar's mask cache holds: the states its
// masks have met (Earley sets told apart by signature, with the
// transitions learnt between them), the whole masks cached, and about how
// many bytes both take.
type CacheStats struct {
	States, Masks, Bytes int
}

// CacheStats reports g's mask cache. The cache is bounded: its states are
// dropped past 8 MiB and learnt anew, its masks past 4 MiB (least recently
// used first).
func (g *Grammar) CacheStats() CacheStats {
	d := g.cache.cur.Load()
	d.mu.Lock()
	st := CacheStats{States: len(d.states), Bytes: d.bytes}
	d.mu.Unlock()
	d.maskMu.Lock()
	for _, s := range d.ring {
		if cm := s.mask.Load(); cm != nil {
			st.Masks++
			st.Bytes += 8 * len(cm.m)
		}
	}
	d.maskMu.Unlock()
	return st
}

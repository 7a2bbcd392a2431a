package kvcache

import (
	"fmt"
	"slices"
)

// Snapshot is a whole-state snapshot as the snapshot pool sees it: the exact
// tokens it covers, the bytes it holds, and a way to give them back
// (model.Snapshot implements it).
type Snapshot interface {
	Covered() []int32
	Size() int64
	// Release frees the snapshot's memory; the pool calls it once, when
	// it drops the snapshot.
	Release()
}

// SnapshotPool holds whole-state snapshots of models whose state cannot be
// cut back (recurrent and hybrid layers), keyed by the exact token sequence
// each covers, within a byte budget. A lookup takes the longest stored
// snapshot that is a prefix of the request. When room is needed, snapshots
// superseded by a newer one of their conversation (scope) that extends them
// go first, then the least recently used. Superseded snapshots stay
// findable until then: a history-boundary snapshot is superseded by the
// end-of-turn snapshot, yet it is the one the next turn needs when the
// template re-renders the reply differently. It is a plain data structure
// owned by the scheduler.
//
// The pool owns what it is given: Put hands a snapshot over (one it
// rejects is released at once), and the pool releases every snapshot it
// drops (evicted, replaced, Reset). A snapshot Lookup returns stays the
// pool's: use it before the next Put or Reset.
type SnapshotPool struct {
	budget  int64
	used    int64
	clock   uint64
	entries []*snapEntry
	stats   SnapshotStats
}

type snapEntry struct {
	snap       Snapshot
	scope      string
	used       uint64
	superseded bool // a newer snapshot of its conversation extends it
	kept       bool // a cache breakpoint's: never superseded (PutKept)
}

// SnapshotStats are the pool's counters. Misses are classified: no stored
// snapshot shares a first token with the request (NoCandidate); the best
// one covers fewer than MinTokens tokens (TooShort); or the closest one
// diverged from the request (Diverged), with the geometry of the last such
// miss.
type SnapshotStats struct {
	Entries, Bytes                 int64
	Lookups, Hits, HitTokens       int64
	Inserts, Evictions, Supersedes int64
	Rejected                       int64 // snapshots larger than the whole budget
	NoCandidate, TooShort          int64
	Diverged                       int64
	LastDivergedAt, LastDivergedOf int // common prefix and snapshot length of the last divergence
}

// MinTokens is the shortest snapshot worth restoring.
const MinTokens = 1

// NewSnapshotPool returns a pool holding at most budget bytes (the sum of
// its snapshots' Size).
func NewSnapshotPool(budget int64) *SnapshotPool { return &SnapshotPool{budget: budget} }

// Budget is the pool's byte budget.
func (p *SnapshotPool) Budget() int64 { return p.budget }

// Lookup returns the longest stored snapshot covering a prefix of tokens
// (nil on a miss) among those of scope's tenant; a scope naming a
// conversation (prompt_cache_key) restricts the search to that
// conversation's snapshots, one without searches all of the tenant's (see
// JoinScope).
func (p *SnapshotPool) Lookup(tokens []int32, scope string) Snapshot {
	p.stats.Lookups++
	var best *snapEntry
	bestLCP, bestLen := 0, 0
	for _, e := range p.entries {
		if !scopeMatches(e.scope, scope) {
			continue
		}
		c := e.snap.Covered()
		if len(c) <= len(tokens) && slices.Equal(c, tokens[:len(c)]) {
			if best == nil || len(c) > len(best.snap.Covered()) {
				best = e
			}
			continue
		}
		if l := lcp(c, tokens); l > bestLCP {
			bestLCP, bestLen = l, len(c)
		}
	}
	switch {
	case best != nil && len(best.snap.Covered()) >= MinTokens:
		p.clock++
		best.used = p.clock
		p.stats.Hits++
		p.stats.HitTokens += int64(len(best.snap.Covered()))
		return best.snap
	case bestLCP > 0:
		p.stats.Diverged++
		p.stats.LastDivergedAt, p.stats.LastDivergedOf = bestLCP, bestLen
	case best != nil:
		p.stats.TooShort++
	default:
		p.stats.NoCandidate++
	}
	return nil
}

// Peek reports how many leading tokens the longest stored snapshot that is a
// prefix of tokens covers, under the same scope rules as Lookup, without
// touching statistics or LRU order.
func (p *SnapshotPool) Peek(tokens []int32, scope string) int {
	best := 0
	for _, e := range p.entries {
		c := e.snap.Covered()
		if scopeMatches(e.scope, scope) && len(c) <= len(tokens) && len(c) > best && slices.Equal(c, tokens[:len(c)]) {
			best = len(c)
		}
	}
	return best
}

// Put stores a snapshot under scope. Snapshots of the same scope whose
// tokens it extends are marked superseded; then superseded and least
// recently used snapshots are evicted until it fits. A snapshot covering
// exactly the tokens of a stored one of the same tenant replaces it. It
// reports whether s was stored; either way the pool now owns s (so each
// snapshot is Put once).
func (p *SnapshotPool) Put(s Snapshot, scope string) bool { return p.put(s, scope, false) }

// PutKept is Put for a prefix a client asked to keep (a cache breakpoint,
// such as a system prompt many conversations share): a newer snapshot
// that extends it does not supersede it, so it is evicted only in least
// recently used order.
func (p *SnapshotPool) PutKept(s Snapshot, scope string) bool { return p.put(s, scope, true) }

func (p *SnapshotPool) put(s Snapshot, scope string, kept bool) bool {
	if s.Size() > p.budget {
		p.stats.Rejected++
		s.Release()
		return false
	}
	c := s.Covered()
	tenant, _ := SplitScope(scope)
	p.entries = slices.DeleteFunc(p.entries, func(e *snapEntry) bool {
		if et, _ := SplitScope(e.scope); et == tenant && slices.Equal(e.snap.Covered(), c) {
			kept = kept || e.kept
			p.used -= e.snap.Size()
			e.snap.Release()
			return true
		}
		return false
	})
	for _, e := range p.entries {
		ec := e.snap.Covered()
		if !e.superseded && !e.kept && e.scope == scope && len(ec) < len(c) && slices.Equal(ec, c[:len(ec)]) {
			e.superseded = true
			p.stats.Supersedes++
		}
	}
	for p.used+s.Size() > p.budget && len(p.entries) > 0 {
		victim := 0
		for i, e := range p.entries {
			v := p.entries[victim]
			if e.superseded != v.superseded {
				if e.superseded {
					victim = i
				}
				continue
			}
			if e.used < v.used {
				victim = i
			}
		}
		p.used -= p.entries[victim].snap.Size()
		p.entries[victim].snap.Release()
		p.entries = slices.Delete(p.entries, victim, victim+1)
		p.stats.Evictions++
	}
	p.clock++
	p.entries = append(p.entries, &snapEntry{snap: s, scope: scope, used: p.clock, kept: kept})
	p.used += s.Size()
	p.stats.Inserts++
	return true
}

// Reset drops (and releases) every snapshot.
func (p *SnapshotPool) Reset() {
	for _, e := range p.entries {
		e.snap.Release()
	}
	p.entries, p.used = nil, 0
}

// Stats returns the counters and occupancy.
func (p *SnapshotPool) Stats() SnapshotStats {
	s := p.stats
	s.Entries, s.Bytes = int64(len(p.entries)), p.used
	return s
}

func (p *SnapshotPool) String() string {
	return fmt.Sprintf("snapshot pool: %d entries, %d of %d bytes", len(p.entries), p.used, p.budget)
}

func lcp(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

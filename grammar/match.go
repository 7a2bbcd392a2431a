package grammar

import (
	"cmp"
	"slices"
)

// Matcher follows one output through a grammar, byte by byte: an Earley
// recognizer whose terminals are byte classes. It keeps every Earley set of
// the bytes taken so far, so Mark and Reset move it back cheaply, which is
// what a walk over a token trie needs (take a token's bytes, look, undo).
// A Matcher is not safe for concurrent use; each sequence has its own.
type Matcher struct {
	g *Grammar
	// items holds every set, one after another: set k is
	// items[starts[k]:starts[k+1]] (the last set ends at len(items)).
	items  []item
	starts []int
	// allowed[k] are the bytes set k can take next.
	allowed []ByteSet
	// sigs[k] is set k's structural signature (setSig): sets with equal
	// signatures accept the same continuations.
	sigs []sig
	// waits[k], once waitsFor built it (built[k]), are the items of a
	// large set k that wait for a nonterminal, by nonterminal and
	// position: completion looks them up instead of scanning the set.
	waits [][]waiter
	built []bool
	// seen holds the items of the set being built: an open-addressing
	// table of indices into items (+1; 0 is empty), stamped by gen so
	// that starting a new set does not clear it.
	seen  []itemSlot
	nseen int
	gen   uint32
	// predicted[nt] is the gen of the last set that predicted nt.
	predicted []uint32
	// work counts the items the byte being taken added or found again;
	// tooBig is set once an Advance was refused for passing MaxAdvanceWork.
	work   int
	tooBig bool
}

// MaxAdvanceWork bounds the work of one byte: the Earley items its set
// adds or finds again. The grammars the compilers make stay far below it;
// an ambiguous grammar (GBNF's root ::= root root | "a") does more with
// every byte (its completions grow with the square of the length), and
// each mask would cost more than the last: past the bound the byte is
// refused (TooBig), so the sequence ends instead of stalling its batch.
const MaxAdvanceWork = 1 << 18

type itemSlot struct {
	gen uint32
	idx int32
}

type item struct {
	prod, dot, origin int32
}

type waiter struct{ nt, idx int32 }

// indexMin is the size from which a set's waiting items are indexed.
const indexMin = 24

// waitsFor returns the items of set o (closed, at least indexMin items)
// that wait for nonterminal nt, in their order in the set.
func (m *Matcher) waitsFor(o, nt int32) []waiter {
	if !m.built[o] {
		ws := m.waits[o][:0]
		end := m.starts[o+1]
		for j := m.starts[o]; j < end; j++ {
			w := m.items[j]
			rhs := m.g.prods[w.prod].rhs
			if int(w.dot) < len(rhs) && !rhs[w.dot].Terminal() {
				ws = append(ws, waiter{rhs[w.dot].NT, int32(j)})
			}
		}
		slices.SortFunc(ws, func(a, b waiter) int {
			if a.nt != b.nt {
				return cmp.Compare(a.nt, b.nt)
			}
			return cmp.Compare(a.idx, b.idx)
		})
		m.waits[o], m.built[o] = ws, true
	}
	ws := m.waits[o]
	i, _ := slices.BinarySearchFunc(ws, nt, func(w waiter, nt int32) int { return cmp.Compare(w.nt, nt) })
	j := i
	for j < len(ws) && ws[j].nt == nt {
		j++
	}
	return ws[i:j]
}

// NewMatcher starts a match of g at its start symbol.
func NewMatcher(g *Grammar) *Matcher {
	m := &Matcher{g: g, seen: make([]itemSlot, 64), gen: 1, predicted: make([]uint32, len(g.byLHS))}
	m.starts = append(m.starts, 0)
	m.add(item{prod: g.byLHS[g.start][0]})
	m.close()
	return m
}

// add puts it in the set being built, once.
func (m *Matcher) add(it item) {
	m.work++
	if 2*(m.nseen+1) > len(m.seen) {
		m.grow()
	}
	mask := uint32(len(m.seen) - 1)
	for h := hashItem(it) & mask; ; h = (h + 1) & mask {
		s := &m.seen[h]
		if s.gen != m.gen {
			*s = itemSlot{gen: m.gen, idx: int32(len(m.items))}
			m.nseen++
			m.items = append(m.items, it)
			return
		}
		if m.items[s.idx] == it {
			return
		}
	}
}

func hashItem(it item) uint32 {
	h := uint32(it.prod)*0x9E3779B1 ^ uint32(it.dot)*0x85EBCA77 ^ uint32(it.origin)*0xC2B2AE3D
	return h ^ h>>15
}

// grow doubles the table of the set being built and puts its items back.
func (m *Matcher) grow() {
	old := m.seen
	m.seen = make([]itemSlot, 2*len(old))
	mask := uint32(len(m.seen) - 1)
	for _, s := range old {
		if s.gen != m.gen {
			continue
		}
		h := hashItem(m.items[s.idx]) & mask
		for m.seen[h].gen == m.gen {
			h = (h + 1) & mask
		}
		m.seen[h] = s
	}
}

// close completes the set being built (the last one): prediction and
// completion to a fixed point, nullable rules advanced at prediction
// (Aycock and Horspool), and the bytes the set can take next.
func (m *Matcher) close() {
	k := int32(len(m.starts) - 1)
	var next ByteSet
	for i := m.starts[k]; i < len(m.items); i++ {
		if m.work > MaxAdvanceWork {
			return // Advance undoes the set
		}
		it := m.items[i]
		p := &m.g.prods[it.prod]
		if int(it.dot) == len(p.rhs) {
			// Complete: advance the items of the origin set waiting for
			// p.lhs. (Items of this set that wait for a nullable p.lhs
			// advanced when they predicted it.)
			end := len(m.items)
			if it.origin < k {
				end = m.starts[it.origin+1]
				if end-m.starts[it.origin] >= indexMin {
					for _, w := range m.waitsFor(it.origin, p.lhs) {
						w := m.items[w.idx]
						m.add(item{w.prod, w.dot + 1, w.origin})
					}
					continue
				}
			}
			for j := m.starts[it.origin]; j < end; j++ {
				w := m.items[j]
				wp := &m.g.prods[w.prod]
				if int(w.dot) < len(wp.rhs) && wp.rhs[w.dot].NT == p.lhs {
					m.add(item{w.prod, w.dot + 1, w.origin})
				}
			}
			continue
		}
		s := &p.rhs[it.dot]
		if s.Terminal() {
			next.Union(s.Set)
			continue
		}
		if m.predicted[s.NT] != m.gen {
			// Once per nonterminal and set: its items are there after.
			m.predicted[s.NT] = m.gen
			for _, q := range m.g.byLHS[s.NT] {
				m.add(item{q, 0, k})
			}
		}
		if m.g.nullable[s.NT] {
			m.add(item{it.prod, it.dot + 1, it.origin})
		}
	}
	m.allowed = append(m.allowed, next)
	m.sigs = append(m.sigs, m.setSig(k))
	if len(m.waits) < cap(m.waits) {
		m.waits = m.waits[:len(m.waits)+1] // keeps the old slice's memory
	} else {
		m.waits = append(m.waits, nil)
	}
	m.built = append(m.built, false)
	m.gen++
	m.nseen = 0
	if m.gen == 0 { // wrapped: stamps of old sets would look current
		clear(m.seen)
		clear(m.predicted)
		m.gen = 1
	}
}

// Allowed is the set of bytes the match can take next.
func (m *Matcher) Allowed() ByteSet { return m.allowed[len(m.allowed)-1] }

// Advance takes byte c; it reports false, changing nothing, when the
// grammar does not allow c here.
func (m *Matcher) Advance(c byte) bool {
	k := len(m.starts) - 1
	if !m.allowed[k].Has(c) {
		return false
	}
	from, to := m.starts[k], len(m.items)
	m.starts = append(m.starts, to)
	for i := from; i < to; i++ {
		it := m.items[i]
		p := &m.g.prods[it.prod]
		if int(it.dot) < len(p.rhs) && p.rhs[it.dot].Terminal() && p.rhs[it.dot].Set.Has(c) {
			m.add(item{it.prod, it.dot + 1, it.origin})
		}
	}
	m.work = 0
	m.close()
	if m.work > MaxAdvanceWork {
		m.Reset(k)
		m.tooBig = true
		return false
	}
	return true
}

// TooBig reports whether an Advance was refused for passing
// MaxAdvanceWork.
func (m *Matcher) TooBig() bool { return m.tooBig }

// AdvanceBytes takes every byte of bs; it reports false, changing nothing,
// when the grammar refuses one of them.
func (m *Matcher) AdvanceBytes(bs []byte) bool {
	mark := m.Mark()
	for _, c := range bs {
		if !m.Advance(c) {
			m.Reset(mark)
			return false
		}
	}
	return true
}

// CanEnd reports whether the bytes taken so far are a complete sentence of
// the grammar.
func (m *Matcher) CanEnd() bool {
	k := len(m.starts) - 1
	startProd := m.g.byLHS[m.g.start][0]
	for _, it := range m.items[m.starts[k]:] {
		if it.prod == startProd && it.dot == 1 && it.origin == 0 {
			return true
		}
	}
	return false
}

// Done reports whether the match can take no more bytes (it may end, or be
// stuck where the grammar has nothing: not after a successful Advance).
func (m *Matcher) Done() bool { return m.Allowed() == ByteSet{} }

// InText reports whether the match is inside free JSON string content
// (Builder.JSONText) at a character boundary: any plain text (Vocab) may
// follow.
func (m *Matcher) InText() bool { return m.TextBudget() == NoBound }

// TextBudget is, where the match is inside JSON string content at a
// character boundary (Builder.TextAlt), how much plain text (Vocab) may
// follow: NoBound where any, n where any of at most n characters and no
// longer one; 0 elsewhere. A bounded budget holds only where nothing but
// the text items may take a plain character here (another branch, of an
// anyOf say, could take a longer text): else the answer is 0.
func (m *Matcher) TextBudget() int32 {
	g := m.g
	if !g.hasText {
		return 0
	}
	k := len(m.starts) - 1
	var b int32
	exact := true
	for _, it := range m.items[m.starts[k]:] {
		p := &g.prods[it.prod]
		if int(it.dot) == len(p.rhs) {
			continue
		}
		if t := g.textBudget[it.prod]; t > 0 && it.dot == g.textDot[it.prod] {
			b = max(b, t)
			continue
		}
		switch sym := p.rhs[it.dot]; {
		case sym.Terminal():
			if !g.inChar[p.lhs] && sym.Set.Intersects(&g.plainStart) {
				exact = false
			}
		case g.charNT[sym.NT]:
			exact = false
		}
	}
	if b < NoBound && !exact {
		return 0
	}
	return b
}

// Len is the number of bytes taken.
func (m *Matcher) Len() int { return len(m.starts) - 1 }

// Mark returns the match's position, for Reset.
func (m *Matcher) Mark() int { return len(m.starts) - 1 }

// Reset moves the match back to a position Mark returned.
func (m *Matcher) Reset(mark int) {
	if mark >= len(m.starts)-1 {
		return
	}
	m.items = m.items[:m.starts[mark+1]]
	m.starts = m.starts[:mark+1]
	m.allowed = m.allowed[:mark+1]
	m.sigs = m.sigs[:mark+1]
	m.waits = m.waits[:mark+1]
	m.built = m.built[:mark+1]
}

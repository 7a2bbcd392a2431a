package tokenizer

// mergeTable maps a pair of token ids to its merge (rank and resulting id).
// It is an open-addressing hash table with linear probing: each slot holds
// key and value together, so a lookup usually touches one cache line, and
// building it for a few hundred thousand merges is several times faster
// than a Go map (load time is budgeted).
type mergeTable struct {
	slots []mergeSlot
	shift uint
	n     int
}

type mergeSlot struct {
	key uint64
	val mergeVal
}

const emptyKey = ^uint64(0) // the pair (-1, -1) never occurs

func newMergeTable(n int) *mergeTable {
	size := 16
	bits := uint(4)
	for size*3 < n*4 { // load factor at most 0.75
		size <<= 1
		bits++
	}
	t := &mergeTable{slots: make([]mergeSlot, size), shift: 64 - bits}
	for i := range t.slots {
		t.slots[i].key = emptyKey
	}
	return t
}

func (t *mergeTable) hash(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> t.shift }

// put inserts or replaces (a later duplicate merge wins, as when the Rust
// implementation collects its merges into a HashMap).
func (t *mergeTable) put(k uint64, v mergeVal) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			s.val = v
			return
		}
		if s.key == emptyKey {
			s.key, s.val = k, v
			t.n++
			return
		}
	}
}

func (t *mergeTable) grow() {
	old := t.slots
	nt := newMergeTable(len(old))
	for _, s := range old {
		if s.key != emptyKey {
			nt.put(s.key, s.val)
		}
	}
	*t = *nt
}

func (t *mergeTable) get(k uint64) (mergeVal, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(k); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.key == k {
			return s.val, true
		}
		if s.key == emptyKey {
			return mergeVal{}, false
		}
	}
}

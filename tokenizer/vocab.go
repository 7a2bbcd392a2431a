package tokenizer

import (
	"fmt"
	"hash/maphash"
	"strings"
)

// vocabTable maps token strings to ids. All token bytes live in one string
// (so a token string is a substring, never an allocation) and the index is
// an open-addressing table of (id, hash fingerprint) words. Compared with a
// map[string]int32 it builds several times faster and with two allocations
// instead of one per token, which is what keeps loading a 10 MB
// tokenizer.json within its budget.
type vocabTable struct {
	arena string
	spans []uint64 // token id -> arena range, start<<32 | end
	has   []bool
	slots []uint64 // (id+1)<<32 | fingerprint; 0 is empty
	mask  uint64
	seed  maphash.Seed
	n     int
}

// vocabBuilder collects (token, id) pairs while tokenizer.json is read.
type vocabBuilder struct {
	sb   strings.Builder
	ents []vocabEntry
}

type vocabEntry struct {
	id         int32
	start, end uint32
}

func (b *vocabBuilder) add(tok []byte, id int32) {
	s := uint32(b.sb.Len())
	b.sb.Write(tok)
	b.ents = append(b.ents, vocabEntry{id, s, uint32(b.sb.Len())})
}

func (b *vocabBuilder) build() (*vocabTable, error) {
	v := &vocabTable{arena: b.sb.String(), seed: maphash.MakeSeed()}
	maxID := int32(-1)
	for _, e := range b.ents {
		if e.id < 0 {
			return nil, errNegativeID(v.arena[e.start:e.end], e.id)
		}
		maxID = max(maxID, e.id)
	}
	v.spans = make([]uint64, maxID+1)
	v.has = make([]bool, maxID+1)
	size := 16
	for size < 2*len(b.ents) {
		size <<= 1
	}
	v.slots = make([]uint64, size)
	v.mask = uint64(size - 1)
	for _, e := range b.ents {
		v.put(v.arena[e.start:e.end], e)
	}
	return v, nil
}

func (v *vocabTable) put(tok string, e vocabEntry) {
	h := maphash.String(v.seed, tok)
	fp := uint64(uint32(h))
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := v.slots[i]
		if s == 0 {
			v.slots[i] = uint64(e.id+1)<<32 | fp
			v.n++
			break
		}
		if s&0xFFFFFFFF == fp {
			old := int32(s>>32) - 1
			if v.str(old) == tok {
				// A duplicate key: the later entry wins, as in serde.
				v.slots[i] = uint64(e.id+1)<<32 | fp
				if old != e.id {
					v.has[old] = false
				}
				break
			}
		}
	}
	v.spans[e.id], v.has[e.id] = uint64(e.start)<<32|uint64(e.end), true
}

func (v *vocabTable) str(id int32) string {
	sp := v.spans[id]
	return v.arena[sp>>32 : sp&0xFFFFFFFF]
}

// get returns the id of tok.
func (v *vocabTable) get(tok string) (int32, bool) {
	h := maphash.String(v.seed, tok)
	fp := uint64(uint32(h))
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := v.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&0xFFFFFFFF == fp {
			id := int32(s>>32) - 1
			if v.str(id) == tok {
				return id, true
			}
		}
	}
}

// getBytes is get for a byte slice, without allocating.
func (v *vocabTable) getBytes(tok []byte) (int32, bool) {
	h := maphash.Bytes(v.seed, tok)
	fp := uint64(uint32(h))
	for i := h & v.mask; ; i = (i + 1) & v.mask {
		s := v.slots[i]
		if s == 0 {
			return 0, false
		}
		if s&0xFFFFFFFF == fp {
			id := int32(s>>32) - 1
			if v.str(id) == string(tok) {
				return id, true
			}
		}
	}
}

// token returns the string of id ("" and false when the id is unused).
func (v *vocabTable) token(id int32) (string, bool) {
	if id < 0 || int(id) >= len(v.has) || !v.has[id] {
		return "", false
	}
	return v.str(id), true
}

// size is one more than the largest id.
func (v *vocabTable) size() int { return len(v.has) }

// each calls fn for every token.
func (v *vocabTable) each(fn func(tok string, id int32)) {
	for id := range v.has {
		if v.has[id] {
			fn(v.str(int32(id)), int32(id))
		}
	}
}

func errNegativeID(tok string, id int32) error {
	return fmt.Errorf("vocab: negative id %d for %q", id, tok)
}

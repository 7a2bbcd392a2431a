package grammar

import (
	"math/bits"
	"slices"
)

// Vocab is a tokenizer's vocabulary as a trie of the tokens' bytes: a mask
// is computed by walking it with a Matcher, so tokens that share a prefix
// share its work and a byte the grammar refuses prunes every token below it
// at once. It is immutable and safe for concurrent use.
type Vocab struct {
	size  int
	nodes []trieNode
	// eos are the tokens allowed where the grammar can end. Tokens with
	// no bytes are never allowed: they would let a sequence run without
	// progress.
	eos []int32
}

type trieNode struct {
	// edges to children, sorted by byte.
	bytes    []byte
	children []int32
	// tokens ending here.
	tokens []int32
}

// NewVocab builds the trie of tokens, where tokens[id] are token id's bytes
// (nil: a token never allowed by a grammar, such as a special token) and
// eos are the ids that end a sequence (allowed where the grammar can end).
func NewVocab(tokens [][]byte, eos []int32) *Vocab {
	v := &Vocab{size: len(tokens), nodes: []trieNode{{}}, eos: slices.Clone(eos)}
	for id, bs := range tokens {
		if len(bs) == 0 {
			continue
		}
		n := int32(0)
		for _, c := range bs {
			i, found := slices.BinarySearch(v.nodes[n].bytes, c)
			if !found {
				child := int32(len(v.nodes))
				v.nodes = append(v.nodes, trieNode{})
				nd := &v.nodes[n]
				nd.bytes = slices.Insert(nd.bytes, i, c)
				nd.children = slices.Insert(nd.children, i, child)
			}
			n = v.nodes[n].children[i]
		}
		v.nodes[n].tokens = append(v.nodes[n].tokens, int32(id))
	}
	return v
}

// Size is the vocabulary's size: the length of a mask in bits.
func (v *Vocab) Size() int { return v.size }

// Nodes is the number of trie nodes.
func (v *Vocab) Nodes() int { return len(v.nodes) }

// Mask is a set of token ids, one bit each.
type Mask []uint64

// NewMask returns an empty mask for a vocabulary of n tokens.
func NewMask(n int) Mask { return make(Mask, (n+63)/64) }

// Has reports whether id is in the mask.
func (m Mask) Has(id int32) bool { return m[id>>6]&(1<<(id&63)) != 0 }

// Set adds id.
func (m Mask) Set(id int32) { m[id>>6] |= 1 << (id & 63) }

// Count is the number of ids in the mask.
func (m Mask) Count() int {
	n := 0
	for _, w := range m {
		n += bits.OnesCount64(w)
	}
	return n
}

// Fill sets in dst (cleared first; len NewMask(v.Size())) the tokens the
// matcher's grammar allows next: those whose every byte it takes from here,
// and the EOS tokens where it can end. The matcher is left where it was.
func (v *Vocab) Fill(m *Matcher, dst Mask) {
	clear(dst)
	if m.CanEnd() {
		for _, id := range v.eos {
			dst.Set(id)
		}
	}
	v.walk(m, 0, dst)
}

func (v *Vocab) walk(m *Matcher, n int32, dst Mask) {
	nd := &v.nodes[n]
	allowed := m.Allowed()
	for i, c := range nd.bytes {
		if !allowed.Has(c) {
			continue
		}
		mark := m.Mark()
		if !m.Advance(c) {
			continue
		}
		child := nd.children[i]
		for _, id := range v.nodes[child].tokens {
			dst.Set(id)
		}
		if len(v.nodes[child].bytes) > 0 {
			v.walk(m, child, dst)
		}
		m.Reset(mark)
	}
}

package grammar

import (
	"math/bits"
	"slices"
	"unicode/utf8"
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
	// The fast path inside free JSON string content (Matcher.InText),
	// where a token whose remaining bytes are plain (isPlain) is allowed
	// without walking it: order holds the tokens in depth-first order,
	// node n's subtree is order[lo[n]:hi[n]], plainFrom[i] is where
	// order[i]'s plain tail starts, maxPlainFrom[n] the largest in n's
	// subtree.
	order        []int32
	plainFrom    []uint16
	lo, hi       []int32
	maxPlainFrom []uint16
	// pfBits[n] has bit j set when a token below n has plainFrom j (bit
	// 63: 63 or more); plain are the tokens with plainFrom 0.
	pfBits []uint64
	plain  Mask
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
	// Tokens in depth-first order, each node's subtree a range of it, and
	// for each token where its plain tail starts.
	v.lo, v.hi = make([]int32, len(v.nodes)), make([]int32, len(v.nodes))
	v.maxPlainFrom = make([]uint16, len(v.nodes))
	v.pfBits = make([]uint64, len(v.nodes))
	v.plain = NewMask(v.size)
	var dfs func(n int32)
	dfs = func(n int32) {
		v.lo[n] = int32(len(v.order))
		for _, id := range v.nodes[n].tokens {
			pf := plainFrom(tokens[id])
			v.order = append(v.order, id)
			v.plainFrom = append(v.plainFrom, pf)
			if pf == 0 {
				v.plain.Set(id)
			}
		}
		for _, c := range v.nodes[n].children {
			dfs(c)
		}
		v.hi[n] = int32(len(v.order))
		for _, pf := range v.plainFrom[v.lo[n]:v.hi[n]] {
			v.maxPlainFrom[n] = max(v.maxPlainFrom[n], pf)
			v.pfBits[n] |= 1 << min(pf, 63)
		}
	}
	dfs(0)
	return v
}

// plainFrom is the first offset from which bs is plain (isPlain) at a
// character boundary: len(bs) when no tail is (capped at 65535).
func plainFrom(bs []byte) uint16 {
	for j := 0; j < len(bs) && j < 0xFFFF; j++ {
		// A tail must begin a character: a matcher inside string content
		// at a character boundary is what takes it.
		if utf8.RuneStart(bs[j]) && isPlain(bs[j:]) {
			return uint16(j)
		}
	}
	return uint16(min(len(bs), 0xFFFF))
}

// isPlain reports whether bs can follow any character boundary inside a
// JSON string's content and leave it inside the content: whole characters
// that JSON writes raw (no quote, backslash or control character, valid
// UTF-8), optionally ending in the valid beginning of one more.
func isPlain(bs []byte) bool {
	for i := 0; i < len(bs); {
		c := bs[i]
		if c < 0x80 {
			if c < 0x20 || c == '"' || c == '\\' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(bs[i:])
		if r != utf8.RuneError || size > 1 {
			i += size
			continue
		}
		// Invalid, or a character cut at the end: plain only when what is
		// there begins a valid encoding.
		return validStart(bs[i:])
	}
	return true
}

// validStart reports whether bs, not a whole character, begins a valid
// UTF-8 encoding (shortest form, no surrogates, at most U+10FFFF): a lead
// byte that starts some character, or a longer start that continuation
// bytes complete.
func validStart(bs []byte) bool {
	if utf8.FullRune(bs) {
		return false // whole, or already invalid
	}
	if len(bs) == 1 {
		return bs[0] >= 0xC2 && bs[0] <= 0xF4
	}
	for pad := []byte{0x80}; len(bs)+len(pad) <= utf8.UTFMax; pad = append(pad, 0x80) {
		if utf8.Valid(append(slices.Clip(bs), pad...)) {
			return true
		}
	}
	return false
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
	covered := -1
	if m.InText() {
		for i, w := range v.plain {
			dst[i] |= w
		}
		covered = 0
	}
	v.walk(m, 0, 0, covered, dst)
}

// walk takes the children of trie node n (at depth bytes) that the
// grammar allows. Inside free string content a token whose bytes from
// here on are plain is allowed without walking it: covered is the depth up
// to which such tokens below n are already set (-1: none), and a child
// below which every token is set is skipped.
func (v *Vocab) walk(m *Matcher, n int32, depth, covered int, dst Mask) {
	nd := &v.nodes[n]
	if depth > covered && m.InText() {
		var want uint64
		for j := covered + 1; j <= depth && j < 64; j++ {
			want |= 1 << j
		}
		if v.pfBits[n]&want != 0 {
			for i := v.lo[n]; i < v.hi[n]; i++ {
				if pf := int(v.plainFrom[i]); pf > covered && pf <= depth {
					dst.Set(v.order[i])
				}
			}
		}
		covered = depth
	}
	allowed := m.Allowed()
	for i, c := range nd.bytes {
		child := nd.children[i]
		if !allowed.Has(c) || int(v.maxPlainFrom[child]) <= covered {
			continue
		}
		mark := m.Mark()
		if !m.Advance(c) {
			continue
		}
		for _, id := range v.nodes[child].tokens {
			dst.Set(id)
		}
		if len(v.nodes[child].bytes) > 0 {
			v.walk(m, child, depth+1, covered, dst)
		}
		m.Reset(mark)
	}
}

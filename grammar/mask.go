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
	// plainIDs[plainAt[n]:plainAt[n+1]] are the tokens whose plain tail
	// starts right after node n: those below n with plainFrom n's depth.
	plainAt  []int32
	plainIDs []int32
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
	// Each token with a plain tail under the node of its bytes before it.
	at := make([]int32, len(tokens))
	v.plainAt = make([]int32, len(v.nodes)+1)
	for id, bs := range tokens {
		at[id] = -1
		if len(bs) == 0 {
			continue
		}
		n := int32(0)
		for _, c := range bs[:plainFrom(bs)] {
			i, _ := slices.BinarySearch(v.nodes[n].bytes, c)
			n = v.nodes[n].children[i]
		}
		at[id] = n
		v.plainAt[n+1]++
	}
	for n := range v.nodes {
		v.plainAt[n+1] += v.plainAt[n]
	}
	v.plainIDs = make([]int32, v.plainAt[len(v.nodes)])
	fill := slices.Clone(v.plainAt[:len(v.nodes)])
	for id, n := range at {
		if n >= 0 {
			v.plainIDs[fill[n]] = int32(id)
			fill[n]++
		}
	}
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
//
// The walk follows the grammar's states (dstate) where it has met them
// before and runs the Matcher only to learn a new transition; a state's
// whole mask is cached once its walk was not trivial. Fill is safe to call
// concurrently on matchers of one grammar (each matcher by one goroutine).
func (v *Vocab) Fill(m *Matcher, dst Mask) {
	d := m.g.cache.set()
	root := d.state(m)
	if cm := root.mask.Load(); cm != nil && cm.v == v && len(cm.m) == len(dst) {
		copy(dst, cm.m)
		root.used.Store(true)
		return
	}
	clear(dst)
	if root.canEnd {
		for _, id := range v.eos {
			dst.Set(id)
		}
	}
	covered := -1
	if root.inText {
		for i, w := range v.plain {
			dst[i] |= w
		}
		covered = 0
	}
	w := walker{v: v, d: d, m: m, base: m.Mark(), dst: dst}
	w.walk(0, root, 0, covered)
	m.Reset(w.base)
	if w.visits >= maskMinVisits {
		d.storeMask(root, v, dst)
	}
}

// walker is one mask's walk over the trie. The Matcher lags behind it: it
// has taken mpath (bytes past base), which agrees with the walk's path only
// as far as the last transition the walk had to learn.
type walker struct {
	v      *Vocab
	d      *stateSet
	m      *Matcher
	base   int
	path   []byte // bytes from the trie's root to the node being walked
	mpath  []byte // bytes the matcher has taken past base
	dst    Mask
	visits int
}

// walk takes the children of trie node n (at depth bytes, in state s) that
// the grammar allows. Inside free string content a token whose bytes from
// here on are plain is allowed without walking it: covered is the depth up
// to which such tokens below n are already set (-1: none), and a child
// below which every token is set is skipped.
func (w *walker) walk(n int32, s *dstate, depth, covered int) {
	v := w.v
	nd := &v.nodes[n]
	if depth > covered && s.inText {
		var want uint64
		for j := covered + 1; j <= depth && j < 64; j++ {
			want |= 1 << j
		}
		if depth >= 63 {
			want |= 1 << 63
		}
		if covered == depth-1 {
			// The common case, tokens whose tail starts here: a list.
			for _, id := range v.plainIDs[v.plainAt[n]:v.plainAt[n+1]] {
				w.dst.Set(id)
			}
		} else if v.pfBits[n]&want != 0 {
			for i := v.lo[n]; i < v.hi[n]; i++ {
				if pf := int(v.plainFrom[i]); pf > covered && pf <= depth {
					w.dst.Set(v.order[i])
				}
			}
		}
		covered = depth
	}
	if len(w.path) == depth {
		w.path = append(w.path, 0)
	}
	for i, c := range nd.bytes {
		if !s.allowed.Has(c) {
			continue
		}
		child := nd.children[i]
		if int(v.maxPlainFrom[child]) <= covered {
			continue
		}
		w.visits++
		t := s.next[s.slot(c)].Load()
		if t == nil {
			t = w.learn(s, depth, c)
		}
		cn := &v.nodes[child]
		for _, id := range cn.tokens {
			w.dst.Set(id)
		}
		if len(cn.bytes) > 0 {
			w.path[depth] = c
			w.walk(child, t, depth+1, covered)
		}
	}
}

// learn runs the Matcher to find the state that byte c leads to from s,
// the state of the path's first depth bytes, and records the transition.
func (w *walker) learn(s *dstate, depth int, c byte) *dstate {
	m := w.m
	l := 0
	for l < len(w.mpath) && l < depth && w.mpath[l] == w.path[l] {
		l++
	}
	m.Reset(w.base + l)
	w.mpath = w.mpath[:l]
	for _, b := range w.path[l:depth] {
		w.advance(b)
	}
	w.advance(c)
	t := w.d.state(m)
	s.next[s.slot(c)].Store(t)
	return t
}

func (w *walker) advance(c byte) {
	if !w.m.Advance(c) {
		// The states' transitions are the Matcher's: a byte a state
		// allows is one every set of its signature takes.
		panic("grammar: a mask walk's state and its matcher disagree")
	}
	w.mpath = append(w.mpath, c)
}

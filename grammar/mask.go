package grammar

import (
	"math/bits"
	"slices"
	"unicode/utf8"
)

// Vocab is a tokenizer's vocabulary as a trie of the tokens' bytes: a mask
// is computed by walking it, so tokens that share a prefix share its work
// and a byte the grammar refuses prunes every token below it at once. It
// is immutable and safe for concurrent use.
//
// The trie is flat, for the walk's sake: nodes are numbered in depth-first
// order (a node's first child is the next node) and hold what the walk
// reads of a child in 16 bytes, edges are two arrays, so that a walk reads
// few cache lines per node.
type Vocab struct {
	size int
	// nodes[n] for n < Nodes(), and a sentinel whose edges ends the last
	// node's edges.
	nodes []tnode
	// The edges of node n, sorted by byte: ebyte[e] leads to echild[e]
	// for e in nodes[n].edges..nodes[n+1].edges.
	ebyte  []byte
	echild []int32
	// eos are the tokens allowed where the grammar can end. Tokens with
	// no bytes are never allowed: they would let a sequence run without
	// progress.
	eos []int32
	// order holds the tokens in depth-first order: node n's subtree is
	// order[nodes[n].lo:hi[n]], beginning with the tokens that end at n,
	// order[nodes[n].lo:nodes[n].tokEnd].
	order []int32
	hi    []int32
	// The fast path inside free JSON string content (Matcher.InText),
	// where a token whose remaining bytes are plain (isPlain) is allowed
	// without walking it: plainFrom[i] is where order[i]'s plain tail
	// starts, nodes[n].maxPF the largest in n's subtree.
	plainFrom []uint16
	// pfBits[n] has bit j set when a token below n has plainFrom j (bit
	// 63: 63 or more); plain are the tokens with plainFrom 0.
	pfBits []uint64
	plain  Mask
	// Inside string content with a length bound (Matcher.TextBudget) a
	// plain tail is allowed when it has no more characters than the
	// budget: tailRunes[i] is the number of characters of order[i]'s
	// plain tail (a character cut at its end counts), maxTail the largest;
	// plainByLen[r] are the tokens with plainFrom 0 and r characters,
	// plainUpTo[r] those with at most r (for r < shortTail).
	tailRunes  []uint16
	maxTail    int32
	plainByLen [][]int32
	plainUpTo  []Mask
	// plain0[e] is the number of plain tokens below the root's edge e.
	plain0 []int32
	// plainIDs[plainAt[n]:plainAt[n+1]] are the tokens whose plain tail
	// starts right after node n: those below n with plainFrom n's depth.
	plainAt   []int32
	plainIDs  []int32
	plainRune []uint16 // plainIDs' tail characters
}

// tnode is what a walk reads of a trie node.
type tnode struct {
	edges      int32  // its first edge
	lo, tokEnd int32  // its tokens, order[lo:tokEnd]
	maxPF      uint16 // the largest plainFrom below it
	_          uint16
}

// NewVocab builds the trie of tokens, where tokens[id] are token id's bytes
// (nil: a token never allowed by a grammar, such as a special token) and
// eos are the ids that end a sequence (allowed where the grammar can end).
func NewVocab(tokens [][]byte, eos []int32) *Vocab {
	// A trie of nodes with child lists first, then laid out flat.
	type node struct {
		bytes    []byte
		children []int32
		tokens   []int32
	}
	tr := []node{{}}
	for id, bs := range tokens {
		if len(bs) == 0 {
			continue
		}
		n := int32(0)
		for _, c := range bs {
			i, found := slices.BinarySearch(tr[n].bytes, c)
			if !found {
				child := int32(len(tr))
				tr = append(tr, node{})
				nd := &tr[n]
				nd.bytes = slices.Insert(nd.bytes, i, c)
				nd.children = slices.Insert(nd.children, i, child)
			}
			n = tr[n].children[i]
		}
		tr[n].tokens = append(tr[n].tokens, int32(id))
	}
	nn := len(tr)
	v := &Vocab{
		size:   len(tokens),
		eos:    slices.Clone(eos),
		nodes:  make([]tnode, nn+1),
		ebyte:  make([]byte, 0, nn-1),
		echild: make([]int32, 0, nn-1),
		hi:     make([]int32, nn),
		pfBits: make([]uint64, nn),
		plain:  NewMask(len(tokens)),
	}
	// Depth-first: number the nodes, lay out tokens and edges. at[id] is
	// the node after which token id's plain tail starts.
	at := make([]int32, len(tokens))
	for i := range at {
		at[i] = -1
	}
	next := int32(0)
	var path []byte
	oldOf := make([]int32, nn)
	var dfs func(old int32) int32
	dfs = func(old int32) int32 {
		n := next
		next++
		oldOf[n] = old
		nd := &tr[old]
		v.nodes[n].lo = int32(len(v.order))
		for _, id := range nd.tokens {
			pf := plainFrom(tokens[id])
			tail := runeStarts(tokens[id][pf:])
			v.order = append(v.order, id)
			v.plainFrom = append(v.plainFrom, pf)
			v.tailRunes = append(v.tailRunes, tail)
			v.maxTail = max(v.maxTail, int32(tail))
			if pf == 0 {
				v.plain.Set(id)
				for len(v.plainByLen) <= int(tail) {
					v.plainByLen = append(v.plainByLen, nil)
				}
				v.plainByLen[tail] = append(v.plainByLen[tail], id)
			}
			if int(pf) == len(path) {
				at[id] = n
			}
		}
		v.nodes[n].tokEnd = int32(len(v.order))
		// Edges are laid out after the subtrees are numbered; keep them.
		kids := make([]int32, len(nd.children))
		for i, c := range nd.children {
			path = append(path, nd.bytes[i])
			kids[i] = dfs(c)
			path = path[:len(path)-1]
		}
		v.hi[n] = int32(len(v.order))
		var maxPF uint16
		var pfb uint64
		for _, pf := range v.plainFrom[v.nodes[n].lo:v.hi[n]] {
			maxPF = max(maxPF, pf)
			pfb |= 1 << min(pf, 63)
		}
		v.nodes[n].maxPF, v.pfBits[n] = maxPF, pfb
		tr[old].children = kids // new numbers
		return n
	}
	dfs(0)
	for n, old := range oldOf {
		v.nodes[n].edges = int32(len(v.ebyte))
		v.ebyte = append(v.ebyte, tr[old].bytes...)
		v.echild = append(v.echild, tr[old].children...)
	}
	v.nodes[nn].edges = int32(len(v.ebyte))
	for e := v.nodes[0].edges; e < v.nodes[1].edges; e++ {
		n := 0
		child := v.echild[e]
		for i := v.nodes[child].lo; i < v.hi[child]; i++ {
			if v.plainFrom[i] == 0 {
				n++
			}
		}
		v.plain0 = append(v.plain0, int32(n))
	}
	// Tokens whose plain tail starts inside them sit under the node of
	// their bytes before it.
	for id, bs := range tokens {
		if len(bs) == 0 || at[id] >= 0 {
			continue
		}
		n := int32(0)
		for _, c := range bs[:plainFrom(bs)] {
			n = v.child(n, c)
		}
		at[id] = n
	}
	v.plainAt = make([]int32, nn+1)
	for _, n := range at {
		if n >= 0 {
			v.plainAt[n+1]++
		}
	}
	for n := range nn {
		v.plainAt[n+1] += v.plainAt[n]
	}
	for r := range shortTail {
		m := NewMask(len(tokens))
		if r > 0 {
			copy(m, v.plainUpTo[r-1])
		}
		if r < len(v.plainByLen) {
			for _, id := range v.plainByLen[r] {
				m.Set(id)
			}
		}
		v.plainUpTo = append(v.plainUpTo, m)
	}
	v.plainIDs = make([]int32, v.plainAt[nn])
	v.plainRune = make([]uint16, v.plainAt[nn])
	fill := slices.Clone(v.plainAt[:nn])
	for id, n := range at {
		if n >= 0 {
			v.plainIDs[fill[n]] = int32(id)
			v.plainRune[fill[n]] = runeStarts(tokens[id][plainFrom(tokens[id]):])
			fill[n]++
		}
	}
	return v
}

// runeStarts counts the bytes of bs that begin a character: its
// characters, one cut at the end included (capped at 65535).
func runeStarts(bs []byte) uint16 {
	n := 0
	for _, c := range bs {
		if utf8.RuneStart(c) {
			n++
		}
	}
	return uint16(min(n, 0xFFFF))
}

// shortTail is the number of budgets whose plain tokens a Vocab keeps as
// masks: below it most plain tokens are longer than the budget.
const shortTail = 16

// setPlain sets in dst the tokens with plainFrom 0 and at most budget
// characters: all of them (Vocab.plain) past the longest.
func (v *Vocab) setPlain(dst Mask, budget int32) {
	if budget < shortTail {
		for i, w := range v.plainUpTo[budget] {
			dst[i] |= w
		}
		return
	}
	for i, w := range v.plain {
		dst[i] |= w
	}
	// Few tokens are longer.
	for r := int(budget) + 1; r < len(v.plainByLen); r++ {
		for _, id := range v.plainByLen[r] {
			dst[id>>6] &^= 1 << (id & 63)
		}
	}
}

// child is node n's child by byte c, which it has.
func (v *Vocab) child(n int32, c byte) int32 {
	e0, e1 := v.nodes[n].edges, v.nodes[n+1].edges
	i, _ := slices.BinarySearch(v.ebyte[e0:e1], c)
	return v.echild[e0+int32(i)]
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
func (v *Vocab) Nodes() int { return len(v.nodes) - 1 }

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
// The walk follows the grammar's states (see the package doc) where it has
// met them before and runs the Matcher only to learn a new transition; a
// state's whole mask is cached once its walk was not trivial. Fill is safe
// to call concurrently on matchers of one grammar (each matcher by one
// goroutine), and moves m only while it runs.
func (v *Vocab) Fill(m *Matcher, dst Mask) {
	d := m.g.cache.set()
	root := d.state(m)
	if cm := root.mask.Load(); cm != nil && cm.v == v && len(cm.m) == len(dst) {
		copy(dst, cm.m)
		root.used.Store(true)
		return
	}
	clear(dst)
	w := walker{v: v, d: d, m: m, cls: &m.g.cls, base: m.Mark(), dst: dst}
	covered := -1
	if root.text > 0 {
		v.setPlain(dst, root.text)
		covered = 0
	} else {
		w.plainChildren(root)
	}
	if root.canEnd {
		for _, id := range v.eos {
			dst.Set(id)
		}
	}
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
	v       *Vocab
	d       *stateSet
	m       *Matcher
	cls     *[256]uint8
	base    int
	path    []byte // bytes from the trie's root to the node being walked
	mpath   []byte // bytes the matcher has taken past base
	dst     Mask
	visits  int
	learns  int
	learnNS int64
	// inText are the bytes whose child of the root is inside string
	// content that takes any plain tail (where the root is not):
	// plainChildren has set the plain tokens below them (Vocab.plain0),
	// so they are walked as if covered to 0.
	inText ByteSet
}

// plainChildren sets, where the root is not inside free text, the plain
// tokens (plainFrom 0) below each child of the root that is: where a key
// may be any string but begins with a character of no known key, say.
// The walk would find them child by child, looking at every token below;
// here they are set all at once (or, where few children are not in text,
// every plain token is set and those below the others cleared). It runs
// before anything else sets dst.
func (w *walker) plainChildren(s *dstate) {
	v := w.v
	var in, out int
	e0, e1 := v.nodes[0].edges, v.nodes[1].edges
	for e, c := range v.ebyte[e0:e1] {
		n0 := int(v.plain0[int(e0)+e])
		if n0 == 0 || !s.allowed.Has(c) {
			out += n0
			continue
		}
		t := s.next[s.slot(w.cls[c])].Load()
		if t == nil {
			t = w.learn(s, 0, c)
		}
		if t.text >= v.maxTail {
			w.inText.Add(c)
			in += n0
		} else {
			out += n0
		}
	}
	if in == 0 {
		return
	}
	set := out < in
	if set {
		for i, x := range v.plain {
			w.dst[i] |= x
		}
	}
	for e, c := range v.ebyte[e0:e1] {
		if v.plain0[int(e0)+e] == 0 || w.inText.Has(c) == set {
			continue
		}
		child := v.echild[int(e0)+e]
		for i := v.nodes[child].lo; i < v.hi[child]; i++ {
			if v.plainFrom[i] == 0 {
				id := v.order[i]
				if set {
					w.dst[id>>6] &^= 1 << (id & 63)
				} else {
					w.dst.Set(id)
				}
			}
		}
	}
}

// walk takes the children of trie node n (at depth bytes, in state s) that
// the grammar allows. Inside free string content a token whose bytes from
// here on are plain is allowed without walking it: covered is the depth up
// to which such tokens below n are already set (-1: none), and a child
// below which every token is set is skipped.
func (w *walker) walk(n int32, s *dstate, depth, covered int) {
	v := w.v
	if depth > covered && s.text > 0 {
		// A tail is allowed when its characters from here fit the
		// budget; one that does not fit is not (it has no quote to end
		// the string with), so the tokens below are settled either way.
		budget := s.text
		if w.onlyHere(covered, depth) {
			// The common case, tokens whose tail starts here: a list.
			a, b := v.plainAt[n], v.plainAt[n+1]
			if budget >= v.maxTail {
				for _, id := range v.plainIDs[a:b] {
					w.dst.Set(id)
				}
			} else {
				for i, id := range v.plainIDs[a:b] {
					if int32(v.plainRune[int(a)+i]) <= budget {
						w.dst.Set(id)
					}
				}
			}
		} else {
			var want uint64
			for j := covered + 1; j <= depth && j < 64; j++ {
				want |= 1 << j
			}
			if depth >= 63 {
				want |= 1 << 63
			}
			if v.pfBits[n]&want != 0 {
				for i := v.nodes[n].lo; i < v.hi[n]; i++ {
					pf := int(v.plainFrom[i])
					if pf <= covered || pf > depth {
						continue
					}
					// The tail's characters from here on: the path
					// took those between pf and depth.
					if budget < v.maxTail && int32(v.tailRunes[i])-int32(runeStarts(w.path[pf:depth])) > budget {
						continue
					}
					w.dst.Set(v.order[i])
				}
			}
		}
		covered = depth
	}
	if len(w.path) == depth {
		w.path = append(w.path, 0)
	}
	e0, e1 := v.nodes[n].edges, v.nodes[n+1].edges
	for e, c := range v.ebyte[e0:e1] {
		if !s.allowed.Has(c) {
			continue
		}
		child := v.echild[int(e0)+e]
		cn := &v.nodes[child]
		cov := covered
		if depth == 0 && w.inText.Has(c) {
			cov = 0
		}
		if int(cn.maxPF) <= cov {
			continue
		}
		w.visits++
		// s takes c: the tokens ending at the child are allowed. The
		// state after c matters only to walk on below it.
		for _, id := range v.order[cn.lo:cn.tokEnd] {
			w.dst.Set(id)
		}
		if v.nodes[child+1].edges > cn.edges {
			t := s.next[s.slot(w.cls[c])].Load()
			if t == nil {
				t = w.learn(s, depth, c)
			}
			w.path[depth] = c
			w.walk(child, t, depth+1, cov)
		}
	}
}

// onlyHere reports whether the only tokens below the node at depth whose
// plain tail starts after covered start it at depth: a plain tail begins
// a character, so no token below starts one at a byte of the path that
// continues a character (after the lead byte of a character that ends
// here, say).
func (w *walker) onlyHere(covered, depth int) bool {
	for j := covered + 1; j < depth; j++ {
		if utf8.RuneStart(w.path[j]) {
			return false
		}
	}
	return true
}

// learn runs the Matcher to find the state that byte c leads to from s,
// the state of the path's first depth bytes, and records the transition
// for c's class.
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
	s.next[s.slot(w.cls[c])].Store(t)
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

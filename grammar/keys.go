package grammar

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Object keys under patternProperties. A key's schema depends on which of
// the patterns it matches (JSON Schema's search semantics: the pattern
// occurs somewhere in the key) and whether it is a declared property: a
// key that matches patterns P and Q follows both their schemas, one that
// matches none follows additionalProperties. The keys of each such region
// are a regular language, an intersection of pattern languages and of
// their complements, which a grammar of alternatives cannot express but a
// deterministic automaton can: each pattern is compiled to a DFA over
// characters, the DFAs run in product with the trie of the declared names,
// and every region becomes a right-linear grammar over the product's
// states (each transition a JSONChar, so a key may be written raw or with
// escapes and still means its decoded characters).

// maxKeyStates bounds the states of a pattern's DFA and of the product.
const maxKeyStates = 4096

// keyDFA is a pattern's deterministic automaton over character classes.
type keyDFA struct {
	next   [][]int32 // next[state][class]
	accept []bool
}

// keyAlphabet partitions the characters (surrogates excluded) into classes
// that every pattern and every declared name treats alike.
type keyAlphabet struct {
	classes []RuneRange
}

func (a *keyAlphabet) class(r rune) int {
	i, _ := slices.BinarySearchFunc(a.classes, r, func(c RuneRange, r rune) int {
		switch {
		case c.Hi < r:
			return -1
		case c.Lo > r:
			return 1
		}
		return 0
	})
	return i
}

// patternProg parses an ECMA-262 pattern with search semantics (any
// characters around it) into a program over runes.
func patternProg(pattern string) (*syntax.Prog, error) {
	goPat, err := ecmaToGo(pattern)
	if err != nil {
		return nil, err
	}
	re, err := syntax.Parse(`(?s:.)*(?:`+goPat+`)(?s:.)*`, syntax.Perl)
	if err != nil {
		return nil, err
	}
	return syntax.Compile(re.Simplify())
}

// boundaries adds to set the points where prog's character tests change.
func boundaries(prog *syntax.Prog, set map[rune]bool) {
	for _, in := range prog.Inst {
		switch in.Op {
		case syntax.InstRune:
			if len(in.Rune) == 1 && syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				for r := unicode.SimpleFold(in.Rune[0]); ; r = unicode.SimpleFold(r) {
					set[r], set[r+1] = true, true
					if r == in.Rune[0] {
						break
					}
				}
				continue
			}
			for i := 0; i+1 < len(in.Rune); i += 2 {
				set[in.Rune[i]], set[in.Rune[i+1]+1] = true, true
			}
			if len(in.Rune) == 1 {
				set[in.Rune[0]], set[in.Rune[0]+1] = true, true
			}
		case syntax.InstRune1:
			set[in.Rune[0]], set[in.Rune[0]+1] = true, true
		case syntax.InstRuneAnyNotNL:
			set['\n'], set['\n'+1] = true, true
		}
	}
}

func newKeyAlphabet(points map[rune]bool) *keyAlphabet {
	points[0], points[0xD800], points[0xE000] = true, true, true
	var cuts []rune
	for p := range points {
		if p >= 0 && p <= unicode.MaxRune {
			cuts = append(cuts, p)
		}
	}
	slices.Sort(cuts)
	a := &keyAlphabet{}
	for i, lo := range cuts {
		hi := rune(unicode.MaxRune)
		if i+1 < len(cuts) {
			hi = cuts[i+1] - 1
		}
		if lo >= 0xD800 && lo <= 0xDFFF {
			continue // surrogates are not characters
		}
		a.classes = append(a.classes, RuneRange{lo, hi})
	}
	return a
}

// buildKeyDFA determinizes prog over the alphabet's classes. Anchors ^
// and $ hold only at the key's start and end; word boundaries are not
// supported.
func buildKeyDFA(prog *syntax.Prog, a *keyAlphabet) (*keyDFA, error) {
	var unsupported error
	closure := func(pcs []uint32, atStart, atEnd bool) []uint32 {
		seen := map[uint32]bool{}
		var out []uint32
		stack := slices.Clone(pcs)
		for len(stack) > 0 {
			pc := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[pc] {
				continue
			}
			seen[pc] = true
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				stack = append(stack, in.Out, in.Arg)
			case syntax.InstCapture, syntax.InstNop:
				stack = append(stack, in.Out)
			case syntax.InstEmptyWidth:
				op := syntax.EmptyOp(in.Arg)
				if op&(syntax.EmptyWordBoundary|syntax.EmptyNoWordBoundary) != 0 {
					unsupported = fmt.Errorf("word boundaries are not supported in property patterns")
					continue
				}
				if op&(syntax.EmptyBeginText|syntax.EmptyBeginLine) != 0 && !atStart {
					continue
				}
				if op&(syntax.EmptyEndText|syntax.EmptyEndLine) != 0 && !atEnd {
					// Kept in the set: it holds if the key ends here,
					// which the acceptance test closes over.
					out = append(out, pc)
					continue
				}
				stack = append(stack, in.Out)
			case syntax.InstFail:
			default:
				out = append(out, pc)
			}
		}
		slices.Sort(out)
		return out
	}
	matches := func(pcs []uint32) bool {
		for _, pc := range pcs {
			if prog.Inst[pc].Op == syntax.InstMatch {
				return true
			}
		}
		return false
	}
	type state struct {
		pcs     []uint32
		atStart bool
	}
	key := func(s state) string {
		var sb strings.Builder
		if s.atStart {
			sb.WriteByte('^')
		}
		for _, pc := range s.pcs {
			sb.WriteString(strconv.Itoa(int(pc)))
			sb.WriteByte(',')
		}
		return sb.String()
	}
	d := &keyDFA{}
	var in interner[state]
	add := func(s state) int32 { return int32(in.add(key(s), s)) }
	add(state{pcs: closure([]uint32{uint32(prog.Start)}, true, false), atStart: true})
	for i := 0; i < len(in.items); i++ {
		if len(in.items) > maxKeyStates {
			return nil, fmt.Errorf("a property pattern's automaton has more than %d in.items", maxKeyStates)
		}
		s := in.items[i]
		d.accept = append(d.accept, matches(closure(s.pcs, s.atStart, true)))
		row := make([]int32, len(a.classes))
		for ci, cl := range a.classes {
			var next []uint32
			for _, pc := range s.pcs {
				in := &prog.Inst[pc]
				if consumes(in, cl.Lo) {
					next = append(next, in.Out)
				}
			}
			row[ci] = add(state{pcs: closure(next, false, false)})
		}
		d.next = append(d.next, row)
	}
	if unsupported != nil {
		return nil, unsupported
	}
	return d, nil
}

// keyRegions compiles the keys of an object with patternProperties: for
// every set of patterns a key can match (by index into patterns), the
// grammar of those keys (quotes included) that are none of names. The
// empty set's keys are the additional ones.
type keyRegion struct {
	patterns []int
	key      Sym
}

func (c *schemaCompiler) keyRegions(patterns []string, names []string, ptr string) ([]keyRegion, error) {
	points := map[rune]bool{}
	progs := make([]*syntax.Prog, len(patterns))
	for i, p := range patterns {
		prog, err := patternProg(p)
		if err != nil {
			return nil, c.fail(ptr, "patternProperties", "pattern %q: %v", p, err)
		}
		progs[i] = prog
		boundaries(prog, points)
	}
	// The declared names' trie.
	type node struct {
		next map[rune]int
		end  bool
	}
	trie := []node{{next: map[rune]int{}}}
	for _, n := range names {
		cur := 0
		for _, r := range n {
			points[r], points[r+1] = true, true
			nx, ok := trie[cur].next[r]
			if !ok {
				nx = len(trie)
				trie = append(trie, node{next: map[rune]int{}})
				trie[cur].next[r] = nx
			}
			cur = nx
		}
		trie[cur].end = true
	}
	alpha := newKeyAlphabet(points)
	dfas := make([]*keyDFA, len(progs))
	for i, prog := range progs {
		d, err := buildKeyDFA(prog, alpha)
		if err != nil {
			return nil, c.fail(ptr, "patternProperties", "pattern %q: %v", patterns[i], err)
		}
		dfas[i] = d
	}
	// The product: one state per DFA, plus the trie node (-1: off the
	// trie).
	k := len(dfas)
	type pstate []int32 // k DFA ps.items, then the trie node
	var ps interner[pstate]
	add := func(s pstate) int { return ps.add(intsKey(s), s) }
	add(make(pstate, k+1))
	var next [][]int
	for i := 0; i < len(ps.items); i++ {
		if len(ps.items) > maxKeyStates {
			return nil, c.fail(ptr, "patternProperties", "the property patterns' product has more than %d ps.items", maxKeyStates)
		}
		s := ps.items[i]
		row := make([]int, len(alpha.classes))
		for ci, cl := range alpha.classes {
			t := make(pstate, k+1)
			for j, d := range dfas {
				t[j] = d.next[s[j]][ci]
			}
			t[k] = -1
			if n := s[k]; n >= 0 && cl.Lo == cl.Hi {
				if nx, ok := trie[n].next[cl.Lo]; ok {
					t[k] = int32(nx)
				}
			}
			row[ci] = add(t)
		}
		next = append(next, row)
	}
	// The region of a final state: the patterns it matches; a declared
	// name is no region's.
	region := func(s pstate) (string, []int, bool) {
		if n := s[k]; n >= 0 && trie[n].end {
			return "", nil, false
		}
		var in []int
		for j, d := range dfas {
			if d.accept[s[j]] {
				in = append(in, j)
			}
		}
		return fmt.Sprint(in), in, true
	}
	rev := reverse(next)
	var out []keyRegion
	seen := map[string]bool{}
	for _, s := range ps.items {
		rk, in, ok := region(s)
		if !ok || seen[rk] {
			continue
		}
		seen[rk] = true
		// States that reach a final state of this region.
		final := make([]bool, len(ps.items))
		for i, s := range ps.items {
			r, _, ok := region(s)
			final[i] = ok && r == rk
		}
		live := reaching(final, rev)
		edges := make([][]dfaEdge, len(ps.items))
		for i := range ps.items {
			if !live[i] {
				continue
			}
			edges[i] = groupEdges(next[i], live, alpha)
		}
		key := c.linear("pattern key", edges, final, alpha)
		out = append(out, keyRegion{patterns: in, key: c.b.Seq("pattern key", B('"'), key)})
	}
	return out, nil
}

// patternsMatching lists the patterns name matches (search semantics).
func patternsMatching(patterns []string, name string) ([]int, error) {
	var out []int
	for i, p := range patterns {
		prog, err := patternProg(p)
		if err != nil {
			return nil, err
		}
		a := map[rune]bool{}
		boundaries(prog, a)
		for _, r := range name {
			a[r], a[r+1] = true, true
		}
		alpha := newKeyAlphabet(a)
		d, err := buildKeyDFA(prog, alpha)
		if err != nil {
			return nil, err
		}
		st := int32(0)
		for _, r := range name {
			st = d.next[st][alpha.class(r)]
		}
		if d.accept[st] {
			out = append(out, i)
		}
	}
	return out, nil
}

// consumes reports whether instruction in takes character r.
func consumes(in *syntax.Inst, r rune) bool {
	switch in.Op {
	case syntax.InstRune:
		return in.MatchRune(r)
	case syntax.InstRune1:
		return r == in.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return false
}

// maxBoundedStates bounds the rules of a pattern with a length bound: one
// per DFA state and length.
const maxBoundedStates = 1 << 16

// boundedPattern is the content and closing quote of a JSON string that
// contains a match of every one of patterns (search semantics; anchor one
// for a full match) and has min to max characters (max < 0: no upper
// bound): the patterns' DFAs in product, with a character count, each
// transition a JSONChar.
func (c *schemaCompiler) boundedPattern(patterns []string, minLen, maxLen int) (Sym, error) {
	points := map[rune]bool{}
	progs := make([]*syntax.Prog, len(patterns))
	for i, p := range patterns {
		prog, err := patternProg(p)
		if err != nil {
			return Sym{}, err
		}
		progs[i] = prog
		boundaries(prog, points)
	}
	alpha := newKeyAlphabet(points)
	dfas := make([]*keyDFA, len(progs))
	for i, prog := range progs {
		d, err := buildKeyDFA(prog, alpha)
		if err != nil {
			return Sym{}, err
		}
		dfas[i] = d
	}
	d, err := productDFA(dfas, len(alpha.classes))
	if err != nil {
		return Sym{}, err
	}
	top := minLen // counts beyond the bounds that matter are alike
	if maxLen >= 0 {
		top = maxLen
	}
	if len(d.next)*(top+1) > maxBoundedStates {
		return Sym{}, fmt.Errorf("the pattern's automaton times the length bound exceeds %d states", maxBoundedStates)
	}
	// live[q]: an accepting state is reachable from q.
	next := make([][]int, len(d.next))
	for q, row := range d.next {
		next[q] = make([]int, len(row))
		for i, t := range row {
			next[q][i] = int(t)
		}
	}
	live := reaching(d.accept, reverse(next))
	// The product of the automaton and a count of characters (counts
	// past the bounds that matter are alike): state q*(top+1)+n.
	states := len(d.next) * (top + 1)
	edges := make([][]dfaEdge, states)
	final := make([]bool, states)
	for q := range d.next {
		if !live[q] {
			continue
		}
		grouped := groupEdges(next[q], live, alpha)
		for n := 0; n <= top; n++ {
			id := q*(top+1) + n
			final[id] = d.accept[q] && n >= minLen
			if maxLen >= 0 && n >= maxLen {
				continue
			}
			for _, e := range grouped {
				e.to = e.to*(top+1) + min(n+1, top)
				edges[id] = append(edges[id], e)
			}
		}
	}
	return c.linear("bounded pattern", edges, final, alpha), nil
}

// dfaEdge is a transition of an automaton over string content: to the
// state to on the characters of set, classes of an alphabet.
type dfaEdge struct {
	to  int
	set CharSet
}

// groupEdges lists a state's transitions (row: target by class) to live
// states, one edge per target.
func groupEdges(row []int, live []bool, alpha *keyAlphabet) []dfaEdge {
	var out []dfaEdge
	idx := map[int]int{}
	for ci, t := range row {
		if !live[t] {
			continue
		}
		i, ok := idx[t]
		if !ok {
			i = len(out)
			idx[t] = i
			out = append(out, dfaEdge{to: t})
		}
		out[i].set = append(out[i].set, alpha.classes[ci])
	}
	return out
}

// maxLeftLinear is the most states of an automaton that linear writes
// as a left-linear grammar.
const maxLeftLinear = 1024

// linear is the grammar of JSON string content that an automaton leads
// from state 0 to a final state, then the closing quote; each transition
// is a JSONChar, so a character may be written raw or escaped. The
// automaton is deterministic, so no text has two parses.
//
// Small automata are written left-linear: rule R_q for the content that
// ends in state q (R_0 → ε, R_t → R_q c for each transition q → t on c).
// An Earley set inside the content then holds the items that wait after
// one R_q, with the content's start as their origin whatever the path:
// two positions in one state have sets alike, and the states masks learn
// repeat (a right-linear grammar chains an item per character into every
// set). The price is that the content's start predicts every rule, so
// large automata (length bounds times states, whose states do not repeat
// anyway) are written right-linear: R_q → c R_t, R_q → '"' where q is
// final, predicted one state at a time.
//
// The transitions of a state from which any plain text keeps the
// automaton alive (freeStates) are text alternatives (Builder.TextAlt).
func (c *schemaCompiler) linear(name string, edges [][]dfaEdge, final []bool, alpha *keyAlphabet) Sym {
	// The states reachable from 0, in order, with the transitions to
	// states that reach a final one.
	rev := make([][]int, len(edges))
	for q, es := range edges {
		for _, e := range es {
			rev[e.to] = append(rev[e.to], q)
		}
	}
	live := reaching(final, rev)
	for q, es := range edges {
		edges[q] = slices.DeleteFunc(es, func(e dfaEdge) bool { return !live[e.to] })
	}
	num := map[int]int{0: 0}
	order := []int{0}
	for i := 0; i < len(order); i++ {
		for _, e := range edges[order[i]] {
			if _, ok := num[e.to]; !ok {
				num[e.to] = len(order)
				order = append(order, e.to)
			}
		}
	}
	free := freeStates(edges, order, alpha)
	budget := func(q int) int32 {
		if free[q] {
			return NoBound
		}
		return 0
	}
	rules := make([]int, len(order))
	for i := range order {
		rules[i] = c.b.Rule(name)
	}
	if len(order) > maxLeftLinear {
		for i, q := range order {
			if final[q] {
				c.b.Alt(rules[i], B('"'))
			}
			for _, e := range edges[q] {
				c.b.TextAlt(rules[i], 0, budget(q), c.b.JSONChar(e.set), N(rules[num[e.to]]))
			}
			if len(c.b.rules[rules[i]].alts) == 0 {
				c.b.Alt(rules[i], never())
			}
		}
		return N(rules[0])
	}
	c.b.Alt(rules[0])
	for i, q := range order {
		for _, e := range edges[q] {
			c.b.TextAlt(rules[num[e.to]], 1, budget(q), N(rules[i]), c.b.JSONChar(e.set))
		}
	}
	end := c.b.Rule(name)
	for i, q := range order {
		if final[q] {
			c.b.Alt(end, N(rules[i]), B('"'))
		}
	}
	if len(c.b.rules[end].alts) == 0 {
		c.b.Alt(end, never())
	}
	return N(end)
}

// freeStates finds the states of an automaton over string content (edges
// to live states only) from which any plain text (Vocab's isPlain) keeps
// it alive: no state reachable from them lacks a transition for some plain
// character. A search backwards from the states that do lack one.
func freeStates(edges [][]dfaEdge, order []int, alpha *keyAlphabet) map[int]bool {
	// The classes with a plain character: all but those of control
	// characters, the quote and the backslash alone.
	isPlain := func(cl RuneRange) bool {
		return !(cl.Hi < 0x20 || (cl.Lo == '"' && cl.Hi == '"') || (cl.Lo == '\\' && cl.Hi == '\\'))
	}
	plain := 0
	for _, cl := range alpha.classes {
		if isPlain(cl) {
			plain++
		}
	}
	free := make(map[int]bool, len(order))
	rev := map[int][]int{}
	var queue []int
	for _, q := range order {
		n := 0
		for _, e := range edges[q] {
			for _, cl := range e.set {
				if isPlain(cl) {
					n++
				}
			}
			rev[e.to] = append(rev[e.to], q)
		}
		free[q] = n == plain
		if !free[q] {
			queue = append(queue, q)
		}
	}
	for i := 0; i < len(queue); i++ {
		for _, q := range rev[queue[i]] {
			if free[q] {
				free[q] = false
				queue = append(queue, q)
			}
		}
	}
	return free
}

// productDFA is the automaton of the strings every one of dfas accepts.
func productDFA(dfas []*keyDFA, classes int) (*keyDFA, error) {
	if len(dfas) == 1 {
		return dfas[0], nil
	}
	out := &keyDFA{}
	var in interner[[]int32]
	add := func(st []int32) int32 { return int32(in.add(intsKey(st), st)) }
	add(make([]int32, len(dfas)))
	for i := 0; i < len(in.items); i++ {
		if len(in.items) > maxKeyStates {
			return nil, fmt.Errorf("the patterns' product has more than %d in.items", maxKeyStates)
		}
		st := in.items[i]
		all := true
		for j, d := range dfas {
			all = all && d.accept[st[j]]
		}
		out.accept = append(out.accept, all)
		row := make([]int32, classes)
		for ci := range classes {
			t := make([]int32, len(dfas))
			for j, d := range dfas {
				t[j] = d.next[st[j]][ci]
			}
			row[ci] = add(t)
		}
		out.next = append(out.next, row)
	}
	return out, nil
}

// reverse lists, per state, the states with a transition to it.
func reverse(next [][]int) [][]int {
	rev := make([][]int, len(next))
	for q, row := range next {
		for _, t := range row {
			if n := len(rev[t]); n == 0 || rev[t][n-1] != q {
				rev[t] = append(rev[t], q)
			}
		}
	}
	return rev
}

// reaching marks the states from which a final state is reachable: a
// search backwards from the final states, linear in the transitions.
func reaching(final []bool, rev [][]int) []bool {
	live := slices.Clone(final)
	var stack []int
	for q, f := range final {
		if f {
			stack = append(stack, q)
		}
	}
	for len(stack) > 0 {
		q := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range rev[q] {
			if !live[p] {
				live[p] = true
				stack = append(stack, p)
			}
		}
	}
	return live
}

// interner numbers the distinct values of an automaton's states, by key.
type interner[T any] struct {
	index map[string]int
	items []T
}

// add returns v's number, giving it the next one when key is new.
func (in *interner[T]) add(key string, v T) int {
	if i, ok := in.index[key]; ok {
		return i
	}
	if in.index == nil {
		in.index = map[string]int{}
	}
	in.index[key] = len(in.items)
	in.items = append(in.items, v)
	return len(in.items) - 1
}

// intsKey is a state tuple's key.
func intsKey(vs []int32) string {
	var sb strings.Builder
	for _, v := range vs {
		sb.WriteString(strconv.Itoa(int(v)))
		sb.WriteByte(',')
	}
	return sb.String()
}

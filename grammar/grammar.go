package grammar

import (
	"errors"
	"fmt"
	"math/bits"
)

// ByteSet is a set of bytes: the terminal symbols of a grammar are byte
// classes, so one terminal matches one byte of output.
type ByteSet [4]uint64

// Add puts b in s.
func (s *ByteSet) Add(b byte) { s[b>>6] |= 1 << (b & 63) }

// AddRange puts lo..hi (inclusive) in s.
func (s *ByteSet) AddRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.Add(byte(c))
	}
}

// Intersects reports whether s and o have a byte in common.
func (s *ByteSet) Intersects(o *ByteSet) bool {
	return s[0]&o[0]|s[1]&o[1]|s[2]&o[2]|s[3]&o[3] != 0
}

// Has reports whether b is in s.
func (s *ByteSet) Has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Union adds every byte of o to s.
func (s *ByteSet) Union(o ByteSet) {
	for i := range s {
		s[i] |= o[i]
	}
}

// Len is the number of bytes in s.
func (s *ByteSet) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Bytes returns the set of the given bytes.
func Bytes(bs ...byte) ByteSet {
	var s ByteSet
	for _, b := range bs {
		s.Add(b)
	}
	return s
}

// Range returns the set lo..hi (inclusive).
func Range(lo, hi byte) ByteSet {
	var s ByteSet
	s.AddRange(lo, hi)
	return s
}

// Sym is one symbol of a production: a terminal byte class (NT < 0) or a
// nonterminal (NT >= 0, a rule of the Builder).
type Sym struct {
	NT  int32
	Set ByteSet
}

// T is the terminal symbol matching one byte of set.
func T(set ByteSet) Sym { return Sym{NT: -1, Set: set} }

// B is the terminal symbol matching byte b.
func B(b byte) Sym { return T(Bytes(b)) }

// N is the nonterminal symbol of rule nt.
func N(nt int) Sym { return Sym{NT: int32(nt)} }

// Lit is the sequence of terminals spelling s.
func Lit(s string) []Sym {
	out := make([]Sym, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = B(s[i])
	}
	return out
}

// Terminal reports whether s is a terminal.
func (s Sym) Terminal() bool { return s.NT < 0 }

// Builder makes a grammar: rules are numbered nonterminals, each with
// alternatives (sequences of symbols). The compilers (JSON Schema, regular
// expressions, GBNF) build into one Builder; Build checks it and freezes it
// for matching. The zero Builder is ready to use.
type Builder struct {
	rules []rule
	// limit bounds the grammar's size (symbols over all alternatives);
	// 0 means DefaultLimit.
	limit int
	size  int
	err   error
	// texts are the text productions (TextAlt): rule, index of the
	// alternative, the dot, and its budget of characters.
	texts []textAlt
	// jsonChars are the rules JSONChar made, by character set;
	// textRanges those JSONTextRange made, by bounds.
	jsonChars  map[string]Sym
	textRanges map[[2]int]Sym
}

type rule struct {
	name string
	alts [][]Sym
}

type textAlt struct {
	nt, alt, dot int
	budget       int32
}

// NoBound is the budget of a text production without a length bound.
const NoBound = 1<<31 - 1

// maxLeftCount is the largest length bound JSONTextRange counts
// left-linear.
const maxLeftCount = 1024

// DefaultLimit is the most symbols a Builder takes by default: a compiler
// whose input would make a larger grammar (a schema with huge repetition
// bounds) fails with ErrTooLarge instead of exhausting memory.
const DefaultLimit = 4 << 20

// ErrTooLarge is the error of a grammar past its Builder's size limit.
var ErrTooLarge = errors.New("grammar: too large")

// SetLimit bounds the grammar's size in symbols (0: DefaultLimit).
func (b *Builder) SetLimit(n int) { b.limit = n }

// Err is the first error the Builder met (ErrTooLarge), if any.
func (b *Builder) Err() error { return b.err }

// Rule makes a new nonterminal with no alternatives yet; name is for
// messages and debugging.
func (b *Builder) Rule(name string) int {
	b.rules = append(b.rules, rule{name: name})
	return len(b.rules) - 1
}

// Alt adds an alternative to rule nt: the sequence syms (empty: ε).
func (b *Builder) Alt(nt int, syms ...Sym) {
	limit := b.limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	if b.size += len(syms) + 1; b.size > limit {
		if b.err == nil {
			b.err = fmt.Errorf("%w: more than %d symbols", ErrTooLarge, limit)
		}
		return
	}
	b.rules[nt].alts = append(b.rules[nt].alts, append([]Sym(nil), syms...))
}

// Seq returns a symbol for the sequence syms (syms[0] itself when alone).
func (b *Builder) Seq(name string, syms ...Sym) Sym {
	if len(syms) == 1 {
		return syms[0]
	}
	nt := b.Rule(name)
	b.Alt(nt, syms...)
	return N(nt)
}

// Choice returns a symbol for one of alts.
func (b *Builder) Choice(name string, alts ...[]Sym) Sym {
	nt := b.Rule(name)
	for _, a := range alts {
		b.Alt(nt, a...)
	}
	return N(nt)
}

// Opt returns a symbol for s or nothing.
func (b *Builder) Opt(s Sym) Sym {
	nt := b.Rule("opt")
	b.Alt(nt)
	b.Alt(nt, s)
	return N(nt)
}

// Star returns a symbol for zero or more s, as the left-recursive rule
// R → ε | R s, which an Earley parser handles in constant items per byte.
func (b *Builder) Star(s Sym) Sym {
	nt := b.Rule("star")
	b.Alt(nt)
	b.Alt(nt, N(nt), s)
	return N(nt)
}

// Plus returns a symbol for one or more s.
func (b *Builder) Plus(s Sym) Sym {
	nt := b.Rule("plus")
	b.Alt(nt, s)
	b.Alt(nt, N(nt), s)
	return N(nt)
}

// Repeat returns a symbol for min to max repetitions of s (max < 0:
// unbounded). Bounded repetitions cost O(max) symbols.
func (b *Builder) Repeat(s Sym, min, max int) Sym {
	if max >= 0 && max < min {
		min, max = max, min
	}
	var seq []Sym
	for i := 0; i < min; i++ {
		seq = append(seq, s)
	}
	switch {
	case max < 0:
		seq = append(seq, b.Star(s))
	case max > min:
		// s? nested: (s (s (s)?)?)? so that the count is what bounds it.
		tail := -1
		for i := 0; i < max-min; i++ {
			nt := b.Rule("upto")
			b.Alt(nt)
			if tail < 0 {
				b.Alt(nt, s)
			} else {
				b.Alt(nt, s, N(tail))
			}
			tail = nt
			if b.err != nil {
				break
			}
		}
		seq = append(seq, N(tail))
	}
	if len(seq) == 0 {
		nt := b.Rule("empty")
		b.Alt(nt)
		return N(nt)
	}
	return b.Seq("repeat", seq...)
}

// JSONText returns a symbol for any JSON string content (between the
// quotes): zero or more JSONChar(AnyChar()). The Grammar knows these rules:
// a Matcher inside one takes every "plain" token (Vocab) without a walk,
// the masks' fast path in free strings.
func (b *Builder) JSONText() Sym {
	nt := b.Rule("text")
	b.Alt(nt)
	b.TextAlt(nt, 1, NoBound, N(nt), b.JSONChar(AnyChar()))
	return N(nt)
}

// TextAlt adds an alternative to rule nt, as Alt, where syms[dot] is a
// JSONChar, and says that a match before it is inside JSON string content
// that takes any plain text (Vocab) of up to budget characters (NoBound:
// any length), each character leading to a state that is again inside
// such content, with one character less; and, where budget is not
// NoBound, no plain text longer. Masks then take plain tokens that fit
// without a walk. Length bounds and automata over string content mark
// with it the states they know take any plain text.
func (b *Builder) TextAlt(nt, dot int, budget int32, syms ...Sym) {
	n := len(b.rules[nt].alts)
	b.Alt(nt, syms...)
	if len(b.rules[nt].alts) > n && budget > 0 {
		b.texts = append(b.texts, textAlt{nt, n, dot, budget})
	}
}

// JSONTextRange is JSON string content of min to max characters (max < 0:
// no upper bound), each character a text alternative (TextAlt) with the
// characters left as its budget. Its size is O(max) symbols (O(min)
// without an upper bound).
//
// Counts up to maxLeftCount are left-linear, R_n → R_{n-1} c: every set
// inside the content holds O(1) items of it, with the content's start as
// their origin, and the closing quote completes one of them. (A
// right-linear count, which larger bounds get so as not to predict every
// count at the start, leaves an item per character waiting, and the
// closing quote completes them all.)
func (b *Builder) JSONTextRange(min, max int) Sym {
	// One grammar per range: a schema repeats its bounds.
	key := [2]int{min, max}
	if sym, ok := b.textRanges[key]; ok {
		return sym
	}
	if b.textRanges == nil {
		b.textRanges = map[[2]int]Sym{}
	}
	sym := b.jsonTextRange(min, max)
	b.textRanges[key] = sym
	return sym
}

func (b *Builder) jsonTextRange(min, max int) Sym {
	c := b.JSONChar(AnyChar())
	top := min
	if max > min {
		top = max
	}
	if top <= maxLeftCount {
		budget := func(n int) int32 {
			if max < 0 {
				return NoBound
			}
			return int32(max - n)
		}
		rules := make([]int, top+1)
		for n := range rules {
			rules[n] = b.Rule("count")
		}
		b.Alt(rules[0])
		for n := 1; n <= top; n++ {
			b.TextAlt(rules[n], 1, budget(n-1), N(rules[n-1]), c)
		}
		content := b.Rule("text range")
		if max < 0 {
			b.TextAlt(rules[top], 1, NoBound, N(rules[top]), c)
			b.Alt(content, N(rules[top]))
		} else {
			for n := min; n <= max; n++ {
				b.Alt(content, N(rules[n]))
			}
		}
		return N(content)
	}
	var cur Sym
	have := false
	switch {
	case max < 0:
		cur, have = b.JSONText(), true
	case max > min:
		// upto_i: at most i more characters.
		for i := 1; i <= max-min && b.err == nil; i++ {
			nt := b.Rule("upto")
			b.Alt(nt)
			if have {
				b.TextAlt(nt, 0, int32(i), c, cur)
			} else {
				b.TextAlt(nt, 0, int32(i), c)
			}
			cur, have = N(nt), true
		}
	}
	// need_j: j more characters, then the tail.
	for j := 1; j <= min && b.err == nil; j++ {
		budget := int32(NoBound)
		if max >= 0 {
			budget = int32(max - min + j)
		}
		nt := b.Rule("need")
		if have {
			b.TextAlt(nt, 0, budget, c, cur)
		} else {
			b.TextAlt(nt, 0, budget, c)
		}
		cur, have = N(nt), true
	}
	if !have {
		nt := b.Rule("empty")
		b.Alt(nt)
		return N(nt)
	}
	return cur
}

// Grammar is a built, immutable grammar: productions indexed for an Earley
// recognizer. It is safe for concurrent use: the one thing that changes
// inside it is the mask cache (states of the grammar met by masks, their
// byte transitions and masks), which synchronizes itself.
type Grammar struct {
	start    int32
	empty    bool // no text matches
	names    []string
	prods    []prod
	byLHS    [][]int32 // productions of each nonterminal
	nullable []bool    // by nonterminal
	// textBudget[p] > 0 marks a text production (TextAlt): a set holding
	// p's item with the dot at textDot[p] is inside JSON string content
	// that takes up to textBudget[p] more characters (NoBound: any).
	// hasText says whether there is one.
	textBudget []int32
	textDot    []int32
	hasText    bool
	// charNT marks the rules JSONChar made; inChar those and the rules
	// they use (a character's insides). plainStart are the bytes that
	// begin a plain character (isPlain).
	charNT, inChar []bool
	plainStart     ByteSet
	// cls[c] is byte c's class: bytes of one class are in the same
	// terminals, so no set of items tells them apart (Advance takes them
	// to the same set) and masks learn one transition per class.
	cls [256]uint8
	// cache holds what masks learn about the grammar (see stateCache).
	cache *stateCache
}

// byteClasses partitions the bytes by the terminals of g: two bytes share
// a class when every terminal has both or neither.
func (g *Grammar) byteClasses() {
	var cls [256]int16
	seen := map[ByteSet]bool{}
	for _, p := range g.prods {
		for _, s := range p.rhs {
			if !s.Terminal() || seen[s.Set] {
				continue
			}
			seen[s.Set] = true
			// Split each class by membership in s.Set.
			var remap [256][2]int16
			n := int16(0)
			for c := range 256 {
				in := 0
				if s.Set.Has(byte(c)) {
					in = 1
				}
				r := &remap[cls[c]][in]
				if *r == 0 {
					n++
					*r = n
				}
				cls[c] = *r - 1
			}
		}
	}
	for c := range 256 {
		g.cls[c] = uint8(cls[c])
	}
}

type prod struct {
	lhs int32
	rhs []Sym
}

// Build freezes the grammar whose start symbol is rule start. It fails on
// the Builder's error, on a reference to a rule that does not exist, and on
// a rule without alternatives. Alternatives that derive no text (an empty
// byte class, a rule whose every alternative is such) are dropped, so
// every byte the matcher takes can still be completed: a mask never leads
// a sequence into a dead end.
func (b *Builder) Build(start int) (*Grammar, error) {
	if b.err != nil {
		return nil, b.err
	}
	if start < 0 || start >= len(b.rules) {
		return nil, fmt.Errorf("grammar: start rule %d does not exist", start)
	}
	g := &Grammar{byLHS: make([][]int32, len(b.rules)+1), nullable: make([]bool, len(b.rules)+1)}
	nProds := 1 // the augmented start
	for _, r := range b.rules {
		if len(r.alts) == 0 {
			return nil, fmt.Errorf("grammar: rule %q has no alternative", r.name)
		}
		for _, a := range r.alts {
			for _, s := range a {
				if !s.Terminal() && int(s.NT) >= len(b.rules) {
					return nil, fmt.Errorf("grammar: rule %q refers to rule %d, which does not exist", r.name, s.NT)
				}
			}
		}
		nProds += len(r.alts)
	}
	keep := b.productive()
	g.names = make([]string, 0, len(b.rules)+1)
	g.prods = make([]prod, 0, nProds)
	ids := make([]int32, nProds) // every rule's production ids, one array
	for i, r := range b.rules {
		g.names = append(g.names, r.name)
		first := len(g.prods)
		for j, a := range r.alts {
			if !keep[i][j] {
				continue // it derives no text: a dead end for the matcher
			}
			ids[len(g.prods)] = int32(len(g.prods))
			g.prods = append(g.prods, prod{lhs: int32(i), rhs: a})
		}
		g.byLHS[i] = ids[first:len(g.prods):len(g.prods)]
	}
	g.empty = len(g.byLHS[start]) == 0
	g.textBudget = make([]int32, len(g.prods)+1)
	g.textDot = make([]int32, len(g.prods)+1)
	for _, t := range b.texts {
		if !keep[t.nt][t.alt] {
			continue
		}
		// The production's id: the kept alternatives before it.
		p := g.byLHS[t.nt][0]
		for j := range t.alt {
			if keep[t.nt][j] {
				p++
			}
		}
		g.textBudget[p], g.textDot[p] = t.budget, int32(t.dot)
		g.hasText = true
	}
	for c := 0x20; c < 0x80; c++ {
		if c != '"' && c != '\\' {
			g.plainStart.Add(byte(c))
		}
	}
	g.plainStart.AddRange(0xC2, 0xF4)
	g.charNT = make([]bool, len(b.rules)+1)
	g.inChar = make([]bool, len(b.rules)+1)
	var queue []int32
	for _, sym := range b.jsonChars {
		if !sym.Terminal() {
			g.charNT[sym.NT], g.inChar[sym.NT] = true, true
			queue = append(queue, sym.NT)
		}
	}
	for i := 0; i < len(queue); i++ {
		for _, p := range g.byLHS[queue[i]] {
			for _, sym := range g.prods[p].rhs {
				if !sym.Terminal() && !g.inChar[sym.NT] {
					g.inChar[sym.NT] = true
					queue = append(queue, sym.NT)
				}
			}
		}
	}
	// The augmented start S' → S, so that acceptance is one completed item.
	g.start = int32(len(b.rules))
	g.names = append(g.names, "<start>")
	g.byLHS[g.start] = []int32{int32(len(g.prods))}
	g.prods = append(g.prods, prod{lhs: g.start, rhs: []Sym{N(start)}})
	for changed := true; changed; {
		changed = false
		for _, p := range g.prods {
			if g.nullable[p.lhs] {
				continue
			}
			all := true
			for _, s := range p.rhs {
				if s.Terminal() || !g.nullable[s.NT] {
					all = false
					break
				}
			}
			if all {
				g.nullable[p.lhs], changed = true, true
			}
		}
	}
	g.byteClasses()
	g.cache = newStateCache()
	return g, nil
}

// Empty reports whether no text matches the grammar.
func (g *Grammar) Empty() bool { return g.empty }

// Rules is the number of rules, for size reports.
func (g *Grammar) Rules() int { return len(g.byLHS) - 1 }

// ErrNoText is the compilers' error for a grammar that derives no text at
// all (a schema no value is valid against, in a form the compiler did not
// see through): no output could follow it, so a request for it is refused
// rather than answered with nothing.
var ErrNoText = errors.New("grammar: no output can match (the grammar derives no text)")

// productive reports, per rule and alternative, whether the alternative
// derives some text: each of its terminals matches a byte and each of its
// rules has such an alternative. A worklist from the alternatives without
// rules, linear in the grammar's size.
func (b *Builder) productive() [][]bool {
	type use struct{ rule, alt int32 }
	missing := make([][]int32, len(b.rules)) // rules not yet productive; -1: an empty terminal
	users := make([][]use, len(b.rules))
	done := make([]bool, len(b.rules))
	var queue []int32
	for i, r := range b.rules {
		missing[i] = make([]int32, len(r.alts))
		for j, a := range r.alts {
			n := int32(0)
			for _, s := range a {
				switch {
				case !s.Terminal():
					n++
					users[s.NT] = append(users[s.NT], use{int32(i), int32(j)})
				case s.Set == (ByteSet{}):
					n = -1 << 30
				}
			}
			missing[i][j] = n
			if n == 0 && !done[i] {
				done[i] = true
				queue = append(queue, int32(i))
			}
		}
	}
	for len(queue) > 0 {
		nt := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, u := range users[nt] {
			missing[u.rule][u.alt]--
			if missing[u.rule][u.alt] == 0 && !done[u.rule] {
				done[u.rule] = true
				queue = append(queue, u.rule)
			}
		}
	}
	keep := make([][]bool, len(b.rules))
	for i := range b.rules {
		keep[i] = make([]bool, len(missing[i]))
		for j, n := range missing[i] {
			keep[i][j] = n == 0
		}
	}
	return keep
}

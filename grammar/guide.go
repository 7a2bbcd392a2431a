package grammar

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
)

// Guides makes the Guide of every constrained sequence of one model: it
// holds the vocabulary's trie (built on first use), the compiled plans and
// the trigger tables, shared by all sequences and safe for concurrent use.
type Guides struct {
	tokens [][]byte

	once  sync.Once
	vocab *Vocab
	cache Cache

	mu       sync.Mutex
	triggers map[string]*trigger
	openers  map[string][]int32
}

// NewGuides returns the guides of a vocabulary: tokens[id] are token id's
// bytes, nil for tokens that never appear in constrained text (special
// tokens), as tokenizer.AllTokenBytes gives them. tokens is not copied.
//
// A token whose bytes are a marker's MarkerBytes is that marker: plans
// write the marker's text, which the Guides rewrites to those bytes.
func NewGuides(tokens [][]byte) *Guides {
	gs := &Guides{tokens: tokens}
	gs.cache.rewrite = markerRewrite(tokens)
	return gs
}

// Vocab returns the vocabulary's trie.
func (gs *Guides) Vocab() *Vocab {
	gs.once.Do(func() { gs.vocab = NewVocab(gs.tokens, nil) })
	return gs.vocab
}

// Check compiles an encoded plan (Plan.Marshal) and reports why it does
// not compile; the grammar is cached for the Guide that follows.
func (gs *Guides) Check(enc []byte) error {
	_, _, err := gs.cache.Plan(enc)
	return err
}

// Guide returns the guide of one sequence that follows the encoded plan.
// stop are the ids that end the sequence (EOS): they are allowed only where
// the plan's output is complete.
func (gs *Guides) Guide(enc []byte, stop []int32) (*Guide, error) {
	p, g, err := gs.cache.Plan(enc)
	if err != nil {
		return nil, err
	}
	gd := &Guide{gs: gs, v: gs.Vocab(), plan: p, g: g, m: NewMatcher(g), stop: slices.Clone(stop)}
	text := p.After + p.Trigger
	if text == "" {
		gd.on = true
		return gd, nil
	}
	gd.trig = gs.trigger(text)
	if p.Open != "" && p.After != "" {
		gd.on, gd.opening = true, true
		gd.openers = gs.opener(p.Open, p.After)
	}
	return gd, nil
}

// Guide follows one sequence's output through its plan: Mask gives the
// tokens allowed next, Accept takes the token chosen. It is not safe for
// concurrent use; the engine calls Mask (possibly on another goroutine,
// during the forward pass) and Accept one after the other.
type Guide struct {
	gs   *Guides
	v    *Vocab
	plan *Plan
	g    *Grammar
	m    *Matcher
	stop []int32
	// on: the output is inside the grammar (from the start, or since the
	// trigger); otherwise it is free and state bytes of trig end it.
	on    bool
	trig  *trigger
	state int
	// opening: the first token may open the block Plan.Open (one of
	// openers) instead of starting the grammar.
	opening bool
	openers []int32
	buf     Mask
}

// Mask returns the tokens allowed next (a mask over Vocab().Size() ids,
// valid until the next call), or false when every token is (the output is
// free). An empty mask means nothing may follow: the sequence ends.
func (gd *Guide) Mask() (Mask, bool) {
	if gd.buf == nil {
		gd.buf = NewMask(gd.v.Size())
	}
	if !gd.fill(gd.buf) {
		return nil, false
	}
	return gd.buf, true
}

func (gd *Guide) fill(dst Mask) bool {
	if gd.on {
		gd.v.Fill(gd.m, dst)
		if gd.plan.Trigger == "" && gd.m.CanEnd() {
			for _, id := range gd.stop {
				if int(id) < gd.v.Size() {
					dst.Set(id)
				}
			}
		}
		if gd.opening {
			for _, id := range gd.openers {
				dst.Set(id)
			}
		}
		return true
	}
	hits := gd.trig.hits[gd.state]
	if gd.plan.After == "" && len(hits) == 0 {
		return false
	}
	for i := range dst {
		dst[i] = ^uint64(0)
	}
	if tail := gd.v.Size() % 64; tail != 0 {
		dst[len(dst)-1] = 1<<tail - 1
	}
	if gd.plan.After != "" {
		// The reasoning must end before the output can.
		for _, id := range gd.stop {
			if int(id) < gd.v.Size() {
				dst[id>>6] &^= 1 << (id & 63)
			}
		}
	}
	// A token that ends the trigger must go on as the grammar allows.
	for _, h := range hits {
		gd.m.Reset(0)
		if !gd.m.AdvanceBytes(gd.gs.tokens[h.id][h.rest:]) {
			dst[h.id>>6] &^= 1 << (h.id & 63)
		}
	}
	gd.m.Reset(0)
	return true
}

// Accept takes the token chosen next; it fails for a token the mask did
// not allow.
func (gd *Guide) Accept(id int32) error {
	var bs []byte
	if int(id) >= 0 && int(id) < len(gd.gs.tokens) {
		bs = gd.gs.tokens[id]
	}
	if gd.opening {
		gd.opening = false
		if bs != nil && bytes.HasPrefix(bs, []byte(gd.plan.Open)) {
			gd.on, gd.state = false, 0
			return gd.free(id, bs[len(gd.plan.Open):])
		}
	}
	if slices.Contains(gd.stop, id) {
		if gd.on && gd.plan.Trigger == "" && !gd.m.CanEnd() {
			return fmt.Errorf("grammar: end of output where the grammar cannot end")
		}
		if !gd.on && gd.plan.After != "" {
			return fmt.Errorf("grammar: end of output before %q", gd.plan.After)
		}
		return nil
	}
	if !gd.on {
		if bs == nil {
			gd.state = 0 // a special token: not part of the text
			return nil
		}
		return gd.free(id, bs)
	}
	if bs == nil {
		return fmt.Errorf("grammar: token %d is not text the grammar allows", id)
	}
	return gd.take(id, bs)
}

// free scans bs (of token id) in free output for the trigger; the bytes
// after it go to the grammar.
func (gd *Guide) free(id int32, bs []byte) error {
	for i, c := range bs {
		gd.state = gd.trig.next(gd.state, c)
		if gd.state == len(gd.trig.text) {
			gd.on, gd.state = true, 0
			gd.m.Reset(0)
			return gd.take(id, bs[i+1:])
		}
	}
	return nil
}

// take feeds bs (of token id) to the grammar; a lazy plan goes back to free
// output once its grammar can take no more.
func (gd *Guide) take(id int32, bs []byte) error {
	if !gd.m.AdvanceBytes(bs) {
		return fmt.Errorf("grammar: token %d (%q) breaks the grammar", id, bs)
	}
	if gd.plan.Trigger != "" && gd.m.Done() {
		gd.on = false
	}
	return nil
}

// Err reports why the guide cannot go on: a byte of its grammar took more
// than MaxAdvanceWork (an ambiguous grammar), so the tokens it refused may
// be the grammar's. The engine ends the sequence with this error.
func (gd *Guide) Err() error {
	if gd.m.TooBig() {
		return fmt.Errorf("grammar: too ambiguous to follow (a byte took over %d Earley items)", MaxAdvanceWork)
	}
	return nil
}

// Free reports whether the output is outside the grammar (before After or
// between triggers).
func (gd *Guide) Free() bool { return !gd.on }

// opener lists the tokens that begin with open and do not also hold the
// end text after it (models that reason write the opening tag as one token).
func (gs *Guides) opener(open, end string) []int32 {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	key := open + "\x00" + end
	if ids, ok := gs.openers[key]; ok {
		return ids
	}
	var ids []int32
	for id, bs := range gs.tokens {
		if bytes.HasPrefix(bs, []byte(open)) && !bytes.Contains(bs[len(open):], []byte(end)) {
			ids = append(ids, int32(id))
		}
	}
	if gs.openers == nil {
		gs.openers = map[string][]int32{}
	}
	gs.openers[key] = ids
	return ids
}

// trigger is a text that switches a plan on, as a KMP automaton over bytes,
// with, per state, the tokens that complete it and go on past its end
// (their bytes after it must then follow the grammar).
type trigger struct {
	text []byte
	// delta[s*256+c]: the state after byte c in state s (bytes of text
	// matched at the output's end).
	delta []int32
	hits  [][]hit
}

type hit struct {
	id   int32
	rest int // offset in the token's bytes just past the trigger
}

func (t *trigger) next(s int, c byte) int { return int(t.delta[s*256+int(c)]) }

func (gs *Guides) trigger(text string) *trigger {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if t, ok := gs.triggers[text]; ok {
		return t
	}
	t := newTrigger([]byte(text), gs.tokens)
	if gs.triggers == nil {
		gs.triggers = map[string]*trigger{}
	}
	gs.triggers[text] = t
	return t
}

func newTrigger(text []byte, tokens [][]byte) *trigger {
	n := len(text)
	t := &trigger{text: text, delta: make([]int32, (n+1)*256), hits: make([][]hit, n)}
	// The KMP automaton: fail[s] is the longest proper border of text[:s].
	fail := make([]int, n+1)
	for s := 1; s < n; s++ {
		k := fail[s]
		for k > 0 && text[s] != text[k] {
			k = fail[k]
		}
		if text[s] == text[k] {
			k++
		}
		fail[s+1] = k
	}
	for s := 0; s <= n; s++ {
		for c := range 256 {
			switch {
			case s < n && byte(c) == text[s]:
				t.delta[s*256+c] = int32(s + 1)
			case s == 0:
				t.delta[c] = 0
			default:
				t.delta[s*256+c] = t.delta[fail[s]*256+c]
			}
		}
	}
	last := text[n-1]
	for id, bs := range tokens {
		if len(bs) < 2 || bytes.IndexByte(bs[:len(bs)-1], last) < 0 {
			continue // it cannot end the trigger before its last byte
		}
		for s := range n {
			st := s
			for i, c := range bs[:len(bs)-1] {
				st = t.next(st, c)
				if st == n {
					t.hits[s] = append(t.hits[s], hit{id: int32(id), rest: i + 1})
					break
				}
			}
		}
	}
	return t
}

package turn

import (
	"sync"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/output"
)

// MaxChoices bounds n, the choices one request may ask for (OpenAI's
// bound); a server bounds it further by its running-sequence cap.
const MaxChoices = 128

// Group is the choices of one request (OpenAI's n): a Turn each, prepared
// once and generated at once (StartN). A request with one choice is a Group
// of one.
type Group struct {
	Turns  []*Turn
	cancel func() // ends every choice (nil: the turns' own)
}

// ChoiceEmit receives a piece of choice i's final text (see Emit).
type ChoiceEmit func(i int, d output.Delta, tok *actors.TokenEvent) bool

// Run reads every choice to its end, all at once. It passes each delta to
// emit with its choice's index and calls done(i) when choice i has ended;
// ping, when set with period, whenever a choice waited period for an event
// and nothing was written meanwhile. emit, done and ping (each may be nil)
// are called one at a time, never concurrently, and each may only look at
// choice i's Turn (the others run on). When one of them fails (the client
// is gone), every choice is cancelled. Run reports whether the client
// stayed to the end (see Turn.Run).
func (g *Group) Run(emit ChoiceEmit, done func(i int) bool, period time.Duration, ping func() bool) bool {
	var mu sync.Mutex
	failed := false
	last := time.Now() // of the last write (emit or ping)
	fail := func() {
		failed = true
		for _, t := range g.Turns {
			t.Stream.Cancel()
		}
	}
	stayed := make([]bool, len(g.Turns))
	run := func(i int) {
		t := g.Turns[i]
		var e Emit
		if emit != nil {
			e = func(d output.Delta, tok *actors.TokenEvent) bool {
				mu.Lock()
				defer mu.Unlock()
				if failed {
					return false
				}
				if !emit(i, d, tok) {
					fail()
					return false
				}
				last = time.Now()
				return true
			}
		}
		var p func() bool
		if ping != nil {
			p = func() bool {
				mu.Lock()
				defer mu.Unlock()
				if failed {
					return false
				}
				if time.Since(last) < period {
					return true
				}
				if !ping() {
					fail()
					return false
				}
				last = time.Now()
				return true
			}
		}
		ok := t.Run(e, period, p)
		mu.Lock()
		defer mu.Unlock()
		if ok && !failed && done != nil && !done(i) {
			fail()
		}
		stayed[i] = ok && !failed
	}
	var wg sync.WaitGroup
	for i := 1; i < len(g.Turns); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i)
		}()
	}
	run(0)
	wg.Wait()
	for _, ok := range stayed {
		if !ok {
			return false
		}
	}
	return true
}

// Close closes every choice.
func (g *Group) Close() {
	for _, t := range g.Turns {
		t.Close()
	}
	if g.cancel != nil {
		g.cancel()
	}
}

// Err is the first choice's error that failed the request ("" when none),
// with the turn that carries it (for its status).
func (g *Group) Err() (string, *Turn) {
	for _, t := range g.Turns {
		if t.Err != "" {
			return t.Err, t
		}
	}
	return "", nil
}

// Tokens is the tokens generated over all choices.
func (g *Group) Tokens() int {
	n := 0
	for _, t := range g.Turns {
		n += t.Tokens
	}
	return n
}

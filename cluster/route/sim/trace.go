package sim

import (
	"math/rand/v2"

	"github.com/troupe-ai/troupe/cluster/route"
)

// Span is an inclusive range [Lo, Hi] a length or count is drawn from
// uniformly.
type Span struct{ Lo, Hi int }

func (s Span) draw(r *rand.Rand) int {
	if s.Hi <= s.Lo {
		return s.Lo
	}
	return s.Lo + r.IntN(s.Hi-s.Lo+1)
}

// turn is one request of a conversation: the user text it adds, the reply it
// gets, and the think time before the next turn.
type turn struct {
	user, reply []int32
	think       float64
}

// conversation is one synthetic multi-turn chat. Turn k's prompt is the
// system prompt, then every earlier turn's user text and reply, then turn
// k's user text: the whole history is resent.
type conversation struct {
	id     int
	start  float64
	system []int32
	turns  []turn

	// replay state
	history []int32           // prompt of the current turn
	blocks  []route.BlockHash // its block hashes, extended turn by turn
}

// trace is the deterministic workload of a Config: the same conversations,
// token ids and think times for every policy.
type trace struct {
	convs []*conversation
}

// newTrace draws the workload. Token ids come from one counter, so two
// segments share tokens only where the trace means them to (a shared system
// prompt, a resent history).
func newTrace(cfg Config) *trace {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x726f757465)) // "route"
	next := int32(1)
	fresh := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = next
			next++
		}
		return t
	}
	shared := make([][]int32, cfg.SharedSystems)
	for i := range shared {
		shared[i] = fresh(cfg.SystemTokens.draw(r))
	}
	tr := &trace{}
	at := 0.0
	for c := range cfg.Conversations {
		at += r.ExpFloat64() * cfg.ArrivalGap
		cv := &conversation{id: c, start: at}
		if len(shared) > 0 && r.Float64() < cfg.SharedFraction {
			// Zipf-like popularity: prompt i with weight 1/(i+1).
			cv.system = shared[pickHarmonic(r, len(shared))]
		} else {
			cv.system = fresh(cfg.SystemTokens.draw(r) / 4)
		}
		for range cfg.Turns.draw(r) {
			cv.turns = append(cv.turns, turn{
				user:  fresh(cfg.UserTokens.draw(r)),
				reply: fresh(cfg.ReplyTokens.draw(r)),
				think: r.ExpFloat64() * cfg.ThinkTime,
			})
		}
		tr.convs = append(tr.convs, cv)
	}
	return tr
}

// pickHarmonic draws i in [0, n) with probability proportional to 1/(i+1).
func pickHarmonic(r *rand.Rand, n int) int {
	total := 0.0
	for i := range n {
		total += 1 / float64(i+1)
	}
	x := r.Float64() * total
	for i := range n {
		x -= 1 / float64(i+1)
		if x < 0 {
			return i
		}
	}
	return n - 1
}

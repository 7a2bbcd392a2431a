package engine

import (
	"context"
	"fmt"
	"github.com/troupe-ai/troupe/grammar"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/sample"
)

// Request is one generation: a prompt and how to continue it.
type Request struct {
	Prompt    []int32
	MaxTokens int
	Sample    sample.Params
	// StopIDs end generation when sampled (the model's EOS ids, typically).
	// The stop token is included in the output.
	StopIDs []int32
	// WantPromptLogits keeps the logits at the last prompt position.
	WantPromptLogits bool
	// Logprobs reports each sampled token's log-probability under the
	// model's distribution, with the TopLogprobs most likely alternatives.
	Logprobs    bool
	TopLogprobs int
	// Boundary is a point in the prompt, in tokens, whose state is worth
	// keeping as soon as it is computed (0: none): the history boundary of a
	// chat request (the conversation up to its last assistant turn), or the
	// prompt less its last token for the first of n choices, which the
	// others reuse. On snapshot-reuse models prefill stops exactly there
	// once and the state is stored; on dense-KV models with the prefix cache
	// the positions computed by then go into the index while the sequence
	// runs on. A snapshot cache ignores it with Options.NoBoundarySnapshots.
	Boundary int
	// Breakpoints are prompt prefixes the client asked to keep cached
	// (Anthropic's cache_control), strictly increasing positions below
	// len(Prompt); others are ignored. With the prefix cache on, each is
	// kept as soon as it is computed: on snapshot-reuse models prefill
	// stops exactly there and the state is stored (as at Boundary, but
	// never superseded: kvcache.SnapshotPool.PutKept; the TTL does not
	// apply); on dense-KV models the prefix's pages go into the index,
	// pinned ahead of LRU eviction for the breakpoint's TTL (see
	// kvcache.Index.Pin). Pinned pages still give way, last of the cached
	// ones, before a running sequence is preempted or a request waits.
	Breakpoints []Breakpoint
	// Scope restricts snapshot reuse to one conversation (prompt_cache_key);
	// empty means any.
	Scope string
	// WarmUp marks a prefill-only request that exists to leave a snapshot
	// (MaxTokens 0); counted separately.
	WarmUp bool
	// FitMaxTokens makes MaxTokens an upper bound: Submit lowers it to what
	// the model's positions and the pool leave after the prompt, instead of
	// refusing the request.
	FitMaxTokens bool
	// Constraint, when set, restricts the tokens generated (structured
	// output): its mask is computed while the forward pass runs, applied
	// before sampling, and the token chosen is passed to Accept. A step
	// whose mask is empty ends the sequence (FinishStop, no token).
	Constraint Constraint
}

// Breakpoint is a prompt prefix to keep cached: its first Pos tokens, for
// TTL (0 means DefaultCacheTTL).
type Breakpoint struct {
	Pos int
	TTL time.Duration
}

// DefaultCacheTTL is how long a breakpoint's prefix stays pinned when it
// names no TTL.
const DefaultCacheTTL = 5 * time.Minute

// Constraint is a per-sequence token filter (grammar.Guide).
type Constraint interface {
	// Mask returns the tokens allowed next, or false when every token is
	// (nothing to apply). The mask stays valid until Accept.
	Mask() (grammar.Mask, bool)
	// Accept takes the token chosen next.
	Accept(id int32) error
	// Err says why an empty mask ends the sequence in error rather than
	// as complete output (nil: it is complete).
	Err() error
}

// Result is what a Request produced.
type Result struct {
	IDs              []int32
	PromptLastLogits []float32
	// Timing of the request: from the start of the run to its first token
	// (prefill) and from then to its last token (decode).
	Prefill, Decode time.Duration
}

// Generate runs all requests to completion together on an Engine — their
// prefill chunks and decode steps batched — and frees their KV pages before
// returning. It is the library form of a whole batch (the CLI, tests and
// benchmarks use it); the server drives an Engine step by step instead.
func Generate(ctx context.Context, m model.Model, dev gpu.Device, pool *kvcache.Pool, reqs []Request, opt Options) ([]Result, error) {
	e := New(m, dev, pool, opt)
	ids := make([]SeqID, len(reqs))
	index := map[SeqID]int{}
	defer func() {
		for _, id := range ids {
			e.Cancel(id)
		}
	}()
	for i, r := range reqs {
		id, err := e.Submit(r)
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		ids[i], index[id] = id, i
	}
	results := make([]Result, len(reqs))
	first := make([]time.Time, len(reqs))
	start := time.Now()
	for !e.Idle() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		events, err := e.Step()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		for _, ev := range events {
			i := index[ev.Seq]
			r := &results[i]
			if ev.PromptLogits != nil {
				r.PromptLastLogits = ev.PromptLogits
			}
			if first[i].IsZero() {
				first[i] = now
				r.Prefill = now.Sub(start)
			}
			if ev.HasToken {
				r.IDs = append(r.IDs, ev.Token)
			}
			if ev.Finish != NotFinished {
				r.Decode = now.Sub(first[i])
			}
		}
	}
	return results, nil
}

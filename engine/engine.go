package engine

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/sample"
)

// SeqID names a submitted request inside an Engine.
type SeqID uint64

// FinishReason says why a sequence ended.
type FinishReason uint8

const (
	// NotFinished: the sequence is still running.
	NotFinished FinishReason = iota
	// FinishStop: a stop id was sampled (or Finish was called).
	FinishStop
	// FinishLength: MaxTokens were generated.
	FinishLength
	// FinishCancelled: Cancel was called.
	FinishCancelled
	// FinishError: the request could not run (see Event.Err).
	FinishError
)

func (f FinishReason) String() string {
	return [...]string{"", "stop", "length", "cancelled", "error"}[f]
}

// Event is what one step produced for one sequence: a token, an end, or both.
type Event struct {
	Seq      SeqID
	Token    int32
	HasToken bool
	Finish   FinishReason
	Err      error
	// Logits of the distribution Token was drawn from (only for requests
	// with WantPromptLogits, first token only). Owned by the receiver.
	PromptLogits []float32
	// Logprob of Token and the most likely alternatives (requests with
	// Logprobs).
	Logprob float32
	Top     []sample.TokenLogprob
	// PromptTokens is the prompt length and CachedTokens how many of its
	// tokens were reused from the prefix cache (set on the first event).
	PromptTokens, CachedTokens int
}

// Stats is a snapshot of the engine's state.
type Stats struct {
	Waiting, Running     int
	PagesUsed, PagesFree int
	Preemptions          int64
	PromptTokens         int64 // prefilled, counting recomputation
	GeneratedTokens      int64
	Steps                int64
	CachedTokens         int64 // prompt tokens reused from the prefix cache
	WarmUps              int64 // warm-up prefills run
	Cache                kvcache.IndexStats
	Snapshots            kvcache.SnapshotStats
}

// Options tune an Engine.
type Options struct {
	// StepTokens is the most tokens one step feeds (prefill chunks plus one
	// per decoding sequence): the chunked-prefill budget. 0 means 512.
	StepTokens int
	// MaxRunning caps the sequences admitted at once; 0 means 64.
	MaxRunning int
	// PrefixCache reuses the KV pages of earlier sequences' common prefixes
	// (dense-KV models: every layer's state can be cut back to a prefix).
	// On models whose state cannot be cut back (recurrent, hybrid) it keeps
	// whole-state snapshots instead: at each request's history boundary and
	// at the end of each healthy generation.
	PrefixCache bool
	// SnapshotBudget bounds the snapshots' memory in bytes; 0 derives it
	// from the model's per-sequence state (8 conversations per running
	// sequence, at least 64 MiB).
	SnapshotBudget int64
	// MaxModelLen caps one request's positions (prompt plus max tokens)
	// below the model's max_position_embeddings; 0 means the model's.
	MaxModelLen int
	// StepStretch keeps streams smooth while prompts are prefilled: a step
	// that feeds prefill tokens beside decoding sequences is sized (from
	// the measured cost of a decode step and of a prefill token) to last
	// at most StepStretch decode steps. 0 means 2; 1 or less turns it off
	// (prefill then takes all of StepTokens that decoding leaves).
	StepStretch float64
	// Now is the clock that times steps for StepStretch; nil means
	// time.Now.
	Now func() time.Time
	// OnCached, when set, is told of every token prefix the prompt cache
	// takes in (a finished or cut-short sequence's pages, a snapshot) or
	// serves (a reuse), with the request's cache scope; snapshot says
	// which kind. A cluster replica keeps from it the digest of cached
	// prefixes it publishes for routing. It runs on the engine's goroutine
	// and must not keep tokens.
	OnCached func(scope string, tokens []int32, snapshot bool)
	// NoBoundarySnapshots is the history-boundary kill switch (troupe
	// serve --boundary-snapshots off) on the engine's side, for jobs
	// prepared elsewhere (a cluster gateway's): with the snapshot cache,
	// a request's Boundary is ignored and WarmUps reports false. A dense-KV
	// prefix cache keeps its boundaries (they only hand computed pages to
	// the index), and the snapshot at the end of a healthy generation is
	// still taken.
	NoBoundarySnapshots bool
}

// seq is one request's progress.
type seq struct {
	id      SeqID
	req     Request
	kv      kvcache.Seq
	sampler *sample.Sampler
	// tokens is what the KV must cover before the next sample: the prompt,
	// then (after a preemption) the prompt plus everything generated.
	tokens    []int32
	fed       int // tokens in the KV
	generated []int32
	admitted  bool
	cached    int  // prompt tokens taken from the prefix cache at admission
	boundary  bool // the history-boundary snapshot was taken
	bp        int  // the next of req.Breakpoints not yet kept
	// The constraint's mask for the coming token (masked: there is one)
	// and its refusal of the last token, if any.
	mask     grammar.Mask
	masked   bool
	guideErr error
}

// Engine is continuous batching over one model and one KV pool. Each Step
// feeds one forward pass: a new token for every decoding sequence plus
// prefill chunks of admitted sequences under the step budget, admitting
// waiting requests in order while pages and the budget allow. When a
// running sequence needs a page and none is free, the most recently
// admitted sequence younger than it is preempted (or, with none, itself):
// its pages are freed and it is requeued to recompute its prompt and
// generated tokens, so no sequence ever sees a corrupted cache, and the
// oldest sequence always progresses (see Step).
//
// An Engine is not safe for concurrent use; one owner (the scheduler actor)
// drives it.
type Engine struct {
	m      model.Model
	dev    gpu.Device
	pool   *kvcache.Pool
	opt    Options
	vocab  int
	nextID SeqID
	// parallelSample is parallelSampleWork (tests lower it).
	parallelSample int

	waiting []*seq // FIFO; preempted sequences go to the front
	running []*seq // admission order
	byID    map[SeqID]*seq
	stats   Stats

	batch  []model.Seq
	owners []*seq
	events []Event
	lsm    []float32
	// preempted records that this step preempted a sequence (admission
	// then waits for the next step).
	preempted bool
	// admitBlocked records that the first waiting request could not get
	// its pages even after reusing its cached prefix; admission waits until
	// a sequence ends or is preempted (nothing else frees pages), so the
	// cache is not looked up, pinned and released again every step.
	admitBlocked bool
	index        *kvcache.Index        // prefix cache of dense-KV models; nil when off
	snaps        *kvcache.SnapshotPool // snapshot cache of the others; nil when off
	cad          cadence               // prefill budget beside decoding streams
	picked       []int32               // the token sampled for each batch entry (sampleAll)
	picks        []pick                // sampleAll's work list
}

// pick is a batch entry to sample from, with its logits.
type pick struct {
	i  int
	lg []float32
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// New returns an engine over m, dev and pool.
func New(m model.Model, dev gpu.Device, pool *kvcache.Pool, opt Options) *Engine {
	if opt.StepTokens <= 0 {
		opt.StepTokens = 512
	}
	if opt.MaxRunning <= 0 {
		opt.MaxRunning = 64
	}
	if opt.StepStretch == 0 {
		opt.StepStretch = 2
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	e := &Engine{m: m, dev: dev, pool: pool, opt: opt, vocab: m.Info().Vocab, byID: map[SeqID]*seq{},
		cad: cadence{stretch: opt.StepStretch}, parallelSample: parallelSampleWork}
	switch {
	case !opt.PrefixCache:
	case model.SnapshotReuse(m.Cache()):
		budget := opt.SnapshotBudget
		if budget <= 0 {
			var perSeq int64
			for _, n := range model.PoolLayout(m.Cache()).StateSizes {
				perSeq += int64(4 * n)
			}
			budget = max(64<<20, 8*int64(opt.MaxRunning)*perSeq)
		}
		e.snaps = kvcache.NewSnapshotPool(budget)
	default:
		e.index = kvcache.NewIndexClock(pool, opt.Now)
	}
	return e
}

// Reusable reports how many tokens of prompt the cache would reuse if it
// were admitted now (at least one token is always computed).
func (e *Engine) Reusable(prompt []int32, scope string) int {
	if len(prompt) < 2 {
		return 0
	}
	switch {
	case e.index != nil:
		return e.index.Peek(prompt[:len(prompt)-1], scope)
	case e.snaps != nil:
		return e.snaps.Peek(prompt[:len(prompt)-1], scope)
	}
	return 0
}

// SnapshotCache reports whether prompt reuse works by whole-state snapshots.
func (e *Engine) SnapshotCache() bool { return e.snaps != nil }

// SnapshotBudget is the snapshot cache's byte budget (0 when off).
func (e *Engine) SnapshotBudget() int64 {
	if e.snaps == nil {
		return 0
	}
	return e.snaps.Budget()
}

// PrefixCache reports whether the prefix cache (pages or snapshots) is on.
func (e *Engine) PrefixCache() bool { return e.index != nil || e.snaps != nil }

// WarmUps reports whether warm-up requests are worth running: the prompt
// cache is on, and it is not a snapshot cache with boundary snapshots off
// (Options.NoBoundarySnapshots), where a warm-up would be one.
func (e *Engine) WarmUps() bool {
	return e.PrefixCache() && !(e.snaps != nil && e.opt.NoBoundarySnapshots)
}

// ResetCache drops every cached prefix (pages of running sequences stay).
func (e *Engine) ResetCache() {
	if e.index != nil {
		e.index.Reset()
	}
	if e.snaps != nil {
		e.snaps.Reset()
	}
}

// ErrTooLong is returned for a request that can never fit the pool or the
// model's positions.
var ErrTooLong = errors.New("engine: request too long")

// Submit queues a request. It validates it first; an invalid request is
// rejected here and never queued.
func (e *Engine) Submit(r Request) (SeqID, error) {
	if len(r.Prompt) == 0 {
		return 0, errors.New("engine: empty prompt")
	}
	for _, id := range r.Prompt {
		if id < 0 || int(id) >= e.vocab {
			return 0, fmt.Errorf("engine: prompt token %d outside the vocabulary of %d", id, e.vocab)
		}
	}
	if r.MaxTokens < 0 {
		return 0, fmt.Errorf("engine: max tokens %d is negative", r.MaxTokens)
	}
	if err := r.Sample.Validate(); err != nil {
		return 0, fmt.Errorf("engine: %w", err)
	}
	maxTokens, err := LimitsOf(e.m, e.pool, e.opt.MaxModelLen).Admit(len(r.Prompt), r.MaxTokens, r.FitMaxTokens)
	if err != nil {
		return 0, err
	}
	r.MaxTokens = maxTokens
	if e.snaps != nil && e.opt.NoBoundarySnapshots {
		r.Boundary = 0
	}
	r.Breakpoints = validBreakpoints(r.Breakpoints, len(r.Prompt))
	e.nextID++
	s := &seq{id: e.nextID, req: r, sampler: sample.New(r.Sample, r.Prompt), tokens: slices.Clip(slices.Clone(r.Prompt))}
	e.waiting = append(e.waiting, s)
	e.byID[s.id] = s
	return s.id, nil
}

// Cancel ends a sequence now, freeing its pages; it reports whether the
// sequence was known. No event is emitted for it.
func (e *Engine) Cancel(id SeqID) bool {
	s, ok := e.byID[id]
	if !ok {
		return false
	}
	e.drop(s)
	return true
}

func (e *Engine) drop(s *seq) {
	e.admitBlocked = false
	e.donate(s)
	e.pool.Free(&s.kv)
	delete(e.byID, s.id)
	e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
}

// finish ends a sequence that generated to its end: its final state is
// worth keeping for the next turn of its conversation.
func (e *Engine) finish(s *seq) {
	if e.snaps != nil && s.kv.Len > 0 {
		e.snapshot(s, false)
	}
	if s.req.WarmUp {
		e.stats.WarmUps++
	}
	e.drop(s)
}

// snapshot stores the whole state of s (covering its fed tokens); kept
// marks a cache breakpoint's (kvcache.SnapshotPool.PutKept).
func (e *Engine) snapshot(s *seq, kept bool) {
	snap, err := e.m.Snapshot(e.pool, &s.kv, s.tokens[:s.kv.Len])
	if err == nil {
		if kept {
			e.snaps.PutKept(snap, s.req.Scope)
		} else {
			e.snaps.Put(snap, s.req.Scope)
		}
		e.cached(s.req.Scope, s.tokens[:s.kv.Len], true)
	}
}

// cached tells Options.OnCached of a prefix taken into or served from the
// prompt cache.
func (e *Engine) cached(scope string, tokens []int32, snapshot bool) {
	if e.opt.OnCached != nil && len(tokens) > 0 {
		e.opt.OnCached(scope, tokens, snapshot)
	}
}

// donate records the positions s has computed in the prefix cache, so later
// requests sharing the prefix reuse its pages.
func (e *Engine) donate(s *seq) {
	if e.index != nil && s.kv.Len > 0 {
		e.index.Insert(s.tokens[:s.kv.Len], s.kv.Pages[:e.pool.PagesFor(s.kv.Len)], s.req.Scope)
		e.cached(s.req.Scope, s.tokens[:s.kv.Len], false)
	}
}

// reuse starts a newly admitted sequence from the longest cached prefix of
// its tokens (keeping at least one token to compute, whose logits start the
// generation). A prefix ending inside a page gets a private copy of that
// page. It returns the prompt tokens to report as cached if the admission
// goes through (0 for a recompute after preemption).
func (e *Engine) reuse(s *seq) int {
	if s.fed > 0 || len(s.tokens) < 2 {
		return 0
	}
	if e.snaps != nil {
		return e.restore(s)
	}
	if e.index == nil {
		return 0
	}
	pages, matched, partial, partialLen := e.index.Lookup(s.tokens[:len(s.tokens)-1], s.req.Scope)
	if partial >= 0 {
		fresh, err := e.pool.Alloc(1)
		if err != nil && e.index.Evict(1) > 0 {
			fresh, err = e.pool.Alloc(1)
		}
		if err != nil { // no room for the copy: reuse the whole pages only
			matched -= partialLen
		} else {
			kvcache.CopyPage(e.pool, fresh[0], partial, partialLen)
			pages = append(pages, fresh[0])
		}
		e.pool.Release([]int32{partial})
	}
	if matched == 0 {
		e.pool.Release(pages)
		return 0
	}
	s.kv.Pages = append(s.kv.Pages[:0], pages...)
	s.kv.Len, s.fed = matched, matched
	e.cached(s.req.Scope, s.tokens[:matched], false)
	if len(s.generated) > 0 { // a recompute after preemption
		return 0
	}
	return matched
}

// restore starts s from the longest stored snapshot of a prefix of its
// tokens (keeping at least one token to compute).
func (e *Engine) restore(s *seq) int {
	found := e.snaps.Lookup(s.tokens[:len(s.tokens)-1], s.req.Scope)
	snap, ok := found.(*model.Snapshot)
	if !ok {
		return 0
	}
	kv, err := snap.Restore(e.pool)
	if err != nil {
		return 0 // no room: compute from the start
	}
	s.kv = *kv
	s.fed = kv.Len
	e.cached(s.req.Scope, s.tokens[:kv.Len], true)
	if len(s.generated) > 0 || s.req.WarmUp {
		return 0
	}
	return kv.Len
}

// validBreakpoints keeps the breakpoints inside the prompt (1..n-1) that
// rise strictly.
func validBreakpoints(bps []Breakpoint, n int) []Breakpoint {
	var out []Breakpoint
	last := 0
	for _, b := range bps {
		if b.Pos > last && b.Pos < n {
			out = append(out, b)
			last = b.Pos
		}
	}
	return out
}

// nextBreakpoint is the position of the first breakpoint of s past its fed
// tokens (0 when none).
func (s *seq) nextBreakpoint() int {
	for _, b := range s.req.Breakpoints[s.bp:] {
		if b.Pos > s.fed {
			return b.Pos
		}
	}
	return 0
}

// keepBreakpoints keeps the prefixes of the breakpoints s has now computed
// (see Request.Breakpoints): a snapshot at each on snapshot-reuse models
// (prefill stopped there; one passed by a restored snapshot is already
// covered by it), and on dense-KV models the prefix's pages inserted into
// the index and pinned for the breakpoint's TTL. Pinning again a prefix
// that was reused extends its pin, as a cache hit refreshes Anthropic's.
func (e *Engine) keepBreakpoints(s *seq) {
	for s.bp < len(s.req.Breakpoints) {
		b := s.req.Breakpoints[s.bp]
		if b.Pos > s.fed {
			return
		}
		s.bp++
		switch {
		case e.snaps != nil:
			if b.Pos == s.fed {
				e.snapshot(s, true)
			}
		case e.index != nil:
			ttl := b.TTL
			if ttl <= 0 {
				ttl = DefaultCacheTTL
			}
			prefix := s.tokens[:b.Pos]
			e.index.Insert(prefix, s.kv.Pages[:e.pool.PagesFor(b.Pos)], s.req.Scope)
			e.index.Pin(prefix, s.req.Scope, e.opt.Now().Add(ttl))
			e.cached(s.req.Scope, prefix, false)
		}
	}
}

// Idle reports whether there is nothing to step.
func (e *Engine) Idle() bool { return len(e.waiting) == 0 && len(e.running) == 0 }

// Stats returns counters and the current occupancy.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Waiting, s.Running = len(e.waiting), len(e.running)
	s.PagesFree = e.pool.FreePages()
	s.PagesUsed = e.pool.NumPages() - s.PagesFree
	if e.index != nil {
		s.Cache = e.index.Stats()
	}
	if e.snaps != nil {
		s.Snapshots = e.snaps.Stats()
	}
	return s
}

// reserve makes room in the pool for s to cover total positions. It first
// evicts cached prefixes nobody uses, then preempts running sequences
// admitted after s (the youngest first) that are not yet in this step's
// batch; it never touches an older sequence, so the oldest running sequence
// can always take the whole pool (Submit refuses a request the pool cannot
// hold alone) and some sequence progresses every step. When that is not
// enough, reserve reports false (the caller decides whether s waits or
// gives its own pages back). With preempt false (admission, or a shorter
// chunk) nobody is preempted.
func (e *Engine) reserve(s *seq, total int, preempt bool) bool {
	for {
		err := e.pool.Reserve(&s.kv, total)
		if err == nil {
			err = e.pool.EnsureSlot(&s.kv)
		}
		if err == nil {
			return true
		}
		if e.index != nil && e.index.Evict(e.pool.PagesFor(total)-len(s.kv.Pages)) > 0 {
			continue // cached prefixes nobody uses go before running sequences
		}
		victim := e.youngerVictim(s)
		if !preempt || victim == nil {
			return false
		}
		e.preempt(victim)
	}
}

// youngerVictim is the most recently admitted running sequence admitted
// after s and not in this step's batch, or nil.
func (e *Engine) youngerVictim(s *seq) *seq {
	for i := len(e.running) - 1; i >= 0; i-- {
		r := e.running[i]
		if r == s {
			return nil
		}
		if !slices.Contains(e.owners, r) {
			return r
		}
	}
	return nil
}

// preempt frees a running sequence and requeues it (at the front) to
// recompute everything it has so far.
func (e *Engine) preempt(s *seq) {
	e.donate(s)
	e.pool.Free(&s.kv)
	s.fed = 0
	s.admitted = false
	s.tokens = append(slices.Clone(s.req.Prompt), s.generated...)
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.waiting = append([]*seq{s}, e.waiting...)
	e.stats.Preemptions++
	e.preempted = true
	e.admitBlocked = false
}

// Step runs one forward pass and returns its events (nil when idle). The
// returned slice is reused by the next call.
//
// Scheduling, and why it always progresses:
//  1. Every decoding sequence gets its next token, oldest first.
//  2. Admitted sequences still prefilling get their next chunk, oldest
//     first, under the step's token budget; beside decoding sequences that
//     budget is what keeps the step within StepStretch decode steps
//     (cadence), so a long prompt does not stall the running streams.
//  3. Waiting requests are admitted in order while the budget, MaxRunning,
//     free state slots and free (or evictable) pages allow. Admission never
//     preempts: a request that cannot get its first chunk's pages stays
//     first in line (and nothing behind it overtakes it).
//
// A running sequence short of pages may preempt only younger ones (see
// reserve), and a decoding sequence with nobody younger to preempt
// preempts itself, giving its pages back to its elders. So the oldest
// running sequence always gets its token or chunk unless younger ones
// already took this step's budget or pages with decodes of their own — and
// those progress. Every step therefore feeds at least one token, and the
// work of one step is bounded by the number of sequences.
func (e *Engine) Step() ([]Event, error) {
	e.batch, e.owners, e.events = e.batch[:0], e.owners[:0], e.events[:0]
	e.preempted = false
	budget := e.opt.StepTokens
	// 1. Decodes. (A preemption while reserving removes sequences from
	// running, so iterate over a copy and skip those no longer admitted.)
	for _, s := range slices.Clone(e.running) {
		if !s.admitted || len(s.generated) == 0 || s.fed != len(s.tokens)-1 || budget == 0 {
			continue // not decoding: no token yet, or recomputing after a preemption
		}
		if e.reserve(s, s.fed+1, true) {
			e.add(s, s.tokens[s.fed:s.fed+1])
			budget--
		} else if len(e.running) > 1 {
			e.preempt(s) // its elders need the pages more
		}
	}
	// 2. Prefill chunks of admitted sequences, beside decoding ones only
	// what keeps the step within StepStretch decode steps.
	decoders := len(e.batch)
	budget = e.cad.budget(decoders, budget)
	for _, s := range slices.Clone(e.running) {
		if budget == 0 {
			break
		}
		if s.admitted && s.fed < len(s.tokens) && !slices.Contains(e.owners, s) {
			budget -= e.prefill(s, budget, true)
		}
	}
	// 3. Admission, unless this step had to preempt: readmitting what was
	// just preempted would only thrash.
	for budget > 0 && !e.preempted && !e.admitBlocked && len(e.waiting) > 0 && len(e.running) < e.opt.MaxRunning {
		s := e.waiting[0]
		n := min(budget, len(s.tokens))
		free := e.pool.FreePages()
		if e.index != nil {
			free += e.index.Evictable()
		}
		if e.pool.PagesFor(n) > free || (e.pool.HasState() && e.pool.FreeSlots() == 0) {
			break // admission waits for free pages
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
		s.admitted = true
		cached := e.reuse(s)
		fed := e.prefill(s, budget, false)
		if fed == 0 { // the reused pages left too little room: undo, wait
			e.pool.Free(&s.kv)
			s.fed, s.admitted = 0, false
			e.running = e.running[:len(e.running)-1]
			e.waiting = append([]*seq{s}, e.waiting...)
			e.admitBlocked = true
			break
		}
		if cached > 0 {
			s.cached = min(cached, len(s.req.Prompt))
			e.stats.CachedTokens += int64(s.cached)
		}
		budget -= fed
	}
	if len(e.batch) == 0 {
		if len(e.running) > 0 || len(e.waiting) > 0 {
			return nil, errors.New("engine: no sequence could be scheduled (KV pool exhausted)")
		}
		return nil, nil
	}
	began := e.opt.Now()
	masks := e.startMasks()
	logits, err := e.m.Forward(e.dev, e.pool, e.batch)
	masks()
	if err != nil {
		return nil, err
	}
	fed := 0
	for _, b := range e.batch {
		fed += len(b.Tokens)
	}
	e.cad.observe(e.opt.Now().Sub(began), decoders, fed-decoders)
	e.stats.Steps++
	e.sampleAll(logits)
	row := 0
	for i, b := range e.batch {
		s := e.owners[i]
		s.fed += len(b.Tokens)
		s.kv.Len = s.fed
		if !s.boundary && s.req.Boundary > 0 {
			switch {
			case e.snaps != nil && s.fed == s.req.Boundary:
				s.boundary = true
				e.snapshot(s, false)
			case e.index != nil && s.fed >= s.req.Boundary:
				// Dense KV: the pages computed so far go into the index now,
				// while s runs on (it only appends past them).
				s.boundary = true
				e.donate(s)
			}
		}
		e.keepBreakpoints(s)
		if s.fed <= len(s.req.Prompt) {
			e.stats.PromptTokens += int64(len(b.Tokens))
		}
		if b.Logits == model.NoLogits {
			continue
		}
		lg := logits[row*e.vocab : (row+1)*e.vocab]
		row++
		ev := Event{Seq: s.id}
		if len(s.generated) == 0 && s.req.WantPromptLogits {
			ev.PromptLogits = slices.Clone(lg)
		}
		if len(s.generated) >= s.req.MaxTokens {
			ev.Finish = FinishLength
		} else if id := e.picked[i]; id < 0 || s.guideErr != nil {
			// The constraint allows nothing more (its output is complete
			// and no stop id may follow, or it cannot go on: Err), or
			// refused the token.
			ev.Finish = FinishStop
			if id < 0 && s.guideErr == nil {
				s.guideErr = s.req.Constraint.Err()
			}
			if s.guideErr != nil {
				ev.Finish, ev.Err = FinishError, fmt.Errorf("engine: constrained output: %w", s.guideErr)
			}
		} else {
			if s.req.Logprobs {
				e.lsm = grow(e.lsm, len(lg))
				sample.LogSoftmax(e.lsm, lg)
				ev.Logprob = e.lsm[id]
				if s.req.TopLogprobs > 0 {
					ev.Top = sample.TopLogprobs(lg, s.req.TopLogprobs)
				}
			}
			if len(s.generated) == 0 {
				ev.PromptTokens, ev.CachedTokens = len(s.req.Prompt), s.cached
			}
			s.generated = append(s.generated, id)
			s.tokens = append(s.tokens, id)
			ev.Token, ev.HasToken = id, true
			e.stats.GeneratedTokens++
			switch {
			case slices.Contains(s.req.StopIDs, id):
				ev.Finish = FinishStop
			case len(s.generated) >= s.req.MaxTokens:
				ev.Finish = FinishLength
			}
		}
		if ev.Finish != NotFinished {
			e.finish(s)
		}
		e.events = append(e.events, ev)
	}
	return e.events, nil
}

// startMasks computes, on another goroutine, the constraint masks of the
// batch's sequences that sample this step, and returns the function that
// waits for them: the forward pass runs meanwhile, so a mask costs a
// constrained sequence nothing while it takes less than the pass.
func (e *Engine) startMasks() (wait func()) {
	var guided []*seq
	for i, b := range e.batch {
		if s := e.owners[i]; b.Logits != model.NoLogits && s.req.Constraint != nil && len(s.generated) < s.req.MaxTokens {
			guided = append(guided, s)
		}
	}
	if len(guided) == 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range guided {
			s.mask, s.masked = s.req.Constraint.Mask()
		}
	}()
	return func() { <-done }
}

// sampleOne samples the next token of s from its logits row, under its
// constraint's mask when it has one; -1 when the mask allows nothing.
func sampleOne(s *seq, lg []float32) int32 {
	c := s.req.Constraint
	if c == nil {
		return s.sampler.Sample(lg)
	}
	var id int32
	if s.masked {
		id = s.sampler.SampleAllowed(lg, s.mask)
		s.masked = false
	} else {
		id = s.sampler.Sample(lg)
	}
	if id >= 0 {
		s.guideErr = c.Accept(id)
	}
	return id
}

// parallelSampleWork is the sampling work of a step from which sampleAll
// spreads the sequences over goroutines, counted per logit: 1 for a
// sequence that takes the argmax, drawCost for one that draws. Below it
// they are sampled in turn on the stepping goroutine: the CPU device's
// threads are still spinning down from the forward pass on the other
// cores, and waking goroutines there costs more than it saves. Measured on
// smollm2-135m Q4_0, 2 vCPUs, 8 sequences (49152-token vocabulary): greedy,
// 1690-1720 tok/s in turn against 1400-1500 in parallel; temperature 0.8
// with top-p 0.95, 985-1010 in parallel against 826-894 in turn; 2
// sequences drawing, even.
const parallelSampleWork = 1 << 21

// drawCost is a drawn token's sampling work per logit against an
// argmax's (sample.Sampler.Argmax).
const drawCost = 16

// sampleAll samples the next token of every batch entry that gets one into
// e.picked. Each sequence has its own sampler, so with enough work they run
// in parallel: a draw over the vocabulary costs hundreds of microseconds,
// and serially, between forward passes, that would hold up every stream.
func (e *Engine) sampleAll(logits []float32) {
	e.picked = slices.Grow(e.picked[:0], len(e.batch))[:len(e.batch)]
	picks := e.picks[:0]
	defer func() { e.picks = picks[:0] }()
	row, work := 0, 0
	for i, b := range e.batch {
		if b.Logits == model.NoLogits {
			continue
		}
		lg := logits[row*e.vocab : (row+1)*e.vocab]
		row++
		if s := e.owners[i]; len(s.generated) < s.req.MaxTokens {
			picks = append(picks, pick{i, lg})
			if s.req.Constraint == nil && s.sampler.Argmax() {
				work += len(lg)
			} else {
				work += drawCost * len(lg)
			}
		}
	}
	workers := min(len(picks), runtime.GOMAXPROCS(0))
	if workers <= 1 || work < e.parallelSample {
		for _, p := range picks {
			e.picked[p.i] = sampleOne(e.owners[p.i], p.lg)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for j := w; j < len(picks); j += workers {
				p := picks[j]
				e.picked[p.i] = sampleOne(e.owners[p.i], p.lg)
			}
		})
	}
	wg.Wait()
}

// prefill adds the next chunk of s (at most budget tokens) to the batch and
// returns its size; 0 if the pool had no room. When the whole chunk does
// not fit, a shorter one that does is taken: every token of prefill is
// progress.
func (e *Engine) prefill(s *seq, budget int, preempt bool) int {
	n := min(budget, len(s.tokens)-s.fed)
	if b := s.req.Boundary; e.snaps != nil && !s.boundary && s.fed < b && b < len(s.tokens) && s.fed+n > b {
		n = b - s.fed // stop exactly at the history boundary to snapshot it
	}
	if b := s.nextBreakpoint(); e.snaps != nil && b > 0 && s.fed+n > b {
		n = b - s.fed // and at each cache breakpoint
	}
	if !e.reserve(s, s.fed+n, preempt) {
		// Take what the pages s holds, free pages and evictable cached
		// prefixes cover.
		spare := e.pool.FreePages()
		if e.index != nil {
			spare += e.index.Evictable()
		}
		room := (len(s.kv.Pages)+spare)*e.pool.PageSize() - s.fed
		if e.pool.PagesFor(1) > 0 && room > 0 && room < n && e.reserve(s, s.fed+room, false) {
			n = room
		} else {
			return 0
		}
	}
	e.add(s, s.tokens[s.fed:s.fed+n])
	return n
}

func (e *Engine) add(s *seq, tokens []int32) {
	mode := model.NoLogits
	if s.fed+len(tokens) == len(s.tokens) {
		mode = model.LastLogits
	}
	e.batch = append(e.batch, model.Seq{Tokens: tokens, Pos: s.fed, Pages: s.kv.Pages, Slot: s.kv.Slot, Logits: mode})
	e.owners = append(e.owners, s)
}

package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/grammar"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/sample"
)

// SchedulerActor owns the engine, the device and the KV pool. It runs one
// engine step per step message it sends itself, so new jobs, cancellations
// and stats queries are handled between steps, never after a whole
// generation.
type SchedulerActor struct {
	opt      engine.Options
	metrics  *metrics.Metrics
	log      *slog.Logger
	progress *Progress

	eng      *engine.Engine
	pending  []pendingJob // jobs that arrived before the model
	failure  error        // the model failed to load
	byReq    map[string]engine.SeqID
	jobs     map[engine.SeqID]*jobState
	stepping bool
	warmUps  []*PrefillJob               // run only when the engine is otherwise idle; at most maxWarmUps
	warming  map[engine.SeqID]*warmState // warm-ups in the engine
	held     map[string]engine.SeqID     // requests waiting for a warm-up (by request id)
	idleAt   time.Time                   // when the engine last became idle
	warmWait bool                        // a warmUpTick is on its way
	last     *SchedulerStats             // counters already added to the metrics

	pool *kvcache.Pool // the engine's; closed when the actor stops
	// guides make the structured-output guides of constrained jobs.
	guides *grammar.Guides
}

type pendingJob struct {
	job    *PrefillJob
	sender *actor.PID
}

// warmState is a warm-up in the engine: its prompt and, on a snapshot
// engine, the requests that extend it, held until it has stored its
// snapshot (computing the same history beside it would be twice the work,
// and they would start from an older snapshot).
type warmState struct {
	prompt []int32
	held   []pendingJob
}

type jobState struct {
	id        string
	requester *actor.PID
}

// NewSchedulerActor returns the actor's producer. The actor reports its
// steps to progress (nil: a private one), which watchdogs read.
func NewSchedulerActor(opt engine.Options, m *metrics.Metrics, log *slog.Logger, progress *Progress) actor.Producer {
	if progress == nil {
		progress = &Progress{}
	}
	return func() actor.Actor {
		return &SchedulerActor{opt: opt, metrics: m, log: log, progress: progress, byReq: map[string]engine.SeqID{},
			jobs: map[engine.SeqID]*jobState{}, warming: map[engine.SeqID]*warmState{}, held: map[string]engine.SeqID{}}
	}
}

// maxWarmUps bounds the queued warm-ups: they only run when the engine is
// idle, so under steady traffic they would pile up. The oldest go first:
// newer turns of a conversation supersede them anyway.
const maxWarmUps = 32

// warmUpIdle is how long the engine must have been idle before a queued
// warm-up starts. A client in a tight loop (an agent whose tool answered
// at once, a benchmark) sends the next turn within milliseconds of the
// last token, and that turn computes the same history itself; a warm-up
// already in its step would hold it up for the length of the step.
const warmUpIdle = 50 * time.Millisecond

// warmUpTick asks the scheduler to look at its queued warm-ups again.
type warmUpTick struct{}

// Receive implements actor.Actor.
func (s *SchedulerActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *modelReady:
		s.eng = engine.New(msg.model, msg.dev, msg.pool, s.opt)
		s.pool = msg.pool
		s.guides = msg.guides
		s.idleAt = time.Now()
		s.publish()
		pending := s.pending
		s.pending = nil
		for _, p := range pending {
			s.submit(ctx, p.job, p.sender)
		}
	case *actor.Stopped:
		s.release()
	case *loadFailed:
		s.failure = msg.err
		pending := s.pending
		s.pending = nil
		s.metrics.QueueDepth.Set(0)
		for _, p := range pending {
			s.refuse(ctx, p.job, p.sender)
		}
	case *PrefillJob:
		if s.failure != nil {
			s.refuse(ctx, msg, ctx.Sender())
			return
		}
		if msg.WarmUp {
			// Dropped while the model loads, with the prompt cache off,
			// and on a snapshot cache with boundary snapshots off.
			if s.eng != nil && s.eng.WarmUps() && len(msg.Prompt) > 1 {
				if len(s.warmUps) == maxWarmUps {
					s.warmUps = slices.Delete(s.warmUps, 0, 1)
				}
				s.warmUps = append(s.warmUps, msg)
				s.kick(ctx)
			}
			return
		}
		if s.eng == nil {
			s.pending = append(s.pending, pendingJob{msg, ctx.Sender()})
			s.metrics.QueueDepth.Set(float64(len(s.pending)))
			return
		}
		s.submit(ctx, msg, ctx.Sender())
	case *CancelJob:
		s.cancel(msg.RequestId)
	case *step:
		s.stepping = false
		s.step(ctx)
	case *warmUpTick:
		s.warmWait = false
		s.kick(ctx)
	case *StatsQuery:
		ctx.Respond(s.stats())
	case *CacheProbe:
		n := 0
		if s.eng != nil {
			n = s.eng.Reusable(msg.Prompt, msg.CacheScope)
		}
		ctx.Respond(&CacheProbeResult{ReusableTokens: int32(n)})
	case *CacheReset:
		if s.eng != nil {
			s.warmUps = nil // they would refill the cache just emptied
			s.eng.ResetCache()
			s.publish()
		}
		ctx.Respond(s.stats())
	}
}

// refuse answers a job that can never run: the model failed to load.
func (s *SchedulerActor) refuse(ctx actor.Context, j *PrefillJob, requester *actor.PID) {
	if requester != nil && !j.WarmUp {
		ctx.Send(requester, &TokenEvent{RequestId: j.RequestId, FinishReason: "error",
			Error: (&Unavailable{Cause: s.failure}).Error(), Unavailable: true})
	}
}

// guide makes the structured-output guide of a constrained job: its plan
// compiled (cached by its bytes) over the model's vocabulary.
func (s *SchedulerActor) guide(j *PrefillJob) (*grammar.Guide, error) {
	if s.guides == nil {
		return nil, errors.New("structured output: this runtime has no tokenizer to follow a grammar with")
	}
	gd, err := s.guides.Guide(j.Constraint, j.StopIds)
	if err != nil {
		return nil, fmt.Errorf("structured output: %w", err)
	}
	return gd, nil
}

func (s *SchedulerActor) submit(ctx actor.Context, j *PrefillJob, requester *actor.PID) {
	p := j.GetSampling()
	req := engine.Request{
		Prompt: j.Prompt, MaxTokens: int(j.MaxTokens), StopIDs: j.StopIds,
		Sample: sample.Params{Temperature: p.GetTemperature(), TopK: int(p.GetTopK()), TopP: p.GetTopP(), MinP: p.GetMinP(),
			RepetitionPenalty: p.GetRepetitionPenalty(), PresencePenalty: p.GetPresencePenalty(),
			FrequencyPenalty: p.GetFrequencyPenalty(), Seed: p.GetSeed(), HasSeed: p.GetHasSeed()},
		Logprobs: j.Logprobs, TopLogprobs: int(j.TopLogprobs),
		Boundary: int(j.HistoryBoundary), Scope: j.CacheScope, FitMaxTokens: j.FitMaxTokens,
	}
	for i, pos := range j.CacheBreakpoints {
		bp := engine.Breakpoint{Pos: int(pos)}
		if i < len(j.CacheTtlSeconds) {
			bp.TTL = time.Duration(j.CacheTtlSeconds[i]) * time.Second
		}
		req.Breakpoints = append(req.Breakpoints, bp)
	}
	if len(j.Constraint) > 0 {
		gd, err := s.guide(j)
		if err != nil {
			if requester != nil {
				ctx.Send(requester, &TokenEvent{RequestId: j.RequestId, FinishReason: "error", Error: err.Error()})
			}
			return
		}
		req.Constraint = gd
	}
	if s.holdForWarmUp(j, requester) {
		return
	}
	s.yieldWarmUps()
	id, err := s.eng.Submit(req)
	if err != nil {
		if requester != nil {
			ctx.Send(requester, &TokenEvent{RequestId: j.RequestId, FinishReason: "error", Error: err.Error()})
		}
		return
	}
	s.byReq[j.RequestId] = id
	s.jobs[id] = &jobState{id: j.RequestId, requester: requester}
	s.kick(ctx)
}

func (s *SchedulerActor) cancel(reqID string) {
	if s.eng == nil {
		for i, p := range s.pending {
			if p.job.RequestId == reqID {
				s.pending = append(s.pending[:i], s.pending[i+1:]...)
				return
			}
		}
		return
	}
	if wid, ok := s.held[reqID]; ok {
		delete(s.held, reqID)
		if w := s.warming[wid]; w != nil {
			w.held = slices.DeleteFunc(w.held, func(p pendingJob) bool { return p.job.RequestId == reqID })
		}
		return
	}
	if id, ok := s.byReq[reqID]; ok {
		s.eng.Cancel(id)
		delete(s.byReq, reqID)
		delete(s.jobs, id)
		if s.eng.Idle() {
			s.idleAt = time.Now()
			s.progress.setIdle(s.idleAt, true)
		}
		s.publish()
	}
}

// holdForWarmUp holds a request on a snapshot engine while a warm-up of a
// prefix of its prompt runs (starting a queued one now): the warm-up's
// snapshot is what it will start from (see warmState). It reports whether
// the request was held.
func (s *SchedulerActor) holdForWarmUp(j *PrefillJob, requester *actor.PID) bool {
	if !s.eng.SnapshotCache() {
		return false
	}
	extends := func(prompt []int32) bool {
		return len(prompt) < len(j.Prompt) && slices.Equal(prompt, j.Prompt[:len(prompt)])
	}
	for id, w := range s.warming {
		if extends(w.prompt) {
			w.held = append(w.held, pendingJob{j, requester})
			s.held[j.RequestId] = id
			return true
		}
	}
	// a queued warm-up of its history starts now rather than after it
	for i, w := range s.warmUps {
		if !extends(w.Prompt) || s.eng.Reusable(w.Prompt, w.CacheScope) >= len(w.Prompt)-1 {
			continue
		}
		s.warmUps = slices.Delete(s.warmUps, i, i+1)
		id, err := s.eng.Submit(engine.Request{Prompt: w.Prompt, MaxTokens: 0, Scope: w.CacheScope, WarmUp: true})
		if err != nil {
			return false
		}
		s.warming[id] = &warmState{prompt: w.Prompt, held: []pendingJob{{j, requester}}}
		s.held[j.RequestId] = id
		return true
	}
	return false
}

// warmUpDone ends warm-up id (finished, failed or cancelled) and submits
// the requests it held.
func (s *SchedulerActor) warmUpDone(ctx actor.Context, id engine.SeqID) {
	w, ok := s.warming[id]
	if !ok {
		return
	}
	delete(s.warming, id)
	for _, p := range w.held {
		delete(s.held, p.job.RequestId)
		s.submit(ctx, p.job, p.sender)
	}
}

// yieldWarmUps makes room for a request: on a dense-KV engine the warm-ups
// in flight are cancelled, which keeps what they computed (a cancelled
// sequence's pages go to the prefix cache) and lets the request, usually
// the very turn the warm-up prepared for, start at the next step. On a
// snapshot engine a cut-short warm-up would leave no snapshot, so it runs
// on beside the request.
func (s *SchedulerActor) yieldWarmUps() {
	if len(s.warming) == 0 || s.eng.SnapshotCache() {
		return
	}
	for id := range s.warming { // none holds requests: only snapshot engines hold
		s.eng.Cancel(id)
		delete(s.warming, id)
	}
}

// startWarmUp starts the oldest queued warm-up once the engine has been idle
// for warmUpIdle (asking for a tick when it has not yet). A warm-up whose
// history is already cached, as when the next turn came first, is dropped.
func (s *SchedulerActor) startWarmUp(ctx actor.Context) {
	for len(s.warmUps) > 0 {
		if wait := warmUpIdle - time.Since(s.idleAt); wait > 0 {
			if !s.warmWait {
				s.warmWait = true
				sys, self := ctx.ActorSystem(), ctx.Self()
				time.AfterFunc(wait, func() { sys.Root.Send(self, &warmUpTick{}) })
			}
			return
		}
		w := s.warmUps[0]
		s.warmUps = s.warmUps[1:]
		if s.eng.Reusable(w.Prompt, w.CacheScope) >= len(w.Prompt)-1 {
			continue
		}
		id, err := s.eng.Submit(engine.Request{Prompt: w.Prompt, MaxTokens: 0, Scope: w.CacheScope, WarmUp: true})
		if err != nil {
			s.log.Debug("warm-up rejected", "err", err)
			continue
		}
		s.warming[id] = &warmState{prompt: w.Prompt}
		return
	}
}

func (s *SchedulerActor) kick(ctx actor.Context) {
	if s.eng != nil && s.eng.Idle() && len(s.warmUps) > 0 {
		s.startWarmUp(ctx)
	}
	if !s.stepping && s.eng != nil && !s.eng.Idle() {
		s.progress.busy(time.Now())
		s.stepping = true
		ctx.Send(ctx.Self(), &step{})
	}
}

func (s *SchedulerActor) step(ctx actor.Context) {
	if s.eng == nil {
		return
	}
	before := s.eng.Stats()
	events, err := s.eng.Step()
	now := time.Now()
	s.progress.stepped(now, s.eng.Idle())
	if s.eng.Idle() {
		s.idleAt = now
	}
	if err != nil {
		// A step that cannot run fails every running job rather than spin.
		s.log.Error("engine step failed", "err", err)
		for id, j := range s.jobs {
			s.eng.Cancel(id)
			ctx.Send(j.requester, &TokenEvent{RequestId: j.id, FinishReason: "error", Error: fmt.Sprintf("engine: %v", err)})
			delete(s.jobs, id)
			delete(s.byReq, j.id)
		}
		for id := range s.warming {
			s.eng.Cancel(id)
			s.warmUpDone(ctx, id)
		}
		s.idleAt = time.Now()
		s.progress.setIdle(s.idleAt, s.eng.Idle())
		return
	}
	after := s.eng.Stats()
	s.metrics.PromptTokens.Add(float64(after.PromptTokens - before.PromptTokens))
	s.metrics.GeneratedTokens.Add(float64(after.GeneratedTokens - before.GeneratedTokens))
	s.metrics.Preemptions.Add(float64(after.Preemptions - before.Preemptions))
	// The gauges are set before any event leaves: a client that has its last
	// token and then reads /metrics sees its pages already given back.
	s.publish()
	for _, ev := range events {
		if ev.Finish != engine.NotFinished {
			s.warmUpDone(ctx, ev.Seq)
		}
		j, ok := s.jobs[ev.Seq]
		if !ok {
			continue
		}
		te := &TokenEvent{RequestId: j.id, Token: ev.Token, HasToken: ev.HasToken, Logprob: ev.Logprob,
			PromptTokens: int32(ev.PromptTokens), CachedTokens: int32(ev.CachedTokens)}
		for _, t := range ev.Top {
			te.TopLogprobs = append(te.TopLogprobs, &TopLogprob{Token: t.ID, Logprob: t.Logprob})
		}
		if ev.Finish != engine.NotFinished {
			te.FinishReason = ev.Finish.String()
			delete(s.jobs, ev.Seq)
			delete(s.byReq, j.id)
		}
		if j.requester != nil {
			ctx.Send(j.requester, te)
		}
	}
	s.kick(ctx)
}

// release gives back the off-heap memory of the snapshots and the pool:
// the actor has stopped, so nothing steps on them any more.
func (s *SchedulerActor) release() {
	if s.eng == nil {
		return
	}
	s.eng.ResetCache()
	if err := s.pool.Close(); err != nil {
		s.log.Warn("closing the KV pool", "err", err)
	}
	s.eng = nil
}

func (s *SchedulerActor) publish() {
	st := s.stats()
	m := s.metrics
	m.QueueDepth.Set(float64(st.Waiting))
	m.Running.Set(float64(st.Running))
	m.KVPagesUsed.Set(float64(st.PagesUsed))
	m.KVPagesFree.Set(float64(st.PagesFree))
	if p := s.pool; p != nil {
		m.StateSlotsUsed.Set(float64(p.NumSlots() - p.FreeSlots()))
		m.StateSlotsFree.Set(float64(p.FreeSlots()))
		m.KVPoolBytes.Set(float64(p.Bytes()))
		m.KVBytesInUse.Set(float64(p.BytesInUse()))
	}
	m.SnapshotBudget.Set(float64(st.SnapshotBudget))
	m.SnapshotBytes.Set(float64(st.SnapshotBytes))
	last := s.last
	if last == nil {
		last = &SchedulerStats{}
	}
	add := func(c interface{ Add(float64) }, now, before int64) {
		if now > before {
			c.Add(float64(now - before))
		}
	}
	add(m.CacheLookups, st.CacheLookups, last.CacheLookups)
	add(m.CacheHits, st.CacheHits, last.CacheHits)
	add(m.CachedTokens, st.CachedTokens, last.CachedTokens)
	add(m.CacheInserts, st.CacheInserts, last.CacheInserts)
	add(m.CacheEvictions, st.CacheEvictions, last.CacheEvictions)
	add(m.CacheSupersedes, st.SnapshotSupersedes, last.SnapshotSupersedes)
	add(m.CacheWarmUps, st.WarmUps, last.WarmUps)
	add(m.CachePins, st.CachePins, last.CachePins)
	add(m.CachePinEvictions, st.CachePinEvictions, last.CachePinEvictions)
	add(m.CacheMisses.WithLabelValues("no_candidate"), st.MissNoCandidate, last.MissNoCandidate)
	add(m.CacheMisses.WithLabelValues("prefix_too_short"), st.MissTooShort, last.MissTooShort)
	add(m.CacheMisses.WithLabelValues("diverged"), st.MissDiverged, last.MissDiverged)
	s.last = st
}

func (s *SchedulerActor) stats() *SchedulerStats {
	if s.eng == nil {
		return &SchedulerStats{Waiting: int32(len(s.pending))}
	}
	st := s.eng.Stats()
	c, sn := st.Cache, st.Snapshots
	kind := "dense_kv_prefix"
	lookups, hits, hitTokens, inserts, evictions := c.Lookups, c.Hits, c.HitTokens, c.Inserts, c.Evictions
	if s.eng.SnapshotCache() {
		kind = "snapshot"
		lookups, hits, hitTokens, inserts, evictions = sn.Lookups, sn.Hits, sn.HitTokens, sn.Inserts, sn.Evictions
	}
	return &SchedulerStats{Waiting: int32(st.Waiting), Running: int32(st.Running), PagesUsed: int32(st.PagesUsed),
		PagesFree: int32(st.PagesFree), Preemptions: st.Preemptions, PromptTokens: st.PromptTokens,
		GeneratedTokens: st.GeneratedTokens, Steps: st.Steps,
		CacheEnabled: s.eng.PrefixCache(), CacheKind: kind, CacheLookups: lookups, CacheHits: hits, CacheHitTokens: hitTokens,
		CachedTokens: st.CachedTokens, CacheInserts: inserts, CacheEvictions: evictions,
		CachePages: int32(c.Pages), CacheTokens: int64(c.Tokens),
		SnapshotEntries: sn.Entries, SnapshotBytes: sn.Bytes, SnapshotBudget: s.eng.SnapshotBudget(), SnapshotSupersedes: sn.Supersedes,
		MissNoCandidate: sn.NoCandidate, MissTooShort: sn.TooShort, MissDiverged: sn.Diverged,
		LastMissCommonTokens: int32(sn.LastDivergedAt), LastMissSnapshotTokens: int32(sn.LastDivergedOf),
		WarmUps: st.WarmUps, CachePins: c.Pins, CachePinEvictions: c.PinEvictions}
}

// stepTimeout bounds how long callers wait on the scheduler's answers.
const stepTimeout = 5 * time.Second

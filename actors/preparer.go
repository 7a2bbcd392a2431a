package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/metrics"
)

// RequestPreparer renders and tokenizes requests. It is stateless apart from
// the model's assets and capability, so a pool of them scales with cores.
type RequestPreparer struct {
	modelPID   *actor.PID
	metrics    *metrics.Metrics
	log        *slog.Logger
	assets     *chat.Assets
	capability Capability
	// boundary is the runtime's kill switch: off renders no history
	// boundary and prepares no snapshot warm-up, whatever the capability.
	boundary BoundarySnapshots
	waiting  []waitingPrepare // requests that arrived before the assets
	failure  error            // the model failed to load
	// hook, when set, runs before each preparation (tests inject panics).
	hook func(*Prepare)
}

type waitingPrepare struct {
	msg    *Prepare
	sender *actor.PID
}

// NewRequestPreparer returns the actor's producer. boundary is the
// runtime's history-boundary kill switch (BoundarySnapshots; "" is auto):
// it applies to every request the preparer answers, so no sender can make
// the gate looser than the runtime's setting.
func NewRequestPreparer(modelPID *actor.PID, m *metrics.Metrics, log *slog.Logger, hook func(*Prepare), boundary BoundarySnapshots) actor.Producer {
	return func() actor.Actor {
		return &RequestPreparer{modelPID: modelPID, metrics: m, log: log, hook: hook, boundary: boundary}
	}
}

// Receive implements actor.Actor.
func (p *RequestPreparer) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started, *actor.Restarting:
		// A fresh or restarted preparer knows nothing: ask the ModelActor
		// before preparing anything (requests wait until the assets come).
		p.assets, p.capability = nil, CapabilityUnknownYet
		ctx.Request(p.modelPID, &registerPreparer{})
	case *registration:
		if msg.capability != nil {
			p.setCapability(msg.capability)
		}
		if msg.assets != nil {
			p.setAssets(ctx, msg.assets)
		}
		if msg.failure != nil {
			p.fail(ctx, msg.failure)
		}
	case *loadFailed:
		p.fail(ctx, msg.err)
	case *assetsReady:
		p.setAssets(ctx, msg.assets)
	case *CapabilityReady:
		p.setCapability(msg)
		ctx.Respond(&CapabilityAck{})
	case *Prepare:
		if p.failure != nil {
			p.refuse(ctx, ctx.Sender())
			return
		}
		if p.assets == nil {
			p.waiting = append(p.waiting, waitingPrepare{msg, ctx.Sender()})
			return
		}
		p.prepare(ctx, msg, ctx.Sender())
	}
}

// fail answers every waiting request, and every later one, with
// Unavailable.
func (p *RequestPreparer) fail(ctx actor.Context, err error) {
	p.failure = err
	waiting := p.waiting
	p.waiting = nil
	for _, w := range waiting {
		p.refuse(ctx, w.sender)
	}
}

func (p *RequestPreparer) refuse(ctx actor.Context, sender *actor.PID) {
	if sender != nil {
		ctx.Send(sender, &Prepared{Capability: p.capability, Err: &Unavailable{Cause: p.failure}})
	}
}

func (p *RequestPreparer) setCapability(c *CapabilityReady) {
	if c.SnapshotReuse {
		p.capability = SnapshotReuse
	} else {
		p.capability = DenseKV
	}
}

func (p *RequestPreparer) setAssets(ctx actor.Context, a *chat.Assets) {
	p.assets = a
	waiting := p.waiting
	p.waiting = nil
	for _, w := range waiting {
		p.prepare(ctx, w.msg, w.sender)
	}
}

// prepare answers one request. A panic answers the request with an error
// and is then re-raised so the supervisor restarts this preparer; other
// requests are untouched.
func (p *RequestPreparer) prepare(ctx actor.Context, msg *Prepare, sender *actor.PID) {
	capability := p.capability
	defer func() {
		if r := recover(); r != nil {
			if sender != nil {
				ctx.Send(sender, &Prepared{Capability: capability, Err: fmt.Errorf("internal error while preparing the request: %v", r)})
			}
			panic(r)
		}
	}()
	if p.hook != nil {
		p.hook(msg)
	}
	if msg.WarmUpReply != nil {
		if p.boundary.Blocks(capability) {
			// A warm-up on a model that may reuse by snapshots ends in a
			// snapshot of the next turn's history: a boundary snapshot.
			if sender != nil {
				ctx.Send(sender, &Prepared{Assets: p.assets, Capability: capability, Err: ErrBoundarySnapshotsOff})
			}
			return
		}
		ids, err := p.assets.WarmUp(msg.Request, *msg.WarmUpReply, msg.PromptCache)
		out := &Prepared{Assets: p.assets, Capability: capability, Err: err}
		if err == nil {
			out.Job = &PrefillJob{RequestId: msg.ID, Prompt: ids, WarmUp: true, CacheScope: msg.Request.CacheScope,
				Sampling: &SamplingParams{}}
		}
		if sender != nil {
			ctx.Send(sender, out)
		}
		return
	}
	withBoundary := false
	if msg.PromptCache && msg.Request.IsChat() && msg.Request.TextOnly() {
		switch {
		case capability == DenseKV:
			p.metrics.HistoryRenders.WithLabelValues(metrics.SkippedDense).Inc()
		case p.boundary.Off():
			// auto would have rendered it (fail-open or snapshot reuse).
			p.metrics.HistoryRenders.WithLabelValues(metrics.Disabled).Inc()
		case capability == CapabilityUnknownYet:
			withBoundary = true
			p.metrics.HistoryRenders.WithLabelValues(metrics.FailOpen).Inc()
		case capability == SnapshotReuse:
			withBoundary = true
			p.metrics.HistoryRenders.WithLabelValues(metrics.Rendered).Inc()
		}
	}
	prep, err := p.assets.PrepareWith(msg.Request, chat.PrepareOptions{Boundary: withBoundary, PromptCache: msg.PromptCache})
	if err == nil && !withBoundary && p.boundary.Off() {
		prep.BoundaryNote = ErrBoundarySnapshotsOff.Error()
	}
	out := &Prepared{Prepared: prep, Assets: p.assets, Capability: capability, Err: err}
	if err == nil && !msg.InspectOnly {
		out.Job = p.job(msg, prep)
		if p.metrics != nil {
			p.metrics.ReasoningReattached.WithLabelValues(metrics.Reattached).Add(float64(prep.Reattached))
			p.metrics.ReasoningReattached.WithLabelValues(metrics.Unknown).Add(float64(prep.Unknown))
		}
	}
	if sender != nil {
		ctx.Send(sender, out)
	}
}

// job builds the PrefillJob of a prepared request. The model's
// recommended sampling parameters fill those the request left unset: here,
// once for every API, where the request becomes the engine's job.
func (p *RequestPreparer) job(msg *Prepare, prep *chat.Prepared) *PrefillJob {
	r := msg.Request
	s := p.assets.Sampling.Apply(r.Sampling, r.SamplingSet)
	j := &PrefillJob{
		RequestId: msg.ID, Prompt: prep.IDs, MaxTokens: int32(r.MaxTokens), FitMaxTokens: r.FitMaxTokens,
		Sampling: &SamplingParams{Temperature: s.Temperature, TopK: int32(s.TopK), TopP: s.TopP, MinP: s.MinP,
			RepetitionPenalty: s.RepetitionPenalty, PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty,
			Seed: s.Seed, HasSeed: s.HasSeed},
		HistoryBoundary: int32(prep.Boundary), Logprobs: r.Logprobs, TopLogprobs: int32(r.TopLogprobs),
		CacheScope: r.CacheScope, Conversation: r.ConversationKey(), Constraint: prep.Plan,
	}
	if !r.IgnoreEOS {
		j.StopIds = p.assets.EOS
	}
	for _, bp := range prep.Breakpoints {
		j.CacheBreakpoints = append(j.CacheBreakpoints, int32(bp.Pos))
		j.CacheTtlSeconds = append(j.CacheTtlSeconds, int32(bp.TTL/time.Second))
	}
	if len(prep.Plan) > 0 && p.metrics != nil {
		p.metrics.Constrained.WithLabelValues(r.ConstraintKind()).Inc()
	}
	return j
}

package actors

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
)

// Loader loads what the ModelActor publishes: first the assets (tokenizer,
// template: fast), then the model, device and pool (slow). Phase reports
// progress in words ("loading weights"). A LoadModel that returns no model
// and no error loads the assets only (a gateway that prepares requests for
// other nodes): the actor is then ready once the preparers have the assets,
// with no capability of its own (CapabilityQuery answers
// CapabilityUnknown, so no gateway routes to it).
type Loader interface {
	LoadAssets(ctx context.Context) (*chat.Assets, error)
	LoadModel(ctx context.Context, phase func(string)) (model.Model, gpu.Device, *kvcache.Pool, error)
}

// ModelActor loads a model and gates readiness on every preparer knowing the
// capability.
type ModelActor struct {
	name      string
	loader    Loader
	scheduler *actor.PID
	log       *slog.Logger

	preparers  []*actor.PID
	assets     *chat.Assets
	capability *CapabilityReady
	pendingAck int
	failure    error // set when the load failed
	status     *LoadStatus
	cancel     context.CancelFunc
	// noWeights: the loader loaded the assets only; the capability, if
	// any, is the replicas' (a CapabilityReady sent by the host).
	noWeights bool
	// offered is a capability the host passed on before the load ended:
	// adopted if it ends without weights.
	offered *CapabilityReady
}

// NewModelActor returns the actor's producer.
func NewModelActor(name string, loader Loader, scheduler *actor.PID, log *slog.Logger) actor.Producer {
	return func() actor.Actor {
		return &ModelActor{name: name, loader: loader, scheduler: scheduler, log: log}
	}
}

// Receive implements actor.Actor.
func (a *ModelActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.status = &LoadStatus{Phase: "loading tokenizer and template"}
		lctx, cancel := context.WithCancel(context.Background())
		a.cancel = cancel
		self, root := ctx.Self(), ctx.ActorSystem().Root
		go func() {
			assets, err := a.loader.LoadAssets(lctx)
			root.Send(self, &assetsLoaded{assets: assets, err: err})
			if err != nil {
				return
			}
			m, dev, pool, err := a.loader.LoadModel(lctx, func(p string) { root.Send(self, &loadPhase{phase: p}) })
			root.Send(self, &modelLoaded{model: m, dev: dev, pool: pool, err: err})
		}()
	case *actor.Stopping:
		if a.cancel != nil {
			a.cancel()
		}
	case *loadPhase:
		a.status.Phase = msg.phase
		a.log.Debug("model load", "model", a.name, "phase", msg.phase)
	case *assetsLoaded:
		if msg.err != nil {
			a.fail(ctx, msg.err)
			return
		}
		a.assets = msg.assets
		a.status.Phase = "loading weights"
		for _, p := range a.preparers {
			ctx.Send(p, &assetsReady{assets: a.assets})
		}
	case *modelLoaded:
		if msg.err != nil {
			a.fail(ctx, msg.err)
			return
		}
		if msg.model == nil {
			// Assets only: the preparers were sent them above (and new
			// ones get them on registering); they stay fail-open until a
			// CapabilityReady of the replicas comes.
			a.noWeights = true
			a.status = &LoadStatus{Phase: "ready", Ready: true}
			a.log.Info("model assets ready (no weights)", "model", a.name)
			if a.offered != nil {
				a.adopt(ctx, a.offered)
			}
			return
		}
		reuse := model.SnapshotReuse(msg.model.Cache())
		a.capability = &CapabilityReady{SnapshotReuse: reuse, Model: a.name}
		ready := &modelReady{model: msg.model, dev: msg.dev, pool: msg.pool}
		if a.assets != nil {
			ready.guides = a.assets.Guides()
		}
		ctx.Send(a.scheduler, ready)
		a.status.Phase = "publishing capability"
		a.pendingAck = len(a.preparers)
		for _, p := range a.preparers {
			ctx.Request(p, a.capability)
		}
		a.log.Debug("model loaded", "model", a.name, "snapshot_reuse", reuse, "preparers", len(a.preparers))
		a.maybeReady()
	case *CapabilityAck:
		a.pendingAck--
		a.maybeReady()
	case *CapabilityReady:
		// A gateway's host (assets only) passes on the capability of the
		// replicas it routes to: preparers then render as for the model
		// itself, not fail-open. A model loaded here keeps its own. One
		// offered while the load is under way is kept for its end.
		switch {
		case a.noWeights:
			a.adopt(ctx, msg)
		case a.capability == nil && a.failure == nil:
			a.offered = msg
		}
	case *registerPreparer:
		if !containsPID(a.preparers, ctx.Sender()) {
			a.preparers = append(a.preparers, ctx.Sender())
		}
		ctx.Respond(&registration{assets: a.assets, capability: a.capability, failure: a.failure})
	case *actor.Terminated:
		a.preparers = removePID(a.preparers, msg.Who)
	case *CapabilityQuery:
		// Answered once every local preparer has the capability (the
		// model is ready): a remote gateway that learns it from here
		// routes to this node only from then on.
		if a.status.Ready && a.capability != nil && !a.noWeights {
			ctx.Respond(a.capability)
		} else {
			ctx.Respond(&CapabilityUnknown{})
		}
	case *LoadStatusQuery:
		ctx.Respond(&LoadStatus{Phase: a.status.Phase, Ready: a.status.Ready, Error: a.status.Error})
	}
}

// adopt takes on msg, the capability of the replicas a runtime without
// weights routes to, and passes it to the preparers.
func (a *ModelActor) adopt(ctx actor.Context, msg *CapabilityReady) {
	a.offered = nil
	if a.capability != nil && a.capability.SnapshotReuse == msg.SnapshotReuse {
		return
	}
	a.capability = &CapabilityReady{SnapshotReuse: msg.SnapshotReuse, Model: a.name}
	for _, p := range a.preparers {
		ctx.Request(p, a.capability)
	}
	a.log.Info("model capability adopted from the replicas", "model", a.name, "snapshot_reuse", msg.SnapshotReuse)
}

func (a *ModelActor) maybeReady() {
	if a.capability != nil && a.pendingAck <= 0 && !a.status.Ready {
		a.status = &LoadStatus{Phase: "ready", Ready: true}
		a.log.Info("model ready", "model", a.name)
	}
}

// fail records a failed load and tells the preparers and the scheduler,
// so requests waiting for the model (and later ones) are answered rather
// than left to hang.
func (a *ModelActor) fail(ctx actor.Context, err error) {
	a.status = &LoadStatus{Phase: "failed", Error: err.Error()}
	a.failure = err
	a.log.Error("model load failed", "model", a.name, "err", err)
	ctx.Send(a.scheduler, &loadFailed{err: err})
	for _, p := range a.preparers {
		ctx.Send(p, &loadFailed{err: err})
	}
}

func containsPID(list []*actor.PID, p *actor.PID) bool {
	for _, x := range list {
		if x.Equal(p) {
			return true
		}
	}
	return false
}

func removePID(list []*actor.PID, p *actor.PID) []*actor.PID {
	out := list[:0]
	for _, x := range list {
		if !x.Equal(p) {
			out = append(out, x)
		}
	}
	return out
}

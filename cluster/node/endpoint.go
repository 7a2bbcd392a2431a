package node

import (
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/engine"
)

// endpoint is a node's actor under the well-known name EndpointName. It
// owns the node's view of the cluster (members from the provider's
// topology events, capabilities from the replicas), and on a replica it
// hands jobs to the local SchedulerActor and answers capability queries.
type endpoint struct {
	node  *Node
	local *actors.Pids // nil on a gateway

	selfID  string
	self    *actor.PID
	members map[string]*cluster.Member
	since   map[string]time.Time      // when each member was first seen
	caps    map[string]seenCapability // by member id
	// states are the members known not to be routable: loading,
	// draining, gateway (by member id).
	states map[string]MemberState
	// pidOf is a member's endpoint (endpointOf; tests replace it).
	pidOf func(*cluster.Member) *actor.PID
	// draining: this replica is leaving (Node.Drain); drained is closed
	// once no job forwarded here is in flight any more.
	draining bool
	drained  chan struct{}
	localCap *actors.CapabilityReady // this replica's, once its model is ready
	localAt  time.Time
	// jobs are the request ids of the jobs forwarded for each watched
	// requester (by PID).
	jobs map[string]map[string]struct{}
	// Publication of this replica's state (publish.go): the digest
	// (nil: nothing to publish), the ticks and sequence number so far, the
	// load and time of the last send, the members owed a full state.
	digest   *cacheDigest
	pubTicks int
	pubSeq   uint64
	pubLoad  [3]int32
	pubAt    time.Time
	needFull map[string]bool
}

type seenCapability struct {
	cap      *actors.CapabilityReady
	endpoint *actor.PID
	since    time.Time
}

// pollLocal and queryTick are the endpoint's timers.
type pollLocal struct{}
type queryTick struct{}

// startDrain starts the drain (Node.Drain); done is closed once no job
// forwarded by the endpoint is in flight. The endpoint answers it once
// the other members have been told.
type startDrain struct{ done chan struct{} }

func newEndpoint(n *Node, local *actors.Pids) *endpoint {
	return &endpoint{node: n, local: local, selfID: n.ID(),
		members: map[string]*cluster.Member{}, since: map[string]time.Time{}, jobs: map[string]map[string]struct{}{},
		caps: map[string]seenCapability{}, states: map[string]MemberState{}, pidOf: endpointOf,
		digest: n.digest, needFull: map[string]bool{}}
}

// localPoll is how often a replica asks its own ModelActor whether the
// model is ready.
const localPoll = 100 * time.Millisecond

// Receive implements actor.Actor.
func (e *endpoint) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		e.self = ctx.Self()
		if e.local != nil {
			e.pollLocal(ctx)
		}
		if e.digest != nil {
			e.after(ctx, e.node.cfg.PublishInterval, &publishTick{})
		}
		e.after(ctx, e.node.cfg.QueryInterval, &queryTick{})
	case *topologyAt:
		e.topology(ctx, m.topology, m.at)
	case *cluster.ClusterTopology:
		e.topology(ctx, m, time.Now())
	case *queryTick:
		e.queryUnknown(ctx)
		e.after(ctx, e.node.cfg.QueryInterval, &queryTick{})
	case *pollLocal:
		e.pollLocal(ctx)
	case *publishTick:
		e.publishState(ctx)
		e.after(ctx, e.node.cfg.PublishInterval, &publishTick{})
	case *actors.ReplicaState:
		e.receiveState(ctx, m)
	case *actors.ReplicaStateResync:
		if id, ok := e.sender(ctx); ok {
			e.needFull[id] = true
		}
	case *actors.CapabilityQuery:
		// A member asks; the answer is a Request so that it carries this
		// endpoint as its sender, which names this member. A gateway
		// answers that it serves no model, so it is not asked again.
		if ctx.Sender() == nil {
			return
		}
		switch {
		case e.local == nil:
			ctx.Request(ctx.Sender(), &actors.CapabilityUnknown{ServesNoModel: true})
		case e.draining:
			ctx.Request(ctx.Sender(), &actors.Draining{})
		case e.localCap != nil:
			ctx.Request(ctx.Sender(), e.localCap)
		default:
			ctx.Request(ctx.Sender(), &actors.CapabilityUnknown{})
		}
	case *actors.CapabilityReady:
		e.capability(ctx, m)
	case *actors.CapabilityUnknown:
		state := StateLoading
		if m.ServesNoModel {
			state = StateGateway
		}
		e.memberState(ctx, state)
	case *actors.Draining:
		e.memberState(ctx, StateDraining)
	case *startDrain:
		e.startDrain(ctx, m.done)
	case *actors.PrefillJob:
		if e.local == nil || e.draining {
			// Unavailable before any token: a gateway routes it again.
			why := "this cluster member serves no model"
			if e.draining {
				why = "this replica is draining (leaving the cluster)"
			}
			if ctx.Sender() != nil {
				ctx.Send(ctx.Sender(), &actors.TokenEvent{RequestId: m.RequestId, FinishReason: "error",
					Error: why, Unavailable: true})
			}
			return
		}
		// Forward keeps the original sender: the scheduler streams the
		// TokenEvents straight to the requester, wherever it lives.
		ctx.Forward(e.local.Scheduler)
		e.watchRequester(ctx, m)
	case *actor.Terminated:
		// A requester stopped (its job ended, or it gave up) or its
		// member left the cluster: its jobs are cancelled, so a gateway
		// that dies does not leave generations running for nobody.
		// Cancelling a job that has finished does nothing.
		key := m.Who.String()
		for id := range e.jobs[key] {
			ctx.Send(e.local.Scheduler, &actors.CancelJob{RequestId: id})
		}
		delete(e.jobs, key)
		e.checkDrained()
	case *actors.CancelJob, *actors.StatsQuery, *actors.CacheProbe:
		if e.local != nil {
			ctx.Forward(e.local.Scheduler)
		}
	}
}

// watchRequester watches the sender of a job (not of a warm-up, which
// nobody waits for) until it stops.
func (e *endpoint) watchRequester(ctx actor.Context, j *actors.PrefillJob) {
	from := ctx.Sender()
	if from == nil || j.WarmUp {
		return
	}
	key := from.String()
	ids, ok := e.jobs[key]
	if !ok {
		ids = map[string]struct{}{}
		e.jobs[key] = ids
		ctx.Watch(from)
	}
	ids[j.RequestId] = struct{}{}
}

// after sends msg to the endpoint itself after d.
func (e *endpoint) after(ctx actor.Context, d time.Duration, msg any) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	time.AfterFunc(d, func() { root.Send(self, msg) })
}

// pollLocal asks the local ModelActor for the capability until the model
// is ready, then announces it to every other member.
func (e *endpoint) pollLocal(ctx actor.Context) {
	f := ctx.RequestFuture(e.local.Model, &actors.CapabilityQuery{}, 5*time.Second)
	ctx.ReenterAfter(f, func(res any, err error) {
		c, ok := res.(*actors.CapabilityReady)
		if err != nil || !ok {
			e.after(ctx, localPoll, &pollLocal{})
			return
		}
		if rt := e.node.rt; rt != nil {
			// The announcement carries the replica's length limits:
			// gateways refuse what no replica can run.
			if l, ok := rt.Limits(); ok {
				c = &actors.CapabilityReady{Model: c.Model, SnapshotReuse: c.SnapshotReuse, MaxPos: int32(l.MaxPos),
					MaxPosCapped: l.Capped, KvPages: int32(l.Pages), KvPageSize: int32(l.PageSize)}
			}
		}
		e.localCap, e.localAt = c, time.Now()
		if e.draining {
			return // drained before it was ready: never routable
		}
		e.node.cfg.Logger.Info("cluster node: model ready, announcing capability",
			"model", c.Model, "snapshot_reuse", c.SnapshotReuse, "members", len(e.members)-1)
		for id, m := range e.members {
			if id != e.selfID {
				ctx.Request(e.pidOf(m), c)
			}
		}
		e.publish()
	})
}

func endpointOf(m *cluster.Member) *actor.PID { return actor.NewPID(m.Address(), EndpointName) }

// topology takes the provider's member list: members that left lose their
// capability (they are no longer routable), members that joined are asked
// for theirs and, on a replica, told this one's.
func (e *endpoint) topology(ctx actor.Context, t *cluster.ClusterTopology, at time.Time) {
	members := make(map[string]*cluster.Member, len(t.Members))
	for _, m := range t.Members {
		// This node is the member at its own address: the k8s provider
		// names members with ids of its own (newProvider).
		if m.Address() == e.self.Address && m.Id != e.selfID {
			e.selfID = m.Id
			e.node.selfID.Store(m.Id)
		}
		members[m.Id] = m
		if _, ok := e.since[m.Id]; !ok {
			e.since[m.Id] = at
		}
	}
	for id := range e.since {
		if _, ok := members[id]; !ok {
			delete(e.since, id)
		}
	}
	for id := range e.caps {
		if _, ok := members[id]; !ok {
			delete(e.caps, id)
		}
	}
	for id := range e.states {
		if _, ok := members[id]; !ok {
			delete(e.states, id)
		}
	}
	for _, m := range t.Left {
		e.node.cfg.Logger.Info("cluster node: member left", "member", m.Id, "address", m.Address())
	}
	for _, m := range t.Joined {
		e.node.cfg.Logger.Info("cluster node: member joined", "member", m.Id, "address", m.Address())
		e.needFull[m.Id] = true
	}
	e.members = members
	e.forgetStates()
	if e.draining || e.localCap != nil {
		var msg any = e.localCap
		if e.draining {
			msg = &actors.Draining{}
		}
		for _, m := range t.Joined {
			if m.Id != e.selfID {
				ctx.Request(e.pidOf(m), msg)
			}
		}
	}
	e.queryUnknown(ctx)
	e.publish()
}

// queryUnknown asks every other member whose capability is not known yet
// (a replica still loading answers CapabilityUnknown). A member that
// serves no model (a gateway) or is draining has said so once, for good,
// and is not asked again.
func (e *endpoint) queryUnknown(ctx actor.Context) {
	for id, m := range e.members {
		if _, ok := e.caps[id]; ok || id == e.selfID || e.states[id] == StateGateway || e.states[id] == StateDraining {
			continue
		}
		ctx.Request(e.pidOf(m), &actors.CapabilityQuery{})
	}
}

// sender is the member whose endpoint sent the current message (by its
// address; not this node), if it is a member.
func (e *endpoint) sender(ctx actor.Context) (string, bool) {
	from := ctx.Sender()
	if from == nil {
		return "", false
	}
	for id, m := range e.members {
		if id != e.selfID && m.Address() == from.Address {
			return id, true
		}
	}
	return "", false
}

// memberState records what a member said it is (loading, draining, no
// model). A draining member is no longer routable, and stays draining.
func (e *endpoint) memberState(ctx actor.Context, state MemberState) {
	id, ok := e.sender(ctx)
	if !ok || e.states[id] == state || e.states[id] == StateDraining {
		return
	}
	if _, routable := e.caps[id]; routable && state == StateLoading {
		return // an answer older than its CapabilityReady
	}
	e.states[id] = state
	if state == StateDraining {
		delete(e.caps, id)
		e.node.cfg.Logger.Info("cluster node: replica draining, no longer routable", "member", id)
	}
	e.publish()
}

// startDrain makes this replica leave the routable set: every other
// member is told (Draining), new jobs are refused as Unavailable (a
// gateway routes them again), and done is closed once the jobs forwarded
// here have ended. The sender gets an answer once the members are told.
func (e *endpoint) startDrain(ctx actor.Context, done chan struct{}) {
	if e.local == nil {
		close(done)
		ctx.Respond(&actors.Draining{})
		return
	}
	if !e.draining {
		e.draining = true
		n := 0
		for id, m := range e.members {
			if id != e.selfID {
				ctx.Request(e.pidOf(m), &actors.Draining{})
				n++
			}
		}
		e.node.cfg.Logger.Info("cluster node: draining: told the members, taking no new jobs",
			"members", n, "jobs_in_flight", e.inFlight())
		e.publish()
	}
	if e.drained != nil {
		close(e.drained) // an earlier Drain gave up waiting
	}
	e.drained = done
	e.checkDrained()
	ctx.Respond(&actors.Draining{})
}

// inFlight counts the jobs forwarded here whose requester is still there.
func (e *endpoint) inFlight() int {
	n := 0
	for _, ids := range e.jobs {
		n += len(ids)
	}
	return n
}

// checkDrained closes drained once a draining replica has no job in
// flight.
func (e *endpoint) checkDrained() {
	if e.draining && e.drained != nil && len(e.jobs) == 0 {
		close(e.drained)
		e.drained = nil
	}
}

// capability records a replica's CapabilityReady. The sender names the
// replica; one that is not a member (any more, or not yet) is ignored: it
// is asked again once the topology lists it.
func (e *endpoint) capability(ctx actor.Context, c *actors.CapabilityReady) {
	id, ok := e.sender(ctx)
	if !ok || e.states[id] == StateDraining {
		return
	}
	if old, ok := e.caps[id]; ok && sameCapability(old.cap, c) {
		return
	}
	delete(e.states, id)
	e.caps[id] = seenCapability{cap: c, endpoint: ctx.Sender(), since: time.Now()}
	e.node.cfg.Logger.Info("cluster node: replica routable", "member", id, "model", c.Model, "snapshot_reuse", c.SnapshotReuse)
	e.publish()
}

func sameCapability(a, b *actors.CapabilityReady) bool {
	return a.Model == b.Model && a.SnapshotReuse == b.SnapshotReuse
}

// limitsOf are the length limits a CapabilityReady announces.
func limitsOf(c *actors.CapabilityReady) engine.Limits {
	return engine.Limits{MaxPos: int(c.MaxPos), Capped: c.MaxPosCapped, Pages: int(c.KvPages), PageSize: int(c.KvPageSize)}
}

// publish replaces the node's View.
func (e *endpoint) publish() {
	v := &View{Updated: time.Now()}
	for id, m := range e.members {
		v.Members = append(v.Members, Member{ID: id, Address: m.Address(), Self: id == e.selfID, Since: e.since[id], State: e.stateOf(id)})
	}
	for id, s := range e.caps {
		v.Replicas = append(v.Replicas, Replica{MemberID: id, Address: s.endpoint.Address, Model: s.cap.Model,
			SnapshotReuse: s.cap.SnapshotReuse, Limits: limitsOf(s.cap), Endpoint: s.endpoint, Since: s.since})
	}
	if e.localCap != nil && !e.draining {
		v.Replicas = append(v.Replicas, Replica{MemberID: e.selfID, Address: e.self.Address, Self: true,
			Model: e.localCap.Model, SnapshotReuse: e.localCap.SnapshotReuse, Limits: limitsOf(e.localCap), Endpoint: e.self, Since: e.localAt})
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(v.Replicas, func(a, b Replica) int { return strings.Compare(a.MemberID, b.MemberID) })
	e.node.view.Store(v)
}

// stateOf is what this node knows member id to be.
func (e *endpoint) stateOf(id string) MemberState {
	switch {
	case id == e.selfID && e.local == nil:
		return StateGateway
	case id == e.selfID && e.draining:
		return StateDraining
	case id == e.selfID && e.localCap != nil:
		return StateRoutable
	case id == e.selfID:
		return StateLoading
	}
	if _, ok := e.caps[id]; ok {
		return StateRoutable
	}
	if s, ok := e.states[id]; ok {
		return s
	}
	return StateUnknown
}

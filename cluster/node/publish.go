package node

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/route"
	"github.com/troupe-ai/troupe/kvcache"
)

// Replica state publication (DESIGN.md §8): a replica records what its
// prompt cache takes in and serves (troupe.Options.OnCached) in a bounded
// digest, and every Config.PublishInterval its endpoint sends the digest's
// changes and its load to every other member (ReplicaState). A member
// holds each replica's state (Node.Published) for its gateways to route
// with, without asking the replicas per request.

// cacheDigest is a replica's digest with the changes not yet published. The
// engine's goroutine records into it; the endpoint takes the changes.
type cacheDigest struct {
	mu      sync.Mutex
	d       *route.Digest
	added   map[route.BlockHash]struct{}
	dropped map[route.BlockHash]struct{}
}

func newCacheDigest(entries int) *cacheDigest {
	c := &cacheDigest{d: route.NewDigest(entries), added: map[route.BlockHash]struct{}{}, dropped: map[route.BlockHash]struct{}{}}
	c.d.OnAdd = func(h route.BlockHash) {
		delete(c.dropped, h)
		c.added[h] = struct{}{}
	}
	c.d.OnDrop = func(h route.BlockHash) {
		delete(c.added, h)
		c.dropped[h] = struct{}{}
	}
	return c
}

// record is troupe.Options.OnCached: the full blocks of a dense prefix, or
// the key of a snapshot, under the scope's tenant.
func (c *cacheDigest) record(scope string, tokens []int32, snapshot bool) {
	tenant, _ := kvcache.SplitScope(scope)
	var hs []route.BlockHash
	if snapshot {
		hs = []route.BlockHash{route.SnapshotKey(tenant, tokens)}
	} else {
		hs = route.BlockHashes(tenant, tokens)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.d.AddBlocks(hs)
}

// take returns the changes since the last take (and forgets them) and,
// with full, the whole digest after them.
func (c *cacheDigest) take(full bool) (added, dropped, all []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h := range c.added {
		added = append(added, uint64(h))
	}
	for h := range c.dropped {
		dropped = append(dropped, uint64(h))
	}
	clear(c.added)
	clear(c.dropped)
	if full {
		for _, h := range c.d.Hashes() {
			all = append(all, uint64(h))
		}
	}
	return added, dropped, all
}

// Published is one replica's state as this member last received it.
type Published struct {
	// Waiting, Running and FreePages are the replica's load when it
	// published.
	Waiting, Running, FreePages int
	// Prefix is the replica's digest: what route.Route matches requests
	// against. It stays current as new states arrive.
	Prefix route.Prefixes
	// At is when the last state arrived.
	At time.Time
}

// publishedState is a replica's state as a member holds it.
type publishedState struct {
	mu        sync.RWMutex
	set       route.HashSet
	seq       uint64
	stale     bool // a delta was missed: the digest is not used until a full state comes
	waiting   int
	running   int
	freePages int
	at        time.Time
}

// Contains implements route.Prefixes.
func (p *publishedState) Contains(h route.BlockHash) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	_, ok := p.set[h]
	return ok && !p.stale
}

// apply takes in a state; it reports false when m is a delta that does
// not follow the state held (the sender must send its full state).
func (p *publishedState) apply(m *actors.ReplicaState, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting, p.running, p.freePages, p.at = int(m.Waiting), int(m.Running), int(m.FreePages), at
	switch {
	case m.Full:
		p.set = make(route.HashSet, len(m.Added))
		p.stale = false
	case p.set == nil || p.stale || m.Seq != p.seq+1:
		p.stale = true
		p.seq = m.Seq
		return false
	default:
		for _, h := range m.Dropped {
			delete(p.set, route.BlockHash(h))
		}
	}
	for _, h := range m.Added {
		p.set[route.BlockHash(h)] = struct{}{}
	}
	p.seq = m.Seq
	return true
}

// Published returns the state replica member id last published to this
// member, if any has arrived.
func (n *Node) Published(id string) (Published, bool) {
	n.pubMu.RLock()
	p, ok := n.published[id]
	n.pubMu.RUnlock()
	if !ok {
		return Published{}, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return Published{Waiting: p.waiting, Running: p.running, FreePages: p.freePages, Prefix: p, At: p.at}, true
}

// receiveState takes a replica's published state (the endpoint's
// goroutine); a delta that does not follow is answered with a resync
// request.
func (e *endpoint) receiveState(ctx actor.Context, m *actors.ReplicaState) {
	id, ok := e.sender(ctx)
	if !ok {
		return
	}
	n := e.node
	n.pubMu.Lock()
	if n.published == nil {
		n.published = map[string]*publishedState{}
	}
	p, ok := n.published[id]
	if !ok {
		p = &publishedState{}
		n.published[id] = p
	}
	n.pubMu.Unlock()
	if !p.apply(m, time.Now()) {
		ctx.Request(ctx.Sender(), &actors.ReplicaStateResync{})
	}
}

// forgetStates drops the states of replicas that are no longer members.
func (e *endpoint) forgetStates() {
	n := e.node
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	for id := range n.published {
		if _, ok := e.members[id]; !ok {
			delete(n.published, id)
		}
	}
}

// publishTick is the endpoint's timer for publishing its replica's state.
type publishTick struct{}

// publishState sends this replica's state to every other member: a full
// state to those that need one (new members, resyncs, and all of them
// every fullEvery ticks), the changes to the others; nothing when neither
// the digest nor the load changed and the last send is recent.
func (e *endpoint) publishState(ctx actor.Context) {
	if e.localCap == nil || e.draining || e.digest == nil {
		return
	}
	f := ctx.RequestFuture(e.local.Scheduler, &actors.StatsQuery{}, e.node.cfg.PublishInterval)
	ctx.ReenterAfter(f, func(res any, err error) {
		st, ok := res.(*actors.SchedulerStats)
		if err != nil || !ok || e.draining {
			return
		}
		e.pubTicks++
		if e.pubTicks%fullEvery == 0 {
			for id := range e.members {
				e.needFull[id] = true
			}
		}
		added, dropped, all := e.digest.take(len(e.needFull) > 0)
		load := [3]int32{int32(st.Waiting), int32(st.Running), int32(st.PagesFree)}
		changed := len(added) > 0 || len(dropped) > 0 || load != e.pubLoad
		if !changed && len(e.needFull) == 0 && time.Since(e.pubAt) < heartbeat {
			return
		}
		e.pubSeq++
		e.pubLoad, e.pubAt = load, time.Now()
		delta := &actors.ReplicaState{Seq: e.pubSeq, Added: added, Dropped: dropped, Waiting: load[0], Running: load[1], FreePages: load[2]}
		full := &actors.ReplicaState{Seq: e.pubSeq, Full: true, Added: all, Waiting: load[0], Running: load[1], FreePages: load[2]}
		for id, m := range e.members {
			if id == e.selfID {
				continue
			}
			msg := delta
			if e.needFull[id] {
				msg = full
			}
			ctx.Request(e.pidOf(m), msg)
		}
		clear(e.needFull)
	})
}

const (
	// fullEvery: every this many publish ticks every member gets the
	// full state (a member that missed deltas without noticing recovers).
	fullEvery = 40
	// heartbeat: a replica whose state did not change publishes it again
	// after this long, so members can tell a quiet replica from a lost one.
	heartbeat = time.Second
)

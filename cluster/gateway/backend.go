package gateway

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/node"
	"github.com/troupe-ai/troupe/engine"
)

// NodeBackend is the Backend of a cluster member.
type NodeBackend struct{ Node *node.Node }

// Replicas implements Backend.
func (b NodeBackend) Replicas() []node.Replica { return b.Node.View().Replicas }

// Published implements Backend.
func (b NodeBackend) Published(r node.Replica) (node.Published, bool) {
	return b.Node.Published(r.MemberID)
}

// Submit implements Backend.
func (b NodeBackend) Submit(ctx context.Context, r node.Replica, job *actors.PrefillJob) <-chan *actors.TokenEvent {
	return b.Node.Submit(ctx, r.Endpoint, job).Events
}

// Probe implements Backend: a CacheProbe and a StatsQuery to r's endpoint,
// at once.
func (b NodeBackend) Probe(ctx context.Context, r node.Replica, job *actors.PrefillJob) (Probe, error) {
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return Probe{}, context.DeadlineExceeded
	}
	root := b.Node.System().Root
	cache := root.RequestFuture(r.Endpoint, &actors.CacheProbe{Prompt: job.Prompt, CacheScope: job.CacheScope}, timeout)
	stats, err := b.Node.SchedulerStats(ctx, r.Endpoint)
	if err != nil {
		return Probe{}, err
	}
	res, err := cache.Result()
	if err != nil {
		return Probe{}, err
	}
	c, ok := res.(*actors.CacheProbeResult)
	if !ok {
		return Probe{}, fmt.Errorf("cluster gateway: %v answered %T to a CacheProbe", r.Endpoint, res)
	}
	return Probe{Reusable: int(c.ReusableTokens), Waiting: int(stats.Waiting), Running: int(stats.Running),
		FreePages: int(stats.PagesFree)}, nil
}

// MemberStatus is one member in GET /v1/cluster.
type MemberStatus struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Self    bool   `json:"self"`
	// Model is the served model of a routable replica ("" on a gateway,
	// or a replica whose capability this node has not seen yet).
	Model string `json:"model,omitempty"`
	// Capability is the model's prompt-cache mechanism: "dense_kv_prefix"
	// or "snapshot"; "" when not known.
	Capability string `json:"capability,omitempty"`
	Routable   bool   `json:"routable"`
	// State is what this node knows the member to be: routable,
	// loading (a replica whose model is not ready), draining (leaving
	// once its jobs end), gateway (serves no model), or unknown (it has
	// not answered yet).
	State string `json:"state"`
	// Load is a routable replica's scheduler state, asked for now; nil
	// when it did not answer.
	Load  *Load  `json:"load,omitempty"`
	Since string `json:"since"`
}

// Load is a replica's load in GET /v1/cluster.
type Load struct {
	Waiting   int `json:"waiting"`
	Running   int `json:"running"`
	PagesFree int `json:"pages_free"`
	PagesUsed int `json:"pages_used"`
}

// ClusterStatus is the body of GET /v1/cluster.
type ClusterStatus struct {
	Self    string         `json:"self"`
	Members []MemberStatus `json:"members"`
}

// Status is n's picture of the cluster, with the routable replicas' load
// asked for now (each bounded by ctx).
func Status(ctx context.Context, n *node.Node) ClusterStatus {
	v := n.View()
	st := ClusterStatus{Self: n.ID(), Members: make([]MemberStatus, len(v.Members))}
	var wg sync.WaitGroup
	for i, m := range v.Members {
		ms := &st.Members[i]
		*ms = MemberStatus{ID: m.ID, Address: m.Address, Self: m.Self, State: string(m.State), Since: m.Since.UTC().Format(time.RFC3339)}
		r, ok := v.Replica(m.ID)
		if !ok {
			continue
		}
		ms.Model, ms.Routable, ms.Capability = r.Model, true, "dense_kv_prefix"
		if r.SnapshotReuse {
			ms.Capability = "snapshot"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := n.SchedulerStats(ctx, r.Endpoint)
			if err == nil {
				ms.Load = &Load{Waiting: int(s.Waiting), Running: int(s.Running), PagesFree: int(s.PagesFree), PagesUsed: int(s.PagesUsed)}
			}
		}()
	}
	wg.Wait()
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].ID < st.Members[j].ID })
	return st
}

// ShareCapability passes the capability of the replicas that serve rt's
// model on to rt (an assets-only gateway runtime, troupe.Options.NoWeights),
// every interval until ctx ends: its preparers then render as for the model
// (the capability gate of DESIGN.md §8: fail-open until the gateway has seen
// a replica's CapabilityReady), and it refuses a request that no replica
// could run (the loosest of their length limits) before routing it. Passing
// it again changes nothing.
func ShareCapability(ctx context.Context, n *node.Node, rt *troupe.Runtime, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var c *actors.CapabilityReady
		var lim engine.Limits
		for _, r := range n.View().Replicas {
			if r.Model != rt.Name() {
				continue
			}
			if c == nil {
				c, lim = &actors.CapabilityReady{Model: r.Model, SnapshotReuse: r.SnapshotReuse}, r.Limits
			} else {
				lim = Loosest(lim, r.Limits)
			}
		}
		if c != nil {
			c.MaxPos, c.MaxPosCapped, c.KvPages, c.KvPageSize = int32(lim.MaxPos), lim.Capped, int32(lim.Pages), int32(lim.PageSize)
			rt.AdoptCapability(c)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Loosest are the length limits that admit whatever a or b admits: a
// request refused under them fits no replica. Zero fields are unbounded
// (engine.Limits.Admit).
func Loosest(a, b engine.Limits) engine.Limits {
	switch {
	case a.MaxPos == 0 || b.MaxPos == 0:
		a.MaxPos, a.Capped = 0, false
	case b.MaxPos > a.MaxPos:
		a.MaxPos, a.Capped = b.MaxPos, b.Capped
	}
	switch {
	case a.Pages == 0 || b.Pages == 0:
		a.Pages = 0
	case b.Pages*b.PageSize > a.Pages*a.PageSize:
		a.Pages, a.PageSize = b.Pages, b.PageSize
	}
	return a
}

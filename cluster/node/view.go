package node

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/engine"
)

// View is what a node knows of the cluster at one moment: the members the
// provider reports and the replicas among them whose capability it has
// seen. Nodes replace their View on each change; a View is never modified,
// so a router can read Node.View on every request without locking.
type View struct {
	// Members are the cluster's members, this node included, sorted by id.
	Members []Member
	// Replicas are the routable replicas, sorted by member id: members
	// whose CapabilityReady this node has received (this node too when it
	// serves a model). A member that has not announced its capability is
	// not routable (the capability gate of DESIGN.md §8).
	Replicas []Replica
	// Updated is when the view was built.
	Updated time.Time
}

// Member is one cluster member.
type Member struct {
	ID      string
	Address string // remote host:port
	Self    bool
	// State is what this node knows the member to be.
	State MemberState
	// Since is when this node's provider first reported the member.
	Since time.Time
}

// Replica is a routable member: one that serves a model and whose
// capability this node has seen.
type Replica struct {
	MemberID string
	Address  string
	Self     bool
	// Model is the served model's name; SnapshotReuse its prompt-cache
	// capability (whole-state snapshots rather than KV prefix pages).
	Model         string
	SnapshotReuse bool
	// Limits are the replica's length limits as it announced them (zero
	// when it did not: a member of an older troupe, or a host's replica
	// without a runtime).
	Limits engine.Limits
	// Endpoint takes PrefillJob, CancelJob, StatsQuery and CacheProbe
	// for the replica's SchedulerActor (Node.Submit).
	Endpoint *actor.PID
	// Since is when this node received the capability.
	Since time.Time
}

// Member returns the member with id, if it is in the view.
func (v *View) Member(id string) (Member, bool) {
	for _, m := range v.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// Replica returns the replica on member id, if it is routable.
func (v *View) Replica(id string) (Replica, bool) {
	for _, r := range v.Replicas {
		if r.MemberID == id {
			return r, true
		}
	}
	return Replica{}, false
}

// MemberState is what a node knows a member to be.
type MemberState string

// Member states.
const (
	// StateUnknown: the member has not answered a CapabilityQuery yet.
	StateUnknown MemberState = "unknown"
	// StateLoading: a replica whose model is not ready (not routable).
	StateLoading MemberState = "loading"
	// StateRoutable: a replica whose CapabilityReady this node has seen
	// (it is in View.Replicas).
	StateRoutable MemberState = "routable"
	// StateDraining: a replica that is leaving (its Draining has arrived):
	// it finishes its jobs but takes no new ones; not routable.
	StateDraining MemberState = "draining"
	// StateGateway: a member that serves no model; it is not asked for
	// its capability again.
	StateGateway MemberState = "gateway"
)

// ReplicaStates counts the members that serve (or will serve) a model by
// state: StateRoutable, StateLoading and StateDraining, each present
// (zero included). Members not known yet and gateways are not counted.
func (v *View) ReplicaStates() map[MemberState]int {
	c := map[MemberState]int{StateRoutable: 0, StateLoading: 0, StateDraining: 0}
	for _, m := range v.Members {
		if _, ok := c[m.State]; ok {
			c[m.State]++
		}
	}
	return c
}

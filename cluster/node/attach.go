package node

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
)

// Attached is a troupe node on a cluster that a host program owns
// (Attach). Its Node works as one from Start: View, Submit, Endpoint,
// Runtime, and gateway.NodeBackend{Node: a.Node}. Close the Attached, not
// its Node: Node.Close shuts the host's cluster down.
type Attached struct {
	*Node
	once sync.Once
}

// Attach makes a member of a host's cluster a troupe node: system is the
// host's actor system and c its cluster, on which the host has called
// StartMember already (remote listens and the provider runs). Attach spawns
// the endpoint actor (EndpointName, one per actor system) and, when
// cfg.Model is set, the model's pipeline into system, as Start does; the
// host's own actors, kinds and membership provider are left alone. Of cfg
// only Model, QueryInterval, PublishInterval, DigestEntries and Logger are
// used (a replica publishes its state as Start's do): the cluster's name,
// addresses and provider are the host's. Every member that other troupe
// nodes should reach must link package actors (importing this package
// does), since remote finds a message's type by its protobuf name.
//
// The members the cluster knows already are read from its gossip state
// (the last ClusterTopology the member published, which the gossip actor
// keeps under cluster.TopologyKey): the pinned MemberList has no
// synchronised accessor, and a provider publishes a topology only when it
// changes. Later topologies come from the event stream, as in Start. One
// gap is left: a topology whose publication has already listed the event
// stream's subscribers when Attach subscribes, but has not yet reached the
// gossip actor when Attach reads it, is in neither; the members it changed
// are seen at the next change of the topology.
func Attach(system *actor.ActorSystem, c *cluster.Cluster, cfg Config) (*Attached, error) {
	if system == nil || c == nil || c.ActorSystem != system {
		return nil, errors.New("cluster node: attach needs the host's actor system and its cluster")
	}
	if c.Remote == nil || c.Gossip == nil {
		return nil, errors.New("cluster node: attach needs a started cluster member (call StartMember first)")
	}
	cfg.nodeDefaults()
	n := &Node{cfg: cfg, system: system, cluster: c}
	n.view.Store(&View{})
	// Subscribed before the gossip state is read: a topology published in
	// between is then held here and delivered after the snapshot.
	fwd := &topologyForwarder{root: system.Root}
	n.sub = system.EventStream.Subscribe(fwd.publish)
	local, err := n.spawnReplica()
	if err != nil {
		system.EventStream.Unsubscribe(n.sub)
		return nil, err
	}
	a := &Attached{Node: n}
	snap, err := currentTopology(c, system.ID)
	if err != nil {
		a.Close()
		return nil, err
	}
	n.endpoint, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return newEndpoint(n, local)
	}), EndpointName)
	if err != nil {
		n.endpoint = nil
		a.Close()
		return nil, fmt.Errorf("cluster node: spawn endpoint: %w", err)
	}
	if snap != nil {
		fwd.mu.Lock()
		fwd.pending = append([]*topologyAt{{topology: snap, at: time.Now()}}, fwd.pending...)
		fwd.mu.Unlock()
	}
	fwd.attach(n.endpoint)
	return a, nil
}

// currentTopology is the last ClusterTopology the member with gossip id
// self published, as its gossip actor holds it, with every member marked
// joined (they are all new to the endpoint); nil when there is none yet.
func currentTopology(c *cluster.Cluster, self string) (*cluster.ClusterTopology, error) {
	state, err := c.Gossip.GetState(cluster.TopologyKey)
	if err != nil {
		return nil, fmt.Errorf("cluster node: read the cluster's topology from gossip: %w", err)
	}
	kv, ok := state[self]
	if !ok || kv.GetValue() == nil {
		return nil, nil
	}
	var t cluster.ClusterTopology
	if err := kv.GetValue().UnmarshalTo(&t); err != nil {
		return nil, fmt.Errorf("cluster node: the gossiped topology: %w", err)
	}
	return &cluster.ClusterTopology{TopologyHash: t.TopologyHash, Members: t.Members, Joined: t.Members}, nil
}

// Close stops the endpoint and, on a replica, the model's pipeline. The
// host's cluster and actor system run on; the host shuts them down.
func (a *Attached) Close() {
	a.once.Do(func() {
		n := a.Node
		n.system.EventStream.Unsubscribe(n.sub)
		if n.endpoint != nil {
			_ = n.system.Root.StopFuture(n.endpoint).Wait()
		}
		if n.rt != nil {
			n.rt.Close()
		}
	})
}

package main

import (
	"context"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/cluster/gateway"
	"github.com/troupe-ai/troupe/cluster/node"
)

// member is serve's cluster member: a replica (the node serves the model
// and this process's HTTP generates on it) or a gateway (the runtime reads
// the model's assets only and routes every job to a replica).
type member struct {
	node *node.Node
	rt   *troupe.Runtime
	own  bool // rt is the gateway's, closed here; a replica's closes with the node
	stop func()
}

// startMember joins the cluster described by cfg with the model of opts.
func startMember(opts troupe.Options, cfg node.Config, gatewayOnly bool) (*member, error) {
	if !gatewayOnly {
		cfg.Model = &opts
		n, err := node.Start(cfg)
		if err != nil {
			return nil, err
		}
		return &member{node: n, rt: n.Runtime()}, nil
	}
	n, err := node.Start(cfg)
	if err != nil {
		return nil, err
	}
	g := gateway.New(gateway.NodeBackend{Node: n}, gateway.Config{Logger: opts.Logger})
	opts.NoWeights, opts.Dispatcher, opts.RequestIDPrefix = true, g, n.ID()+"-"
	rt, err := troupe.Spawn(n.System(), opts)
	if err != nil {
		n.Close()
		return nil, err
	}
	// Before the first request: the served name is the runtime's.
	g.Attach(rt.Name(), rt.Metrics())
	ctx, stop := context.WithCancel(context.Background())
	go gateway.ShareCapability(ctx, n, rt, 500*time.Millisecond)
	return &member{node: n, rt: rt, own: true, stop: stop}, nil
}

func (m *member) close() {
	if m.own {
		m.stop()
		m.rt.Close()
	}
	m.node.Close()
}

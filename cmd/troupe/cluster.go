package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/cluster/assets"
	"github.com/troupe-ai/troupe/cluster/gateway"
	"github.com/troupe-ai/troupe/cluster/node"
)

// member is serve's cluster member: a replica (the node serves the model,
// this process's HTTP generates on it, and its assets server hands the
// model's tokenizer and templates to gateways) or a gateway (the runtime
// reads the model's assets only and routes every job to a replica).
type member struct {
	node *node.Node
	rt   *troupe.Runtime
	own  bool // rt is the gateway's, closed here; a replica's closes with the node
	stop func()
	tmp  string // the folder of the fetched assets, removed at close
}

// startMember joins the cluster described by cfg with the model of opts.
// A gateway with fetch set takes the model's assets from the first
// replica it sees (waiting for one as long as ctx allows) instead of
// opts.Model.
func startMember(ctx context.Context, opts troupe.Options, cfg node.Config, gatewayOnly, fetch bool) (*member, error) {
	if !gatewayOnly {
		cfg.Model = &opts
		n, err := node.Start(cfg)
		if err != nil {
			return nil, err
		}
		rt := n.Runtime()
		if _, err := assets.Serve(n.System(), rt.Name(), rt.ModelDir(), opts.ChatTemplate); err != nil {
			n.Close()
			return nil, fmt.Errorf("assets server: %w", err)
		}
		watchReplicas(rt, n)
		return &member{node: n, rt: rt}, nil
	}
	n, err := node.Start(cfg)
	if err != nil {
		return nil, err
	}
	m := &member{node: n, own: true, stop: func() {}}
	if fetch {
		if err := m.fetchAssets(ctx, &opts, cfg.Logger); err != nil {
			m.close()
			return nil, err
		}
	}
	g := gateway.New(gateway.NodeBackend{Node: n}, gateway.Config{Logger: opts.Logger})
	opts.NoWeights, opts.Dispatcher, opts.RequestIDPrefix = true, g, n.ID()+"-"
	if m.rt, err = troupe.Spawn(n.System(), opts); err != nil {
		m.rt = nil
		m.close()
		return nil, err
	}
	// Before the first request: the served name is the runtime's.
	g.Attach(m.rt.Name(), m.rt.Metrics())
	watchReplicas(m.rt, n)
	sctx, stop := context.WithCancel(context.Background())
	m.stop = stop
	go gateway.ShareCapability(sctx, n, m.rt, 500*time.Millisecond)
	return m, nil
}

// fetchAssets waits for a routable replica and takes its model's assets
// into a folder of the gateway's own: opts then serves that folder, under
// the replica's model name.
func (m *member) fetchAssets(ctx context.Context, opts *troupe.Options, log *slog.Logger) error {
	log.Info("gateway: waiting for a replica to take the model's tokenizer and chat template from")
	var r node.Replica
	for {
		if reps := m.node.View().Replicas; len(reps) > 0 {
			r = reps[0]
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway: no replica joined: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	dir, err := os.MkdirTemp("", "troupe-gateway-assets-")
	if err != nil {
		return err
	}
	m.tmp = dir
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	model, override, err := assets.Fetch(fctx, m.node.System().Root, r.Address, dir)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	log.Info("gateway: model assets taken from a replica", "model", model, "replica", r.MemberID)
	opts.Model, opts.ServedName = dir, model
	if override != "" {
		opts.ChatTemplate = override
	}
	return nil
}

// watchReplicas exports n's view of the replicas by state in rt's
// metrics (troupe_cluster_replicas{state}).
func watchReplicas(rt *troupe.Runtime, n *node.Node) {
	rt.Metrics().WatchCluster(func() map[string]int {
		c := map[string]int{}
		for s, k := range n.View().ReplicaStates() {
			c[string(s)] = k
		}
		return c
	})
}

// drain makes a replica leave the routable set and waits, until ctx ends,
// for the jobs gateways routed to it (node.Drain); nothing on a gateway.
func (m *member) drain(ctx context.Context, log *slog.Logger) {
	if m.own {
		return
	}
	began := time.Now()
	if err := m.node.Drain(ctx); err != nil {
		log.Warn("cluster: drain: jobs routed here still running; leaving the cluster cuts them", "err", err,
			"after", time.Since(began).Round(time.Millisecond))
		return
	}
	log.Info("cluster: drained: the jobs routed here have ended", "took", time.Since(began).Round(time.Millisecond))
}

func (m *member) close() {
	if m.own {
		m.stop()
		if m.rt != nil {
			m.rt.Close()
		}
	}
	m.node.Close()
	if m.tmp != "" {
		_ = os.RemoveAll(m.tmp)
	}
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
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
	// opts are the options the member's runtimes of other models start
	// from (serveModels).
	opts troupe.Options
	// others are the runtimes of the models other members serve
	// (serveModels); dirs the folders of every model's fetched assets
	// (takeAssets). Both end at close.
	mu     sync.Mutex
	others []*troupe.Runtime
	dirs   []string
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
		return &member{node: n, rt: rt, opts: opts, stop: func() {}}, nil
	}
	n, err := node.Start(cfg)
	if err != nil {
		return nil, err
	}
	m := &member{node: n, own: true, stop: func() {}, opts: opts}
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

// serveModels makes the member serve, through add (the HTTP server's
// AddModel), every model that other members serve and it does not: each
// time a replica of a new model becomes routable, it takes that model's
// tokenizer and chat template from the replica and starts a runtime
// without weights that routes the model's requests to its replicas
// (cluster/gateway), counting into the member's metrics. A model whose
// assets cannot be fetched is tried again 5s later. It returns when ctx
// ends.
func (m *member) serveModels(ctx context.Context, add func(*troupe.Runtime), log *slog.Logger) {
	served := map[string]bool{m.rt.Name(): true}
	retry := map[string]time.Time{}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range m.node.View().Replicas {
			if served[r.Model] || time.Now().Before(retry[r.Model]) {
				continue
			}
			rt, err := m.startModel(ctx, r, log)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				log.Warn("cluster: cannot serve a model of the cluster here; trying again in 5s", "model", r.Model, "replica", r.MemberID, "err", err)
				retry[r.Model] = time.Now().Add(5 * time.Second)
				continue
			}
			served[r.Model] = true
			add(rt)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// startModel starts the runtime that routes r's model: its assets from r,
// no weights, the jobs to the model's replicas.
func (m *member) startModel(ctx context.Context, r node.Replica, log *slog.Logger) (*troupe.Runtime, error) {
	dir, model, override, err := m.takeAssets(ctx, r)
	if err != nil {
		return nil, err
	}
	if model != r.Model {
		return nil, fmt.Errorf("replica %s serves %q, its assets server %q", r.MemberID, r.Model, model)
	}
	opts := troupe.Options{Model: dir, ServedName: model, ChatTemplate: override, Threads: 1, Preparers: m.opts.Preparers, PromptCache: m.opts.PromptCache,
		Logger: m.opts.Logger, PrepareTimeout: m.opts.PrepareTimeout, MaxInspections: m.opts.MaxInspections,
		InspectMaxInput: m.opts.InspectMaxInput, InspectMaxOutput: m.opts.InspectMaxOutput, GenerationConfig: m.opts.GenerationConfig,
		NoWeights: true, Metrics: m.rt.Metrics(), RequestIDPrefix: m.node.ID() + "-"}
	opts.Dispatcher = gateway.New(gateway.NodeBackend{Node: m.node}, gateway.Config{Model: model, Metrics: m.rt.Metrics(), Logger: m.opts.Logger})
	rt, err := troupe.Spawn(m.node.System(), opts)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.others = append(m.others, rt)
	m.mu.Unlock()
	go gateway.ShareCapability(ctx, m.node, rt, 500*time.Millisecond)
	log.Info("cluster: serving a model of other members", "model", model, "assets_from", r.MemberID)
	return rt, nil
}

// fetchAssets waits for a routable replica (of opts.ServedName, when set:
// the gateway's default model) and takes its model's assets into a folder
// of the gateway's own: opts then serves that folder, under the replica's
// model name.
func (m *member) fetchAssets(ctx context.Context, opts *troupe.Options, log *slog.Logger) error {
	log.Info("gateway: waiting for a replica to take the model's tokenizer and chat template from", "model", opts.ServedName)
	var r node.Replica
	for {
		reps := m.node.View().Replicas
		i := slices.IndexFunc(reps, func(rep node.Replica) bool {
			return opts.ServedName == "" || rep.Model == opts.ServedName
		})
		if i >= 0 {
			r = reps[i]
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway: no replica joined: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	dir, model, override, err := m.takeAssets(ctx, r)
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

// takeAssets fetches replica r's model assets (tokenizer, chat template,
// generation config) into a folder of the member's own, removed at close:
// the folder, the served model name and the template override's path.
func (m *member) takeAssets(ctx context.Context, r node.Replica) (dir, model, override string, err error) {
	if dir, err = os.MkdirTemp("", "troupe-model-assets-"); err != nil {
		return "", "", "", err
	}
	m.mu.Lock()
	m.dirs = append(m.dirs, dir)
	m.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	model, override, err = assets.Fetch(fctx, m.node.System().Root, r.Address, dir)
	return dir, model, override, err
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
	m.mu.Lock()
	for _, rt := range m.others {
		rt.Close()
	}
	for _, d := range m.dirs {
		_ = os.RemoveAll(d)
	}
	m.others, m.dirs = nil, nil
	m.mu.Unlock()
	if m.own {
		m.stop()
		if m.rt != nil {
			m.rt.Close()
		}
	}
	m.node.Close()
}

// Package gateway is a cluster gateway's dispatcher (DESIGN.md §8): the
// gateway's runtime prepares each request locally (render + tokenize) and
// hands the PrefillJob to Gateway.Dispatch (troupe.Options.Dispatcher),
// which picks a replica with route.Route over the node's routable replicas
// and streams the replica's TokenEvents back through node.Submit. Every API
// path (OpenAI chat and completions, Responses, Anthropic) generates through
// Runtime.GenerateN, so they all route the same way.
//
// # Replica state: published, predicted, probed as a fallback
//
// The router needs each candidate's load and what it has cached of the
// request's prompt. Replicas publish both (cluster/node: load and a bounded
// digest of block hashes or snapshot keys, as deltas every 250 ms), and a
// candidate whose published state is fresher than Config.Fresh is routed on
// it with no round trip. Two things fill the gap between publications: a
// replica's load is at least the jobs this gateway sent it that have not
// ended (counted in the same locked step as each decision, so a burst is
// spread instead of sent to the replica idle at its start), and a job's
// prompt blocks count as cached on the replica it went to (a bounded digest
// per replica, Config.Predicted; dense models), so a conversation's next
// turn follows it before the replica's digest says so, as SGLang's router
// inserts each request into the tree of the worker it chose.
//
// A candidate with no fresh state (a replica of a host cluster without a
// troupe runtime, or one that just joined) is probed instead: one
// CacheProbe (the exact number of prompt tokens its prompt cache would reuse
// now) and one StatsQuery, in parallel with the other probes, bounded by
// Config.ProbeTimeout; a replica that does not answer in time is not a
// candidate. A probe's answer is turned into the digest route.Route
// expects: the block hashes of the reusable prefix (dense KV models), or the
// snapshot key at the request's history boundary when the replica would
// reuse that much (snapshot models). Probes count in
// troupe_route_probes_total. A lone candidate is neither looked up nor
// probed.
//
// A chat request's conversation is the route's sticky key: the
// conversation part of the job's CacheScope (prompt_cache_key), else the
// hash of its opening messages (PrefillJob.Conversation). While no
// candidate's cache holds more of the prompt, the conversation stays on
// the replica rendezvous hashing gives it, so a snapshot model's turns
// find their state even before a digest records it.
//
// # Several models
//
// One Gateway routes one model (Config.Model). A member that serves
// several models runs one runtime without weights per model, each with its
// own Gateway over the same Backend; the HTTP server picks the runtime by
// the request's "model" (troupe/http Server.AddModel).
//
// # Retries
//
// A job whose replica fails before anything of it reached the caller (the
// replica left the cluster, serves no model, or is draining and took
// no new job: an "error" event with Unavailable set as its first event) is routed again, excluding the
// replicas that failed, at most Config.MaxAttempts times in all. A stream
// that has delivered an event ends with the replica's error event. Each
// retry counts in troupe_route_retries_total.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/node"
	"github.com/troupe-ai/troupe/cluster/route"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
)

// Config configures a Gateway.
type Config struct {
	// Model is the served model name the gateway prepares for; it routes to
	// the replicas whose CapabilityReady names it.
	Model string
	// Policy chooses the replica; nil means route.CacheAware{Threshold: 8}.
	Policy route.Policy
	// ProbeTimeout bounds the probes of the candidates; 0 means 1s.
	ProbeTimeout time.Duration
	// Fresh is how old a replica's published state may be for routing
	// on it; an older one (or none) makes the gateway probe the
	// replica. 0 means 3s (replicas publish at least every second).
	Fresh time.Duration
	// Predicted bounds, per replica, the blocks the gateway expects it to
	// have cached from the jobs it sent there since its last published
	// state; 0 means 4096.
	Predicted int
	// MaxAttempts is how many replicas one job may be sent to (retries
	// after a replica failed before its first event); 0 means 3.
	MaxAttempts int
	// Metrics, when set, counts the decisions (troupe_route_decisions_total)
	// and the retries (troupe_route_retries_total).
	Metrics *metrics.Metrics
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Backend is what the gateway needs of the cluster: a Node (NodeBackend)
// or, in tests, a fake.
type Backend interface {
	// Replicas are the routable replicas now (node.View().Replicas).
	Replicas() []node.Replica
	// Probe asks r for what it would reuse of job's prompt and its load.
	Probe(ctx context.Context, r node.Replica, job *actors.PrefillJob) (Probe, error)
	// Submit sends job to r and returns its events (ending with the one
	// that carries a FinishReason, then closed); ending ctx cancels it.
	Submit(ctx context.Context, r node.Replica, job *actors.PrefillJob) <-chan *actors.TokenEvent
	// Published is the state r last published (Node.Published), if any.
	Published(r node.Replica) (node.Published, bool)
}

// Probe is one replica's answer for one request.
type Probe struct {
	Reusable  int // prompt tokens its cache would reuse
	Waiting   int
	Running   int
	FreePages int
}

// Gateway dispatches prepared jobs to replicas; it implements
// troupe.Dispatcher.
type Gateway struct {
	cfg     Config
	backend Backend
	// mu guards inflight: per replica (member id), the jobs this gateway
	// sent there that have not ended.
	mu       sync.Mutex
	inflight map[string]int
	// predicted are, per replica, the prompt blocks of the jobs this
	// gateway sent there (guarded by mu): what its cache will hold before
	// its published digest says so.
	predicted map[string]*route.Digest
}

// New returns a gateway over backend.
func New(backend Backend, cfg Config) *Gateway {
	if cfg.Policy == nil {
		cfg.Policy = route.CacheAware{Threshold: 8}
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.Fresh <= 0 {
		cfg.Fresh = 3 * time.Second
	}
	if cfg.Predicted <= 0 {
		cfg.Predicted = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Gateway{cfg: cfg, backend: backend, inflight: map[string]int{}, predicted: map[string]*route.Digest{}}
}

// Attach sets the model the gateway routes for and the metrics it counts
// to, when they are known only once the runtime that dispatches through it
// is spawned; it must be called before the first Dispatch.
func (g *Gateway) Attach(model string, m *metrics.Metrics) {
	g.cfg.Model, g.cfg.Metrics = model, m
}

// Dispatch implements troupe.Dispatcher.
func (g *Gateway) Dispatch(ctx context.Context, job *actors.PrefillJob) <-chan *actors.TokenEvent {
	out := make(chan *actors.TokenEvent, 64)
	go g.run(ctx, job, out)
	return out
}

func (g *Gateway) run(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent) {
	defer close(out)
	var exclude []string
	for attempt := 1; ; attempt++ {
		r, d, err := g.pick(ctx, job, exclude, true)
		if err != nil {
			select {
			case out <- failed(job, err):
			case <-ctx.Done():
			}
			return
		}
		if m := g.cfg.Metrics; m != nil {
			m.RouteDecisions.WithLabelValues(d.Reason.String()).Inc()
		}
		g.cfg.Logger.Debug("cluster gateway: routed", "request", job.RequestId, "replica", r.MemberID,
			"reason", d.Reason.String(), "cached_tokens", d.CachedTokens, "attempt", attempt)
		again := g.relay(ctx, r, job, out, attempt < g.cfg.MaxAttempts)
		g.done(r.MemberID)
		if !again {
			return
		}
		g.cfg.Logger.Warn("cluster gateway: replica failed before the first event, routing again",
			"request", job.RequestId, "replica", r.MemberID)
		if m := g.cfg.Metrics; m != nil {
			m.RouteRetries.Inc()
		}
		exclude = append(exclude, r.MemberID)
	}
}

// done counts a job reserved on replica id (pick) as ended.
func (g *Gateway) done(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight[id]--; g.inflight[id] <= 0 {
		delete(g.inflight, id)
	}
}

// sent is the number of jobs this gateway sent to replica id that have not
// ended.
func (g *Gateway) sent(id string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight[id]
}

// relay hands r's events for job on to out. It returns true, having handed
// on nothing, when retry is allowed and the replica failed as the first
// thing it did (an Unavailable error).
func (g *Gateway) relay(ctx context.Context, r node.Replica, job *actors.PrefillJob, out chan<- *actors.TokenEvent, retry bool) bool {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := 0
	for ev := range g.backend.Submit(sctx, r, job) {
		if sent == 0 && retry && ev.FinishReason == "error" && ev.Unavailable && !ev.HasToken {
			return true
		}
		select {
		case out <- ev:
			sent++
		case <-ctx.Done():
			return false
		}
		if ev.FinishReason != "" {
			return false
		}
	}
	return false
}

// failed is the error event of a job that could not be routed.
func failed(job *actors.PrefillJob, err error) *actors.TokenEvent {
	return &actors.TokenEvent{RequestId: job.RequestId, FinishReason: "error", Error: err.Error(),
		Unavailable: errors.Is(err, route.ErrUnavailable) || errors.Is(err, route.ErrUnknownModel)}
}

// Pick probes the candidate replicas for job and routes it: the chosen
// replica and the decision. exclude names member ids not to pick.
func (g *Gateway) Pick(ctx context.Context, job *actors.PrefillJob, exclude []string) (node.Replica, route.Decision, error) {
	return g.pick(ctx, job, exclude, false)
}

// pick is Pick; with reserve it counts the job as sent to the chosen
// replica in the same step as the decision (track(-1) when it ends), so
// that decisions made together see each other.
func (g *Gateway) pick(ctx context.Context, job *actors.PrefillJob, exclude []string, reserve bool) (node.Replica, route.Decision, error) {
	all := g.backend.Replicas()
	states := make([]route.Replica, len(all))
	var wg sync.WaitGroup
	pctx, cancel := context.WithTimeout(ctx, g.cfg.ProbeTimeout)
	defer cancel()
	req := route.Request{Model: g.cfg.Model, Tokens: job.Prompt, Boundary: int(job.HistoryBoundary), Exclude: exclude}
	var conv string
	req.Tenant, conv = kvcache.SplitScope(job.CacheScope)
	switch {
	case conv != "":
		// prompt_cache_key: the conversation sticks to one replica while
		// no replica's cache tells better.
		req.StickyKey = job.CacheScope
	case job.Conversation != "":
		// Else the conversation's opening does.
		req.StickyKey = req.Tenant + "\x00" + job.Conversation
	}
	// The prompt's block hashes, once: the route, the probes' digests and
	// the prediction all read them.
	req.Blocks = route.BlockHashes(req.Tenant, req.Tokens)
	candidates := 0
	for _, r := range all {
		if r.Model == g.cfg.Model && !slices.Contains(exclude, r.MemberID) {
			candidates++
		}
	}
	for i, r := range all {
		states[i] = route.Replica{ID: r.MemberID, Model: r.Model, CapabilityKnown: true, SnapshotReuse: r.SnapshotReuse}
		if r.Model != g.cfg.Model || slices.Contains(exclude, r.MemberID) {
			continue
		}
		if candidates == 1 {
			// Nothing to choose: no probe round trip (a replica that
			// fails is handled by the retry, which finds none left).
			states[i].Routable = true
			continue
		}
		if p, ok := g.backend.Published(r); ok && time.Since(p.At) < g.cfg.Fresh {
			s := &states[i]
			s.Routable = true
			s.Waiting, s.Running, s.FreePages, s.Prefix = p.Waiting, p.Running, p.FreePages, p.Prefix
			continue
		}
		if m := g.cfg.Metrics; m != nil {
			m.RouteProbes.Inc()
		}
		wg.Add(1)
		go func(s *route.Replica, r node.Replica) {
			defer wg.Done()
			p, err := g.backend.Probe(pctx, r, job)
			if err != nil {
				g.cfg.Logger.Warn("cluster gateway: probe failed", "replica", r.MemberID, "err", err)
				return
			}
			s.Routable = true
			s.Waiting, s.Running, s.FreePages = p.Waiting, p.Running, p.FreePages
			s.Prefix = probedPrefix(req, r.SnapshotReuse, p.Reusable)
		}(&states[i], r)
	}
	wg.Wait()
	// The jobs this gateway sent that have not ended are a floor of a
	// replica's load: requests arriving together would otherwise all see
	// the load of before the first was sent, and all go to one replica.
	// The floor is read, and the decision counted, under one lock.
	// What the gateway sent a replica is in its cache before its
	// published digest says so (the jobs' prompt blocks, dense models).
	g.mu.Lock()
	for i := range states {
		s := &states[i]
		if own := g.inflight[s.ID]; s.Routable && own > s.Waiting+s.Running {
			s.Waiting = own - s.Running
		}
		if p, ok := g.predicted[s.ID]; ok && s.Routable && !s.SnapshotReuse {
			s.Prefix = either{s.Prefix, p}
		}
	}
	d, err := route.Route(req, states, g.cfg.Policy)
	if err == nil && reserve {
		g.inflight[d.ReplicaID]++
		if !slices.ContainsFunc(states, func(s route.Replica) bool { return s.ID == d.ReplicaID && s.SnapshotReuse }) {
			g.predict(d.ReplicaID, req.Blocks, all)
		}
	}
	g.mu.Unlock()
	if err != nil {
		return node.Replica{}, route.Decision{}, err
	}
	for _, r := range all {
		if r.MemberID == d.ReplicaID {
			return r, d, nil
		}
	}
	if reserve {
		g.done(d.ReplicaID)
	}
	return node.Replica{}, route.Decision{}, errors.New("cluster gateway: the route named a replica the view does not hold")
}

// predict records that replica id will cache blocks (g.mu held), and
// forgets the predictions of replicas no longer in all.
func (g *Gateway) predict(id string, blocks []route.BlockHash, all []node.Replica) {
	p, ok := g.predicted[id]
	if !ok {
		p = route.NewDigest(g.cfg.Predicted)
		g.predicted[id] = p
		for other := range g.predicted {
			if !slices.ContainsFunc(all, func(r node.Replica) bool { return r.MemberID == other }) {
				delete(g.predicted, other)
			}
		}
	}
	p.AddBlocks(blocks)
}

// either holds what a or b holds.
type either struct{ a, b route.Prefixes }

func (e either) Contains(h route.BlockHash) bool {
	return (e.a != nil && e.a.Contains(h)) || e.b.Contains(h)
}

// probedPrefix is the digest a probe stands for, as far as req can tell
// (from its Blocks when set):
// the block hashes of the reusable prefix (dense models), or the snapshot
// key at the history boundary when the replica would reuse at least that
// much (snapshot models).
func probedPrefix(req route.Request, snapshot bool, reusable int) route.Prefixes {
	reusable = min(reusable, len(req.Tokens))
	if reusable <= 0 {
		return nil
	}
	if snapshot {
		if req.Boundary <= 0 || req.Boundary > reusable {
			return nil
		}
		return route.NewHashSet([]route.BlockHash{route.SnapshotKeyFromBlocks(req.Blocks, req.Tenant, req.Tokens[:req.Boundary])})
	}
	blocks := req.Blocks
	if blocks == nil {
		blocks = route.BlockHashes(req.Tenant, req.Tokens[:reusable])
	}
	return route.NewHashSet(blocks[:min(reusable/route.BlockTokens, len(blocks))])
}

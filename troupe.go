// Package troupe is the embedding API of the troupe serving runtime: start
// the actor pipeline for a model in-process (Start), or spawn it into a host
// application's own actor system (Spawn), then prepare and generate through
// the same render + encode path the HTTP server uses.
//
//	rt, err := troupe.Start(ctx, troupe.Options{Model: "path/to/model"})
//	defer rt.Close()
//	stream, err := rt.Generate(ctx, &chat.Request{Messages: msgs, MaxTokens: 64})
//	for ev := range stream.Events { ... }
package troupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// Options configure a runtime.
type Options struct {
	// Model is the model folder; "" uses the built-in demo model.
	Model string
	// ServedName is the model's name in the API; default: the folder's name.
	ServedName string
	// ChatTemplate overrides the model's chat template with a file.
	ChatTemplate string
	// Threads is the number of compute threads; 0 means all cores.
	Threads int
	// Parallel caps the sequences running at once; 0 means 16.
	Parallel int
	// KVBudget bounds the per-sequence memory in bytes: the KV pool (pages
	// and recurrent-state slots) and the snapshot cache together; 0 means
	// 1 GiB. Both live off the Go heap. A budget that cannot hold one
	// sequence fails the model load.
	KVBudget int64
	// SnapshotBudget is the snapshot cache's share of KVBudget on models
	// that reuse prompts by whole-state snapshots (state-space and hybrid
	// models, prompt cache on); the pool gets the rest. 0 means a quarter
	// of KVBudget. It must be less than KVBudget.
	SnapshotBudget int64
	// StepTokens is the per-step token budget (chunked prefill); 0 means 512.
	StepTokens int
	// PromptCache turns on prompt reuse (and with it history-boundary
	// renders on snapshot-reuse models).
	PromptCache bool
	// Preparers is the size of the RequestPreparer pool; 0 means one per core.
	Preparers int
	// Logger receives the runtime's logs; nil means slog.Default().
	Logger *slog.Logger

	// LoadDelay slows the weight load (tests of requests queued during load).
	LoadDelay time.Duration
	// PrepareHook runs in the preparer before each request (tests inject
	// panics through it).
	PrepareHook func(*actors.Prepare)
}

// DefaultSnapshotShare: without Options.SnapshotBudget, snapshots get
// 1/DefaultSnapshotShare of the KV budget.
const DefaultSnapshotShare = 4

// Runtime is one model's actor pipeline.
type Runtime struct {
	system  *actor.ActorSystem
	own     bool
	pids    actors.Pids
	metrics *metrics.Metrics
	opts    Options
	name    string
	next    atomic.Uint64
}

// Start creates an actor system and spawns the pipeline into it.
func Start(ctx context.Context, opts Options) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("lib", "protoactor")
	}))
	rt, err := Spawn(system, opts)
	if err != nil {
		return nil, err
	}
	rt.own = true
	return rt, nil
}

// Spawn spawns the pipeline into a host application's actor system; the
// host can then talk to Runtime.Pids() by message.
func Spawn(system *actor.ActorSystem, opts Options) (*Runtime, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Threads <= 0 {
		opts.Threads = runtime.NumCPU()
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 16
	}
	if opts.KVBudget <= 0 {
		opts.KVBudget = 1 << 30
	}
	if opts.SnapshotBudget < 0 || opts.SnapshotBudget >= opts.KVBudget {
		return nil, fmt.Errorf("troupe: the snapshot budget of %s must be less than the KV budget of %s",
			kvcache.FormatBytes(opts.SnapshotBudget), kvcache.FormatBytes(opts.KVBudget))
	}
	if opts.SnapshotBudget == 0 {
		opts.SnapshotBudget = opts.KVBudget / DefaultSnapshotShare
	}
	if opts.Preparers <= 0 {
		opts.Preparers = runtime.NumCPU()
	}
	dir := opts.Model
	if dir == "" {
		var err error
		if dir, err = checkpoint.Demo(); err != nil {
			return nil, err
		}
		opts.Model = dir
		if opts.ServedName == "" {
			opts.ServedName = "troupe-demo"
		}
	}
	if opts.ServedName == "" {
		opts.ServedName = filepath.Base(filepath.Clean(dir))
	}
	rt := &Runtime{system: system, metrics: metrics.New(), opts: opts, name: opts.ServedName}
	rt.metrics.KVBudget.Set(float64(opts.KVBudget))
	root := system.Root
	var err error
	rt.pids.Scheduler, err = root.SpawnNamed(actor.PropsFromProducer(actors.NewSchedulerActor(
		engine.Options{StepTokens: opts.StepTokens, MaxRunning: opts.Parallel, PrefixCache: opts.PromptCache,
			SnapshotBudget: opts.SnapshotBudget}, rt.metrics, opts.Logger)), "scheduler-"+rt.name+"-"+uniq())
	if err != nil {
		return nil, fmt.Errorf("spawn scheduler: %w", err)
	}
	loader := &dirLoader{opts: opts}
	rt.pids.Model, err = root.SpawnNamed(actor.PropsFromProducer(actors.NewModelActor(rt.name, loader, rt.pids.Scheduler, opts.Logger)), "model-"+rt.name+"-"+uniq())
	if err != nil {
		return nil, fmt.Errorf("spawn model actor: %w", err)
	}
	for i := 0; i < opts.Preparers; i++ {
		pid := root.Spawn(actor.PropsFromProducer(actors.NewRequestPreparer(rt.pids.Model, rt.metrics, opts.Logger, opts.PrepareHook)))
		rt.pids.Preparers = append(rt.pids.Preparers, pid)
	}
	return rt, nil
}

var spawnCount atomic.Uint64

func uniq() string { return strconv.FormatUint(spawnCount.Add(1), 10) }

// Name is the served model name.
func (r *Runtime) Name() string { return r.name }

// Pids names the runtime's actors, for hosts that talk to them by message.
func (r *Runtime) Pids() actors.Pids { return r.pids }

// Metrics returns the runtime's Prometheus collectors.
func (r *Runtime) Metrics() *metrics.Metrics { return r.metrics }

// PromptCache reports whether the prompt cache is on.
func (r *Runtime) PromptCache() bool { return r.opts.PromptCache }

// Status asks the ModelActor for its load phase.
func (r *Runtime) Status(ctx context.Context) (*actors.LoadStatus, error) {
	return ask[*actors.LoadStatus](ctx, r, r.pids.Model, &actors.LoadStatusQuery{})
}

// ResetCache asks the SchedulerActor to drop every cached prefix.
func (r *Runtime) ResetCache(ctx context.Context) (*actors.SchedulerStats, error) {
	return ask[*actors.SchedulerStats](ctx, r, r.pids.Scheduler, &actors.CacheReset{})
}

// Reusable asks the SchedulerActor how many tokens of prompt its cache would
// reuse right now.
func (r *Runtime) Reusable(ctx context.Context, prompt []int32, scope string) (int, error) {
	res, err := ask[*actors.CacheProbeResult](ctx, r, r.pids.Scheduler, &actors.CacheProbe{Prompt: prompt, CacheScope: scope})
	if err != nil {
		return 0, err
	}
	return int(res.ReusableTokens), nil
}

// SchedulerStats asks the SchedulerActor for its counters.
func (r *Runtime) SchedulerStats(ctx context.Context) (*actors.SchedulerStats, error) {
	return ask[*actors.SchedulerStats](ctx, r, r.pids.Scheduler, &actors.StatsQuery{})
}

// ask sends msg to pid and expects an answer of type T.
func ask[T any](ctx context.Context, r *Runtime, pid *actor.PID, msg any) (T, error) {
	var zero T
	res, err := r.request(ctx, pid, msg)
	if err != nil {
		return zero, err
	}
	t, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("actor %s answered %T to %T", pid.Id, res, msg)
	}
	return t, nil
}

func (r *Runtime) request(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	return r.system.Root.RequestFuture(pid, msg, timeout).Result()
}

// Prepare renders and tokenizes req through a RequestPreparer (the same path
// generation takes). With inspect, no job is built.
func (r *Runtime) Prepare(ctx context.Context, req *chat.Request, inspect bool) (*actors.Prepared, error) {
	id, p := r.pick("req-")
	res, err := r.request(ctx, p, &actors.Prepare{ID: id, Request: req, PromptCache: r.opts.PromptCache, InspectOnly: inspect})
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	out, ok := res.(*actors.Prepared)
	if !ok {
		return nil, fmt.Errorf("preparer answered %T", res)
	}
	if out.Err != nil {
		return out, out.Err
	}
	return out, nil
}

// WarmUp asks, after a turn of a conversation on a snapshot-reuse model
// finished with reply, for the history the next turn will render to be
// prefilled from the best snapshot and stored, when the scheduler is idle.
// It returns once the job is queued; errors only mean no warm-up.
func (r *Runtime) WarmUp(ctx context.Context, req *chat.Request, reply string) error {
	id, p := r.pick("warm-")
	res, err := r.request(ctx, p, &actors.Prepare{ID: id, Request: req, PromptCache: r.opts.PromptCache, WarmUpReply: &reply})
	if err != nil {
		return err
	}
	out, ok := res.(*actors.Prepared)
	if !ok || out.Err != nil || out.Job == nil {
		return fmt.Errorf("warm-up not prepared: %v", out.Err)
	}
	r.system.Root.Send(r.pids.Scheduler, out.Job)
	return nil
}

// pick names a new request and chooses its preparer, round-robin.
func (r *Runtime) pick(prefix string) (string, *actor.PID) {
	n := r.next.Add(1)
	return prefix + strconv.FormatUint(n, 10), r.pids.Preparers[int(n%uint64(len(r.pids.Preparers)))]
}

// Stream is one generation in flight.
type Stream struct {
	// Prepared is the prompt the model sees.
	Prepared *actors.Prepared
	// Events delivers the tokens; it is closed after the final event (one
	// with a FinishReason).
	Events <-chan *actors.TokenEvent
	cancel func()
}

// Cancel stops the generation and frees its KV; Events is closed soon after.
func (s *Stream) Cancel() { s.cancel() }

// ErrClosed is returned by a stream's runtime after Close.
var ErrClosed = errors.New("troupe: runtime closed")

// Generate prepares req and streams its tokens. Cancelling ctx cancels the
// generation.
func (r *Runtime) Generate(ctx context.Context, req *chat.Request) (*Stream, error) {
	prep, err := r.Prepare(ctx, req, false)
	if err != nil {
		return nil, err
	}
	events := make(chan *actors.TokenEvent, 64)
	job := prep.Job
	done := make(chan struct{})     // closed by Cancel
	finished := make(chan struct{}) // closed by the receiver when the stream ends
	// A per-request actor receives the scheduler's events (so the job's
	// sender is an actor that could live anywhere) and hands them on.
	pid := r.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(r.pids.Scheduler, job)
		case *actors.TokenEvent:
			select {
			case events <- m:
			case <-done:
			}
			if m.FinishReason != "" {
				c.Stop(c.Self())
			}
		case *actor.Stopping:
			close(events)
			close(finished)
		}
	}))
	var cancelled atomic.Bool
	cancel := func() {
		if cancelled.CompareAndSwap(false, true) {
			close(done)
			r.system.Root.Send(r.pids.Scheduler, &actors.CancelJob{RequestId: job.RequestId})
			r.system.Root.Stop(pid)
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-finished:
		}
	}()
	return &Stream{Prepared: prep, Events: events, cancel: cancel}, nil
}

// Close stops the runtime's actors (and its actor system when Start made
// it). It returns once the scheduler has stopped and given back the KV
// pool's and the snapshots' memory.
func (r *Runtime) Close() {
	root := r.system.Root
	for _, p := range r.pids.Preparers {
		root.Stop(p)
	}
	root.Stop(r.pids.Model)
	_ = root.StopFuture(r.pids.Scheduler).Wait()
	if r.own {
		r.system.Shutdown()
	}
}

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
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
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
	// Device is the compute device: "" or "cpu", "cuda" or "cuda:N" (CUDA
	// device N, in a binary built with -tags cuda; see ParseDevice and
	// CheckDevice).
	Device string
	// MmapWeights keeps the weights in the memory-mapped checkpoint files
	// instead of copying them into huge-page memory (model.LoadOptions.Mmap).
	MmapWeights bool
	// NoPackedWeights skips the packed copies the CPU device makes at load
	// (model.PackWeights): panels of BF16 layer matrices for prefill, and
	// quantized layer matrices in the layout of decode and batches. It
	// saves their memory (as much again as those matrices) at the cost of
	// slower prefill and batch decode.
	NoPackedWeights bool
	// Quantize, when set (gpu.Q8_0, ...), quantizes the model's F32, BF16
	// and F16 weight matrices at load (model.LoadOptions.Quantize): serve
	// --quantize. A GGUF file's quantized matrices are kept as they are.
	Quantize gpu.DType
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
	// PrefaultKV commits the KV pool's memory at load, before the model
	// is marked loaded, as llama.cpp (which clears its KV buffer) and vLLM
	// (which reserves its cache blocks) do: the first requests then do not
	// pay for first-touch page faults in the pool, which on a virtual
	// machine cost as much as 1.6 s per GiB, and the memory is resident
	// from the start rather than growing under load. The zero value leaves
	// the pool to be committed as it is used (embedders and tests that
	// start many runtimes); troupe serve turns it on (--kv-prefault).
	PrefaultKV bool
	// StepTokens is the per-step token budget (chunked prefill); 0 means 512.
	StepTokens int
	// StepStretch bounds a step that prefills beside decoding streams to
	// about this many decode steps (engine.Options.StepStretch): 0 means
	// 2, 1 or less turns it off.
	StepStretch float64
	// MaxModelLen caps one request's context (prompt plus max tokens)
	// below the model's max_position_embeddings, as vLLM's --max-model-len
	// does; 0 means the model's.
	MaxModelLen int
	// PromptCache turns on prompt reuse (and with it history-boundary
	// renders on snapshot-reuse models).
	PromptCache bool
	// BoundarySnapshots is the history-boundary kill switch (serve
	// --boundary-snapshots): actors.BoundarySnapshotsAuto ("" too) leaves
	// the capability gate to decide; actors.BoundarySnapshotsOff renders no
	// history boundary on any path (not fail-open during load, not on
	// snapshot-reuse models), prepares no next-turn warm-up and stores no
	// shared-prefix snapshot for n > 1 choices unless the model is known to
	// be dense-KV; the scheduler of a snapshot-reuse model then also
	// ignores the boundaries of jobs prepared elsewhere (a cluster
	// gateway's) and drops warm-ups. It never makes the gate looser.
	BoundarySnapshots actors.BoundarySnapshots
	// GenerationConfig says where a request's unset sampling parameters
	// come from: GenerationConfigAuto ("" too) takes the model's
	// recommended ones from its generation_config.json, as vLLM's
	// --generation-config auto; GenerationConfigNone ("vllm" too, vLLM's
	// name for it) ignores them, so the server's own defaults apply.
	GenerationConfig string
	// StallTimeout is how long queued work may wait for an engine step
	// before the runtime reports itself stalled (Runtime.Stalled, /ready,
	// troupe_scheduler_stalled); 0 means 60s, negative turns it off.
	StallTimeout time.Duration
	// Preparers is the size of the RequestPreparer pool; 0 means one per core.
	Preparers int
	// Logger receives the runtime's logs; nil means slog.Default().
	Logger *slog.Logger

	// PrepareTimeout bounds how long a request waits for a preparer and its
	// answer; past it the request fails with *actors.TimedOut (HTTP 503).
	// 0 means 30s.
	PrepareTimeout time.Duration
	// BigPrepareBytes is the size of text (messages, tools, prompt) from
	// which a preparation counts as big: at most Preparers-1 big ones (at
	// least one) run at once, so small requests always find a preparer
	// that is not busy with a huge prompt. 0 means 256 KiB.
	BigPrepareBytes int
	// MaxInspections bounds the inspection requests (tokenize, detokenize,
	// apply-template, input_tokens, count_tokens) in flight; past it they
	// are refused with *actors.Overloaded (HTTP 429). 0 means 16 (at least
	// 2 per preparer).
	MaxInspections int
	// InspectMaxInput bounds an inspection's input: bytes of text, or
	// tokens for detokenize; past it the answer is *actors.TooLarge (HTTP
	// 413). 0 means 1 MiB.
	InspectMaxInput int
	// InspectMaxOutput bounds an inspection answer's size in bytes (the
	// HTTP layer refuses with 413 past it). 0 means 16 MiB.
	InspectMaxOutput int

	// LoadProgress, when set, receives the weight read's progress in bytes
	// (troupe serve draws a bar with it on a terminal); without it a slow
	// read logs a line every few seconds.
	LoadProgress func(done, total int64)

	// LoadDelay slows the weight load (tests of requests queued during load).
	LoadDelay time.Duration
	// PrepareHook runs in the preparer before each request (tests inject
	// panics through it).
	PrepareHook func(*actors.Prepare)
	// JobHook sees each generation's job just before it goes to the
	// scheduler (tests check what the engine is asked to do).
	JobHook func(*actors.PrefillJob)

	// Dispatcher, when set, runs every generation's prepared job instead
	// of the local SchedulerActor: a cluster gateway sends it to a replica
	// (package cluster/gateway). Every API path shares it, since they all
	// generate through GenerateN. Warm-ups are not dispatched.
	Dispatcher Dispatcher
	// RequestIDPrefix is put before every request id the runtime makes
	// ("req-1" becomes RequestIDPrefix+"req-1"): a cluster member sets its
	// member id, so ids are unique across the gateways that share a
	// replica's scheduler, which keys jobs by id.
	RequestIDPrefix string
	// NoWeights loads the model's assets only (tokenizer, chat template,
	// generation config), not its weights: the runtime prepares requests
	// and reports ready once the assets are read, and needs a Dispatcher
	// to generate (a gateway-only cluster member).
	NoWeights bool
	// OnCached, when set, is told of every token prefix the prompt cache
	// takes in or serves (engine.Options.OnCached): a cluster replica
	// keeps from it the digest of cached prefixes it publishes. It runs on
	// the engine's goroutine and must not keep tokens.
	OnCached func(scope string, tokens []int32, snapshot bool)
	// Metrics, with NoWeights, are collectors the runtime counts into
	// instead of its own: a cluster member that prepares requests for
	// several models (one runtime each) exposes one set of request,
	// latency and routing metrics. Nil: the runtime's own.
	Metrics *metrics.Metrics
}

// Dispatcher runs prepared jobs somewhere other than the runtime's own
// scheduler.
type Dispatcher interface {
	// Dispatch starts job and returns its TokenEvents: the channel ends
	// with the event that carries a FinishReason, then closes. Ending ctx
	// cancels the job (and closes the channel soon after).
	Dispatch(ctx context.Context, job *actors.PrefillJob) <-chan *actors.TokenEvent
}

// The values of Options.GenerationConfig.
const (
	GenerationConfigAuto = "auto"
	GenerationConfigNone = "none"
)

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
	beat    *actors.Progress
	started time.Time

	// idle holds the indexes of the preparers with no request: a request
	// takes one and gives it back when the preparer has answered, so no
	// request waits behind another's preparation while a preparer is idle.
	idle chan int
	// big bounds the big preparations running at once.
	big chan struct{}
	// inspections bounds the inspection requests in flight.
	inspections chan struct{}
	// limits are the loaded model's length limits (nil while loading).
	limits atomic.Pointer[engine.Limits]
	// sampling are the model's sampling defaults in use (nil while loading).
	sampling atomic.Pointer[sample.Defaults]
	assets   atomic.Pointer[chat.Assets]
}

// InspectLimits bound one inspection request.
type InspectLimits struct {
	// MaxInput is in bytes of text (tokens for detokenize); MaxOutput in
	// bytes of the answer.
	MaxInput, MaxOutput int
}

// Start creates an actor system and spawns the pipeline into it.
func Start(ctx context.Context, opts Options) (*Runtime, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		// protoactor narrates its life at INFO (system started, dead
		// letters); an operator wants its warnings and errors only.
		return slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn}).With("lib", "protoactor")
	}),
		// Expected dead letters (answers to requesters that left) are not
		// logged at all (actors/deadletter.go); the rest at most 3 a minute.
		actor.WithDeadLetterThrottleInterval(time.Minute), actor.WithDeadLetterThrottleCount(3))
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
	if opts.MaxModelLen < 0 {
		return nil, fmt.Errorf("troupe: MaxModelLen %d is negative", opts.MaxModelLen)
	}
	if opts.NoWeights && opts.Dispatcher == nil {
		return nil, errors.New("troupe: a runtime without weights needs a Dispatcher to generate")
	}
	if opts.Metrics != nil && !opts.NoWeights {
		return nil, errors.New("troupe: shared Metrics are for runtimes without weights; a model's runtime has its own")
	}
	if opts.Preparers <= 0 {
		opts.Preparers = runtime.NumCPU()
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = time.Minute
	}
	if opts.PrepareTimeout <= 0 {
		opts.PrepareTimeout = 30 * time.Second
	}
	if opts.BigPrepareBytes <= 0 {
		opts.BigPrepareBytes = 256 << 10
	}
	if opts.MaxInspections <= 0 {
		opts.MaxInspections = max(16, 2*opts.Preparers)
	}
	if opts.InspectMaxInput <= 0 {
		opts.InspectMaxInput = 1 << 20
	}
	if opts.InspectMaxOutput <= 0 {
		opts.InspectMaxOutput = 16 << 20
	}
	switch opts.GenerationConfig {
	case "", GenerationConfigAuto:
		opts.GenerationConfig = GenerationConfigAuto
	case GenerationConfigNone, "vllm":
		opts.GenerationConfig = GenerationConfigNone
	default:
		return nil, fmt.Errorf("troupe: generation config %q: want %q (the model's sampling defaults) or %q (the server's)",
			opts.GenerationConfig, GenerationConfigAuto, GenerationConfigNone)
	}
	bs, err := actors.ParseBoundarySnapshots(string(opts.BoundarySnapshots))
	if err != nil {
		return nil, fmt.Errorf("troupe: %w", err)
	}
	opts.BoundarySnapshots = bs
	dir := opts.Model
	if dir == "" {
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
	rt := &Runtime{system: system, metrics: opts.Metrics, opts: opts, name: opts.ServedName, beat: &actors.Progress{}, started: time.Now(),
		idle: make(chan int, opts.Preparers), big: make(chan struct{}, max(1, opts.Preparers-1)),
		inspections: make(chan struct{}, opts.MaxInspections)}
	if rt.metrics == nil {
		rt.metrics = metrics.New()
		rt.metrics.WatchScheduler(rt.beat, opts.StallTimeout)
		rt.metrics.KVBudget.Set(float64(opts.KVBudget))
	}
	root := system.Root
	rt.pids.Scheduler, err = root.SpawnNamed(actor.PropsFromProducer(actors.NewSchedulerActor(
		engine.Options{StepTokens: opts.StepTokens, MaxRunning: opts.Parallel, PrefixCache: opts.PromptCache, OnCached: opts.OnCached,
			SnapshotBudget: opts.SnapshotBudget, MaxModelLen: opts.MaxModelLen, StepStretch: opts.StepStretch,
			NoBoundarySnapshots: opts.BoundarySnapshots.Off()}, rt.metrics, opts.Logger, rt.beat)), "scheduler-"+rt.name+"-"+uniq())
	if err != nil {
		return nil, fmt.Errorf("spawn scheduler: %w", err)
	}
	device := opts.Device // a bad name fails the load (openDevice)
	if spec, err := ParseDevice(opts.Device); err == nil {
		device = spec.String()
	}
	loader := &limitsLoader{Loader: &dirLoader{opts: opts}, limits: &rt.limits, sampling: &rt.sampling, assets: &rt.assets,
		maxModelLen: opts.MaxModelLen, metrics: rt.metrics, device: device, log: opts.Logger}
	rt.pids.Model, err = root.SpawnNamed(actor.PropsFromProducer(actors.NewModelActor(rt.name, loader, rt.pids.Scheduler, opts.Logger)), "model-"+rt.name+"-"+uniq())
	if err != nil {
		return nil, fmt.Errorf("spawn model actor: %w", err)
	}
	for i := 0; i < opts.Preparers; i++ {
		pid := root.Spawn(actor.PropsFromProducer(actors.NewRequestPreparer(rt.pids.Model, rt.metrics, opts.Logger, opts.PrepareHook, opts.BoundarySnapshots)))
		rt.pids.Preparers = append(rt.pids.Preparers, pid)
		rt.idle <- i
	}
	return rt, nil
}

// limitsLoader records the loaded model's length limits for the runtime
// before the ModelActor hands the model to the scheduler, so requests can
// be checked against them before they are submitted, and the sampling
// defaults in use, for the runtime to report.
type limitsLoader struct {
	actors.Loader
	limits      *atomic.Pointer[engine.Limits]
	sampling    *atomic.Pointer[sample.Defaults]
	assets      *atomic.Pointer[chat.Assets]
	maxModelLen int
	// metrics gets troupe_device_memory_bytes, labelled device, when the
	// loaded device reports its memory (gpu.MemoryReporter).
	metrics *metrics.Metrics
	device  string
	log     *slog.Logger
}

func (l *limitsLoader) LoadAssets(ctx context.Context) (*chat.Assets, error) {
	a, err := l.Loader.LoadAssets(ctx)
	if err == nil {
		d := a.Sampling
		l.sampling.Store(&d)
		l.assets.Store(a)
	}
	return a, err
}

func (l *limitsLoader) LoadModel(ctx context.Context, phase func(string)) (model.Model, gpu.Device, *kvcache.Pool, error) {
	m, dev, pool, err := l.Loader.LoadModel(ctx, phase)
	if err == nil && m != nil {
		lim := engine.LimitsOf(m, pool, l.maxModelLen)
		l.limits.Store(&lim)
	}
	if r, ok := dev.(gpu.MemoryReporter); ok && err == nil {
		if werr := l.metrics.WatchDeviceMemory(l.device, r); werr != nil {
			l.log.Warn("device memory is not exported", "device", l.device, "err", werr)
		}
	}
	return m, dev, pool, err
}

// minLevel passes on records at min or above only.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

var spawnCount atomic.Uint64

func uniq() string { return strconv.FormatUint(spawnCount.Add(1), 10) }

// ModelDir is the model folder the runtime serves (the demo model's
// generated folder when Options.Model was "").
func (r *Runtime) ModelDir() string { return r.opts.Model }

// Name is the served model name.
func (r *Runtime) Name() string { return r.name }

// Started is when the runtime started (the model's "created" time in
// /v1/models, as vLLM reports it).
func (r *Runtime) Started() time.Time { return r.started }

// Pids names the runtime's actors, for hosts that talk to them by message.
func (r *Runtime) Pids() actors.Pids { return r.pids }

// Metrics returns the runtime's Prometheus collectors.
func (r *Runtime) Metrics() *metrics.Metrics { return r.metrics }

// Logger is the runtime's logger.
func (r *Runtime) Logger() *slog.Logger { return r.opts.Logger }

// InspectLimits are the bounds on one inspection request.
func (r *Runtime) InspectLimits() InspectLimits {
	return InspectLimits{MaxInput: r.opts.InspectMaxInput, MaxOutput: r.opts.InspectMaxOutput}
}

// AdmitInspection takes one of the MaxInspections slots for an inspection
// request, or refuses with *actors.Overloaded when all are taken; release
// frees the slot.
func (r *Runtime) AdmitInspection() (release func(), err error) {
	select {
	case r.inspections <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-r.inspections }) }, nil
	default:
		return nil, &actors.Overloaded{What: "inspection requests in flight", Limit: cap(r.inspections), RetryAfter: time.Second}
	}
}

// Limits are the loaded model's length limits; ok is false while it loads.
func (r *Runtime) Limits() (l engine.Limits, ok bool) {
	if p := r.limits.Load(); p != nil {
		return *p, true
	}
	return engine.Limits{}, false
}

// SamplingDefaults are the sampling parameters that fill what a request
// leaves unset: the model's recommended ones (Options.GenerationConfig);
// ok is false until the model's files are read.
func (r *Runtime) SamplingDefaults() (d sample.Defaults, ok bool) {
	if p := r.sampling.Load(); p != nil {
		return *p, true
	}
	return sample.Defaults{}, false
}

// PreserveThinking is what the model's chat template does with earlier
// turns' reasoning (probed once its files are read; ok false before) and
// whether requests get preserve_thinking by default (the prompt cache on
// and a template that keeps earlier reasoning).
func (r *Runtime) PreserveThinking() (s chat.PreserveSupport, byDefault, ok bool) {
	a := r.assets.Load()
	if a == nil {
		return chat.PreserveSupport{}, false, false
	}
	s = a.PreserveThinking(false)
	return s, r.opts.PromptCache && s.Supported(), true
}

// Parallel is the most sequences the engine runs at once (Options.Parallel).
func (r *Runtime) Parallel() int { return r.opts.Parallel }

// PromptCache reports whether the prompt cache is on.
func (r *Runtime) PromptCache() bool { return r.opts.PromptCache }

// BoundarySnapshots is the history-boundary kill switch in use
// (Options.BoundarySnapshots): auto or off.
func (r *Runtime) BoundarySnapshots() actors.BoundarySnapshots { return r.opts.BoundarySnapshots }

// AdoptCapability tells a runtime without weights (Options.NoWeights) the
// capability of the replicas it dispatches to, so its preparers render as
// for the model (history boundaries on snapshot-reuse models) rather than
// fail-open. A runtime that loaded its model ignores it.
func (r *Runtime) AdoptCapability(c *actors.CapabilityReady) {
	if r.opts.NoWeights && (c.MaxPos > 0 || c.KvPages > 0) {
		// The replicas' length limits: GenerateN refuses what they
		// cannot run before dispatching it, and /v1/models shows them.
		lim := engine.Limits{MaxPos: int(c.MaxPos), Capped: c.MaxPosCapped, Pages: int(c.KvPages), PageSize: int(c.KvPageSize)}
		if old := r.limits.Load(); old == nil || *old != lim {
			r.limits.Store(&lim)
		}
	}
	r.system.Root.Send(r.pids.Model, &actors.CapabilityReady{Model: c.Model, SnapshotReuse: c.SnapshotReuse})
}

// Status asks the ModelActor for its load phase.
func (r *Runtime) Status(ctx context.Context) (*actors.LoadStatus, error) {
	return ask[*actors.LoadStatus](ctx, r, r.pids.Model, &actors.LoadStatusQuery{})
}

// Stalled reports whether queued work has waited longer than the stall
// timeout for an engine step, and how long it has waited. It reads the
// scheduler's heartbeat without asking the actor, so it answers even when
// the scheduler is stuck.
func (r *Runtime) Stalled() (bool, time.Duration) {
	now := time.Now()
	return r.beat.Stalled(now, r.opts.StallTimeout), r.beat.Waiting(now)
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
// generation takes). With inspect, no job is built and the input is checked
// against InspectMaxInput. It waits for an idle preparer and its answer at
// most PrepareTimeout (or until ctx ends): past it the error is
// *actors.TimedOut.
func (r *Runtime) Prepare(ctx context.Context, req *chat.Request, inspect bool) (*actors.Prepared, error) {
	size := requestBytes(req)
	if inspect && size > r.opts.InspectMaxInput {
		return nil, &actors.TooLarge{What: "the input", Size: size, Limit: r.opts.InspectMaxInput, Unit: "bytes of text"}
	}
	out, err := r.prepare(ctx, "req-", size, func(id string) *actors.Prepare {
		return &actors.Prepare{ID: id, Request: req, PromptCache: r.opts.PromptCache, InspectOnly: inspect}
	})
	if err != nil {
		return nil, err
	}
	if out.Err != nil {
		return out, out.Err
	}
	return out, nil
}

// prepare sends one Prepare to an idle preparer and waits for its answer.
// A preparer is given back to the idle set only once it has answered, even
// when the caller stopped waiting, so later requests are never queued
// behind a preparation still running. size is the request's text in bytes
// (requestBytes): big ones wait for a big-preparation slot.
func (r *Runtime) prepare(ctx context.Context, prefix string, size int, msg func(id string) *actors.Prepare) (*actors.Prepared, error) {
	timeout := r.opts.PrepareTimeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func() error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &actors.TimedOut{What: "prepare", After: timeout, RetryAfter: time.Second}
		}
		return fmt.Errorf("prepare: %w", ctx.Err())
	}
	big := size > r.opts.BigPrepareBytes
	if big {
		select {
		case r.big <- struct{}{}:
		case <-ctx.Done():
			return nil, timedOut()
		}
	}
	var idx int
	select {
	case idx = <-r.idle:
	case <-ctx.Done():
		if big {
			<-r.big
		}
		return nil, timedOut()
	}
	id := r.opts.RequestIDPrefix + prefix + strconv.FormatUint(r.next.Add(1), 10)
	// The future outlives the caller's wait: it only frees the preparer.
	fut := r.system.Root.RequestFuture(r.pids.Preparers[idx], msg(id), preparerAnswerTimeout)
	type answer struct {
		res any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := fut.Result()
		r.idle <- idx
		if big {
			<-r.big
		}
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, fmt.Errorf("prepare: %w", a.err)
		}
		out, ok := a.res.(*actors.Prepared)
		if !ok {
			return nil, fmt.Errorf("preparer answered %T", a.res)
		}
		return out, nil
	case <-ctx.Done():
		return nil, timedOut()
	}
}

// preparerAnswerTimeout is how long an idle-set slot waits for a preparer's
// answer before it is given back anyway (a preparer always answers, unless
// the runtime is closing).
const preparerAnswerTimeout = 10 * time.Minute

// requestBytes is the size of a request's text: the strings of its
// messages, tools, documents and prompt (what rendering and tokenizing
// cost grows with), and its prompt ids.
func requestBytes(req *chat.Request) int {
	return textBytes(req.Messages) + textBytes(req.Tools) + textBytes(req.Documents) + len(req.Prompt) + len(req.PromptIDs)
}

func textBytes(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		n := 0
		for _, e := range x {
			n += textBytes(e)
		}
		return n
	case *templates.Dict:
		n := 0
		x.Range(func(k, v any) bool {
			n += textBytes(k) + textBytes(v)
			return true
		})
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + textBytes(e)
		}
		return n
	}
	return 0
}

// WarmUp asks, after a turn of a conversation on a snapshot-reuse model
// finished with reply, for the history the next turn will render to be
// prefilled from the best snapshot and stored, when the scheduler is idle.
// It returns once the job is queued; errors only mean no warm-up. With
// boundary snapshots off (Options.BoundarySnapshots) the preparer renders
// nothing and the error is actors.ErrBoundarySnapshotsOff, unless the model
// is known to be dense-KV (its warm-up fills KV pages, not a snapshot).
func (r *Runtime) WarmUp(ctx context.Context, req *chat.Request, reply chat.Reply) error {
	if r.opts.Dispatcher != nil {
		return errors.New("warm-ups are not dispatched to other nodes")
	}
	out, err := r.prepare(ctx, "warm-", requestBytes(req), func(id string) *actors.Prepare {
		return &actors.Prepare{ID: id, Request: req, PromptCache: r.opts.PromptCache, WarmUpReply: &reply}
	})
	if err != nil {
		return err
	}
	if out.Err != nil {
		return fmt.Errorf("warm-up not prepared: %w", out.Err)
	}
	if out.Job == nil {
		return errors.New("warm-up not prepared")
	}
	r.system.Root.Send(r.pids.Scheduler, out.Job)
	return nil
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
	streams, err := r.GenerateN(ctx, req, 1)
	if err != nil {
		return nil, err
	}
	return streams[0], nil
}

// GenerateN prepares req once and streams n choices of it (n >= 1), each an
// independent generation with its own sampler: with a seed, choice i samples
// with seed+i (as vLLM derives the seeds of its n > 1 requests), so every
// choice is reproducible on its own. Cancelling ctx cancels them all.
//
// With the prompt cache on, the prompt is prefilled once: the first choice
// stores the state of its prompt less the last token in the cache as soon as
// it has computed it (the job's HistoryBoundary becomes that point), and the
// other choices are submitted only when its first event arrives, so they
// reuse it and compute one prompt token each (whose logits start their
// sampling). On a snapshot-reuse model that point replaces the history
// boundary of a chat request. With the cache off every choice prefills the
// prompt itself, and so it does with boundary snapshots off
// (Options.BoundarySnapshots) unless the model is known to be dense-KV: on
// a snapshot-reuse model that point would be a boundary snapshot, while on
// a dense-KV model it only hands the computed KV pages to the prefix cache.
func (r *Runtime) GenerateN(ctx context.Context, req *chat.Request, n int) ([]*Stream, error) {
	if n < 1 {
		return nil, fmt.Errorf("troupe: %d choices requested, need at least 1", n)
	}
	prep, err := r.Prepare(ctx, req, false)
	if err != nil {
		return nil, err
	}
	job := prep.Job
	// Refuse what can never run now, before the caller answers anything
	// (the scheduler checks again; before the model has loaded only it
	// does).
	if l, ok := r.Limits(); ok {
		if _, err := l.Admit(len(job.Prompt), int(job.MaxTokens), job.FitMaxTokens); err != nil {
			return nil, err
		}
	}
	if r.opts.JobHook != nil {
		r.opts.JobHook(job)
	}
	share := shareChoices(r.opts.PromptCache, r.opts.BoundarySnapshots, prep.Capability)
	jobs := choiceJobs(job, n, share)
	streams := make([]*Stream, n)
	var gate chan struct{}
	var open func()
	if n > 1 && share {
		gate = make(chan struct{})
		var once sync.Once
		open = func() { once.Do(func() { close(gate) }) }
	}
	streams[0] = r.stream(ctx, prep, jobs[0], nil, open)
	for i := 1; i < n; i++ {
		streams[i] = r.stream(ctx, prep, jobs[i], gate, nil)
	}
	return streams, nil
}

// shareChoices says whether the n > 1 choices of a request share one
// prefill (choiceJobs): with the prompt cache on, unless boundary snapshots
// are off and the model, as its preparer knew it (c), may reuse by
// snapshots, where the shared point would be a boundary snapshot.
func shareChoices(promptCache bool, b actors.BoundarySnapshots, c actors.Capability) bool {
	return promptCache && !b.Blocks(c)
}

// choiceJobs are the jobs of n choices of job: each its own request id and,
// when seeded, seed+i. With share (n > 1, prompt cache on) the first stores
// its prompt less the last token as soon as it is computed (the boundary)
// and the others, which reuse it, have no boundary of their own.
func choiceJobs(job *actors.PrefillJob, n int, share bool) []*actors.PrefillJob {
	if n == 1 {
		return []*actors.PrefillJob{job}
	}
	jobs := make([]*actors.PrefillJob, n)
	for i := range jobs {
		j := job
		if i > 0 {
			j = proto.Clone(job).(*actors.PrefillJob)
			j.RequestId = job.RequestId + "." + strconv.Itoa(i)
			if s := j.Sampling; s != nil && s.HasSeed {
				s.Seed += uint64(i)
			}
		}
		if share {
			j.HistoryBoundary = 0
			if i == 0 && len(j.Prompt) > 1 {
				j.HistoryBoundary = int32(len(j.Prompt) - 1)
			}
		}
		jobs[i] = j
	}
	return jobs
}

// submitJob asks a choice's receiving actor to send its job (a choice
// waiting for the first one's prefill).
type submitJob struct{}

// IgnoreDeadLetterLogging: a choice cancelled before its turn came has
// stopped; the late go-ahead is expected.
func (*submitJob) IgnoreDeadLetterLogging() {}

// stream starts one generation of job: a per-request actor receives the
// scheduler's events (so the job's sender is an actor that could live
// anywhere) and hands them on. With gate, the job is sent only once gate is
// closed (or never, if the stream is cancelled first); first, when set, runs
// once the first event arrives or the stream ends without one.
func (r *Runtime) stream(ctx context.Context, prep *actors.Prepared, job *actors.PrefillJob, gate <-chan struct{}, first func()) *Stream {
	if r.opts.Dispatcher != nil {
		return r.dispatch(ctx, prep, job, gate, first)
	}
	events := make(chan *actors.TokenEvent, 64)
	done := make(chan struct{})     // closed by Cancel
	finished := make(chan struct{}) // closed by the receiver when the stream ends
	// mu orders the job's submission before its cancellation: a job is
	// either sent before CancelJob or never.
	var mu sync.Mutex
	cancelled := false
	submit := func(c actor.Context) {
		mu.Lock()
		defer mu.Unlock()
		if !cancelled {
			c.Request(r.pids.Scheduler, job)
		}
	}
	began := func() {
		if first != nil {
			first()
		}
	}
	pid := r.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			if gate == nil {
				submit(c)
				return
			}
			self := c.Self()
			go func() {
				select {
				case <-gate:
					r.system.Root.Send(self, &submitJob{})
				case <-done:
				}
			}()
		case *submitJob:
			submit(c)
		case *actors.TokenEvent:
			began()
			select {
			case events <- m:
			case <-done:
			}
			if m.FinishReason != "" {
				c.Stop(c.Self())
			}
		case *actor.Stopping:
			began()
			close(events)
			close(finished)
		}
	}))
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(done)
			mu.Lock()
			cancelled = true
			r.system.Root.Send(r.pids.Scheduler, &actors.CancelJob{RequestId: job.RequestId})
			mu.Unlock()
			r.system.Root.Stop(pid)
		})
	}
	go func() {
		select {
		case <-ctx.Done():
			cancel()
		case <-finished:
		}
	}()
	return &Stream{Prepared: prep, Events: events, cancel: cancel}
}

// dispatch is stream through Options.Dispatcher: the job goes there (once
// gate is closed, when set) and its events are handed on.
func (r *Runtime) dispatch(ctx context.Context, prep *actors.Prepared, job *actors.PrefillJob, gate <-chan struct{}, first func()) *Stream {
	events := make(chan *actors.TokenEvent, 64)
	done := make(chan struct{}) // closed by Cancel
	var once sync.Once
	cancel := func() { once.Do(func() { close(done) }) }
	go func() {
		defer close(events)
		began := sync.OnceFunc(func() {
			if first != nil {
				first()
			}
		})
		defer began()
		if gate != nil {
			select {
			case <-gate:
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
		dctx, stop := context.WithCancel(ctx)
		defer stop() // a stream ended early cancels its job
		in := r.opts.Dispatcher.Dispatch(dctx, job)
		for {
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				began()
				select {
				case events <- ev:
				case <-done:
					return
				}
				if ev.FinishReason != "" {
					return
				}
			case <-done:
				return
			}
		}
	}()
	return &Stream{Prepared: prep, Events: events, cancel: cancel}
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

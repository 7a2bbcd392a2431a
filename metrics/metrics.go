// Package metrics defines troupe's Prometheus metrics. Each runtime owns its
// own registry (no package-level state), served at GET /metrics.
//
// Metrics (all prefixed troupe_):
//
//	requests_total{route,status}        HTTP requests by route and status code
//	time_to_first_token_seconds         from request arrival to the first token (histogram)
//	inter_token_latency_seconds         between consecutive tokens of a stream (histogram)
//	queue_depth                         requests waiting for admission to the engine
//	running_sequences                   sequences admitted to the engine
//	kv_pages_used / kv_pages_free       KV-cache pages in use and free; 0 and 0 on a model without
//	                                    attention KV (pure state-space models have no pages)
//	state_slots_used / state_slots_free recurrent-state slots in use and free (one per running
//	                                    sequence of a model with state-space layers; 0 and 0 otherwise)
//	kv_budget_bytes                     the --kv-budget: the most the KV pool and the snapshots may hold
//	kv_pool_bytes                       memory the KV pool maps (pages and state slots), off the Go heap
//	kv_bytes_in_use                     of that, the pages and slots held by sequences or the prefix cache
//	snapshot_budget_bytes               the snapshot pool's share of the budget (0 on dense-KV models
//	                                    or with the prompt cache off); kv_pool_bytes + this <= kv_budget_bytes
//	snapshot_bytes                      memory the stored snapshots hold, off the Go heap
//	prompt_tokens_total                 prompt tokens prefilled (recomputation included)
//	generated_tokens_total              tokens generated
//	preemptions_total                   sequences preempted for KV pages and recomputed
//	history_renders_total{outcome}      history-boundary renders by preparers: rendered
//	                                    (snapshot-reuse model), fail_open (capability not yet
//	                                    known), skipped_dense (dense-KV model: not rendered),
//	                                    disabled (not rendered because of serve --boundary-snapshots
//	                                    off: auto would have rendered it, fail-open or snapshot reuse)
//	prompt_cache_lookups_total          prompt-cache lookups (one per admitted request and warm-up)
//	prompt_cache_hits_total             lookups that reused at least one token
//	prompt_cache_cached_tokens_total    prompt tokens reused, summed over requests
//	prompt_cache_inserts_total          prefixes (pages) or snapshots stored
//	prompt_cache_evictions_total        pages or snapshots evicted for room
//	prompt_cache_supersedes_total       snapshots superseded by a newer one of their conversation
//	prompt_cache_warm_ups_total         next-turn histories prefilled ahead
//	prompt_cache_misses_total{reason}   snapshot misses: no_candidate, prefix_too_short, diverged
//	route_decisions_total{reason}       a cluster gateway's routing decisions (cluster/route): prefix-hit,
//	                                    sticky, least-load, round-robin; a retry on another replica
//	                                    after one failed before its first token counts again
//	route_retries_total                 jobs a cluster gateway routed again because their replica
//	                                    failed before the first token (it left, or it is draining)
//	cluster_replicas{state}             a cluster member's view of the replicas: routable, loading
//	                                    (a member whose model is not ready), draining (leaving after
//	                                    its jobs end); members not answered yet and gateways are not
//	                                    counted. Every member exports it (serve with a cluster)
//	scheduler_steps_total               engine steps run by the scheduler
//	scheduler_stall_seconds             how long queued work has waited for the next engine
//	                                    step (0 when idle; grows only while the engine is stuck
//	                                    or a single step is that long)
//	scheduler_stalled                   1 while scheduler_stall_seconds exceeds the stall timeout
//	                                    (serve --stall-timeout); /ready answers 503 meanwhile
//	reasoning_reattached_total{outcome} assistant turns sent back without reasoning, rendered with
//	                                    preserve_thinking on: reattached (the reasoning the server
//	                                    kept for that reply), unknown (none kept: rendered as sent)
//	device_memory_bytes{device,kind}    memory of a compute device with memory of its own (a CUDA
//	                                    GPU; absent on the CPU), from its own accounting: weights
//	                                    (uploaded so far), kv (KV held on the device; 0 while the KV
//	                                    pool is host memory), scratch (staging buffers), total (the
//	                                    device's memory, in use or not). Exported once the model is
//	                                    loaded
//
// The registry also carries the standard Go and process collectors: among
// them process_resident_memory_bytes (the process's RSS, to compare with
// troupe_kv_budget_bytes: RSS is about the weights' touched pages, the Go
// heap, and the KV pool and snapshots as far as they are touched) and
// go_memstats_heap_alloc_bytes (the Go heap, which no longer holds KV).
package metrics

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/troupe-ai/troupe/gpu"
)

// Metrics is one runtime's set of collectors.
type Metrics struct {
	Registry        *prometheus.Registry
	Requests        *prometheus.CounterVec
	TTFT            prometheus.Histogram
	InterToken      prometheus.Histogram
	QueueDepth      prometheus.Gauge
	Running         prometheus.Gauge
	KVPagesUsed     prometheus.Gauge
	KVPagesFree     prometheus.Gauge
	StateSlotsUsed  prometheus.Gauge
	StateSlotsFree  prometheus.Gauge
	KVBudget        prometheus.Gauge
	KVPoolBytes     prometheus.Gauge
	KVBytesInUse    prometheus.Gauge
	SnapshotBudget  prometheus.Gauge
	SnapshotBytes   prometheus.Gauge
	PromptTokens    prometheus.Counter
	GeneratedTokens prometheus.Counter
	Preemptions     prometheus.Counter
	HistoryRenders  *prometheus.CounterVec
	// Constrained counts structured-output requests by kind (see
	// chat.Request.ConstraintKind).
	Constrained    *prometheus.CounterVec
	RouteDecisions *prometheus.CounterVec
	RouteRetries   prometheus.Counter
	RouteProbes    prometheus.Counter

	CacheLookups, CacheHits, CachedTokens, CacheInserts prometheus.Counter
	CacheEvictions, CacheSupersedes, CacheWarmUps       prometheus.Counter
	CachePins, CachePinEvictions                        prometheus.Counter
	CacheMisses                                         *prometheus.CounterVec

	// ReasoningReattached counts assistant turns that came back without
	// their reasoning under preserve_thinking, by outcome (Reattached,
	// Unknown).
	ReasoningReattached *prometheus.CounterVec
}

// Reasoning re-attachment outcomes.
const (
	Reattached = "reattached"
	Unknown    = "unknown"
)

// History-render outcomes.
const (
	Rendered     = "rendered"
	FailOpen     = "fail_open"
	SkippedDense = "skipped_dense"
	// Disabled: not rendered because boundary snapshots are off, where the
	// gate alone would have rendered it (fail-open or snapshot reuse).
	Disabled = "disabled"
)

// New creates and registers the collectors.
func New() *Metrics {
	r := prometheus.NewRegistry()
	m := &Metrics{
		Registry: r,
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_requests_total",
			Help: "HTTP requests by route and status code."}, []string{"route", "status"}),
		TTFT: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "troupe_time_to_first_token_seconds",
			Help: "Time from request arrival to the first generated token.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		InterToken: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "troupe_inter_token_latency_seconds",
			Help: "Time between consecutive tokens of one stream.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		QueueDepth:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_queue_depth", Help: "Requests waiting for admission to the engine."}),
		Running:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_running_sequences", Help: "Sequences admitted to the engine."}),
		KVPagesUsed:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_kv_pages_used", Help: "KV-cache pages in use."}),
		KVPagesFree:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_kv_pages_free", Help: "KV-cache pages free."}),
		StateSlotsUsed:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_state_slots_used", Help: "Recurrent-state slots in use."}),
		StateSlotsFree:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_state_slots_free", Help: "Recurrent-state slots free."}),
		KVBudget:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_kv_budget_bytes", Help: "The KV budget: the most the KV pool and the snapshots may hold."}),
		KVPoolBytes:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_kv_pool_bytes", Help: "Memory the KV pool maps for pages and state slots."}),
		KVBytesInUse:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_kv_bytes_in_use", Help: "KV pool memory held by sequences or the prefix cache."}),
		SnapshotBudget:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_snapshot_budget_bytes", Help: "The snapshot pool's share of the KV budget."}),
		SnapshotBytes:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "troupe_snapshot_bytes", Help: "Memory the stored snapshots hold."}),
		PromptTokens:    prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_prompt_tokens_total", Help: "Prompt tokens prefilled, recomputation included."}),
		GeneratedTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_generated_tokens_total", Help: "Tokens generated."}),
		Preemptions:     prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_preemptions_total", Help: "Sequences preempted for KV pages and recomputed."}),
		HistoryRenders: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_history_renders_total",
			Help: "History-boundary decisions of the request preparers: rendered, fail_open, skipped_dense, disabled (--boundary-snapshots off)."}, []string{"outcome"}),
	}
	m.Constrained = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_constrained_requests_total",
		Help: "Requests whose output follows a grammar, by kind: json_schema, json, regex, choice, grammar, tool_calls (forced), strict_tools (calls the model opens)."}, []string{"kind"})
	m.RouteDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_route_decisions_total",
		Help: "Routing decisions of a cluster gateway by reason: prefix-hit, sticky, least-load, round-robin."}, []string{"reason"})
	m.RouteProbes = prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_route_probes_total",
		Help: "Replicas a cluster gateway asked for their cache and load while routing, holding no fresh state they published."})
	m.RouteRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_route_retries_total",
		Help: "Jobs a cluster gateway routed again because their replica failed before the first token."})
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "troupe_prompt_cache_" + name, Help: help})
	}
	m.CacheLookups = counter("lookups_total", "Prompt-cache lookups (admitted requests and warm-ups).")
	m.CacheHits = counter("hits_total", "Prompt-cache lookups that reused at least one token.")
	m.CachedTokens = counter("cached_tokens_total", "Prompt tokens reused from the prompt cache.")
	m.CacheInserts = counter("inserts_total", "Prefixes or snapshots stored in the prompt cache.")
	m.CacheEvictions = counter("evictions_total", "Pages or snapshots evicted from the prompt cache.")
	m.CacheSupersedes = counter("supersedes_total", "Snapshots superseded by a newer one of their conversation.")
	m.CacheWarmUps = counter("warm_ups_total", "Next-turn histories prefilled ahead.")
	m.CachePins = counter("pins_total", "Cache-breakpoint prefixes pinned ahead of LRU eviction (cache_control).")
	m.CachePinEvictions = counter("pin_evictions_total", "Pinned pages evicted because nothing unpinned was left to evict.")
	m.CacheMisses = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_prompt_cache_misses_total",
		Help: "Snapshot-cache misses by reason."}, []string{"reason"})
	r.MustRegister(m.Requests, m.TTFT, m.InterToken, m.QueueDepth, m.Running, m.KVPagesUsed, m.KVPagesFree,
		m.StateSlotsUsed, m.StateSlotsFree, m.KVBudget, m.KVPoolBytes, m.KVBytesInUse, m.SnapshotBudget, m.SnapshotBytes,
		m.PromptTokens, m.GeneratedTokens, m.Preemptions, m.HistoryRenders, m.Constrained, m.RouteDecisions, m.RouteRetries, m.RouteProbes,
		m.CacheLookups, m.CacheHits, m.CachedTokens, m.CacheInserts, m.CacheEvictions, m.CacheSupersedes, m.CacheWarmUps, m.CacheMisses,
		m.CachePins, m.CachePinEvictions,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.ReasoningReattached = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "troupe_reasoning_reattached_total",
		Help: "Assistant turns sent back without reasoning under preserve_thinking: reattached (the kept reasoning), unknown (none kept)."}, []string{"outcome"})
	r.MustRegister(m.ReasoningReattached)
	m.ReasoningReattached.WithLabelValues(Reattached)
	m.ReasoningReattached.WithLabelValues(Unknown)
	for _, o := range []string{Rendered, FailOpen, SkippedDense, Disabled} {
		m.HistoryRenders.WithLabelValues(o)
	}
	return m
}

// Heartbeat is what the scheduler watchdog reads: the steps run so far and
// how long queued work has waited for the next one.
type Heartbeat interface {
	Steps() int64
	Waiting(now time.Time) time.Duration
}

// WatchScheduler exports the scheduler's heartbeat: its step counter, how
// long work has waited for a step, and whether that exceeds limit (the
// stall watchdog; limit <= 0 never reports a stall).
func (m *Metrics) WatchScheduler(h Heartbeat, limit time.Duration) {
	m.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "troupe_scheduler_steps_total",
			Help: "Engine steps run by the scheduler."}, func() float64 { return float64(h.Steps()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "troupe_scheduler_stall_seconds",
			Help: "How long queued work has waited for the next engine step (0 when idle)."},
			func() float64 { return h.Waiting(time.Now()).Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "troupe_scheduler_stalled",
			Help: "1 while queued work has waited longer than the stall timeout for an engine step."},
			func() float64 {
				if limit > 0 && h.Waiting(time.Now()) > limit {
					return 1
				}
				return 0
			}),
	)
}

// Replica states of troupe_cluster_replicas.
var ClusterStates = []string{"routable", "loading", "draining"}

// WatchCluster exports troupe_cluster_replicas{state}: the number of
// replicas in each of ClusterStates, as count reports them when scraped
// (a state count omits counts as 0).
func (m *Metrics) WatchCluster(count func() map[string]int) {
	m.Registry.MustRegister(&clusterCollector{count: count, desc: prometheus.NewDesc("troupe_cluster_replicas",
		"Replicas of the cluster by state, as this member sees them: routable, loading, draining.", []string{"state"}, nil)})
}

type clusterCollector struct {
	count func() map[string]int
	desc  *prometheus.Desc
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.count()
	for _, s := range ClusterStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n[s]), s)
	}
}

// Kinds of troupe_device_memory_bytes, in the order it exports them.
var DeviceMemoryKinds = []string{"weights", "kv", "scratch", "total"}

// WatchDeviceMemory exports troupe_device_memory_bytes{device,kind}: r's
// memory by use (gpu.MemoryUse, read when scraped), labelled device. It
// fails when the registry already has the metric for that device.
func (m *Metrics) WatchDeviceMemory(device string, r gpu.MemoryReporter) error {
	c := &deviceMemoryCollector{device: device, r: r, desc: prometheus.NewDesc("troupe_device_memory_bytes",
		"Memory of the compute device by kind: weights, kv, scratch (in use, from the device's own accounting), total (the device's memory).",
		[]string{"device", "kind"}, nil)}
	if err := m.Registry.Register(c); err != nil {
		return fmt.Errorf("metrics: troupe_device_memory_bytes for %s: %w", device, err)
	}
	return nil
}

type deviceMemoryCollector struct {
	device string
	r      gpu.MemoryReporter
	desc   *prometheus.Desc
}

func (c *deviceMemoryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *deviceMemoryCollector) Collect(ch chan<- prometheus.Metric) {
	u := c.r.MemoryUse()
	for i, v := range []int64{u.Weights, u.KV, u.Scratch, u.Total} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), c.device, DeviceMemoryKinds[i])
	}
}

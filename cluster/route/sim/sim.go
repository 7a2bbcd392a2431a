// Package sim is a deterministic discrete-event simulator of a gateway
// routing multi-turn chat traffic to model replicas with route.Route. It measures what a policy buys (the share of prompt tokens
// served from a replica's prefix cache) and what it costs (load imbalance).
//
// The model: conversations start at exponential gaps; each has a system
// prompt (a share of conversations use one of a few shared prompts, with
// Zipf-like popularity) and several turns; turn k resends the system prompt
// and the whole history (every earlier user text and reply) plus new user
// text, and the next turn arrives a think time after the reply. Arrivals of
// all conversations interleave. Each replica runs Slots requests at once from
// a FIFO queue; a request's service time is PrefillCost per uncached prompt
// token plus DecodeCost per generated token, so misses cost time and load
// builds up where the cache misses. Each replica has a prefix cache of
// CacheBlocks 16-token blocks with LRU eviction (a route.Digest): a request
// hits the leading blocks present when it starts; its prompt blocks are
// cached when it starts (after prefill) and prompt+reply when it completes.
// Replicas publish their digest (as a delta: hashes added and dropped since
// the last publication) every PublishEvery seconds, or at every completion
// when PublishEvery is 0, so the gateway routes on a view up to PublishEvery
// old; the gateway keeps Waiting/Running current itself (it sees what it
// sends and what completes). Pages of running requests are not pinned.
//
// With Snapshot set the model is a snapshot model (recurrent state): a
// replica keeps the last Snapshots snapshot keys (LRU) instead of blocks. A
// request's history boundary is the end of the previous turn's reply (turn 1:
// the end of the system prompt); the replica resumes from the snapshot there,
// else from the system prompt's, else from scratch. Snapshots are donated at
// the boundary during prefill and at the end of each generation (which is the
// next turn's boundary), as in the engine.
//
// The baseline is one replica with the pooled resources of all of them
// (Replicas×Slots, Replicas×CacheBlocks or Snapshots): the cache share
// perfect routing could reach without duplicating anything.
//
// The table of the README comes from
//
//	go test ./cluster/route/sim -run 'Target|Snapshot' -v
package sim

import (
	"container/heap"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/troupe-ai/troupe/cluster/route"
)

// Config is a simulation's workload and cluster. Times are in seconds.
type Config struct {
	Seed     uint64
	Replicas int
	Slots    int // requests a replica serves at once

	CacheBlocks  int     // prefix cache (and digest) capacity of a replica, in 16-token blocks
	PublishEvery float64 // digest publication period (0: at every completion)

	Conversations  int
	Turns          Span
	SharedSystems  int     // number of shared system prompts
	SharedFraction float64 // share of conversations using a shared one
	SystemTokens   Span    // shared system prompt length (a private one: a quarter)
	UserTokens     Span
	ReplyTokens    Span
	ArrivalGap     float64 // mean gap between conversation starts
	ThinkTime      float64 // mean gap between a reply and the next turn

	PrefillCost float64 // seconds per uncached prompt token
	DecodeCost  float64 // seconds per generated token

	Snapshot  bool // a snapshot model: replicas keep snapshot keys, not blocks
	Snapshots int  // snapshots a replica keeps (Snapshot only)
}

// SnapshotConfig is DefaultConfig for a snapshot model whose replicas keep
// 64 snapshots each (about a third of the live conversations).
func SnapshotConfig() Config {
	cfg := DefaultConfig()
	cfg.Snapshot, cfg.Snapshots = true, 64
	return cfg
}

// DefaultConfig is the workload the tests and the README table use: 4
// replicas, 600 conversations of 2–10 turns, 70% of them on one of 8 shared
// system prompts, caches that hold about a third of the live working set.
func DefaultConfig() Config {
	return Config{
		Seed:           1,
		Replicas:       4,
		Slots:          8,
		CacheBlocks:    3000,
		PublishEvery:   0.25,
		Conversations:  600,
		Turns:          Span{2, 10},
		SharedSystems:  8,
		SharedFraction: 0.7,
		SystemTokens:   Span{300, 1500},
		UserTokens:     Span{20, 300},
		ReplyTokens:    Span{50, 400},
		ArrivalGap:     0.5,
		ThinkTime:      10,
		PrefillCost:    1.0 / 5000,
		DecodeCost:     1.0 / 100,
	}
}

// Result is one policy's outcome.
type Result struct {
	Policy       string
	Requests     int
	PromptTokens int64
	CachedTokens int64     // prompt tokens served from a replica's cache
	Stale        int       // requests whose replica held fewer blocks than its digest promised
	Work         []float64 // busy time per replica (sum of service times)
	LoadTime     []float64 // time integral of Waiting+Running per replica
	Reasons      map[route.Reason]int
	Duration     float64 // simulated time until the last completion
}

// CachedShare is CachedTokens / PromptTokens.
func (r *Result) CachedShare() float64 {
	if r.PromptTokens == 0 {
		return 0
	}
	return float64(r.CachedTokens) / float64(r.PromptTokens)
}

// WorkImbalance is max/mean of the replicas' work.
func (r *Result) WorkImbalance() float64 { return maxOverMean(r.Work) }

// LoadImbalance is max/mean of the replicas' time-averaged queue depth
// (Waiting+Running).
func (r *Result) LoadImbalance() float64 { return maxOverMean(r.LoadTime) }

func maxOverMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	if sum == 0 {
		return 1
	}
	return slices.Max(xs) / (sum / float64(len(xs)))
}

// Baseline runs the trace on one replica with the pooled slots and cache of
// cfg.Replicas replicas.
func Baseline(cfg Config) Result {
	one := cfg
	one.Slots *= cfg.Replicas
	one.CacheBlocks *= cfg.Replicas
	one.Snapshots *= cfg.Replicas
	one.Replicas = 1
	r := Run(one, route.LeastLoad{})
	r.Policy = fmt.Sprintf("single replica (%d× pooled)", cfg.Replicas)
	return r
}

// Run replays cfg's trace with policy; policy should be fresh (a RoundRobin
// carries its counter).
func Run(cfg Config, policy route.Policy) Result {
	s := newSim(cfg, policy)
	s.run()
	return s.res
}

// PolicyName names a policy for tables.
func PolicyName(p route.Policy) string {
	switch p := p.(type) {
	case *route.RoundRobin:
		return "round-robin"
	case route.LeastLoad:
		return "least-load"
	case route.CacheAware:
		return fmt.Sprintf("cache-aware(threshold %d)", p.Threshold)
	}
	return fmt.Sprintf("%T", p)
}

// WriteTable prints results, one line each, with cache share relative to
// base (the first result when base is nil).
func WriteTable(w io.Writer, base *Result, rs ...Result) error {
	if base == nil && len(rs) > 0 {
		base = &rs[0]
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\trequests\tcached share\tvs single\twork max/mean\tqueue max/mean\tstale\tprefix/sticky/least/rr\t")
	for i := range rs {
		r := &rs[i]
		rel := 0.0
		if base != nil && base.CachedShare() > 0 {
			rel = r.CachedShare() / base.CachedShare()
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.1f%%\t%.3f\t%.3f\t%d\t%d/%d/%d/%d\t\n",
			r.Policy, r.Requests, 100*r.CachedShare(), 100*rel, r.WorkImbalance(), r.LoadImbalance(), r.Stale,
			r.Reasons[route.ReasonPrefixHit], r.Reasons[route.ReasonSticky], r.Reasons[route.ReasonLeastLoad], r.Reasons[route.ReasonRoundRobin])
	}
	return tw.Flush()
}

// --- event loop

type eventKind uint8

const (
	evArrive eventKind = iota
	evComplete
	evPublish
)

type event struct {
	t    float64
	seq  int // insertion order: ties resolve deterministically
	kind eventKind
	conv *conversation
	turn int
	rep  int
	job  *job
}

type events []*event

func (h events) Len() int { return len(h) }
func (h events) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h events) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *events) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *events) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

type job struct {
	conv     *conversation
	turn     int
	prompt   []int32
	blocks   []route.BlockHash
	boundary int // history boundary (snapshot models)
	expected int // cached tokens the digest promised
}

type replica struct {
	id        string
	queue     []*job
	running   int
	cache     *route.Digest
	published route.HashSet                // the gateway's view of cache
	dirty     map[route.BlockHash]struct{} // added or dropped since the last publication
	lastT     float64                      // time of the last load change (for LoadTime)
}

type sim struct {
	cfg    Config
	policy route.Policy
	reps   []*replica
	view   []route.Replica
	q      events
	seq    int
	now    float64
	live   int // conversations not finished
	res    Result
}

func newSim(cfg Config, policy route.Policy) *sim {
	s := &sim{cfg: cfg, policy: policy}
	s.res = Result{
		Policy:   PolicyName(policy),
		Work:     make([]float64, cfg.Replicas),
		LoadTime: make([]float64, cfg.Replicas),
		Reasons:  map[route.Reason]int{},
	}
	for i := range cfg.Replicas {
		size := cfg.CacheBlocks
		if cfg.Snapshot {
			size = cfg.Snapshots
		}
		r := &replica{id: fmt.Sprintf("replica-%d", i), cache: route.NewDigest(size),
			published: route.HashSet{}, dirty: map[route.BlockHash]struct{}{}}
		r.cache.OnAdd, r.cache.OnDrop = r.changed, r.changed
		s.reps = append(s.reps, r)
		if cfg.PublishEvery > 0 {
			s.push(&event{t: cfg.PublishEvery, kind: evPublish, rep: i})
		}
	}
	for _, c := range newTrace(cfg).convs {
		s.push(&event{t: c.start, kind: evArrive, conv: c})
		s.live++
	}
	return s
}

func (s *sim) push(e *event) {
	e.seq = s.seq
	s.seq++
	heap.Push(&s.q, e)
}

func (s *sim) run() {
	for s.q.Len() > 0 && s.live > 0 {
		e := heap.Pop(&s.q).(*event)
		s.now = e.t
		switch e.kind {
		case evArrive:
			s.arrive(e.conv, e.turn)
		case evComplete:
			s.complete(e.rep, e.job)
		case evPublish:
			s.publish(s.reps[e.rep])
			s.push(&event{t: s.now + s.cfg.PublishEvery, kind: evPublish, rep: e.rep})
		}
	}
	s.res.Duration = s.now
	for i := range s.reps {
		s.account(i)
	}
}

// account adds replica i's load since its last change to LoadTime.
func (s *sim) account(i int) {
	r := s.reps[i]
	s.res.LoadTime[i] += float64(len(r.queue)+r.running) * (s.now - r.lastT)
	r.lastT = s.now
}

func (r *replica) changed(h route.BlockHash) { r.dirty[h] = struct{}{} }

// add caches blocks on r.
func (r *replica) add(blocks []route.BlockHash) { r.cache.AddBlocks(blocks) }

// publish brings the gateway's view of r's digest up to date.
func (s *sim) publish(r *replica) {
	for h := range r.dirty {
		if r.cache.Contains(h) {
			r.published[h] = struct{}{}
		} else {
			delete(r.published, h)
		}
	}
	clear(r.dirty)
}

func (s *sim) arrive(c *conversation, k int) {
	t := c.turns[k]
	if k == 0 {
		c.history = append(slices.Clip(c.system), t.user...)
	} else {
		prev := c.turns[k-1]
		c.history = append(append(c.history, prev.reply...), t.user...)
	}
	c.blocks = route.AppendBlockHashes(c.blocks, "", c.history)
	j := &job{conv: c, turn: k, prompt: c.history, blocks: c.blocks, boundary: len(c.history) - len(t.user)}

	s.view = s.view[:0]
	for _, r := range s.reps {
		s.view = append(s.view, route.Replica{
			ID: r.id, Model: "m", CapabilityKnown: true, Routable: true, SnapshotReuse: s.cfg.Snapshot,
			Waiting: len(r.queue), Running: r.running,
			FreePages: s.cfg.CacheBlocks - r.cache.Len(), Prefix: r.published,
		})
	}
	d, err := route.Route(route.Request{
		Model: "m", Tokens: j.prompt, Blocks: j.blocks, StickyKey: fmt.Sprintf("conv-%d", c.id), Boundary: j.boundary,
	}, s.view, s.policy)
	if err != nil {
		panic(err) // every replica is routable
	}
	s.res.Reasons[d.Reason]++
	j.expected = d.CachedTokens
	i := slices.IndexFunc(s.reps, func(r *replica) bool { return r.id == d.ReplicaID })
	s.account(i)
	s.reps[i].queue = append(s.reps[i].queue, j)
	s.startAll(i)
}

// lookup returns the prompt tokens of j that replica r has cached when j
// starts, and caches what the prefill makes available: the prompt's blocks
// (dense), the snapshot at the history boundary (snapshot models).
func (s *sim) lookup(r *replica, j *job) int {
	if !s.cfg.Snapshot {
		cached := min(route.MatchBlocks(r.cache, j.blocks)*route.BlockTokens, len(j.prompt))
		r.add(j.blocks)
		return cached
	}
	at := route.SnapshotKeyFromBlocks(j.blocks, "", j.prompt[:j.boundary])
	cached := 0
	if r.cache.Contains(at) {
		cached = j.boundary
	} else if sys := route.SnapshotKeyFromBlocks(j.blocks, "", j.conv.system); j.boundary > len(j.conv.system) && r.cache.Contains(sys) {
		cached = len(j.conv.system)
		r.add([]route.BlockHash{sys})
	}
	r.add([]route.BlockHash{at})
	return cached
}

// startAll starts queued jobs on replica i while it has free slots.
func (s *sim) startAll(i int) {
	r := s.reps[i]
	for r.running < s.cfg.Slots && len(r.queue) > 0 {
		j := r.queue[0]
		r.queue = r.queue[1:]
		r.running++
		cached := s.lookup(r, j)
		if cached < j.expected {
			s.res.Stale++
		}
		reply := len(j.conv.turns[j.turn].reply)
		service := s.cfg.PrefillCost*float64(len(j.prompt)-cached) + s.cfg.DecodeCost*float64(reply)
		s.res.Requests++
		s.res.PromptTokens += int64(len(j.prompt))
		s.res.CachedTokens += int64(cached)
		s.res.Work[i] += service
		s.push(&event{t: s.now + service, kind: evComplete, rep: i, job: j})
	}
}

func (s *sim) complete(i int, j *job) {
	r := s.reps[i]
	s.account(i)
	r.running--
	c := j.conv
	full := append(slices.Clip(j.prompt), c.turns[j.turn].reply...)
	blocks := route.AppendBlockHashes(slices.Clip(j.blocks), "", full)
	if s.cfg.Snapshot {
		r.add([]route.BlockHash{route.SnapshotKeyFromBlocks(blocks, "", full)})
	} else {
		r.add(blocks)
	}
	if s.cfg.PublishEvery == 0 {
		s.publish(r)
	}
	s.startAll(i)
	if j.turn+1 < len(c.turns) {
		s.push(&event{t: s.now + c.turns[j.turn].think, kind: evArrive, conv: c, turn: j.turn + 1})
	} else {
		s.live--
	}
}

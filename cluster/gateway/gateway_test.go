package gateway

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/node"
	"github.com/troupe-ai/troupe/cluster/route"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/metrics"
)

// fakeReplica is one replica of fakeBackend: what its probe answers and
// how it runs a job.
type fakeReplica struct {
	probe    Probe
	probeErr error
	// published, when set, is the state the replica published.
	published *node.Published
	// run produces the job's events on out (closed by the backend after).
	run func(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent)
}

type fakeBackend struct {
	replicas []node.Replica
	by       map[string]*fakeReplica
	mu       sync.Mutex
	sent     []string // member ids jobs were submitted to
	probed   int
}

func newFake(model string, reps map[string]*fakeReplica) *fakeBackend {
	b := &fakeBackend{by: reps}
	for _, id := range []string{"a", "b", "c"} {
		if _, ok := reps[id]; ok {
			b.replicas = append(b.replicas, node.Replica{MemberID: id, Model: model})
		}
	}
	return b
}

func (b *fakeBackend) Replicas() []node.Replica { return b.replicas }

func (b *fakeBackend) Probe(ctx context.Context, r node.Replica, job *actors.PrefillJob) (Probe, error) {
	b.mu.Lock()
	b.probed++
	b.mu.Unlock()
	f := b.by[r.MemberID]
	return f.probe, f.probeErr
}

func (b *fakeBackend) Published(r node.Replica) (node.Published, bool) {
	if p := b.by[r.MemberID].published; p != nil {
		return *p, true
	}
	return node.Published{}, false
}

func (b *fakeBackend) Submit(ctx context.Context, r node.Replica, job *actors.PrefillJob) <-chan *actors.TokenEvent {
	b.mu.Lock()
	b.sent = append(b.sent, r.MemberID)
	b.mu.Unlock()
	out := make(chan *actors.TokenEvent, 8)
	go func() {
		defer close(out)
		b.by[r.MemberID].run(ctx, job, out)
	}()
	return out
}

// tokens answers n tokens and a stop.
func tokens(n int) func(context.Context, *actors.PrefillJob, chan<- *actors.TokenEvent) {
	return func(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent) {
		for i := 0; i < n; i++ {
			out <- &actors.TokenEvent{RequestId: job.RequestId, Token: int32(i), HasToken: true}
		}
		out <- &actors.TokenEvent{RequestId: job.RequestId, FinishReason: "stop"}
	}
}

// dies fails as a replica that left the cluster does, after n tokens.
func dies(n int) func(context.Context, *actors.PrefillJob, chan<- *actors.TokenEvent) {
	return func(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent) {
		for i := 0; i < n; i++ {
			out <- &actors.TokenEvent{RequestId: job.RequestId, Token: int32(i), HasToken: true}
		}
		out <- &actors.TokenEvent{RequestId: job.RequestId, FinishReason: "error", Unavailable: true, Error: "gone"}
	}
}

func job(n int) *actors.PrefillJob {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(i % 7)
	}
	return &actors.PrefillJob{RequestId: "gw-req-1", Prompt: p, MaxTokens: 4}
}

func drain(t *testing.T, ch <-chan *actors.TokenEvent) (toks int, last *actors.TokenEvent) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return toks, last
			}
			if ev.HasToken {
				toks++
			}
			last = ev
		case <-timeout:
			t.Fatal("the stream did not end")
		}
	}
}

func TestDispatchPrefersTheCachedPrefix(t *testing.T) {
	m := metrics.New()
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{Reusable: 0, FreePages: 100}, run: tokens(2)},
		"b": {probe: Probe{Reusable: 48, Running: 2, FreePages: 10}, run: tokens(3)},
	})
	g := New(b, Config{Model: "m", Metrics: m})
	toks, last := drain(t, g.Dispatch(context.Background(), job(64)))
	if toks != 3 || last.FinishReason != "stop" || len(b.sent) != 1 || b.sent[0] != "b" {
		t.Fatalf("got %d tokens, last %v, sent to %v; want 3 tokens from b", toks, last, b.sent)
	}
	if n := testutil.ToFloat64(m.RouteDecisions.WithLabelValues("prefix-hit")); n != 1 {
		t.Fatalf("prefix-hit decisions = %v, want 1", n)
	}
	// The probe's 48 tokens, then the whole prompt once the gateway sent
	// it there.
	_, d, err := New(b, Config{Model: "m"}).Pick(context.Background(), job(64), nil)
	if err != nil || d.CachedTokens != 48 {
		t.Fatalf("decision %+v, %v: want 48 cached tokens", d, err)
	}
	_, d, err = g.Pick(context.Background(), job(64), nil)
	if err != nil || d.CachedTokens != 64 {
		t.Fatalf("decision %+v, %v: want the 64 tokens sent there cached", d, err)
	}
}

func TestDispatchBalancesWithoutCache(t *testing.T) {
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{Running: 3}, run: tokens(1)},
		"b": {probe: Probe{Running: 1}, run: tokens(1)},
	})
	g := New(b, Config{Model: "m"})
	_, d, err := g.Pick(context.Background(), job(40), nil)
	if err != nil || d.ReplicaID != "b" || d.Reason != route.ReasonLeastLoad {
		t.Fatalf("decision %+v, %v: want b by least load", d, err)
	}
	// The cached replica loses once its load is past the threshold.
	b.by["a"].probe = Probe{Reusable: 32, Running: 20}
	if _, d, _ = g.Pick(context.Background(), job(40), nil); d.ReplicaID != "b" {
		t.Fatalf("decision %+v: want b, a is overloaded", d)
	}
}

func TestDispatchRetriesBeforeTheFirstEvent(t *testing.T) {
	m := metrics.New()
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{Reusable: 32}, run: dies(0)},
		"b": {probe: Probe{}, run: tokens(2)},
	})
	g := New(b, Config{Model: "m", Metrics: m})
	toks, last := drain(t, g.Dispatch(context.Background(), job(40)))
	if toks != 2 || last.FinishReason != "stop" || len(b.sent) != 2 || b.sent[0] != "a" || b.sent[1] != "b" {
		t.Fatalf("got %d tokens, last %v, sent to %v; want a then b", toks, last, b.sent)
	}
	if n := testutil.CollectAndCount(m.RouteDecisions); n != 2 {
		t.Fatalf("%d decision reasons counted, want prefix-hit then least-load", n)
	}
	if n := testutil.ToFloat64(m.RouteRetries); n != 1 {
		t.Fatalf("troupe_route_retries_total %v, want 1", n)
	}
}

func TestDispatchDoesNotRetryAStreamThatStarted(t *testing.T) {
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{Reusable: 32}, run: dies(2)},
		"b": {probe: Probe{}, run: tokens(2)},
	})
	g := New(b, Config{Model: "m"})
	toks, last := drain(t, g.Dispatch(context.Background(), job(40)))
	if toks != 2 || last.FinishReason != "error" || !last.Unavailable || len(b.sent) != 1 {
		t.Fatalf("got %d tokens, last %v, sent to %v; want a's 2 tokens and its error", toks, last, b.sent)
	}
}

func TestDispatchGivesUpAfterMaxAttempts(t *testing.T) {
	b := newFake("m", map[string]*fakeReplica{
		"a": {run: dies(0)}, "b": {run: dies(0)}, "c": {run: dies(0)},
	})
	g := New(b, Config{Model: "m", MaxAttempts: 2})
	_, last := drain(t, g.Dispatch(context.Background(), job(20)))
	if last == nil || last.FinishReason != "error" || !last.Unavailable || len(b.sent) != 2 {
		t.Fatalf("last %v, sent to %v; want the second replica's error", last, b.sent)
	}
}

func TestDispatchWithoutReplicas(t *testing.T) {
	g := New(newFake("m", map[string]*fakeReplica{}), Config{Model: "m"})
	_, last := drain(t, g.Dispatch(context.Background(), job(20)))
	if last == nil || last.FinishReason != "error" || !last.Unavailable {
		t.Fatalf("last %v: want an unavailable error", last)
	}
	// A replica of another model does not serve this one; one whose probe
	// fails is not routable.
	b := newFake("other", map[string]*fakeReplica{"a": {run: tokens(1)}})
	if _, _, err := New(b, Config{Model: "m"}).Pick(context.Background(), job(20), nil); !errors.Is(err, route.ErrUnknownModel) {
		t.Fatalf("err %v, want ErrUnknownModel", err)
	}
	b = newFake("m", map[string]*fakeReplica{"a": {probeErr: errors.New("timeout"), run: tokens(1)}, "b": {probeErr: errors.New("timeout"), run: tokens(1)}})
	if _, _, err := New(b, Config{Model: "m"}).Pick(context.Background(), job(20), nil); !errors.Is(err, route.ErrUnavailable) {
		t.Fatalf("err %v, want ErrUnavailable", err)
	}
}

func TestDispatchCancel(t *testing.T) {
	stopped := make(chan struct{})
	b := newFake("m", map[string]*fakeReplica{"a": {run: func(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent) {
		out <- &actors.TokenEvent{RequestId: job.RequestId, HasToken: true}
		<-ctx.Done()
		close(stopped)
	}}})
	ctx, cancel := context.WithCancel(context.Background())
	ch := New(b, Config{Model: "m"}).Dispatch(ctx, job(20))
	<-ch
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the dispatch did not cancel the replica's job")
	}
	drain(t, ch)
}

func TestProbedPrefix(t *testing.T) {
	toks := job(50).Prompt
	req := route.Request{Tenant: "t", Tokens: toks, Boundary: 40}
	p := probedPrefix(req, false, 35)
	if n := route.MatchBlocks(p, route.BlockHashes("t", toks)); n != 2 {
		t.Fatalf("dense: %d blocks match, want 2 (35 reusable tokens)", n)
	}
	if probedPrefix(req, false, 0) != nil {
		t.Fatal("dense: nothing reusable must give no digest")
	}
	key := route.SnapshotKey("t", toks[:40])
	if p := probedPrefix(req, true, 45); p == nil || !p.Contains(key) {
		t.Fatal("snapshot: reusable past the boundary must hold the boundary's key")
	}
	if p := probedPrefix(req, true, 39); p != nil {
		t.Fatal("snapshot: reusable short of the boundary must give no digest")
	}
}

// A lone candidate is sent the job without a probe; with two, both are
// probed.
func TestPickProbesOnlyToChoose(t *testing.T) {
	b := newFake("m", map[string]*fakeReplica{"a": {probeErr: errors.New("not to be asked"), run: tokens(1)}})
	r, d, err := New(b, Config{Model: "m"}).Pick(context.Background(), job(20), nil)
	if err != nil || r.MemberID != "a" || d.ReplicaID != "a" {
		t.Fatalf("lone replica: %+v %+v %v", r, d, err)
	}
	b = newFake("m", map[string]*fakeReplica{"a": {probeErr: errors.New("down"), run: tokens(1)}, "b": {run: tokens(1)}})
	if r, _, err = New(b, Config{Model: "m"}).Pick(context.Background(), job(20), nil); err != nil || r.MemberID != "b" {
		t.Fatalf("a's probe failed: picked %+v, %v; want b", r, err)
	}
	// Excluding one of two leaves a lone candidate: not probed either.
	if r, _, err = New(b, Config{Model: "m"}).Pick(context.Background(), job(20), []string{"b"}); err != nil || r.MemberID != "a" {
		t.Fatalf("b excluded: picked %+v, %v; want a", r, err)
	}
}

// TestStickyConversation: with nothing cached anywhere and equal load, a
// conversation's prompt_cache_key keeps it on one replica, turn after turn
// (the rendezvous choice), and different conversations spread; the tenant
// part of the scope does not change the prefix the probes stand for.
func TestStickyConversation(t *testing.T) {
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{FreePages: 100}, run: tokens(1)},
		"b": {probe: Probe{FreePages: 100}, run: tokens(1)},
		"c": {probe: Probe{FreePages: 100}, run: tokens(1)},
	})
	g := New(b, Config{Model: "m"})
	picked := map[string]bool{}
	for conv := range 12 {
		scope := kvcache.JoinScope("tenant-1", "conversation-"+strconv.Itoa(conv))
		var first string
		for turn := range 3 {
			j := job(32 + 16*turn)
			j.CacheScope = scope
			r, d, err := g.Pick(context.Background(), j, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != route.ReasonSticky {
				t.Fatalf("conversation %d turn %d: reason %v, want sticky", conv, turn, d.Reason)
			}
			if turn == 0 {
				first = r.MemberID
			} else if r.MemberID != first {
				t.Fatalf("conversation %d moved from %s to %s at turn %d", conv, first, r.MemberID, turn)
			}
		}
		picked[first] = true
	}
	if len(picked) < 2 {
		t.Fatalf("12 conversations all stuck to %v", picked)
	}
	// Without a conversation key: least load, no stickiness.
	j := job(32)
	j.CacheScope = kvcache.JoinScope("tenant-1", "")
	if _, d, err := g.Pick(context.Background(), j, nil); err != nil || d.Reason != route.ReasonLeastLoad {
		t.Fatalf("no conversation key: %v %v, want least-load", d.Reason, err)
	}
	// No prompt_cache_key but the conversation's opening: sticky too.
	var first string
	for turn := range 3 {
		j := job(32 + 16*turn)
		j.CacheScope, j.Conversation = kvcache.JoinScope("tenant-1", ""), "opening-7"
		r, d, err := g.Pick(context.Background(), j, nil)
		if err != nil || d.Reason != route.ReasonSticky || (turn > 0 && r.MemberID != first) {
			t.Fatalf("opening key, turn %d: %s %v %v (turn 1 on %s)", turn, r.MemberID, d.Reason, err, first)
		}
		first = r.MemberID
	}
}

// TestBurstIsSpread: 16 requests arriving together, routed concurrently,
// probes that cannot see each other's jobs yet (every replica reports
// itself idle): the gateway counts the jobs it sent and has not seen end,
// in the same step as each decision, and spreads the burst evenly instead
// of sending it all to one replica.
func TestBurstIsSpread(t *testing.T) {
	release := make(chan struct{})
	hold := func(ctx context.Context, job *actors.PrefillJob, out chan<- *actors.TokenEvent) {
		<-release
		tokens(1)(ctx, job, out)
	}
	b := newFake("m", map[string]*fakeReplica{
		"a": {probe: Probe{FreePages: 100}, run: hold},
		"b": {probe: Probe{FreePages: 100}, run: hold},
	})
	g := New(b, Config{Model: "m"})
	var streams []<-chan *actors.TokenEvent
	for i := range 16 {
		j := job(40)
		j.Prompt[0] = int32(1000 + i) // 16 different prompts
		streams = append(streams, g.Dispatch(context.Background(), j))
	}
	if !waitFor(func() bool { b.mu.Lock(); defer b.mu.Unlock(); return len(b.sent) == 16 }) {
		t.Fatal("not every job was submitted")
	}
	per := map[string]int{}
	for _, id := range b.sent {
		per[id]++
	}
	if per["a"] != 8 || per["b"] != 8 {
		t.Fatalf("16 simultaneous jobs went %v; want 8 and 8", per)
	}
	close(release)
	for _, s := range streams {
		drain(t, s)
	}
	if n := g.sent("a") + g.sent("b"); n != 0 {
		t.Fatalf("%d jobs still counted in flight after all ended", n)
	}
}

func waitFor(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

func TestLoosest(t *testing.T) {
	for _, tc := range []struct {
		a, b, want engine.Limits
	}{
		{engine.Limits{MaxPos: 2048, Pages: 100, PageSize: 16}, engine.Limits{MaxPos: 4096, Capped: true, Pages: 50, PageSize: 16},
			engine.Limits{MaxPos: 4096, Capped: true, Pages: 100, PageSize: 16}},
		{engine.Limits{MaxPos: 2048, Pages: 100, PageSize: 16}, engine.Limits{MaxPos: 1024, Pages: 0, PageSize: 16},
			engine.Limits{MaxPos: 2048, Pages: 0, PageSize: 16}},
		{engine.Limits{MaxPos: 0}, engine.Limits{MaxPos: 1024, Capped: true}, engine.Limits{}},
		{engine.Limits{MaxPos: 1024, Capped: true, Pages: 8, PageSize: 16}, engine.Limits{MaxPos: 1024, Capped: true, Pages: 8, PageSize: 16},
			engine.Limits{MaxPos: 1024, Capped: true, Pages: 8, PageSize: 16}},
	} {
		if got := Loosest(tc.a, tc.b); got != tc.want {
			t.Errorf("Loosest(%+v, %+v) = %+v, want %+v", tc.a, tc.b, got, tc.want)
		}
		if got := Loosest(tc.b, tc.a); got.MaxPos != tc.want.MaxPos || got.Pages*got.PageSize != tc.want.Pages*tc.want.PageSize {
			t.Errorf("Loosest(%+v, %+v) = %+v: not symmetric", tc.b, tc.a, got)
		}
	}
}

// TestPublishedState: replicas that published a fresh state are routed on
// it without a probe (its digest finds the prefix); one whose state is
// stale is probed; and a job's prompt counts as cached on the replica it
// was sent to before any digest says so, so the conversation's next turn
// follows it.
func TestPublishedState(t *testing.T) {
	j := job(64)
	now := time.Now()
	b := newFake("m", map[string]*fakeReplica{
		"a": {published: &node.Published{At: now, Running: 1, Prefix: route.NewHashSet(route.BlockHashes("", j.Prompt[:48]))}, run: tokens(1)},
		"b": {published: &node.Published{At: now}, run: tokens(1)},
	})
	m := metrics.New()
	g := New(b, Config{Model: "m", Metrics: m})
	r, d, err := g.Pick(context.Background(), j, nil)
	if err != nil || r.MemberID != "a" || d.Reason != route.ReasonPrefixHit || d.CachedTokens != 48 {
		t.Fatalf("routed to %s (%v, %d cached, %v); want a, prefix-hit, 48", r.MemberID, d.Reason, d.CachedTokens, err)
	}
	if b.probed != 0 || testutil.ToFloat64(m.RouteProbes) != 0 {
		t.Fatalf("%d probes with fresh published states", b.probed)
	}

	// Nothing published knows this conversation: its first turn goes to
	// the less loaded b, and its second turn follows it there.
	turn1 := job(40)
	for i := range turn1.Prompt {
		turn1.Prompt[i] = int32(100 + i)
	}
	drain(t, g.Dispatch(context.Background(), turn1))
	turn2 := &actors.PrefillJob{RequestId: "gw-req-2", Prompt: append(slices.Clone(turn1.Prompt), 7, 8, 9, 10, 11, 12, 13, 14, 15, 16), MaxTokens: 4}
	// b is now the busier one by what it published.
	b.by["b"].published.Running = 1
	b.by["a"].published.Running = 0
	if r, d, err := g.Pick(context.Background(), turn2, nil); err != nil || r.MemberID != "b" || d.Reason != route.ReasonPrefixHit || d.CachedTokens != 32 {
		t.Fatalf("turn 2 routed to %s (%v, %d cached, %v); want b, prefix-hit on turn 1's 32 block tokens", r.MemberID, d.Reason, d.CachedTokens, err)
	}

	// A stale state: probed.
	b.by["a"].published.At = now.Add(-time.Minute)
	b.by["a"].probe = Probe{FreePages: 1}
	if _, _, err := g.Pick(context.Background(), j, nil); err != nil || b.probed != 1 || testutil.ToFloat64(m.RouteProbes) != 1 {
		t.Fatalf("a stale state: %d probes (%v), want 1", b.probed, err)
	}
}

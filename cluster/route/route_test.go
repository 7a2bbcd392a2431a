package route

import (
	"errors"
	"fmt"
	"testing"
)

// toks returns n token ids starting at base.
func toks(base, n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(base + i)
	}
	return t
}

func cat(parts ...[]int32) []int32 {
	var t []int32
	for _, p := range parts {
		t = append(t, p...)
	}
	return t
}

// digestOf returns a digest holding the given prefixes.
func digestOf(tenant string, prefixes ...[]int32) *Digest {
	d := NewDigest(1 << 12)
	for _, p := range prefixes {
		d.Add(tenant, p)
	}
	return d
}

func dense(id, model string, load int, p Prefixes) Replica {
	return Replica{ID: id, Model: model, CapabilityKnown: true, Routable: true, Waiting: load, FreePages: 100, Prefix: p}
}

func TestRoute(t *testing.T) {
	sys := toks(1000, 64)             // 4 blocks
	conv := cat(sys, toks(5000, 100)) // 10 blocks (164 tokens)
	other := toks(9000, 80)
	ca := CacheAware{Threshold: 4}

	cases := []struct {
		name     string
		req      Request
		replicas []Replica
		policy   Policy
		want     string
		why      Reason
		cached   int
		retry    bool
		err      error
	}{
		{
			name: "filters by model",
			req:  Request{Model: "b", Tokens: conv},
			replicas: []Replica{
				dense("r1", "a", 0, digestOf("", conv)),
				dense("r2", "b", 9, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "unroutable skipped",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				func() Replica { r := dense("r1", "m", 0, digestOf("", conv)); r.Routable = false; return r }(),
				dense("r2", "m", 3, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "capability unknown skipped",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				func() Replica { r := dense("r1", "m", 0, digestOf("", conv)); r.CapabilityKnown = false; return r }(),
				dense("r2", "m", 3, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "longest prefix wins",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 0, digestOf("", sys)),
				dense("r2", "m", 2, digestOf("", conv[:128])),
				dense("r3", "m", 1, digestOf("", other)),
			},
			policy: ca, want: "r2", why: ReasonPrefixHit, cached: 128,
		},
		{
			name: "full match of a non-aligned prompt caps at its length",
			req:  Request{Model: "m", Tokens: conv[:160]},
			replicas: []Replica{
				dense("r1", "m", 0, nil),
				dense("r2", "m", 1, digestOf("", conv)),
			},
			policy: ca, want: "r2", why: ReasonPrefixHit, cached: 160,
		},
		{
			name: "tenant separates prefixes",
			req:  Request{Model: "m", Tenant: "t2", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 3, digestOf("t1", conv)),
				dense("r2", "m", 0, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "precomputed blocks used",
			req:  Request{Model: "m", Tokens: conv, Blocks: BlockHashes("", sys)},
			replicas: []Replica{
				dense("r1", "m", 1, digestOf("", sys)),
				dense("r2", "m", 0, nil),
			},
			policy: ca, want: "r1", why: ReasonPrefixHit, cached: 64,
		},
		{
			name: "blocks without tokens",
			req:  Request{Model: "m", Blocks: BlockHashes("", conv)},
			replicas: []Replica{
				dense("r1", "m", 0, digestOf("", sys)),
				dense("r2", "m", 1, digestOf("", conv)),
			},
			policy: ca, want: "r2", why: ReasonPrefixHit, cached: 160,
		},
		{
			name: "load threshold overrides prefix",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 9, digestOf("", conv)),
				dense("r2", "m", 4, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "at the threshold the prefix still wins",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 8, digestOf("", conv)),
				dense("r2", "m", 4, nil),
			},
			policy: ca, want: "r1", why: ReasonPrefixHit, cached: 160,
		},
		{
			name: "overloaded longest match yields to a shorter eligible one",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 20, digestOf("", conv)),
				dense("r2", "m", 3, digestOf("", sys)),
				dense("r3", "m", 0, nil),
			},
			policy: ca, want: "r2", why: ReasonPrefixHit, cached: 64,
		},
		{
			name: "least load ignores prefix",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 1, digestOf("", conv)),
				dense("r2", "m", 0, nil),
			},
			policy: LeastLoad{}, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "least load reports the chosen replica's cache",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 0, digestOf("", sys)),
				dense("r2", "m", 1, digestOf("", conv)),
			},
			policy: LeastLoad{}, want: "r1", why: ReasonLeastLoad, cached: 64,
		},
		{
			name: "equal load: more free pages",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				dense("r1", "m", 2, nil),
				func() Replica { r := dense("r2", "m", 2, nil); r.FreePages = 500; return r }(),
			},
			policy: LeastLoad{}, want: "r2", why: ReasonLeastLoad,
		},
		{
			name: "exclusion for retries",
			req:  Request{Model: "m", Tokens: conv, Exclude: []string{"r1"}},
			replicas: []Replica{
				dense("r1", "m", 0, digestOf("", conv)),
				dense("r2", "m", 5, nil),
			},
			policy: ca, want: "r2", why: ReasonLeastLoad, retry: true,
		},
		{
			name: "exclusion of a replica that is not a candidate is no retry",
			req:  Request{Model: "m", Tokens: conv, Exclude: []string{"gone"}},
			replicas: []Replica{
				dense("r1", "m", 0, digestOf("", conv)),
			},
			policy: ca, want: "r1", why: ReasonPrefixHit, cached: 160,
		},
		{
			name: "snapshot model: boundary snapshot wins",
			req:  Request{Model: "s", Tokens: conv, Boundary: 70, StickyKey: "c1"},
			replicas: func() []Replica {
				var rs []Replica
				for i := range 4 {
					d := NewDigest(8)
					if i == 2 {
						d.AddKey(SnapshotKey("", conv[:70]))
					}
					r := dense(fmt.Sprintf("r%d", i), "s", i, d)
					r.SnapshotReuse = true
					rs = append(rs, r)
				}
				return rs
			}(),
			policy: ca, want: "r2", why: ReasonPrefixHit, cached: 70,
		},
		{
			name:     "no replica serves the model",
			req:      Request{Model: "x", Tokens: conv},
			replicas: []Replica{dense("r1", "m", 0, nil)},
			policy:   ca, err: ErrUnknownModel,
		},
		{
			name:     "no replicas at all",
			req:      Request{Model: "m"},
			replicas: nil,
			policy:   &RoundRobin{}, err: ErrUnknownModel,
		},
		{
			name: "none routable",
			req:  Request{Model: "m", Tokens: conv},
			replicas: []Replica{
				func() Replica { r := dense("r1", "m", 0, nil); r.Routable = false; return r }(),
			},
			policy: ca, err: ErrUnavailable,
		},
		{
			name:     "all excluded",
			req:      Request{Model: "m", Tokens: conv, Exclude: []string{"r1"}},
			replicas: []Replica{dense("r1", "m", 0, nil)},
			policy:   LeastLoad{}, err: ErrUnavailable,
		},
		{
			name:     "nil policy",
			req:      Request{Model: "m"},
			replicas: []Replica{dense("r1", "m", 0, nil)},
			err:      errors.New("route: nil policy"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Route(tc.req, tc.replicas, tc.policy)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("got %+v, want error %v", d, tc.err)
				}
				if !errors.Is(err, tc.err) && err.Error() != tc.err.Error() {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Decision{ReplicaID: tc.want, Reason: tc.why, CachedTokens: tc.cached, Retry: tc.retry}
			if d != want {
				t.Fatalf("got %+v, want %+v", d, want)
			}
		})
	}
}

func TestRoundRobin(t *testing.T) {
	var rr RoundRobin
	rs := []Replica{dense("c", "m", 0, nil), dense("a", "m", 9, nil), dense("x", "z", 0, nil), dense("b", "m", 0, nil)}
	var got []string
	for range 7 {
		d, err := Route(Request{Model: "m"}, rs, &rr)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != ReasonRoundRobin {
			t.Fatalf("reason %v", d.Reason)
		}
		got = append(got, d.ReplicaID)
	}
	if fmt.Sprint(got) != "[a b c a b c a]" {
		t.Fatalf("order %v", got)
	}
}

// TestStickyRendezvous checks that a snapshot model's conversations stay put
// when an unrelated replica joins or leaves: only the keys the newcomer wins
// (about 1/N) move, all to it, and a departure moves only the departed
// replica's keys.
func TestStickyRendezvous(t *testing.T) {
	mk := func(n int) []Replica {
		var rs []Replica
		for i := range n {
			r := dense(fmt.Sprintf("replica-%d", i), "s", 0, nil)
			r.SnapshotReuse = true
			rs = append(rs, r)
		}
		return rs
	}
	const keys = 4000
	route := func(rs []Replica) []string {
		out := make([]string, keys)
		for k := range keys {
			d, err := Route(Request{Model: "s", StickyKey: fmt.Sprintf("conv-%d", k)}, rs, CacheAware{Threshold: 2})
			if err != nil {
				t.Fatal(err)
			}
			if d.Reason != ReasonSticky {
				t.Fatalf("reason %v", d.Reason)
			}
			out[k] = d.ReplicaID
		}
		return out
	}
	four, five := route(mk(4)), route(mk(5))
	count := map[string]int{}
	moved := 0
	for k := range keys {
		count[four[k]]++
		if four[k] != five[k] {
			moved++
			if five[k] != "replica-4" {
				t.Fatalf("key %d moved %s -> %s, not to the newcomer", k, four[k], five[k])
			}
		}
	}
	// Expect keys/5 = 800 to move; allow sampling noise.
	if moved < 650 || moved > 950 {
		t.Fatalf("join moved %d of %d keys, want about %d", moved, keys, keys/5)
	}
	for id, n := range count {
		if n < keys/4*8/10 || n > keys/4*12/10 {
			t.Fatalf("replica %s got %d of %d keys: unbalanced %v", id, n, keys, count)
		}
	}
	// replica-1 leaves: only its keys move.
	rs := mk(4)
	three := route(append(rs[:1:1], rs[2:]...))
	for k := range keys {
		if four[k] != "replica-1" && three[k] != four[k] {
			t.Fatalf("key %d moved %s -> %s though its replica stayed", k, four[k], three[k])
		}
		if three[k] == "replica-1" {
			t.Fatalf("key %d routed to the departed replica", k)
		}
	}

	// An overloaded sticky replica hands the key to its second choice.
	rs = mk(4)
	key := "conv-7"
	first := four[7]
	for i := range rs {
		if rs[i].ID == first {
			rs[i].Running = 10
		}
	}
	d, err := Route(Request{Model: "s", StickyKey: key}, rs, CacheAware{Threshold: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.ReplicaID == first || d.Reason != ReasonSticky {
		t.Fatalf("overloaded sticky replica %s still chosen: %+v", first, d)
	}
	d2, _ := Route(Request{Model: "s", StickyKey: key}, rs, CacheAware{Threshold: 2})
	if d2 != d {
		t.Fatalf("second choice not stable: %+v then %+v", d, d2)
	}
}

// TestDenseStickyFallback: with no digest match anywhere, a dense request
// with a sticky key goes to its rendezvous replica, so a conversation's
// second turn follows its first before the digest shows it.
func TestDenseStickyFallback(t *testing.T) {
	rs := []Replica{dense("a", "m", 0, nil), dense("b", "m", 1, nil), dense("c", "m", 0, nil)}
	seen := map[string]bool{}
	for k := range 60 {
		req := Request{Model: "m", Tokens: toks(k*100, 40), StickyKey: fmt.Sprint("k", k)}
		d1, err := Route(req, rs, CacheAware{Threshold: 1})
		if err != nil {
			t.Fatal(err)
		}
		req.Tokens = toks(k*100, 90)
		d2, _ := Route(req, rs, CacheAware{Threshold: 1})
		if d1 != d2 || d1.Reason != ReasonSticky {
			t.Fatalf("key %d: %+v then %+v", k, d1, d2)
		}
		seen[d1.ReplicaID] = true
	}
	if len(seen) != 3 {
		t.Fatalf("sticky keys reached only %v", seen)
	}
	// Threshold 0: only the least loaded are eligible.
	for k := range 20 {
		d, _ := Route(Request{Model: "m", StickyKey: fmt.Sprint("k", k)}, rs, CacheAware{})
		if d.ReplicaID == "b" {
			t.Fatalf("key %d went to the busier replica with threshold 0", k)
		}
	}
}

// BenchmarkRoute: one cache-aware decision for a 4000-token prompt among 16
// replicas whose digests hold 4096 blocks each, one of them the prompt's
// first 3000 tokens (block hashes computed in the call).
func BenchmarkRoute(b *testing.B) {
	prompt := toks(0, 4000)
	var rs []Replica
	for i := range 16 {
		d := NewDigest(4096)
		d.Add("", toks(100000*(i+1), 4096*16))
		if i == 5 {
			d.Add("", prompt[:3000])
		}
		rs = append(rs, dense(fmt.Sprintf("r%02d", i), "m", i%3, NewHashSet(d.Hashes())))
	}
	req := Request{Model: "m", Tokens: prompt, StickyKey: "conv"}
	b.ReportAllocs()
	for b.Loop() {
		d, err := Route(req, rs, CacheAware{Threshold: 8})
		if err != nil || d.ReplicaID != "r05" {
			b.Fatal(d, err)
		}
	}
}

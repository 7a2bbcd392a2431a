package route

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Replica is the state one model replica publishes through the cluster (at a
// bounded rate) as a gateway holds it.
type Replica struct {
	ID    string // cluster-unique replica identity (the actor's PID or identity)
	Model string // served model name, as requests name it

	// CapabilityKnown is set once the replica's CapabilityReady has reached
	// this gateway; SnapshotReuse is then the model's cache mechanism
	// (snapshot keys in Prefix, sticky routing) rather than dense KV (block
	// hashes in Prefix, prefix routing).
	CapabilityKnown bool
	SnapshotReuse   bool
	// Routable is set by the gateway once CapabilityReady arrived and the
	// replica is a live cluster member. Route skips a replica that is not
	// routable, or whose capability is not known.
	Routable bool

	Waiting   int // requests queued, not yet admitted
	Running   int // requests admitted (prefilling or decoding)
	FreePages int // free KV pages (dense) or free snapshot budget in pages

	// Prefix is the replica's published digest: chained block hashes
	// (dense) or snapshot keys (snapshot models). Nil: nothing known.
	Prefix Prefixes
}

// Load is the load Route balances: requests queued plus requests running.
// It counts requests, not tokens, because that is what a replica can publish
// cheaply and what a gateway can keep current between publications (it adds
// one for every request it sends); FreePages only breaks ties.
func (r *Replica) Load() int { return r.Waiting + r.Running }

// Request is what the gateway knows about a prepared request when it routes.
type Request struct {
	Model  string
	Tenant string  // the kvcache scope's tenant: prefixes never match across tenants
	Tokens []int32 // the prompt's token ids after render + tokenize
	// Blocks, when set, are BlockHashes(Tenant, Tokens), precomputed (a
	// gateway that extends a conversation hashes only the new blocks). A
	// dense request may carry Blocks alone, without Tokens.
	Blocks []BlockHash
	// StickyKey identifies the conversation: prompt_cache_key, or a hash of
	// its first turns. Empty: no stickiness.
	StickyKey string
	// Boundary is the history boundary the preparer found (tokens of the
	// previous turns), for snapshot models: a replica holding the snapshot
	// keyed SnapshotKey(Tenant, Tokens[:Boundary]) resumes from it. 0: none.
	Boundary int
	// Exclude lists replica IDs not to pick (retries after a replica died
	// or refused).
	Exclude []string
}

// Reason says why Route picked a replica.
type Reason uint8

const (
	// ReasonPrefixHit: the replica's digest holds the longest prefix of the
	// request (dense) or the snapshot at its history boundary.
	ReasonPrefixHit Reason = iota + 1
	// ReasonSticky: rendezvous hashing on the request's sticky key.
	ReasonSticky
	// ReasonLeastLoad: the least loaded replica.
	ReasonLeastLoad
	// ReasonRoundRobin: the next replica in turn.
	ReasonRoundRobin
)

func (r Reason) String() string {
	switch r {
	case ReasonPrefixHit:
		return "prefix-hit"
	case ReasonSticky:
		return "sticky"
	case ReasonLeastLoad:
		return "least-load"
	case ReasonRoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Decision is Route's answer.
type Decision struct {
	ReplicaID string
	Reason    Reason
	// CachedTokens is the number of prompt tokens the chosen replica is
	// expected to have cached, from its digest (0 when it has none).
	CachedTokens int
	// Retry is set when a replica of Exclude would otherwise have been a
	// candidate.
	Retry bool
}

// Errors Route returns, wrapped with the model's name. The HTTP layer maps
// ErrUnknownModel to 404 and ErrUnavailable to 503 (errors.Is).
var (
	// ErrUnknownModel: no replica, routable or not, serves the model.
	ErrUnknownModel = errors.New("route: no replica serves the model")
	// ErrUnavailable: replicas serve the model but none is routable (not
	// ready yet, or all excluded).
	ErrUnavailable = errors.New("route: no routable replica for the model")
)

// Policy chooses among the candidate replicas of a request. The policies are
// *RoundRobin, LeastLoad and CacheAware.
type Policy interface {
	choose(c *call) Decision
}

// call is one Route call's candidates (routable, model's, not excluded;
// sorted by ID) and the request.
type call struct {
	req      *Request
	cands    []*Replica
	blocks   []BlockHash // the request's block hashes (dense), lazily
	snapshot bool        // the model reuses snapshots
	hashed   bool
	key      BlockHash // the snapshot key at the history boundary, lazily
	keyed    bool
}

// Route picks the replica for req among replicas with policy. Candidates are
// the replicas of req.Model that are routable with a known capability and not
// in req.Exclude; ties are broken deterministically, so Route is a pure
// function of its arguments (and of a RoundRobin's counter).
func Route(req Request, replicas []Replica, policy Policy) (Decision, error) {
	if policy == nil {
		return Decision{}, errors.New("route: nil policy")
	}
	c := call{req: &req}
	served, excluded := false, false
	for i := range replicas {
		r := &replicas[i]
		if r.Model != req.Model {
			continue
		}
		served = true
		if !r.Routable || !r.CapabilityKnown {
			continue
		}
		if slices.Contains(req.Exclude, r.ID) {
			excluded = true
			continue
		}
		c.cands = append(c.cands, r)
	}
	if !served {
		return Decision{}, fmt.Errorf("%w %q", ErrUnknownModel, req.Model)
	}
	if len(c.cands) == 0 {
		if excluded {
			return Decision{}, fmt.Errorf("%w %q (all routable replicas excluded)", ErrUnavailable, req.Model)
		}
		return Decision{}, fmt.Errorf("%w %q", ErrUnavailable, req.Model)
	}
	slices.SortFunc(c.cands, func(a, b *Replica) int { return cmp.Compare(a.ID, b.ID) })
	// Replicas of one model share its capability; the first decides.
	c.snapshot = c.cands[0].SnapshotReuse
	d := policy.choose(&c)
	d.Retry = excluded
	return d, nil
}

// requestBlocks returns the request's block hashes (dense models).
func (c *call) requestBlocks() []BlockHash {
	if !c.hashed {
		c.hashed = true
		c.blocks = c.req.Blocks
		if c.blocks == nil {
			c.blocks = BlockHashes(c.req.Tenant, c.req.Tokens)
		}
	}
	return c.blocks
}

// cached returns the number of prompt tokens r is expected to have cached:
// the digest's longest block match (dense), or the history boundary when r
// holds the snapshot there (snapshot models).
func (c *call) cached(r *Replica) int {
	if r.Prefix == nil {
		return 0
	}
	if c.snapshot {
		b := c.req.Boundary
		if b <= 0 || b > len(c.req.Tokens) {
			return 0
		}
		if !c.keyed {
			c.keyed = true
			c.key = SnapshotKeyFromBlocks(c.req.Blocks, c.req.Tenant, c.req.Tokens[:b])
		}
		if r.Prefix.Contains(c.key) {
			return b
		}
		return 0
	}
	n := MatchBlocks(r.Prefix, c.requestBlocks()) * BlockTokens
	if len(c.req.Tokens) > 0 {
		n = min(n, len(c.req.Tokens))
	}
	return n
}

func (c *call) decide(r *Replica, why Reason) Decision {
	return Decision{ReplicaID: r.ID, Reason: why, CachedTokens: c.cached(r)}
}

// rendezvous is the highest-random-weight score of replica id for key.
func rendezvous(key, id string) uint64 {
	var d xxhash.Digest
	d.Reset()
	d.WriteString(key)
	d.Write([]byte{0})
	d.WriteString(id)
	return d.Sum64()
}

// lessLoaded reports whether a is preferred to b by load: lower load, then
// more free pages, then higher rendezvous weight for key (so equal replicas
// are spread by request, not always the first ID).
func lessLoaded(a, b *Replica, key string) bool {
	if la, lb := a.Load(), b.Load(); la != lb {
		return la < lb
	}
	if a.FreePages != b.FreePages {
		return a.FreePages > b.FreePages
	}
	return rendezvous(key, a.ID) > rendezvous(key, b.ID)
}

// spreadKey is the key that breaks load ties: the sticky key, else the
// model and the prompt's length (cheap and varies by request).
func (c *call) spreadKey() string {
	if c.req.StickyKey != "" {
		return c.req.StickyKey
	}
	return fmt.Sprintf("%s/%d", c.req.Model, len(c.req.Tokens))
}

func leastLoaded(cands []*Replica, key string) *Replica {
	best := cands[0]
	for _, r := range cands[1:] {
		if lessLoaded(r, best, key) {
			best = r
		}
	}
	return best
}

// RoundRobin picks the candidates in turn (by ID order). Its zero value is
// ready; use it through a pointer, shared by the calls it spreads.
type RoundRobin struct {
	n atomic.Uint64
}

func (p *RoundRobin) choose(c *call) Decision {
	i := p.n.Add(1) - 1
	return c.decide(c.cands[i%uint64(len(c.cands))], ReasonRoundRobin)
}

// LeastLoad picks the replica of lowest Load.
type LeastLoad struct{}

func (LeastLoad) choose(c *call) Decision {
	return c.decide(leastLoaded(c.cands, c.spreadKey()), ReasonLeastLoad)
}

// CacheAware routes to the replica most likely to hold the request's prefix
// unless that replica is overloaded: a replica is eligible when its Load is
// at most Threshold above the least loaded candidate's (Threshold < 0 counts
// as 0, which makes it least-load with cache hits breaking ties).
//
// Dense models: among eligible replicas, the longest digest match wins (ties:
// lower load). With no match, the sticky key's rendezvous choice among
// eligible replicas (so a conversation's second turn finds its first even
// before the digest that records it was published), else the least loaded.
//
// Snapshot models: an eligible replica holding the snapshot at the request's
// history boundary, else rendezvous on the sticky key among eligible
// replicas, else the least loaded.
type CacheAware struct {
	Threshold int
}

func (p CacheAware) choose(c *call) Decision {
	key := c.spreadKey()
	least := leastLoaded(c.cands, key)
	limit := least.Load() + max(p.Threshold, 0)
	var best *Replica
	bestCached := 0
	for _, r := range c.cands {
		if r.Load() > limit {
			continue
		}
		n := c.cached(r)
		if n > bestCached || (n == bestCached && n > 0 && lessLoaded(r, best, key)) {
			best, bestCached = r, n
		}
	}
	if best != nil {
		return Decision{ReplicaID: best.ID, Reason: ReasonPrefixHit, CachedTokens: bestCached}
	}
	if c.req.StickyKey != "" {
		var pick *Replica
		var w uint64
		for _, r := range c.cands {
			if r.Load() > limit {
				continue
			}
			if rw := rendezvous(c.req.StickyKey, r.ID); pick == nil || rw > w {
				pick, w = r, rw
			}
		}
		return c.decide(pick, ReasonSticky)
	}
	return c.decide(least, ReasonLeastLoad)
}

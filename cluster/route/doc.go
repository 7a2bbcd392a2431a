// Package route picks the model replica a gateway sends a prepared request
// (its PrefillJob) to. Routing is a plain function, Route(request, replicas,
// policy), of what the gateway knows: the request's token ids and the state
// the replicas publish through the cluster. It holds no actors and does no
// I/O; the cluster actors keep []Replica current and call it.
//
// Why it is shaped this way. KV pages (16 tokens, the kvcache page size)
// never cross nodes, so a prompt prefix is only reused when the request lands
// on the replica that already holds it. Three known designs are combined:
//
//   - SGLang's cache-aware router: send a request to the replica with the
//     longest prefix match, unless that replica's load exceeds the least
//     loaded replica's by more than a threshold; then balance instead.
//     CacheAware{Threshold} is this rule.
//   - llm-d's prefix scorer: replicas do not publish their radix tree but a
//     bounded set of hashes of page-aligned token blocks. Block hashes chain
//     (h_i = H(h_{i-1}, tokens of block i)), so one hash names a whole
//     prefix, a match is a run of set lookups, and the digest is 8 bytes a
//     page. BlockHashes, Digest and MatchBlocks are this.
//   - Rendezvous (highest-random-weight) hashing for stickiness: a
//     conversation key goes to the replica with the highest H(key, id).
//     When a replica joins or leaves, only the keys it wins or held move
//     (about 1/N), where modulo hashing would move almost all. Snapshot
//     models (recurrent state: a snapshot is keyed by an exact token sequence
//     and cannot be cut back) route this way, since any partial prefix is
//     worthless to them.
//
// The types:
//
//   - Replica: one replica's published state: ID, Model; CapabilityKnown and
//     SnapshotReuse (the model's cache mechanism, known once its
//     CapabilityReady reached the gateway); Routable (only then, and while
//     it is a member); Waiting, Running, FreePages; and Prefix, its digest
//     (block hashes for dense models, snapshot keys for snapshot models).
//     Load() = Waiting + Running is what policies balance.
//   - Request: Model, Tenant (prefixes never match across tenants), Tokens
//     (or precomputed Blocks), StickyKey (prompt_cache_key or a hash of the
//     conversation's first turns), Boundary (history boundary, for snapshot
//     lookups) and Exclude (replica IDs a retry must avoid).
//   - Decision: ReplicaID, Reason (PrefixHit, Sticky, LeastLoad, RoundRobin),
//     CachedTokens (what the chosen replica's digest promises) and Retry.
//   - Policy: *RoundRobin (a counter; zero value ready), LeastLoad,
//     CacheAware{Threshold}.
//   - Digest: the bounded LRU of block hashes (or snapshot keys) a replica
//     maintains beside its prefix index and publishes (Hashes); a gateway
//     holds the published list as a HashSet.
//   - ErrUnknownModel (HTTP 404) and ErrUnavailable (HTTP 503): no replica
//     serves the model; replicas serve it but none is routable.
//
// Subpackage sim replays synthetic multi-turn traces against simulated
// replicas to compare the policies' cached-token share and load balance, and
// to choose CacheAware's threshold.
package route

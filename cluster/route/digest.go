package route

import (
	"encoding/binary"

	"github.com/cespare/xxhash/v2"
)

// BlockTokens is the number of token ids in one hashed block: the KV page
// size of the kvcache package, so that one block is one page of a replica's
// prefix index.
const BlockTokens = 16

// BlockHash identifies a whole page-aligned prefix: block i's hash chains
// block i-1's, h_i = xxhash64(h_{i-1} ‖ tokens[16i:16i+16]) (little-endian),
// and h_{-1} is the hash of the tenant, so equal hashes mean equal tenant and
// equal tokens from position 0 to the end of the block.
type BlockHash uint64

// snapshotDomain separates snapshot keys from block hashes.
const snapshotDomain = 0x736e6170 // "snap"

// BlockHashes returns the chained hashes of the full blocks of tokens (a
// trailing partial block has none) under tenant (the kvcache scope's tenant;
// "" for none).
func BlockHashes(tenant string, tokens []int32) []BlockHash {
	return AppendBlockHashes(nil, tenant, tokens)
}

// AppendBlockHashes appends to dst the chained hashes of the full blocks of
// tokens beyond the len(dst) blocks dst already holds, which must be the
// hashes of tokens' first len(dst) blocks under tenant. It lets a caller that
// extends a conversation hash only the new blocks.
func AppendBlockHashes(dst []BlockHash, tenant string, tokens []int32) []BlockHash {
	prev := BlockHash(xxhash.Sum64String(tenant))
	if len(dst) > 0 {
		prev = dst[len(dst)-1]
	}
	for i := len(dst); (i+1)*BlockTokens <= len(tokens); i++ {
		prev = chain(prev, tokens[i*BlockTokens:(i+1)*BlockTokens])
		dst = append(dst, prev)
	}
	return dst
}

// chain returns H(prev ‖ block) for a full block.
func chain(prev BlockHash, block []int32) BlockHash {
	var buf [8 + 4*BlockTokens]byte
	binary.LittleEndian.PutUint64(buf[:8], uint64(prev))
	for j, t := range block[:BlockTokens] {
		binary.LittleEndian.PutUint32(buf[8+4*j:], uint32(t))
	}
	return BlockHash(xxhash.Sum64(buf[:]))
}

// SnapshotKey is the key of a snapshot covering exactly tokens (any length,
// not page-aligned) under tenant: the hash of the last full block chained
// with the remaining tokens and the total length. A snapshot model's replica
// puts these keys in its digest instead of block hashes.
func SnapshotKey(tenant string, tokens []int32) BlockHash {
	return SnapshotKeyFromBlocks(nil, tenant, tokens)
}

// SnapshotKeyFromBlocks is SnapshotKey with the block hashes of tokens (or
// of a longer sequence they begin) already at hand: only the tail after the
// last full block is hashed. Blocks that do not cover tokens' full blocks
// are ignored.
func SnapshotKeyFromBlocks(blocks []BlockHash, tenant string, tokens []int32) BlockHash {
	nb := len(tokens) / BlockTokens
	full := nb * BlockTokens
	var prev BlockHash
	switch {
	case nb > 0 && len(blocks) >= nb:
		prev = blocks[nb-1]
	default:
		prev = BlockHash(xxhash.Sum64String(tenant))
		for i := 0; i < full; i += BlockTokens {
			prev = chain(prev, tokens[i:i+BlockTokens])
		}
	}
	var arr [8 + 4 + 4*BlockTokens + 8]byte
	buf := binary.LittleEndian.AppendUint64(arr[:0], uint64(prev))
	buf = binary.LittleEndian.AppendUint32(buf, snapshotDomain)
	for _, t := range tokens[full:] {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(len(tokens)))
	return BlockHash(xxhash.Sum64(buf))
}

// Prefixes is what a replica publishes about its cache: a set of block
// hashes (dense models) or snapshot keys (snapshot models).
type Prefixes interface {
	Contains(h BlockHash) bool
}

// HashSet is a published digest as a gateway holds it: rebuilt from the
// replica's Digest.Hashes each time a state update arrives.
type HashSet map[BlockHash]struct{}

// NewHashSet returns the set of hs.
func NewHashSet(hs []BlockHash) HashSet {
	s := make(HashSet, len(hs))
	for _, h := range hs {
		s[h] = struct{}{}
	}
	return s
}

// Contains reports whether h is in s.
func (s HashSet) Contains(h BlockHash) bool {
	_, ok := s[h]
	return ok
}

// MatchBlocks returns how many leading blocks of a request (its chained block
// hashes) p holds without a gap: the length, in blocks, of the longest prefix
// the replica is expected to have cached. A nil p matches nothing.
func MatchBlocks(p Prefixes, blocks []BlockHash) int {
	if p == nil {
		return 0
	}
	n := 0
	for n < len(blocks) && p.Contains(blocks[n]) {
		n++
	}
	return n
}

// Digest is a replica's bounded record of the prefixes it caches: at most
// Max block hashes, least recently used dropped first. A replica feeds it
// from its prefix index: Add(tenant, tokens) for every Insert (the prompt and
// the generated tokens it caches) and for every Lookup hit (the matched part),
// so the digest's LRU order follows the index's. Blocks are added deepest
// first, so a prefix's ancestors are always at least as recent as its
// descendants and are dropped after them, as the radix index evicts leaves
// before their parents. An entry may outlive the page it describes (the index
// evicted it first); the cost is a mispredicted hit, which routing tolerates.
// Hashes is what the replica publishes, at a bounded rate. A Digest is not
// safe for concurrent use.
type Digest struct {
	// OnAdd and OnDrop, when set, are called with every entry added and
	// every entry the bound drops: a replica that publishes deltas rather
	// than whole digests records them.
	OnAdd, OnDrop func(h BlockHash)

	max   int
	m     map[BlockHash]int32 // entry -> its node
	nodes []node              // nodes[0]: the list's sentinel; next of it is the most recent
	free  []int32             // unused nodes
}

// node is one entry of the Digest's LRU list (indices into Digest.nodes).
type node struct {
	h          BlockHash
	prev, next int32
}

// NewDigest returns an empty digest of at most n entries (n < 1 means 1).
func NewDigest(n int) *Digest {
	return &Digest{max: max(n, 1), m: map[BlockHash]int32{}, nodes: []node{{}}}
}

// Add records the full blocks of prefixTokens under tenant.
func (d *Digest) Add(tenant string, prefixTokens []int32) {
	d.AddBlocks(BlockHashes(tenant, prefixTokens))
}

// AddBlocks records the chained block hashes of one prefix (block 0 first)
// and returns how many entries were dropped to stay within the bound.
func (d *Digest) AddBlocks(blocks []BlockHash) (dropped int) {
	for i := len(blocks) - 1; i >= 0; i-- {
		if d.touch(blocks[i]) {
			dropped++
		}
	}
	return dropped
}

// AddKey records one snapshot key (the digest of a snapshot model) and
// returns how many entries were dropped.
func (d *Digest) AddKey(k BlockHash) int { return d.AddBlocks([]BlockHash{k}) }

// touch makes h the most recent entry, adding it (and dropping the least
// recent when the digest is full; it reports whether it did) if absent.
func (d *Digest) touch(h BlockHash) (dropped bool) {
	if i, ok := d.m[h]; ok {
		d.unlink(i)
		d.pushFront(i)
		return false
	}
	if len(d.m) >= d.max {
		last := d.nodes[0].prev
		old := d.nodes[last].h
		delete(d.m, old)
		d.unlink(last)
		d.free = append(d.free, last)
		dropped = true
		if d.OnDrop != nil {
			d.OnDrop(old)
		}
	}
	var i int32
	if n := len(d.free); n > 0 {
		i = d.free[n-1]
		d.free = d.free[:n-1]
	} else {
		i = int32(len(d.nodes))
		d.nodes = append(d.nodes, node{})
	}
	d.nodes[i].h = h
	d.m[h] = i
	d.pushFront(i)
	if d.OnAdd != nil {
		d.OnAdd(h)
	}
	return dropped
}

func (d *Digest) unlink(i int32) {
	n := &d.nodes[i]
	d.nodes[n.prev].next = n.next
	d.nodes[n.next].prev = n.prev
}

func (d *Digest) pushFront(i int32) {
	first := d.nodes[0].next
	d.nodes[i].prev, d.nodes[i].next = 0, first
	d.nodes[first].prev = i
	d.nodes[0].next = i
}

// Touch marks the leading blocks that are present as used (a lookup hit)
// and returns how many leading blocks were present.
func (d *Digest) Touch(blocks []BlockHash) int {
	n := MatchBlocks(d, blocks)
	for i := n - 1; i >= 0; i-- {
		d.touch(blocks[i])
	}
	return n
}

// Contains reports whether h is recorded; it does not change the LRU order.
func (d *Digest) Contains(h BlockHash) bool {
	_, ok := d.m[h]
	return ok
}

// Remove drops h (a replica that knows which prefix it evicted); it reports
// whether h was present.
func (d *Digest) Remove(h BlockHash) bool {
	i, ok := d.m[h]
	if ok {
		delete(d.m, h)
		d.unlink(i)
		d.free = append(d.free, i)
	}
	return ok
}

// Len returns the number of entries.
func (d *Digest) Len() int { return len(d.m) }

// Hashes returns the entries, most recently used first: what the replica
// publishes (8 bytes an entry).
func (d *Digest) Hashes() []BlockHash {
	hs := make([]BlockHash, 0, len(d.m))
	for i := d.nodes[0].next; i != 0; i = d.nodes[i].next {
		hs = append(hs, d.nodes[i].h)
	}
	return hs
}

package kvcache

import (
	"errors"
	"fmt"
	"strings"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/internal/offheap"
)

// ErrNoPages is returned when the pool cannot satisfy an allocation.
var ErrNoPages = errors.New("kvcache: out of KV pages")

// Layout is what a model keeps per layer: the per-position K (and V) width
// of attention layers (0 for a layer without attention KV, which gets no page
// storage) and the per-sequence state size of recurrent layers in floats (0
// for a layer without one).
type Layout struct {
	KVDims     []int
	StateSizes []int
}

// ErrClosed is returned by a pool used after Close.
var ErrClosed = errors.New("kvcache: pool closed")

// Pool is the per-sequence memory of one model: KV pages for every attention
// layer, and fixed-size state slots for every recurrent layer. All of it
// lives in one off-heap block (see the package doc), released by Close.
type Pool struct {
	pageSize int
	layers   []gpu.KVLayer
	refs     []int32 // reference count per page; 0 = free
	free     []int32 // stack of free page ids

	stateSizes []int
	states     [][]float32 // per layer: numSlots * stateSizes[layer]
	freeSlots  []int32     // stack of free slot ids (1-based)
	numSlots   int
	hasKV      bool // some layer stores KV; without, sequences need no pages

	mem       *offheap.Block // the storage of layers and states; nil when empty or closed
	pageBytes int64          // bytes of one page across all layers (K and V)
	slotBytes int64          // bytes of one state slot across all layers
	closed    bool
}

// NewPool allocates numPages pages of pageSize positions for the attention
// layers of l, and numSlots state slots for its recurrent layers. numSlots
// is ignored when no layer has state, and numPages when no layer stores KV
// (such a pool has no pages). The storage is off the Go heap: the owner
// must Close the pool when done with it.
func NewPool(l Layout, pageSize, numPages, numSlots int) (*Pool, error) {
	if pageSize <= 0 {
		return nil, fmt.Errorf("kvcache: page size %d must be positive", pageSize)
	}
	dims := l.KVDims
	p := &Pool{pageSize: pageSize, layers: make([]gpu.KVLayer, len(dims))}
	for _, d := range dims {
		p.hasKV = p.hasKV || d > 0
	}
	if !p.hasKV {
		numPages = 0
	} else if numPages <= 0 {
		return nil, fmt.Errorf("kvcache: page count %d must be positive", numPages)
	}
	p.pageBytes = PageBytes(dims, pageSize)
	floats := int64(numPages) * p.pageBytes / 4
	if hasState(l.StateSizes) {
		if numSlots <= 0 {
			return nil, fmt.Errorf("kvcache: a model with recurrent state needs at least one state slot, got %d", numSlots)
		}
		p.stateSizes, p.numSlots = l.StateSizes, numSlots
		p.slotBytes = SlotBytes(l.StateSizes)
		floats += int64(numSlots) * p.slotBytes / 4
	}
	var store []float32
	if floats > 0 {
		if int64(int(floats)) != floats {
			return nil, fmt.Errorf("kvcache: a pool of %d floats is too large", floats)
		}
		var err error
		if p.mem, err = offheap.Alloc(int(floats)); err != nil {
			return nil, fmt.Errorf("kvcache: pool of %d pages and %d state slots: %w", numPages, p.numSlots, err)
		}
		store = p.mem.Floats()
	}
	// take carves the next n floats off the block, capped so that no slice
	// can grow into its neighbour.
	take := func(n int) []float32 {
		s := store[:n:n]
		store = store[n:]
		return s
	}
	for i, d := range dims {
		p.layers[i] = gpu.KVLayer{PageSize: pageSize, Dim: d}
		if d > 0 {
			p.layers[i].K = take(numPages * pageSize * d)
			p.layers[i].V = take(numPages * pageSize * d)
		}
	}
	if p.numSlots > 0 {
		p.states = make([][]float32, len(l.StateSizes))
		for i, n := range l.StateSizes {
			p.states[i] = take(p.numSlots * n)
		}
		for i := p.numSlots; i >= 1; i-- {
			p.freeSlots = append(p.freeSlots, int32(i))
		}
	}
	p.refs = make([]int32, numPages)
	p.free = make([]int32, numPages)
	for i := range p.free {
		p.free[i] = int32(numPages - 1 - i) // pop order 0, 1, 2, ...
	}
	return p, nil
}

// Close releases the pool's storage. Afterwards every allocation fails
// with ErrClosed and Layers and State hand out no memory; slices obtained
// from them before Close must not be used after it (the owner closes the
// pool once nothing runs on it any more). Closing twice is a no-op.
func (p *Pool) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	for i := range p.layers {
		p.layers[i].K, p.layers[i].V = nil, nil
	}
	for i := range p.states {
		p.states[i] = nil
	}
	if p.mem == nil {
		return nil
	}
	mem := p.mem
	p.mem = nil
	return mem.Free()
}

// Closed reports whether Close was called.
func (p *Pool) Closed() bool { return p.closed }

// Prefault writes the whole storage of the pool once, so that the system
// commits its memory now rather than in the first steps that use it, as
// llama.cpp clears its KV buffer when it creates a context (troupe
// generate, and troupe serve unless --kv-prefault=false).
func (p *Pool) Prefault() {
	if p.mem != nil {
		clear(p.mem.Floats())
	}
}

func hasState(sizes []int) bool {
	for _, n := range sizes {
		if n > 0 {
			return true
		}
	}
	return false
}

// PageBytes is the memory of one page of pageSize positions across layers
// of the given per-position widths (f32 K and V).
func PageBytes(dims []int, pageSize int) int64 {
	var perPos int64
	for _, d := range dims {
		perPos += int64(2 * 4 * d)
	}
	return perPos * int64(pageSize)
}

// SlotBytes is the memory of one state slot of layers with the given state
// sizes (f32).
func SlotBytes(stateSizes []int) int64 {
	var n int64
	for _, s := range stateSizes {
		n += int64(4 * s)
	}
	return n
}

// PagesForBudget is how many pages of pageSize positions fit in budget bytes
// for layers of the given per-position widths (f32 K and V); 0 for layers
// without KV.
func PagesForBudget(dims []int, pageSize int, budget int64) int {
	pb := PageBytes(dims, pageSize)
	if pb == 0 || budget <= 0 {
		return 0
	}
	return int(budget / pb)
}

// ErrBudget is returned when a byte budget cannot hold one sequence.
var ErrBudget = errors.New("kvcache: budget too small")

// Plan is how PlanBudget divides a byte budget.
type Plan struct {
	Pages, Slots   int   // pool size: KV pages and state slots
	PoolBytes      int64 // memory the pool maps for them (Pool.Bytes)
	SnapshotBudget int64 // the snapshot pool's share
}

// PlanBudget divides budget bytes between snapshots, state slots and KV
// pages: snapshotBudget goes to the snapshot pool; of the rest, up to
// maxSeqs state slots (one per sequence that may run at once, fewer when
// they would not leave room for one page), then as many pages of pageSize
// positions as fit. The pool's mapping (rounded up to system pages) plus
// the snapshot budget never exceed budget. It fails with ErrBudget when
// budget cannot hold the snapshot share and one sequence: one state slot
// and one page, for the layers that have them.
func PlanBudget(l Layout, pageSize int, budget, snapshotBudget int64, maxSeqs int) (Plan, error) {
	if pageSize <= 0 || maxSeqs <= 0 {
		return Plan{}, fmt.Errorf("kvcache: page size %d and sequence count %d must be positive", pageSize, maxSeqs)
	}
	if snapshotBudget < 0 || snapshotBudget >= budget {
		return Plan{}, fmt.Errorf("%w: the snapshot share of %s must be less than the whole budget of %s",
			ErrBudget, FormatBytes(snapshotBudget), FormatBytes(budget))
	}
	pb, sb := PageBytes(l.KVDims, pageSize), SlotBytes(l.StateSizes)
	avail := budget - snapshotBudget
	if need := offheap.RoundUp(pb + sb); need > avail {
		var parts []string
		if pb > 0 {
			parts = append(parts, fmt.Sprintf("a %d-position KV page takes %s", pageSize, FormatBytes(pb)))
		}
		if sb > 0 {
			parts = append(parts, "a recurrent-state slot "+FormatBytes(sb))
		}
		if snapshotBudget > 0 {
			parts = append(parts, "the snapshot share "+FormatBytes(snapshotBudget))
		}
		return Plan{}, fmt.Errorf("%w: %s cannot hold one sequence (%s); it must be at least %s",
			ErrBudget, FormatBytes(budget), strings.Join(parts, ", "), FormatBytes(snapshotBudget+need))
	}
	pl := Plan{SnapshotBudget: snapshotBudget}
	if sb > 0 {
		pl.Slots = int(min(int64(maxSeqs), (avail-pb)/sb))
	}
	if pb > 0 {
		pl.Pages = int((avail - int64(pl.Slots)*sb) / pb)
	}
	size := func() int64 { return offheap.RoundUp(int64(pl.Pages)*pb + int64(pl.Slots)*sb) }
	for size() > avail { // give back what the rounding to system pages took
		if pl.Pages > 1 {
			pl.Pages--
		} else {
			pl.Slots--
		}
	}
	if pl.Pages+pl.Slots > 0 {
		pl.PoolBytes = size()
	}
	return pl, nil
}

// FormatBytes writes n bytes with a binary unit ("1.5 GiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

// Bytes is the memory the pool maps for its pages and slots (0 after
// Close). The page tables and reference counts on the Go heap (8 bytes a
// page) are not counted.
func (p *Pool) Bytes() int64 {
	if p.mem == nil {
		return 0
	}
	return p.mem.Bytes()
}

// BytesInUse is the memory of the pages and state slots someone holds
// (sequences or the prefix index).
func (p *Pool) BytesInUse() int64 {
	if p.closed {
		return 0
	}
	return int64(p.NumPages()-p.FreePages())*p.pageBytes + int64(p.numSlots-p.FreeSlots())*p.slotBytes
}

// NumSlots is the number of state slots (0 for a model without recurrent
// state).
func (p *Pool) NumSlots() int { return p.numSlots }

// PageSize is the number of positions per page.
func (p *Pool) PageSize() int { return p.pageSize }

// Layers returns the per-layer storage, indexed like the model's layers.
func (p *Pool) Layers() []gpu.KVLayer { return p.layers }

// NumPages is the total number of pages.
func (p *Pool) NumPages() int { return len(p.refs) }

// FreePages is the number of pages not referenced by anyone.
func (p *Pool) FreePages() int { return len(p.free) }

// PagesFor is the number of pages n positions need (0 for a model without
// attention KV).
func (p *Pool) PagesFor(n int) int {
	if !p.hasKV {
		return 0
	}
	return (n + p.pageSize - 1) / p.pageSize
}

// Alloc takes n free pages with a reference count of one each. It takes all
// or nothing.
func (p *Pool) Alloc(n int) ([]int32, error) {
	if p.closed {
		return nil, ErrClosed
	}
	if n > len(p.free) {
		return nil, fmt.Errorf("%w: want %d, %d free of %d", ErrNoPages, n, len(p.free), len(p.refs))
	}
	out := make([]int32, n)
	for i := range out {
		id := p.free[len(p.free)-1]
		p.free = p.free[:len(p.free)-1]
		p.refs[id] = 1
		out[i] = id
	}
	return out, nil
}

// Retain adds a reference to each page (a second owner, e.g. a prefix index).
func (p *Pool) Retain(pages []int32) {
	for _, id := range pages {
		if p.refs[id] <= 0 {
			panic(fmt.Sprintf("kvcache: retain of free page %d", id))
		}
		p.refs[id]++
	}
}

// Release drops one reference from each page; pages reaching zero are free.
func (p *Pool) Release(pages []int32) {
	for _, id := range pages {
		if p.refs[id] <= 0 {
			panic(fmt.Sprintf("kvcache: double release of page %d", id))
		}
		p.refs[id]--
		if p.refs[id] == 0 {
			p.free = append(p.free, id)
		}
	}
}

// HasState reports whether the pool's model keeps recurrent state.
func (p *Pool) HasState() bool { return p.states != nil }

// FreeSlots is the number of unused state slots.
func (p *Pool) FreeSlots() int { return len(p.freeSlots) }

// State returns the state of recurrent layer layer in slot (1-based).
func (p *Pool) State(layer int, slot int32) []float32 {
	n := p.stateSizes[layer]
	return p.states[layer][int(slot-1)*n : int(slot)*n]
}

// StateSizes lists the per-layer state sizes (floats per slot).
func (p *Pool) StateSizes() []int { return p.stateSizes }

// Seq is one sequence's view of the pool: its page table, its state slot
// (0 when it has none) and how many positions its KV and state cover.
type Seq struct {
	Pages []int32
	Slot  int32
	Len   int
}

// ErrNoSlots is returned when every state slot is in use.
var ErrNoSlots = errors.New("kvcache: out of state slots")

// EnsureSlot gives s a zeroed state slot if the model keeps recurrent state
// and s has none yet.
func (p *Pool) EnsureSlot(s *Seq) error {
	if p.closed {
		return ErrClosed
	}
	if p.states == nil || s.Slot != 0 {
		return nil
	}
	if len(p.freeSlots) == 0 {
		return fmt.Errorf("%w: all %d in use", ErrNoSlots, p.numSlots)
	}
	id := p.freeSlots[len(p.freeSlots)-1]
	p.freeSlots = p.freeSlots[:len(p.freeSlots)-1]
	for l := range p.states {
		if p.stateSizes[l] > 0 {
			clear(p.State(l, id))
		}
	}
	s.Slot = id
	return nil
}

// Reserve grows s's page table so that it covers total positions.
func (p *Pool) Reserve(s *Seq, total int) error {
	if p.closed {
		return ErrClosed
	}
	need := p.PagesFor(total) - len(s.Pages)
	if need <= 0 {
		return nil
	}
	pages, err := p.Alloc(need)
	if err != nil {
		return err
	}
	s.Pages = append(s.Pages, pages...)
	return nil
}

// Free releases all of s's pages and its state slot, and empties it.
func (p *Pool) Free(s *Seq) {
	p.Release(s.Pages)
	s.Pages = s.Pages[:0]
	if s.Slot != 0 {
		p.freeSlots = append(p.freeSlots, s.Slot)
		s.Slot = 0
	}
	s.Len = 0
}

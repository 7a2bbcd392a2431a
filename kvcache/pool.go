package kvcache

import (
	"errors"
	"fmt"

	"github.com/troupe-ai/troupe/gpu"
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

// Pool is the per-sequence memory of one model: KV pages for every attention
// layer, and fixed-size state slots for every recurrent layer.
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
}

// NewPool allocates numPages pages of pageSize positions for the attention
// layers of l, and numSlots state slots for its recurrent layers (numSlots
// is ignored when no layer has state).
func NewPool(l Layout, pageSize, numPages, numSlots int) (*Pool, error) {
	if pageSize <= 0 || numPages <= 0 {
		return nil, fmt.Errorf("kvcache: page size %d and page count %d must be positive", pageSize, numPages)
	}
	dims := l.KVDims
	p := &Pool{pageSize: pageSize, layers: make([]gpu.KVLayer, len(dims)), refs: make([]int32, numPages)}
	if hasState(l.StateSizes) {
		if numSlots <= 0 {
			return nil, fmt.Errorf("kvcache: a model with recurrent state needs at least one state slot, got %d", numSlots)
		}
		p.stateSizes, p.numSlots = l.StateSizes, numSlots
		p.states = make([][]float32, len(l.StateSizes))
		for i, n := range l.StateSizes {
			p.states[i] = make([]float32, numSlots*n)
		}
		for i := numSlots; i >= 1; i-- {
			p.freeSlots = append(p.freeSlots, int32(i))
		}
	}
	for i, d := range dims {
		p.layers[i] = gpu.KVLayer{PageSize: pageSize, Dim: d}
		if d > 0 {
			p.hasKV = true
			p.layers[i].K = make([]float32, numPages*pageSize*d)
			p.layers[i].V = make([]float32, numPages*pageSize*d)
		}
	}
	p.free = make([]int32, numPages)
	for i := range p.free {
		p.free[i] = int32(numPages - 1 - i) // pop order 0, 1, 2, ...
	}
	return p, nil
}

func hasState(sizes []int) bool {
	for _, n := range sizes {
		if n > 0 {
			return true
		}
	}
	return false
}

// PagesForBudget is how many pages of pageSize positions fit in budget bytes
// for layers of the given per-position widths (f32 K and V).
func PagesForBudget(dims []int, pageSize int, budget int64) int {
	var perPos int64
	for _, d := range dims {
		perPos += int64(2 * 4 * d)
	}
	if perPos == 0 {
		return 1
	}
	return int(budget / (perPos * int64(pageSize)))
}

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

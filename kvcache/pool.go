package kvcache

import (
	"errors"
	"fmt"

	"github.com/troupe-ai/troupe/gpu"
)

// ErrNoPages is returned when the pool cannot satisfy an allocation.
var ErrNoPages = errors.New("kvcache: out of KV pages")

// Pool is a set of KV pages for every attention layer of one model.
type Pool struct {
	pageSize int
	layers   []gpu.KVLayer
	refs     []int32 // reference count per page; 0 = free
	free     []int32 // stack of free page ids
}

// NewPool allocates numPages pages of pageSize positions for layers whose
// per-position K (and V) widths are dims (KVHeads*HeadDim; 0 for a layer
// without attention KV, which gets no storage).
func NewPool(dims []int, pageSize, numPages int) (*Pool, error) {
	if pageSize <= 0 || numPages <= 0 {
		return nil, fmt.Errorf("kvcache: page size %d and page count %d must be positive", pageSize, numPages)
	}
	p := &Pool{pageSize: pageSize, layers: make([]gpu.KVLayer, len(dims)), refs: make([]int32, numPages)}
	for i, d := range dims {
		p.layers[i] = gpu.KVLayer{PageSize: pageSize, Dim: d}
		if d > 0 {
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

// PagesFor is the number of pages n positions need.
func (p *Pool) PagesFor(n int) int { return (n + p.pageSize - 1) / p.pageSize }

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

// Seq is one sequence's view of the pool: its page table and how many
// positions hold valid KV.
type Seq struct {
	Pages []int32
	Len   int
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

// Free releases all of s's pages and empties it.
func (p *Pool) Free(s *Seq) {
	p.Release(s.Pages)
	s.Pages = s.Pages[:0]
	s.Len = 0
}

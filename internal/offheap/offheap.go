// Package offheap allocates float32 storage outside the Go heap: anonymous
// memory mappings the garbage collector neither scans nor counts towards
// its heap goal, so a large KV pool does not make the GC let the heap grow
// to twice its size. The kernel commits the pages lazily, on first touch,
// and returns them to the system as soon as a block is freed.
//
// Blocks of 4 MiB and more (a KV pool, a long sequence's snapshot) are
// aligned to 2 MiB and, on Linux, advised MADV_HUGEPAGE: the kernel then
// commits them in huge pages where transparent huge pages are "always" or
// "madvise", 512 times fewer first-touch faults than 4 KiB pages, and the
// attention's reads across KV pages miss the TLB less. Memory is still
// committed only as it is written, 2 MiB at a time. (On the project's VM a
// fresh server's 414-token prefills, writing untouched pool memory, took
// 355 ms at the median against 305 ms once the pool had been written
// through; with huge pages 330 against 285. What remains is the host
// backing fresh guest memory, which only committing the pool up front
// avoids: kvcache.Pool.Prefault, troupe serve --kv-prefault.)
//
// A Block is owned by one owner, which frees it exactly once; slices
// obtained from Floats must not be used after Free (the memory is gone,
// and touching it faults). On platforms without mmap the block falls back
// to ordinary heap memory.
package offheap

import (
	"errors"
	"fmt"
	"os"
	"unsafe"
)

// Block is one off-heap mapping viewed as float32s.
type Block struct {
	mem    []byte    // the whole mapping (with any alignment slack); nil once freed
	floats []float32 // the block's n floats, at the aligned start
	bytes  int64     // the block's size, page-rounded
}

// ErrFreed is returned for a block used after Free.
var ErrFreed = errors.New("offheap: block already freed")

// RoundUp is the number of bytes a block of n bytes maps: n rounded up to
// the system's page size.
func RoundUp(n int64) int64 {
	ps := int64(os.Getpagesize())
	return (n + ps - 1) / ps * ps
}

// Alloc maps a zeroed block of n float32s (n > 0).
func Alloc(n int) (*Block, error) {
	if n <= 0 {
		return nil, fmt.Errorf("offheap: block of %d floats", n)
	}
	size := RoundUp(int64(n) * 4)
	if int64(int(size)) != size {
		return nil, fmt.Errorf("offheap: block of %d floats is too large", n)
	}
	mem, buf, err := mapAnon(int(size))
	if err != nil {
		return nil, fmt.Errorf("offheap: map %d bytes: %w", size, err)
	}
	return &Block{mem: mem, floats: unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), n), bytes: size}, nil
}

// Floats returns the block's floats (nil after Free).
func (b *Block) Floats() []float32 { return b.floats }

// Bytes is the memory the block maps (0 after Free).
func (b *Block) Bytes() int64 {
	if b.mem == nil {
		return 0
	}
	return b.bytes
}

// Free unmaps the block. A second Free returns ErrFreed.
func (b *Block) Free() error {
	if b.mem == nil {
		return ErrFreed
	}
	mem := b.mem
	b.mem, b.floats = nil, nil
	if err := unmap(mem); err != nil {
		return fmt.Errorf("offheap: unmap: %w", err)
	}
	return nil
}

package hugemem

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// PageSize is the huge page size the arena aligns to.
const PageSize = 2 << 20

// align is the alignment of every block Alloc returns (a cache line, and
// the widest vector load).
const align = 64

// Arena is a bump allocator over one anonymous mapping. It is not safe for
// concurrent use while allocating; the memory it hands out may be read
// from any goroutine.
type Arena struct {
	mem    []byte // the whole mapping; nil once closed
	buf    []byte // its PageSize-aligned part of the requested capacity
	off    int    // bytes of buf handed out
	huge   bool   // MADV_HUGEPAGE accepted and THP not disabled
	sealed bool
}

// New reserves an arena of capacity bytes.
func New(capacity int64) (*Arena, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("hugemem: arena of %d bytes", capacity)
	}
	capacity = (capacity + PageSize - 1) / PageSize * PageSize
	if int64(int(capacity+PageSize)) != capacity+PageSize {
		return nil, fmt.Errorf("hugemem: arena of %d bytes is too large", capacity)
	}
	mem, err := reserve(int(capacity + PageSize))
	if err != nil {
		return nil, fmt.Errorf("hugemem: reserve %d bytes: %w", capacity, err)
	}
	start := int((PageSize - uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%PageSize) % PageSize)
	a := &Arena{mem: mem, buf: mem[start : start+int(capacity) : start+int(capacity)]}
	a.huge = adviseHuge(a.buf) == nil && THP() != "never"
	return a, nil
}

// Alloc returns n zeroed bytes (n > 0), 64-byte aligned, following the
// previous block.
func (a *Arena) Alloc(n int) ([]byte, error) {
	switch {
	case a.mem == nil:
		return nil, fmt.Errorf("hugemem: alloc from a closed arena")
	case a.sealed:
		return nil, fmt.Errorf("hugemem: alloc from a sealed arena")
	case n <= 0:
		return nil, fmt.Errorf("hugemem: alloc of %d bytes", n)
	}
	off := (a.off + align - 1) &^ (align - 1)
	if n > len(a.buf)-off {
		return nil, fmt.Errorf("hugemem: alloc of %d bytes: %d of %d left", n, len(a.buf)-off, len(a.buf))
	}
	a.off = off + n
	return a.buf[off : off+n : off+n], nil
}

// Huge reports whether the kernel was asked for huge pages and has not
// disabled them; the kernel may still fall back to small pages when it
// finds no free 2 MiB frames.
func (a *Arena) Huge() bool { return a.huge }

// Used is the number of bytes handed out so far (alignment included).
func (a *Arena) Used() int64 { return int64(a.off) }

// Seal ends allocation: the used part becomes read-only, so that a stray
// write through a weight slice faults instead of corrupting the model, and
// the reserved tail past it (rounded up to a huge page) is released.
func (a *Arena) Seal() error {
	if a.mem == nil {
		return fmt.Errorf("hugemem: seal a closed arena")
	}
	if a.sealed {
		return nil
	}
	a.sealed = true
	used := (a.off + PageSize - 1) / PageSize * PageSize
	if err := seal(a.mem, a.buf, used); err != nil {
		return fmt.Errorf("hugemem: seal: %w", err)
	}
	return nil
}

// Close unmaps the arena. Slices obtained from it must not be used
// afterwards. Closing twice is harmless.
func (a *Arena) Close() error {
	if a.mem == nil {
		return nil
	}
	mem := a.mem
	a.mem, a.buf = nil, nil
	if err := release(mem); err != nil {
		return fmt.Errorf("hugemem: unmap: %w", err)
	}
	return nil
}

// THP is the system's transparent huge page mode for anonymous memory
// ("always", "madvise" or "never"), or "" where it cannot be read (not
// Linux, or no THP support).
func THP() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return ""
	}
	// "always [madvise] never": the bracketed word is the mode
	s := string(b)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

// errNoTHP is what adviseHuge returns where the system has no transparent
// huge pages.
var errNoTHP = fmt.Errorf("hugemem: no transparent huge pages on this system")

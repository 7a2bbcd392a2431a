//go:build unix

package mmap

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps size bytes of f read-only. The returned release function unmaps
// them; the slice must not be used afterwards. A zero size maps nothing and
// returns a nil slice.
func Map(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if size < 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// DropPages tells the kernel the mapped pages wholly inside b are not needed
// for now: they leave this process's resident set and are read again (from
// the page cache, or the disk) if touched later.
func DropPages(b []byte) {
	ps := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (ps - p%ps) % ps
	if uintptr(len(b)) <= lo {
		return
	}
	n := (uintptr(len(b)) - lo) / ps * ps
	if n > 0 {
		_ = unix.Madvise(b[lo:lo+n], unix.MADV_DONTNEED)
	}
}

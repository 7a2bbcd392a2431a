//go:build unix && !linux

package offheap

import "syscall"

// mapAnon maps size bytes of private anonymous memory, read-write; all of
// it is usable (no transparent huge pages to align for).
func mapAnon(size int) (mem, buf []byte, err error) {
	mem, err = syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return mem, mem, err
}

func unmap(mem []byte) error { return syscall.Munmap(mem) }

// OffHeap reports whether blocks live outside the Go heap on this platform.
const OffHeap = true

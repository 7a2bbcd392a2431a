//go:build unix

package offheap

import "syscall"

// mapAnon maps size bytes of private anonymous memory, read-write.
func mapAnon(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmap(mem []byte) error { return syscall.Munmap(mem) }

// OffHeap reports whether blocks live outside the Go heap on this platform.
const OffHeap = true

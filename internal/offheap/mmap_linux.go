//go:build linux

package offheap

import (
	"syscall"
	"unsafe"
)

// hugePage is the size of a transparent huge page on the platforms troupe
// runs on (x86-64 and arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// mapAnon maps size bytes of private anonymous memory, read-write, and
// returns the mapping and the usable part of it. From 2 huge pages up the
// mapping has a huge page of slack, the usable part starts on a huge-page
// boundary, and the kernel is asked to back it with huge pages (best
// effort: where it will not, the block keeps 4 KiB pages).
func mapAnon(size int) (mem, buf []byte, err error) {
	if size < 2*hugePage {
		mem, err = syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		return mem, mem, err
	}
	mem, err = syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	start := (hugePage - int(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%hugePage)) % hugePage
	buf = mem[start : start+size : start+size]
	_ = syscall.Madvise(buf, syscall.MADV_HUGEPAGE)
	return mem, buf, nil
}

func unmap(mem []byte) error { return syscall.Munmap(mem) }

// OffHeap reports whether blocks live outside the Go heap on this platform.
const OffHeap = true

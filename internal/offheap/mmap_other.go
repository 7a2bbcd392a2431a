//go:build !unix

package offheap

// mapAnon allocates on the Go heap on platforms without syscall.Mmap.
func mapAnon(size int) (mem, buf []byte, err error) {
	mem = make([]byte, size)
	return mem, mem, nil
}

func unmap([]byte) error { return nil }

// OffHeap reports whether blocks live outside the Go heap on this platform.
const OffHeap = false

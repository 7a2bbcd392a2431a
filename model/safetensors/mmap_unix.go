//go:build unix

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only. The returned release function
// unmaps them; the slice must not be used afterwards.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to map", size)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

//go:build !unix

package mmap

import (
	"fmt"
	"io"
	"os"
)

// Map reads the whole file into memory on platforms without syscall.Mmap.
// The release function only drops the reference.
func Map(f *os.File, size int64) ([]byte, func() error, error) {
	if size < 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("file of %d bytes is too large to read", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	return b, func() error { return nil }, nil
}

// DropPages does nothing where the file was read into memory.
func DropPages([]byte) {}

package safetensors

import (
	"os"

	"github.com/troupe-ai/troupe/internal/mmap"
)

// mapFile maps size bytes of f read-only (see internal/mmap, shared with the
// gguf reader). The returned release function unmaps them.
func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	return mmap.Map(f, size)
}

// dropPages lets the kernel reclaim the mapped pages wholly inside b.
func dropPages(b []byte) { mmap.DropPages(b) }

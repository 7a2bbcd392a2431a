//go:build linux

package kvcache

import (
	"syscall"
	"testing"

	"github.com/troupe-ai/troupe/internal/offheap"
)

// minorFaults is the process's count of minor page faults so far.
func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// TestPoolPrefault: after Prefault, writing the whole pool (what the first
// steps do) no longer faults its pages in; without it, it does.
func TestPoolPrefault(t *testing.T) {
	if !offheap.OffHeap {
		t.Skip("no mmap on this platform")
	}
	l := Layout{KVDims: []int{256, 256}}
	const pages = 32 // 16 positions x 2 layers x K and V x 1 KiB: 2 MiB, 512 pages of 4 KiB (small enough for 4 KiB pages: see offheap)
	for _, prefault := range []bool{false, true} {
		p, err := NewPool(l, 16, pages, 1)
		if err != nil {
			t.Fatal(err)
		}
		if prefault {
			p.Prefault()
		}
		before := minorFaults(t)
		for _, kv := range p.Layers() {
			for i := 0; i < len(kv.K); i += 256 {
				kv.K[i], kv.V[i] = 1, 1
			}
		}
		faults := minorFaults(t) - before
		p.Close()
		if prefault && faults > 100 {
			t.Errorf("writing a prefaulted pool of %s took %d page faults", FormatBytes(p.pageBytes*pages), faults)
		}
		if !prefault && faults < 100 {
			t.Skipf("writing a fresh pool took only %d page faults (large pages?): nothing to measure", faults)
		}
	}
}

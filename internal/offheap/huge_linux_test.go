//go:build linux

package offheap

import (
	"syscall"
	"testing"
	"unsafe"

	"github.com/troupe-ai/troupe/internal/hugemem"
)

func minorFaults(t *testing.T) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// TestLargeBlocksUseHugePages: a large block starts on a 2 MiB boundary,
// and where the system offers transparent huge pages, writing all of it
// for the first time takes a fraction of the faults 4 KiB pages would
// (what a fresh server's first prefills pay).
func TestLargeBlocksUseHugePages(t *testing.T) {
	const size = 16 << 20
	b, err := Alloc(size / 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	f := b.Floats()
	if addr := uintptr(unsafe.Pointer(&f[0])); addr%hugePage != 0 {
		t.Fatalf("a %d MiB block starts at %#x, not on a 2 MiB boundary", size>>20, addr)
	}
	if b.Bytes() != size {
		t.Fatalf("Bytes() = %d, want %d", b.Bytes(), size)
	}
	before := minorFaults(t)
	for i := 0; i < len(f); i += 1024 { // one float per 4 KiB
		f[i] = 1
	}
	faults := minorFaults(t) - before
	switch mode := hugemem.THP(); mode {
	case "always", "madvise":
		if faults >= size/4096/4 {
			t.Errorf("THP %q: writing a fresh %d MiB block took %d page faults (4 KiB pages take %d)", mode, size>>20, faults, size/4096)
		}
	default:
		t.Logf("THP mode %q: %d faults for %d MiB on ordinary pages", mode, faults, size>>20)
	}
}

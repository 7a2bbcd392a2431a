package offheap

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// heapAlloc is the live Go heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// mapped reports whether addr lies in a mapping listed in /proc/self/maps
// (ok is false where there is no such file).
func mapped(t *testing.T, addr uintptr) (in, ok bool) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x", &lo, &hi); err == nil && addr >= lo && addr < hi {
			return true, true
		}
	}
	return false, true
}

func TestBlockIsOffHeapAndFreed(t *testing.T) {
	if !OffHeap {
		t.Skip("no mmap on this platform: blocks live on the heap")
	}
	const n = 64 << 20 / 4 // 64 MiB of floats
	before := heapAlloc()
	b, err := Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	f := b.Floats()
	if len(f) != n || b.Bytes() != 64<<20 {
		t.Fatalf("block of %d floats, %d bytes", len(f), b.Bytes())
	}
	for i := 0; i < n; i += 1024 {
		if f[i] != 0 {
			t.Fatalf("float %d is %v, not zeroed", i, f[i])
		}
		f[i] = float32(i)
	}
	if grew := int64(heapAlloc()) - int64(before); grew > 8<<20 {
		t.Errorf("the Go heap grew by %d bytes for a 64 MiB block", grew)
	}
	addr := uintptr(unsafe.Pointer(&f[0]))
	if in, ok := mapped(t, addr); ok && !in {
		t.Fatalf("block address %#x is not in /proc/self/maps", addr)
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if in, ok := mapped(t, addr); ok && in {
		t.Errorf("block address %#x is still mapped after Free", addr)
	}
	if b.Floats() != nil || b.Bytes() != 0 {
		t.Errorf("a freed block still hands out %d floats, %d bytes", len(b.Floats()), b.Bytes())
	}
	if err := b.Free(); !errors.Is(err, ErrFreed) {
		t.Errorf("second Free: %v, want ErrFreed", err)
	}
}

func TestAllocRoundsToPages(t *testing.T) {
	for _, n := range []int{1, 1023, 1024, 1025} {
		b, err := Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		if want := RoundUp(int64(4 * n)); b.Bytes() != want || want%int64(os.Getpagesize()) != 0 || want < int64(4*n) {
			t.Errorf("Alloc(%d): %d bytes, want %d", n, b.Bytes(), want)
		}
		if err := b.Free(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
}

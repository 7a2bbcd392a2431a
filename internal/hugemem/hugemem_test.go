package hugemem

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func TestAlloc(t *testing.T) {
	a, err := New(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var prevEnd uintptr
	for i, n := range []int{1, 63, 64, 100, 1 << 20, 5} {
		b, err := a.Alloc(n)
		if err != nil {
			t.Fatalf("alloc %d: %v", n, err)
		}
		if len(b) != n || cap(b) != n {
			t.Fatalf("alloc %d: len %d cap %d", n, len(b), cap(b))
		}
		p := addr(b)
		if p%align != 0 {
			t.Fatalf("alloc %d at %#x: not %d-byte aligned", n, p, align)
		}
		if i == 0 && p%PageSize != 0 {
			t.Fatalf("first block at %#x: not huge-page aligned", p)
		}
		if i > 0 && (p < prevEnd || p-prevEnd >= align) {
			t.Fatalf("alloc %d at %#x: previous block ended at %#x", n, p, prevEnd)
		}
		prevEnd = p + uintptr(n)
		for j, v := range b {
			if v != 0 {
				t.Fatalf("alloc %d: byte %d is %d, want 0", n, j, v)
			}
		}
		for j := range b {
			b[j] = byte(i + 1)
		}
	}
	if _, err := a.Alloc(4 << 20); err == nil {
		t.Fatal("alloc past the capacity succeeded")
	}
	for _, n := range []int{0, -1} {
		if _, err := a.Alloc(n); err == nil {
			t.Fatalf("alloc of %d bytes succeeded", n)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := a.Alloc(1); err == nil {
		t.Fatal("alloc from a closed arena succeeded")
	}
	if _, err := New(0); err == nil {
		t.Fatal("arena of 0 bytes accepted")
	}
}

// TestSeal: after Seal the data reads back, a write faults, and no more
// blocks are handed out.
func TestSeal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("read-only sealing is checked on Linux")
	}
	a, err := New(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := a.Alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = byte(i)
	}
	if err := a.Seal(); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d is %d after Seal", i, b[i])
		}
	}
	if _, err := a.Alloc(1); err == nil {
		t.Fatal("alloc from a sealed arena succeeded")
	}
	faulted := func() (f bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { f = recover() != nil }()
		b[10] = 1
		return false
	}()
	if !faulted {
		t.Fatal("write to a sealed arena did not fault")
	}
}

// smapsHuge is the AnonHugePages of the mapping holding p, in bytes.
func smapsHuge(t *testing.T, p uintptr) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			lo, hi, _ := strings.Cut(fields[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			in = err1 == nil && err2 == nil && uint64(p) >= l && uint64(p) < h
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "AnonHugePages:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return 0
}

// TestHugePages: where the system offers transparent huge pages for
// madvised memory, the arena's written blocks are backed by them.
func TestHugePages(t *testing.T) {
	mode := THP()
	if mode != "always" && mode != "madvise" {
		t.Skipf("transparent huge pages are %q here", mode)
	}
	a, err := New(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if !a.Huge() {
		t.Fatal("THP is available but the arena did not advise it")
	}
	b, err := a.Alloc(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	if got := smapsHuge(t, addr(b)); got < 4<<20 {
		t.Fatalf("8 MiB written, %d bytes on huge pages (THP %q)", got, mode)
	}
}

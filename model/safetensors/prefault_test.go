package safetensors

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestPrefault: progress climbs to the total of the files' data, ending
// exactly there, and a cancelled context stops the read.
func TestPrefault(t *testing.T) {
	dir := t.TempDir()
	const chunk = 8 << 20 // mmap.Prefault reports progress every 8 MiB
	data := make([]byte, 3*chunk+123)
	mustWrite(t, filepath.Join(dir, SingleFile), []WriteTensor{{Name: "w", DType: "U8", Shape: []int{len(data)}, Data: data}}, nil)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var calls []int64
	if err := m.Prefault(context.Background(), func(done, total int64) {
		if total != m.Bytes() || done > total {
			t.Fatalf("progress %d of %d, model holds %d", done, total, m.Bytes())
		}
		calls = append(calls, done)
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 4 || calls[len(calls)-1] != m.Bytes() || m.Bytes() < int64(len(data)) {
		t.Fatalf("progress %v, total %d", calls, m.Bytes())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Prefault(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled prefault: %v", err)
	}
}

// mappedRss is the resident size of the mapping holding b, from
// /proc/self/smaps (ok false where there is none).
func mappedRss(t *testing.T, b []byte) (int64, bool) {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, false
	}
	p := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") {
			l, e1 := strconv.ParseUint(lo, 16, 64)
			h, e2 := strconv.ParseUint(hi, 16, 64)
			in = e1 == nil && e2 == nil && p >= l && p < h
			continue
		}
		if in && f[0] == "Rss:" && len(f) > 1 {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10, true
		}
	}
	t.Fatalf("no mapping holds %#x", p)
	return 0, false
}

// TestDropPages: Prefault makes the mapped pages resident, dropped pages
// leave the resident set, and the data reads back unchanged.
func TestDropPages(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mustWrite(t, filepath.Join(dir, SingleFile), []WriteTensor{{Name: "w", DType: "U8", Shape: []int{len(data)}, Data: data}}, nil)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Prefault(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	body := m.files[0].body
	before, ok := mappedRss(t, body)
	if !ok || runtime.GOOS != "linux" {
		t.Skip("resident sizes are read from Linux's /proc/self/smaps")
	}
	m.DropPages(body)
	after, _ := mappedRss(t, body)
	if before < 3<<20 || after > before-3<<20 {
		t.Fatalf("resident %d bytes before DropPages, %d after", before, after)
	}
	if !bytes.Equal(body[:len(data)], data) && !bytes.Equal(body[len(body)-len(data):], data) {
		t.Fatal("data changed after DropPages")
	}
}

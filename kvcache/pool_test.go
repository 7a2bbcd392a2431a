package kvcache

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/offheap"
)

func TestPoolReserveAndFree(t *testing.T) {
	p, err := NewPool(Layout{KVDims: []int{8, 0, 8}}, 4, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(p.Layers()[1].K); got != 0 {
		t.Fatalf("layer without KV got %d floats", got)
	}
	if got := len(p.Layers()[0].K); got != 5*4*8 {
		t.Fatalf("layer 0 K has %d floats, want %d", got, 5*4*8)
	}
	var a, b Seq
	tests := []struct {
		seq       *Seq
		total     int
		wantPages int
		wantFree  int
		wantErr   bool
	}{
		{&a, 1, 1, 4, false},
		{&a, 4, 1, 4, false},
		{&a, 5, 2, 3, false},
		{&b, 12, 3, 0, false},
		{&a, 9, 2, 0, true}, // needs a third page, none left
	}
	for i, tc := range tests {
		err := p.Reserve(tc.seq, tc.total)
		if (err != nil) != tc.wantErr {
			t.Fatalf("step %d: err = %v, wantErr %v", i, err, tc.wantErr)
		}
		if tc.wantErr && !errors.Is(err, ErrNoPages) {
			t.Fatalf("step %d: err %v is not ErrNoPages", i, err)
		}
		if len(tc.seq.Pages) != tc.wantPages || p.FreePages() != tc.wantFree {
			t.Fatalf("step %d: pages %d free %d, want %d and %d", i, len(tc.seq.Pages), p.FreePages(), tc.wantPages, tc.wantFree)
		}
	}
	p.Free(&b)
	if p.FreePages() != 3 || len(b.Pages) != 0 {
		t.Fatalf("after free: %d free, b has %d pages", p.FreePages(), len(b.Pages))
	}
	seen := map[int32]bool{}
	for _, id := range a.Pages {
		seen[id] = true
	}
	c := Seq{}
	if err := p.Reserve(&c, 12); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.Pages {
		if seen[id] {
			t.Fatalf("page %d handed out twice", id)
		}
	}
}

func TestPoolRefCounts(t *testing.T) {
	p, _ := NewPool(Layout{KVDims: []int{4}}, 2, 2, 0)
	pages, err := p.Alloc(2)
	if err != nil {
		t.Fatal(err)
	}
	p.Retain(pages[:1])
	p.Release(pages)
	if p.FreePages() != 1 {
		t.Fatalf("retained page was freed: %d free", p.FreePages())
	}
	p.Release(pages[:1])
	if p.FreePages() != 2 {
		t.Fatalf("want all pages free, got %d", p.FreePages())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double release did not panic")
		}
	}()
	p.Release(pages[:1])
}

func TestPagesForBudget(t *testing.T) {
	// 2 layers of width 192: 2*4*192*2 = 3072 bytes per position.
	if got := PagesForBudget([]int{192, 192}, 16, 3072*16*10); got != 10 {
		t.Fatalf("got %d pages, want 10", got)
	}
}

func TestPoolStateSlots(t *testing.T) {
	p, err := NewPool(Layout{KVDims: []int{0, 4}, StateSizes: []int{3, 0}}, 2, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	var a, b, c Seq
	if err := p.EnsureSlot(&a); err != nil || a.Slot == 0 {
		t.Fatalf("slot %d, err %v", a.Slot, err)
	}
	copy(p.State(0, a.Slot), []float32{1, 2, 3})
	if err := p.EnsureSlot(&a); err != nil || p.State(0, a.Slot)[2] != 3 {
		t.Fatal("EnsureSlot on a sequence with a slot must keep its state")
	}
	if err := p.EnsureSlot(&b); err != nil || b.Slot == a.Slot {
		t.Fatalf("second slot %d (first %d), err %v", b.Slot, a.Slot, err)
	}
	if err := p.EnsureSlot(&c); !errors.Is(err, ErrNoSlots) {
		t.Fatalf("third slot: err %v, want ErrNoSlots", err)
	}
	old := a.Slot
	p.Free(&a)
	if a.Slot != 0 || p.FreeSlots() != 1 {
		t.Fatalf("free left slot %d, %d free", a.Slot, p.FreeSlots())
	}
	if err := p.EnsureSlot(&c); err != nil || c.Slot != old {
		t.Fatalf("reused slot %d, want %d (err %v)", c.Slot, old, err)
	}
	for _, v := range p.State(0, c.Slot) {
		if v != 0 {
			t.Fatalf("a reused slot must start zeroed, got %v", p.State(0, c.Slot))
		}
	}
	if _, err := NewPool(Layout{StateSizes: []int{3}}, 2, 4, 0); err == nil {
		t.Fatal("a stateful layout without slots was accepted")
	}
}

func TestPoolWithoutKVNeedsNoPages(t *testing.T) {
	p, err := NewPool(Layout{KVDims: []int{0, 0}, StateSizes: []int{8, 8}}, 16, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	var s Seq
	if err := p.Reserve(&s, 10000); err != nil || len(s.Pages) != 0 {
		t.Fatalf("a recurrent-only model reserved %d pages (err %v)", len(s.Pages), err)
	}
	// No attention KV, no pages: the page gauges read 0 of 0, not 1 free.
	if p.NumPages() != 0 || p.FreePages() != 0 || p.NumSlots() != 1 {
		t.Fatalf("recurrent-only pool: %d pages, %d free, %d slots; want 0, 0, 1", p.NumPages(), p.FreePages(), p.NumSlots())
	}
	if _, err := NewPool(Layout{KVDims: []int{4}}, 16, 0, 1); err == nil {
		t.Fatal("a KV layout without pages was accepted")
	}
}

// heapAlloc is the live Go heap after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestPoolStorageIsOffHeap: a pool's pages and slots do not live on the Go
// heap, so the GC neither counts them towards its goal (which let the heap
// grow to twice the pool) nor scans them; Close gives them back.
func TestPoolStorageIsOffHeap(t *testing.T) {
	if !offheap.OffHeap {
		t.Skip("no mmap on this platform")
	}
	l := Layout{KVDims: []int{1024, 0, 1024}, StateSizes: []int{0, 1 << 20, 0}}
	const pages = 1024 // 16 positions x 2 layers x 2 x 4 KiB = 256 KiB a page: 256 MiB
	before := heapAlloc()
	p, err := NewPool(l, 16, pages, 4) // + 4 slots of 4 MiB
	if err != nil {
		t.Fatal(err)
	}
	want := int64(pages)*256<<10 + 4*4<<20
	if p.Bytes() != want {
		t.Fatalf("pool maps %d bytes, want %d", p.Bytes(), want)
	}
	// Touch every page and slot, as traffic eventually does.
	for _, kv := range p.Layers() {
		for i := 0; i < len(kv.K); i += 1024 {
			kv.K[i], kv.V[i] = 1, 1
		}
	}
	var seq Seq
	if err := p.EnsureSlot(&seq); err != nil {
		t.Fatal(err)
	}
	p.State(1, seq.Slot)[1<<20-1] = 1
	if grew := heapAlloc() - before; grew > 8<<20 {
		t.Errorf("the Go heap grew by %s for a pool of %s", FormatBytes(grew), FormatBytes(p.Bytes()))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Bytes() != 0 {
		t.Errorf("a closed pool still maps %d bytes", p.Bytes())
	}
}

// TestPoolUseAfterClose: once closed, a pool hands out no memory: every
// allocation fails with ErrClosed and its layers and states are empty, so
// nothing can reach the unmapped storage through it.
func TestPoolUseAfterClose(t *testing.T) {
	p, err := NewPool(Layout{KVDims: []int{8, 0}, StateSizes: []int{0, 4}}, 4, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	var held Seq
	if err := p.Reserve(&held, 5); err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureSlot(&held); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if !p.Closed() || p.BytesInUse() != 0 {
		t.Fatalf("closed %v, %d bytes in use", p.Closed(), p.BytesInUse())
	}
	var s Seq
	for name, err := range map[string]error{
		"Reserve":    p.Reserve(&s, 1),
		"EnsureSlot": p.EnsureSlot(&s),
		"Alloc":      func() error { _, err := p.Alloc(1); return err }(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	for i, l := range p.Layers() {
		if l.K != nil || l.V != nil {
			t.Errorf("layer %d still exposes storage after Close", i)
		}
	}
	p.Free(&held) // bookkeeping stays usable: the owner may still drop its sequences
}

// TestPlanBudget: the pool and the snapshot share together stay within the
// budget, slots are capped by the running sequences and leave room for a
// page, and a budget that cannot hold one sequence is refused with the
// figure it would need.
func TestPlanBudget(t *testing.T) {
	dense := Layout{KVDims: []int{128, 128, 128, 128}}                              // 64 KiB a 16-position page
	recurrent := Layout{KVDims: []int{0, 0}, StateSizes: []int{12 << 10, 12 << 10}} // 96 KiB a slot
	hybrid := Layout{KVDims: []int{0, 64, 0}, StateSizes: []int{1000, 0, 1000}}     // 8 KiB page, 8000 B slot
	tiny := Layout{KVDims: []int{4}, StateSizes: []int{3}}                          // 512 B page, 12 B slot
	tests := []struct {
		name                 string
		l                    Layout
		budget, snap         int64
		seqs                 int
		wantPages, wantSlots int
		wantErr              string
	}{
		{"dense 1 GiB", dense, 1 << 30, 0, 16, 16384, 0, ""},
		{"dense with a snapshot share", dense, 1 << 30, 256 << 20, 16, 12288, 0, ""},
		{"recurrent: slots capped by sequences", recurrent, 1 << 30, 256 << 20, 16, 0, 16, ""},
		{"recurrent: fewer slots than sequences", recurrent, 1 << 20, 256 << 10, 16, 0, 8, ""},
		{"hybrid", hybrid, 1 << 20, 256 << 10, 16, 80, 16, ""},
		{"hybrid: slots leave a page", hybrid, 64 << 10, 16 << 10, 16, 1, 5, ""},
		{"tiny: rounding to system pages", tiny, 8 << 10, 4 << 10, 1, 7, 1, ""},
		{"too small for a page", dense, 60 << 10, 0, 16, 0, 0, "at least 64.0 KiB"},
		{"too small for a slot", recurrent, 128 << 10, 64 << 10, 16, 0, 0, "at least 160.0 KiB"},
		{"snapshot share takes everything", dense, 1 << 20, 1 << 20, 16, 0, 0, "must be less than the whole budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl, err := PlanBudget(tc.l, 16, tc.budget, tc.snap, tc.seqs)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want ErrBudget saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pl.Pages != tc.wantPages || pl.Slots != tc.wantSlots || pl.SnapshotBudget != tc.snap {
				t.Fatalf("plan %+v, want %d pages, %d slots, snapshots %d", pl, tc.wantPages, tc.wantSlots, tc.snap)
			}
			p, err := NewPool(tc.l, 16, pl.Pages, pl.Slots)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Bytes() != pl.PoolBytes || p.Bytes()+pl.SnapshotBudget > tc.budget {
				t.Fatalf("pool maps %d bytes (plan %d) + snapshots %d, budget %d", p.Bytes(), pl.PoolBytes, pl.SnapshotBudget, tc.budget)
			}
		})
	}
}

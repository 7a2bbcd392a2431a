package kvcache

import (
	"errors"
	"testing"
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
}

package kvcache

import (
	"testing"
	"time"
)

// TestIndexPin: a pinned prefix survives LRU pressure that evicts an
// unpinned one, even a more recently used one; a pin expires after its
// TTL; pinning again extends a pin and never shortens it; with nothing
// unpinned left, pinned pages go (the pin that ends first first) rather
// than an allocation failing; a pin on a partial page carries over to the
// fuller page that replaces it.
func TestIndexPin(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a := seqTokens(1, 8)     // two full pages
	b := seqTokens(101, 108) // two full pages, another prefix
	tests := []struct {
		name string
		// steps runs against the index with a settable clock, after a and
		// b were inserted (a first, so a is the least recently used).
		steps        func(x *Index, at func(time.Duration))
		need         int // free pages to Evict for
		wantA, wantB int // tokens still cached
		wantPinEvict int64
	}{
		{name: "unpinned: least recently used goes",
			steps: func(x *Index, at func(time.Duration)) {}, need: 4, wantA: 0, wantB: 8},
		{name: "pinned survives pressure",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(a, "", t0.Add(5*time.Minute))
				at(time.Minute)
			}, need: 4, wantA: 8, wantB: 0},
		{name: "pin expires after its TTL",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(a, "", t0.Add(5*time.Minute))
				pages, _, _, _ := x.Lookup(b, "") // b is the more recently used
				x.pool.Release(pages)
				at(6 * time.Minute)
			}, need: 4, wantA: 0, wantB: 8},
		{name: "re-pinning extends",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(a, "", t0.Add(5*time.Minute))
				at(4 * time.Minute)
				x.Pin(a, "", t0.Add(9*time.Minute))
				at(6 * time.Minute)
			}, need: 4, wantA: 8, wantB: 0},
		{name: "re-pinning never shortens",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(a, "", t0.Add(time.Hour))
				x.Pin(a, "", t0.Add(5*time.Minute))
				at(6 * time.Minute)
			}, need: 4, wantA: 8, wantB: 0},
		{name: "last resort: the pin ending first goes",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(b, "", t0.Add(5*time.Minute))
				x.Pin(a, "", t0.Add(10*time.Minute))
			}, need: 4, wantA: 8, wantB: 0, wantPinEvict: 2},
		{name: "last resort: everything, never a failed allocation",
			steps: func(x *Index, at func(time.Duration)) {
				x.Pin(a, "", t0.Add(5*time.Minute))
				x.Pin(b, "", t0.Add(5*time.Minute))
			}, need: 6, wantA: 0, wantB: 0, wantPinEvict: 4},
		{name: "a pin on part of a prefix pins that part",
			steps: func(x *Index, at func(time.Duration)) {
				if n := x.Pin(a[:4], "", t0.Add(5*time.Minute)); n != 4 {
					t.Fatalf("pinned %d tokens, want 4", n)
				}
			}, need: 4, wantA: 4, wantB: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			p := newTestPool(t, 4, 6)
			x := NewIndexClock(p, func() time.Time { return now })
			for _, toks := range [][]int32{a, b} {
				s := compute(t, p, toks)
				x.Insert(toks, s.Pages, "")
				p.Free(s)
			}
			tc.steps(x, func(d time.Duration) { now = t0.Add(d) })
			x.Evict(tc.need)
			if got := p.FreePages(); got < tc.need {
				t.Fatalf("%d free pages after Evict(%d)", got, tc.need)
			}
			if gotA, gotB := x.Peek(a, ""), x.Peek(b, ""); gotA != tc.wantA || gotB != tc.wantB {
				t.Fatalf("cached a %d, b %d tokens; want %d, %d", gotA, gotB, tc.wantA, tc.wantB)
			}
			if st := x.Stats(); st.PinEvictions != tc.wantPinEvict {
				t.Fatalf("pin evictions %d, want %d", st.PinEvictions, tc.wantPinEvict)
			}
			checkTree(t, x, nil)
		})
	}
}

// TestIndexPinPartialPage: a sequence inserts its prefix up to a
// breakpoint inside a page and pins it, then runs on and inserts more of
// the same page; the pin carries over to the fuller page.
func TestIndexPinPartialPage(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	p := newTestPool(t, 4, 4)
	x := NewIndexClock(p, func() time.Time { return t0 })
	a := seqTokens(1, 8)
	s := compute(t, p, a)
	x.Insert(a[:6], s.Pages, "")
	if n := x.Pin(a[:6], "", t0.Add(time.Minute)); n != 6 {
		t.Fatalf("pinned %d tokens, want 6", n)
	}
	x.Insert(a, s.Pages, "")
	p.Free(s)
	other := seqTokens(101, 104)
	so := compute(t, p, other)
	x.Insert(other, so.Pages, "")
	p.Free(so)
	pages, _, _, _ := x.Lookup(other, "") // the unpinned one is the most recently used
	p.Release(pages)
	x.Evict(p.NumPages() - 2)
	if got := x.Peek(a, ""); got != 8 {
		t.Fatalf("pinned prefix: %d tokens cached, want 8", got)
	}
	if got := x.Peek(other, ""); got != 0 {
		t.Fatalf("unpinned prefix: %d tokens cached, want 0", got)
	}
	checkTree(t, x, nil)
}

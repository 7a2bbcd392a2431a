package kvcache

import "testing"

func TestScopeRoundTrip(t *testing.T) {
	tests := []struct{ tenant, conv, joined string }{
		{"", "", ""},
		{"", "conv1", "conv1"}, // a plain prompt_cache_key keeps its meaning
		{"k1", "", "k1\x1f"},
		{"k1", "conv1", "k1\x1fconv1"},
		{"k1", "a\x1fb", "k1\x1fa\x1fb"},
		{"", "a\x1fb", "\x1fa\x1fb"}, // a separator in a key cannot forge a tenant
	}
	for _, tc := range tests {
		if got := JoinScope(tc.tenant, tc.conv); got != tc.joined {
			t.Errorf("JoinScope(%q, %q) = %q, want %q", tc.tenant, tc.conv, got, tc.joined)
		}
		if tenant, conv := SplitScope(tc.joined); tenant != tc.tenant || conv != tc.conv {
			t.Errorf("SplitScope(%q) = %q, %q, want %q, %q", tc.joined, tenant, conv, tc.tenant, tc.conv)
		}
	}
}

// TestIndexTenants: a prefix cached under one tenant is invisible to
// another (Lookup and Peek), while conversations of one tenant share it;
// eviction and reset span all tenants and drop empty roots.
func TestIndexTenants(t *testing.T) {
	p := newTestPool(t, 4, 16)
	x := NewIndex(p)
	a := seqTokens(1, 10)
	sa := compute(t, p, a)
	x.Insert(a, sa.Pages, JoinScope("alice", "conv1"))
	p.Free(sa)
	checkTree(t, x, nil)
	tests := []struct {
		scope string
		want  int
	}{
		{JoinScope("alice", "conv1"), 9},
		{JoinScope("alice", "conv2"), 9}, // another conversation of the same tenant
		{JoinScope("alice", ""), 9},
		{JoinScope("bob", "conv1"), 0}, // the same prompt_cache_key under another key
		{JoinScope("bob", ""), 0},
		{"", 0}, // the default tenant
		{"conv1", 0},
	}
	for _, tc := range tests {
		if got := x.Peek(a[:9], tc.scope); got != tc.want {
			t.Errorf("Peek under %q = %d, want %d", tc.scope, got, tc.want)
		}
		pages, n, part, _ := x.Lookup(a[:9], tc.scope)
		if n != tc.want {
			t.Errorf("Lookup under %q matched %d, want %d", tc.scope, n, tc.want)
		}
		p.Release(pages)
		if part >= 0 {
			p.Release([]int32{part})
		}
	}
	// bob caches the very same tokens in pages of his own.
	sb := compute(t, p, a)
	x.Insert(a, sb.Pages, JoinScope("bob", ""))
	p.Free(sb)
	checkTree(t, x, nil)
	if st := x.Stats(); st.Nodes != 6 || len(x.roots) != 2 {
		t.Fatalf("two tenants' copies: %+v, %d roots", st, len(x.roots))
	}
	if got := x.Peek(a[:9], JoinScope("bob", "x")); got != 9 {
		t.Fatalf("bob's own prefix: Peek %d, want 9", got)
	}
	if x.Evictable() != 6 {
		t.Fatalf("Evictable %d, want 6 (both tenants)", x.Evictable())
	}
	if freed := x.Evict(p.NumPages()); freed != 6 || len(x.roots) != 0 {
		t.Fatalf("Evict freed %d, %d roots left", freed, len(x.roots))
	}
	checkTree(t, x, nil)
	sc := compute(t, p, a)
	x.Insert(a, sc.Pages, JoinScope("carol", ""))
	p.Free(sc)
	x.Reset()
	checkTree(t, x, nil)
	if p.FreePages() != p.NumPages() || x.Peek(a, JoinScope("carol", "")) != 0 {
		t.Fatalf("after Reset: %d of %d pages free", p.FreePages(), p.NumPages())
	}
}

// TestSnapshotTenants: snapshot lookups never cross tenants; within a
// tenant a conversation narrows the search and no conversation searches
// all; an identical snapshot of another tenant does not replace one's own.
func TestSnapshotTenants(t *testing.T) {
	p := NewSnapshotPool(1000)
	hist := []int32{1, 2, 3}
	p.Put(fakeSnap{hist, 10}, JoinScope("alice", "conv1"))
	q := []int32{1, 2, 3, 4}
	tests := []struct {
		scope string
		want  int
	}{
		{JoinScope("alice", "conv1"), 3},
		{JoinScope("alice", ""), 3},
		{JoinScope("alice", "conv2"), 0},
		{JoinScope("bob", "conv1"), 0},
		{JoinScope("bob", ""), 0},
		{"", 0},
		{"conv1", 0},
	}
	for _, tc := range tests {
		if got := p.Peek(q, tc.scope); got != tc.want {
			t.Errorf("Peek under %q = %d, want %d", tc.scope, got, tc.want)
		}
		got := p.Lookup(q, tc.scope)
		if n := 0; got != nil {
			n = len(got.Covered())
			if n != tc.want {
				t.Errorf("Lookup under %q covered %d, want %d", tc.scope, n, tc.want)
			}
		} else if tc.want != 0 {
			t.Errorf("Lookup under %q missed, want %d", tc.scope, tc.want)
		}
	}
	p.Put(fakeSnap{hist, 10}, JoinScope("bob", ""))
	if p.Peek(q, JoinScope("alice", "")) != 3 || p.Peek(q, JoinScope("bob", "")) != 3 || p.Stats().Entries != 2 {
		t.Fatalf("bob's identical snapshot replaced alice's: %+v", p.Stats())
	}
}

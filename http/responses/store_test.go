package responses

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(time.Minute, 3, 1<<30, func() time.Time { return now })
	put := func(id string) { s.Put("", id, &stored{object: []byte(`{"id":"` + id + `"}`)}) }
	has := func(id string) bool { _, ok := s.Get("", id); return ok }
	tests := []struct {
		name string
		step func()
		want map[string]bool
	}{
		{"kept", func() { put("a"); put("b") }, map[string]bool{"a": true, "b": true, "c": false}},
		{"bounded: the oldest goes", func() { put("c"); put("d") }, map[string]bool{"a": false, "b": true, "c": true, "d": true}},
		{"re-put moves to the back", func() { put("b"); put("e") }, map[string]bool{"b": true, "c": false, "d": true, "e": true}},
		{"deleted", func() {
			if !s.Delete("", "d") || s.Delete("", "d") {
				t.Fatal("Delete reports wrongly")
			}
		}, map[string]bool{"d": false, "b": true, "e": true}},
		{"expired after TTL", func() { now = now.Add(61 * time.Second) }, map[string]bool{"b": false, "e": false}},
	}
	for _, tc := range tests {
		tc.step()
		for id, want := range tc.want {
			if got := has(id); got != want {
				t.Fatalf("%s: has(%s) = %v, want %v", tc.name, id, got, want)
			}
		}
	}
	if s.Len() != 0 || s.Bytes() != 0 {
		t.Fatalf("Len %d, Bytes %d after expiry, want 0", s.Len(), s.Bytes())
	}
	for i := range 10 {
		put(fmt.Sprint(i))
	}
	if s.Len() != 3 {
		t.Fatalf("Len %d, want the bound 3", s.Len())
	}
}

// response is a stored response of about n bytes of metadata, continuing
// prev's conversation with one message of m bytes.
func response(id string, n int, prev *segment, m int) *stored {
	obj, _ := json.Marshal(map[string]any{"id": id, "metadata": map[string]string{"k": strings.Repeat("x", n)}})
	return &stored{object: obj, input: []item{{id: "msg_in_" + id, raw: json.RawMessage(`{"type":"message"}`)}},
		output: []item{{id: "msg_out_" + id, raw: json.RawMessage(`{"type":"message"}`)}},
		conv:   newSegment(prev, []any{message("user", strings.Repeat("y", m))})}
}

// TestStoreBytes: the store is bounded by approximate bytes (metadata,
// items, the conversation), oldest evicted first; a conversation's shared
// history counts once; a response larger than the whole bound is not kept.
func TestStoreBytes(t *testing.T) {
	const budget = 12_000
	s := NewStore(time.Hour, 1000, budget, nil)
	r1 := response("r1", 3000, nil, 10)
	one := r1.size() + r1.conv.size
	if one < 3000 || one > 4000 {
		t.Fatalf("a response with 3000 bytes of metadata counts %d bytes", one)
	}
	for _, id := range []string{"r1", "r2", "r3"} {
		if !s.Put("", id, response(id, 3000, nil, 10)) {
			t.Fatalf("%s not kept", id)
		}
	}
	if s.Len() != 3 || s.Bytes() != 3*one {
		t.Fatalf("3 responses: Len %d Bytes %d, want 3 and %d", s.Len(), s.Bytes(), 3*one)
	}
	s.Put("", "r4", response("r4", 3000, nil, 10))
	if _, ok := s.Get("", "r1"); ok || s.Len() != 3 || s.Bytes() > budget {
		t.Fatalf("past the byte bound: r1 kept %v, Len %d, Bytes %d", ok, s.Len(), s.Bytes())
	}
	if _, ok := s.Item("", "msg_out_r1"); ok {
		t.Fatal("an evicted response's items are still found")
	}
	for _, id := range []string{"r2", "r3", "r4"} {
		if _, ok := s.Get("", id); !ok {
			t.Fatalf("%s evicted, want only the oldest gone", id)
		}
	}
	if s.Put("", "huge", response("huge", budget, nil, 10)) {
		t.Fatal("a response larger than the bound was kept")
	}
	if s.Len() != 3 {
		t.Fatalf("refusing one response evicted others: Len %d", s.Len())
	}

	// A conversation: each turn's segment extends the previous one; the
	// history is shared, so the bytes grow by one turn, not by the whole
	// conversation, per response.
	s = NewStore(time.Hour, 1000, 1<<20, nil)
	var prev *segment
	var total int64
	for i := range 5 {
		r := response(fmt.Sprint("t", i), 10, prev, 2000)
		total += r.size() + r.conv.size
		s.Put("", fmt.Sprint("t", i), r)
		prev = r.conv
	}
	if s.Bytes() != total {
		t.Fatalf("conversation of 5 turns: Bytes %d, want %d (each turn once)", s.Bytes(), total)
	}
	if got := len(prev.all()); got != 5 {
		t.Fatalf("last turn's conversation has %d messages, want 5", got)
	}
	// Deleting the first turns keeps their segments: the last turn still
	// continues them.
	s.Delete("", "t0")
	s.Delete("", "t1")
	if _, ok := s.Get("", "t4"); !ok || s.Bytes() >= total || s.Bytes() <= total-2*(response("x", 10, nil, 0).size()+100) {
		t.Fatalf("after deleting 2 turns: Bytes %d of %d", s.Bytes(), total)
	}
	for i := 2; i < 5; i++ {
		s.Delete("", fmt.Sprint("t", i))
	}
	if s.Bytes() != 0 || s.Len() != 0 {
		t.Fatalf("all deleted: Bytes %d Len %d", s.Bytes(), s.Len())
	}
}

// TestStoreTenants: a response and its items are found only under the
// tenant that stored them.
func TestStoreTenants(t *testing.T) {
	s := NewStore(time.Hour, 10, 1<<20, nil)
	s.Put("alice", "r1", response("r1", 10, nil, 10))
	if _, ok := s.Get("alice", "r1"); !ok {
		t.Fatal("alice's own response not found")
	}
	if _, ok := s.Item("alice", "msg_out_r1"); !ok {
		t.Fatal("alice's own item not found")
	}
	for _, tenant := range []string{"bob", ""} {
		if _, ok := s.Get(tenant, "r1"); ok {
			t.Fatalf("tenant %q reads alice's response", tenant)
		}
		if _, ok := s.Item(tenant, "msg_out_r1"); ok {
			t.Fatalf("tenant %q reads alice's item", tenant)
		}
		if s.Delete(tenant, "r1") {
			t.Fatalf("tenant %q deleted alice's response", tenant)
		}
	}
	if _, ok := s.Get("alice", "r1"); !ok {
		t.Fatal("alice's response gone")
	}
}

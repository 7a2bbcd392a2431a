package responses

import (
	"fmt"
	"testing"
	"time"
)

func TestStore(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewStore(time.Minute, 3, func() time.Time { return now })
	put := func(id string) { s.Put(id, &stored{object: map[string]any{"id": id}}) }
	has := func(id string) bool { _, ok := s.Get(id); return ok }
	tests := []struct {
		name string
		step func()
		want map[string]bool
	}{
		{"kept", func() { put("a"); put("b") }, map[string]bool{"a": true, "b": true, "c": false}},
		{"bounded: the oldest goes", func() { put("c"); put("d") }, map[string]bool{"a": false, "b": true, "c": true, "d": true}},
		{"re-put moves to the back", func() { put("b"); put("e") }, map[string]bool{"b": true, "c": false, "d": true, "e": true}},
		{"deleted", func() {
			if !s.Delete("d") || s.Delete("d") {
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
	if s.Len() != 0 {
		t.Fatalf("Len %d after expiry, want 0", s.Len())
	}
	for i := range 10 {
		put(fmt.Sprint(i))
	}
	if s.Len() != 3 {
		t.Fatalf("Len %d, want the bound 3", s.Len())
	}
}

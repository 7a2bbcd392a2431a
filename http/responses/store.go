package responses

import (
	"container/list"
	"encoding/json"
	"sync"
	"time"

	"github.com/troupe-ai/troupe/templates"
)

// Store keeps finished responses in memory for GET /v1/responses/{id},
// its input_items, previous_response_id and item_reference input items.
// Every response belongs to a tenant (its API key's): it is found only
// under that tenant. Entries live for TTL after they were put, and the
// store is bounded both by count and by approximate bytes; past either
// bound the oldest go first. The zero value is not usable; use NewStore.
type Store struct {
	mu       sync.Mutex
	ttl      time.Duration
	max      int
	maxBytes int64
	used     int64 // bytes of the entries and of the segments they reach
	now      func() time.Time
	byID     map[key]*list.Element
	items    map[key]*list.Element // item id → the newest entry holding the item
	order    *list.List            // of *entry, oldest at the front
}

// key is an id under a tenant.
type key struct{ tenant, id string }

type entry struct {
	key
	expires time.Time
	size    int64 // the entry's own bytes (its segment is counted apart)
	r       *stored
}

// stored is one kept response: its final object as GET returns it, the
// items of its input and output (for input_items and item_reference), and
// the conversation it ends (what a follow-up continues, without
// instructions).
type stored struct {
	object []byte
	input  []item
	output []item
	conv   *segment
}

// item is one input or output item: its id and its JSON.
type item struct {
	id  string
	raw json.RawMessage
}

// segment is one response's part of a conversation: this turn's input
// messages and reply; the turns before are its parent's. Follow-ups share
// the segments of their history, so a segment's bytes are counted once,
// while any kept response reaches it (refs, under the store's lock).
type segment struct {
	parent   *segment
	messages []any // template messages
	size     int64
	refs     int
}

// newSegment returns the segment of messages continuing parent.
func newSegment(parent *segment, messages []any) *segment {
	var size int64 = 64
	for _, m := range messages {
		size += approxSize(m)
	}
	return &segment{parent: parent, messages: messages, size: size}
}

// all is the whole conversation the segment ends, oldest first.
func (s *segment) all() []any {
	var chain []*segment
	n := 0
	for p := s; p != nil; p = p.parent {
		chain = append(chain, p)
		n += len(p.messages)
	}
	out := make([]any, 0, n)
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, chain[i].messages...)
	}
	return out
}

// entryOverhead approximates an entry's bookkeeping (list element, map
// slots, ids).
const entryOverhead = 256

// size is r's own approximate footprint.
func (r *stored) size() int64 {
	n := int64(entryOverhead + len(r.object))
	for _, list := range [][]item{r.input, r.output} {
		for _, it := range list {
			n += int64(len(it.id)+len(it.raw)) + 160
		}
	}
	return n
}

// NewStore returns a store keeping up to max responses and maxBytes bytes
// of them, each for ttl.
func NewStore(ttl time.Duration, max int, maxBytes int64, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{ttl: ttl, max: max, maxBytes: maxBytes, now: now,
		byID: map[key]*list.Element{}, items: map[key]*list.Element{}, order: list.New()}
}

// Put keeps r under tenant and id, evicting expired entries and, past the
// bounds, the oldest. A response that alone exceeds the byte bound (with
// the conversation it ends) is not kept: Put reports false.
func (s *Store) Put(tenant, id string, r *stored) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{tenant, id}
	if el, ok := s.byID[k]; ok {
		s.remove(el)
	}
	e := &entry{key: k, expires: s.now().Add(s.ttl), size: r.size(), r: r}
	need := e.size
	for p := r.conv; p != nil; p = p.parent {
		if p.refs == 0 {
			need += p.size
		}
	}
	if need > s.maxBytes {
		return false
	}
	el := s.order.PushBack(e)
	s.byID[k] = el
	s.used += e.size
	for p := r.conv; p != nil; p = p.parent {
		if p.refs == 0 {
			s.used += p.size
		}
		p.refs++
	}
	for _, list := range [][]item{r.input, r.output} {
		for _, it := range list {
			s.items[key{tenant, it.id}] = el
		}
	}
	s.expire()
	for s.order.Len() > s.max || s.used > s.maxBytes {
		s.remove(s.order.Front())
	}
	return true
}

// Get returns the response kept under tenant and id, if it has not
// expired.
func (s *Store) Get(tenant, id string) (*stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	el, ok := s.byID[key{tenant, id}]
	if !ok {
		return nil, false
	}
	return el.Value.(*entry).r, true
}

// Item returns the input or output item with id among the responses kept
// under tenant (the newest holding it; when that one goes, the id goes
// with it even if an older response repeated the item).
func (s *Store) Item(tenant, id string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	el, ok := s.items[key{tenant, id}]
	if !ok {
		return nil, false
	}
	r := el.Value.(*entry).r
	for _, list := range [][]item{r.output, r.input} {
		for _, it := range list {
			if it.id == id {
				return it.raw, true
			}
		}
	}
	return nil, false
}

// Delete forgets tenant's id and reports whether it was kept.
func (s *Store) Delete(tenant, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	el, ok := s.byID[key{tenant, id}]
	if ok {
		s.remove(el)
	}
	return ok
}

// Len is how many responses are kept (expired ones included until the next
// call evicts them).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

// Bytes is the approximate size of what is kept.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// expire drops entries past their TTL: every entry has the same TTL, so
// they expire in insertion order, from the front.
func (s *Store) expire() {
	now := s.now()
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*entry).expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *Store) remove(el *list.Element) {
	e := el.Value.(*entry)
	s.order.Remove(el)
	delete(s.byID, e.key)
	for _, list := range [][]item{e.r.input, e.r.output} {
		for _, it := range list {
			if k := (key{e.tenant, it.id}); s.items[k] == el {
				delete(s.items, k)
			}
		}
	}
	s.used -= e.size
	for p := e.r.conv; p != nil; p = p.parent {
		if p.refs--; p.refs == 0 {
			s.used -= p.size
		}
	}
}

// approxSize estimates the bytes a template value holds: its strings and a
// word or so per value and entry.
func approxSize(v any) int64 {
	switch v := v.(type) {
	case string:
		return int64(len(v)) + 16
	case *templates.Dict:
		n := int64(128)
		v.Range(func(k, val any) bool {
			n += approxSize(k) + approxSize(val)
			return true
		})
		return n
	case []any:
		n := int64(24)
		for _, x := range v {
			n += approxSize(x) + 16
		}
		return n
	}
	return 16
}

package responses

import (
	"container/list"
	"sync"
	"time"
)

// Store keeps finished responses in memory for GET /v1/responses/{id} and
// previous_response_id: at most Max of them, each for TTL after it was put;
// past Max the oldest go first. The zero value is not usable; use NewStore.
type Store struct {
	mu    sync.Mutex
	ttl   time.Duration
	max   int
	now   func() time.Time
	byID  map[string]*list.Element
	order *list.List // of *entry, oldest at the front
}

type entry struct {
	id      string
	expires time.Time
	r       *stored
}

// stored is one kept response: its final object and the conversation it
// ends (the messages a follow-up continues, without instructions).
type stored struct {
	object   map[string]any
	messages []any
}

// NewStore returns a store keeping up to max responses for ttl each.
func NewStore(ttl time.Duration, max int, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{ttl: ttl, max: max, now: now, byID: map[string]*list.Element{}, order: list.New()}
}

// Put keeps r under id, evicting expired entries and, past the bound, the
// oldest.
func (s *Store) Put(id string, r *stored) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.byID[id]; ok {
		s.order.Remove(el)
	}
	s.byID[id] = s.order.PushBack(&entry{id: id, expires: s.now().Add(s.ttl), r: r})
	s.expire()
	for s.order.Len() > s.max {
		s.remove(s.order.Front())
	}
}

// Get returns the response kept under id, if it has not expired.
func (s *Store) Get(id string) (*stored, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	el, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	return el.Value.(*entry).r, true
}

// Delete forgets id and reports whether it was kept.
func (s *Store) Delete(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire()
	el, ok := s.byID[id]
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

// expire drops entries past their TTL: every entry has the same TTL, so
// they expire in insertion order, from the front.
func (s *Store) expire() {
	now := s.now()
	for el := s.order.Front(); el != nil && !now.Before(el.Value.(*entry).expires); el = s.order.Front() {
		s.remove(el)
	}
}

func (s *Store) remove(el *list.Element) {
	s.order.Remove(el)
	delete(s.byID, el.Value.(*entry).id)
}

package chat

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"

	"github.com/troupe-ai/troupe/templates"
)

// ConversationKey identifies the conversation a chat request continues by
// its opening: the messages up to and including the first user message
// (the system prompt and the first question), which every later turn of
// the conversation repeats. A cluster gateway routes on it (rendezvous
// hashing) when the client names no conversation (prompt_cache_key), so
// that the turns of a snapshot model's conversation find the replica that
// holds its state. "" for a request that is not a chat or has no user
// message.
func (r *Request) ConversationKey() string {
	var d xxhash.Digest
	d.Reset()
	for _, m := range r.Messages {
		hashValue(&d, m)
		if dict, ok := m.(*templates.Dict); ok {
			if role, _ := dict.Get("role"); role == "user" {
				return strconv.FormatUint(d.Sum64(), 36)
			}
		}
	}
	return ""
}

// hashValue writes v into d, deterministically and unambiguously (each
// value is tagged with its kind and strings with their length).
func hashValue(d *xxhash.Digest, v any) {
	var buf [9]byte
	put := func(tag byte, n uint64) {
		buf[0] = tag
		binary.LittleEndian.PutUint64(buf[1:], n)
		d.Write(buf[:])
	}
	switch x := v.(type) {
	case nil:
		put('n', 0)
	case bool:
		if x {
			put('b', 1)
		} else {
			put('b', 0)
		}
	case string:
		put('s', uint64(len(x)))
		d.WriteString(x)
	case int:
		put('i', uint64(x))
	case int64:
		put('i', uint64(x))
	case float64:
		put('f', math.Float64bits(x))
	case []any:
		put('l', uint64(len(x)))
		for _, e := range x {
			hashValue(d, e)
		}
	case *templates.Dict:
		put('d', uint64(x.Len()))
		x.Range(func(k, val any) bool {
			hashValue(d, k)
			hashValue(d, val)
			return true
		})
	default:
		s := fmt.Sprintf("%T:%v", x, x)
		put('x', uint64(len(s)))
		d.WriteString(s)
	}
}

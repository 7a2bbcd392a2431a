// Package syncbuf is a bytes.Buffer safe for concurrent writers and
// readers: the tests collect a server's or a process's log in one while it
// still writes, and read it meanwhile.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a concurrency-safe byte buffer; the zero value is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

package conns

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Accept backoff bounds: a failed accept that can pass (out of file
// descriptors, a connection aborted before it was accepted) is retried
// after minBackoff, doubling up to maxBackoff.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// Listener wraps a net.Listener so that the accept loop survives what a
// busy server meets: at most maxConns connections are open at once (the
// next Accept waits, the kernel's backlog holding the caller, until one
// closes), and accept errors that pass (EMFILE, ENFILE, ENOBUFS, ENOMEM,
// ECONNABORTED, timeouts) are retried with capped exponential backoff,
// logged once per burst, instead of ending the server.
type Listener struct {
	net.Listener
	slots  chan struct{}
	done   chan struct{}
	closed sync.Once
	log    *slog.Logger
	full   atomic.Bool // the cap was hit and not free since (log once per burst)
}

// NewListener wraps ln with a cap of maxConns open connections (<= 0:
// DefaultMaxConns()) and accept retries; log receives one line per burst
// of accept failures or of waiting at the cap.
func NewListener(ln net.Listener, maxConns int, log *slog.Logger) *Listener {
	if maxConns <= 0 {
		maxConns = DefaultMaxConns()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: ln, slots: make(chan struct{}, maxConns), done: make(chan struct{}), log: log}
}

// Cap is the most connections open at once.
func (l *Listener) Cap() int { return cap(l.slots) }

// Open is the number of connections open now.
func (l *Listener) Open() int { return len(l.slots) }

// Accept waits for a free connection slot, then for a connection; it
// returns an error only when the listener is closed or the error cannot
// pass by waiting.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
		l.full.Store(false)
	default:
		if l.full.CompareAndSwap(false, true) {
			l.log.Warn("connection cap reached; new connections wait until one closes", "max_conns", cap(l.slots))
		}
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
		}
	}
	backoff, failures := time.Duration(0), 0
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if failures > 0 {
				l.log.Info("accepting connections again", "failed_accepts", failures)
			}
			return &limitedConn{Conn: c, release: l.release}, nil
		}
		if !retryable(err) {
			<-l.slots
			return nil, err
		}
		if failures == 0 {
			l.log.Warn("accept failed; retrying with backoff", "err", err, "open_conns", len(l.slots)-1)
		}
		failures++
		backoff = min(max(2*backoff, minBackoff), maxBackoff)
		select {
		case <-time.After(backoff):
		case <-l.done:
			<-l.slots
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
		}
	}
}

// Close stops the listener; a waiting Accept returns.
func (l *Listener) Close() error {
	l.closed.Do(func() { close(l.done) })
	return l.Listener.Close()
}

func (l *Listener) release() { <-l.slots }

// retryable reports whether an accept error passes by waiting: the
// process or system is out of descriptors or buffers, the peer aborted,
// or a timeout.
func retryable(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// limitedConn frees its listener slot once, when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn is the connection underneath (as tls.Conn names it).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

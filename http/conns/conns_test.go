//go:build unix

package conns

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func dial(t *testing.T, addr net.Addr) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type accepted struct {
	c   net.Conn
	err error
}

func acceptAsync(l net.Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := l.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

// TestListenerCap: past the cap the next Accept waits until a connection
// closes, then takes the waiting one.
func TestListenerCap(t *testing.T) {
	l := NewListener(listen(t), 2, nil)
	var open []net.Conn
	for i := 0; i < 3; i++ {
		dial(t, l.Addr())
	}
	for i := 0; i < 2; i++ {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	third := acceptAsync(l)
	select {
	case a := <-third:
		t.Fatalf("a third connection was accepted under a cap of 2 (%v)", a.err)
	case <-time.After(200 * time.Millisecond):
	}
	if l.Open() != 2 {
		t.Fatalf("open %d, want 2", l.Open())
	}
	open[0].Close()
	open[0].Close() // a second Close frees nothing more
	select {
	case a := <-third:
		if a.err != nil {
			t.Fatal(a.err)
		}
		a.c.Close()
	case <-time.After(2 * time.Second):
		t.Fatal("a closed connection did not free its slot")
	}
	if l.Open() != 1 {
		t.Fatalf("open %d after closing two, want 1", l.Open())
	}
}

// TestListenerCloseWakesAccept: closing the listener ends an Accept that
// waits at the cap, with the error fasthttp takes for a closed listener.
func TestListenerCloseWakesAccept(t *testing.T) {
	l := NewListener(listen(t), 1, nil)
	dial(t, l.Addr())
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waiting := acceptAsync(l)
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case a := <-waiting:
		if !errors.Is(a.err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", a.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still waiting after Close")
	}
}

// flaky returns its errors in turn, then accepts from the real listener.
type flaky struct {
	net.Listener
	errs []error
}

func (f *flaky) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.Listener.Accept()
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestListenerRetries: accept errors that pass (out of descriptors,
// aborted connections, timeouts) are retried; others are returned and
// free their slot.
func TestListenerRetries(t *testing.T) {
	opErr := func(e error) error { return &net.OpError{Op: "accept", Net: "tcp", Err: &syscallErr{e}} }
	for _, tc := range []struct {
		name  string
		errs  []error
		retry bool
	}{
		{"EMFILE", []error{opErr(syscall.EMFILE), opErr(syscall.EMFILE), opErr(syscall.EMFILE)}, true},
		{"ENFILE", []error{opErr(syscall.ENFILE)}, true},
		{"ECONNABORTED", []error{opErr(syscall.ECONNABORTED)}, true},
		{"timeout", []error{timeoutErr{}}, true},
		{"permanent", []error{errors.New("bad listener")}, false},
		{"closed", []error{net.ErrClosed}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := listen(t)
			l := NewListener(&flaky{Listener: inner, errs: tc.errs}, 1, nil)
			dial(t, l.Addr())
			start := time.Now()
			c, err := l.Accept()
			if !tc.retry {
				if err == nil {
					c.Close()
					t.Fatal("a permanent error was retried")
				}
				if l.Open() != 0 {
					t.Fatalf("a failed Accept kept its slot (open %d)", l.Open())
				}
				return
			}
			if err != nil {
				t.Fatalf("Accept gave up: %v", err)
			}
			c.Close()
			if d := time.Since(start); d < minBackoff {
				t.Fatalf("retried without backing off (%v)", d)
			}
		})
	}
}

// syscallErr wraps an errno as os.SyscallError does.
type syscallErr struct{ err error }

func (e *syscallErr) Error() string { return "accept4: " + e.err.Error() }
func (e *syscallErr) Unwrap() error { return e.err }

// TestPeerClosed: the look sees an open idle connection, one with bytes
// waiting (which it leaves unread) and one its peer closed.
func TestPeerClosed(t *testing.T) {
	ln := listen(t)
	client := dial(t, ln.Addr())
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	wrapped := &limitedConn{Conn: server, release: func() {}}
	if closed, ok := PeerClosed(wrapped); !ok || closed {
		t.Fatalf("idle open connection: closed %v ok %v", closed, ok)
	}
	client.Write([]byte("GET / HTTP/1.1\r\n"))
	time.Sleep(50 * time.Millisecond)
	if closed, _ := PeerClosed(wrapped); closed {
		t.Fatal("a connection with pipelined bytes was taken for closed")
	}
	client.Close()
	time.Sleep(50 * time.Millisecond)
	// The bytes sent before the close are still there to read: the look
	// consumed nothing.
	buf := make([]byte, 64)
	server.SetReadDeadline(time.Now().Add(time.Second))
	n, _ := io.ReadFull(server, buf[:16])
	if string(buf[:n]) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("read after the look: %q", buf[:n])
	}
	if closed, ok := PeerClosed(wrapped); !ok || !closed {
		t.Fatalf("closed connection: closed %v ok %v", closed, ok)
	}
}

func TestDefaultMaxConns(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	n := DefaultMaxConns()
	if n < 1 || uint64(n) >= rl.Cur {
		t.Fatalf("cap %d for an open file limit of %d", n, rl.Cur)
	}
}

//go:build unix

package conns

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultMaxConns is the connection cap derived from the process's open
// file limit (RLIMIT_NOFILE): three quarters of it, at least 64
// descriptors below it, so that model files, logs and the runtime's own
// descriptors still open when the cap is reached.
func DefaultMaxConns() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == unix.RLIM_INFINITY {
		return 1 << 16
	}
	n := min(rl.Cur, 1<<20)
	return int(max(n-max(64, n/4), 1))
}

// PeerClosed reports whether the peer of c has closed the connection (an
// orderly FIN or a reset), without consuming any byte: a non-blocking
// MSG_PEEK that reads 0 bytes means end of stream, pipelined request bytes
// are left for the server's next read. ok is false when c has no socket to
// look at.
func PeerClosed(c net.Conn) (closed, ok bool) {
	sc, isSock := Unwrap(c).(syscall.Conn)
	if !isSock {
		return false, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var buf [1]byte
	var n int
	var rerr error
	// Control, not Read: the read deadline fasthttp set for the request
	// must not stop the look (it is in the past during long generations).
	if err := rc.Control(func(fd uintptr) {
		n, _, rerr = unix.Recvfrom(int(fd), buf[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	}); err != nil {
		return true, true // the descriptor is closed
	}
	switch {
	case rerr == nil:
		return n == 0, true
	case errors.Is(rerr, unix.EAGAIN), errors.Is(rerr, unix.EWOULDBLOCK), errors.Is(rerr, unix.EINTR):
		return false, true
	}
	return true, true // ECONNRESET, ETIMEDOUT, ...
}

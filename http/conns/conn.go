package conns

import "net"

// Unwrap peels connection wrappers (the Listener's, TLS's) down to the
// socket.
func Unwrap(c net.Conn) net.Conn {
	for {
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = w.NetConn()
	}
}

// SetSendBuffer bounds the kernel's send buffer of c (what a client that
// stops reading leaves queued).
func SetSendBuffer(c net.Conn, bytes int) {
	if tc, ok := Unwrap(c).(interface{ SetWriteBuffer(int) error }); ok {
		_ = tc.SetWriteBuffer(bytes)
	}
}

//go:build !unix

package conns

import "net"

// DefaultMaxConns is the connection cap where the open file limit cannot
// be read.
func DefaultMaxConns() int { return 1 << 14 }

// PeerClosed cannot look at the socket on this platform: ok is false, and
// abandoned non-streaming requests run to their end.
func PeerClosed(net.Conn) (closed, ok bool) { return false, false }

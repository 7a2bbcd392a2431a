// Package conns is the HTTP server's connection layer below Fiber: a
// listener that caps open connections and survives accept errors, and the
// socket-level looks the request lifetime needs (has the peer closed, how
// much may queue unsent).
package conns

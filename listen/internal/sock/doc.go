// Package sock is the platform half of listen's streams: what the hub needs
// from a TCP socket underneath net.Conn, kept apart so the package that
// holds the delivery rules reads without syscalls. It knows nothing of
// streams, frames or the hub.
//
//   - Probe samples a socket's send-side progress (bytes waiting, bytes the
//     peer acknowledged), for the rule that drops a peer that stopped reading
//     while the kernel still takes our writes.
//   - CloseWatch notices peers that close detached streams: one epoll set per
//     hub instead of a reader goroutine per connection.
//   - RawWriter makes one non-blocking write(2), for the fast write path.
//
// On platforms without them NewProbe and NewCloseWatch return nil and
// DetachSupported is false: streams are then served in place, and end on
// the queue, lag-in-queue and write-deadline rules only.
package sock

import (
	"net"
	"syscall"
)

// Probe reads a TCP socket's send-side progress.
type Probe interface {
	// Sample returns the bytes still in the send queue (unsent or
	// unacknowledged) and the total the peer has acknowledged; ok is false
	// when the socket cannot be read, and the caller stops probing.
	Sample() (queued int, acked uint64, ok bool)
}

// FD is c's descriptor, or -1 when c is not a socket. The close watcher
// watches it; the connection keeps owning it.
func FD(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return -1
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	if raw.Control(func(f uintptr) { fd = int(f) }) != nil {
		return -1
	}
	return fd
}

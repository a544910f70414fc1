//go:build linux && (amd64 || arm64)

package sock

import "syscall"

// RawWriter makes one write(2) on a socket and never waits: the descriptor
// is non-blocking (the runtime's poller made it so), and RawConn.Control,
// unlike RawConn.Write, neither checks the write deadline nor parks on
// EAGAIN. Its callback is made once, so a write allocates nothing. Only the
// holder of the stream's write lock may use it.
type RawWriter struct {
	rc  syscall.RawConn
	op  func(fd uintptr)
	b   []byte
	n   int
	err error
}

// NewRawWriter wraps a socket whose descriptor the runtime made non-blocking.
func NewRawWriter(rc syscall.RawConn) *RawWriter {
	w := &RawWriter{rc: rc}
	w.op = func(fd uintptr) { w.n, w.err = syscall.Write(int(fd), w.b) }
	return w
}

// Try writes b once and returns how many bytes the kernel took (0 on
// EAGAIN) and the error, if any.
func (w *RawWriter) Try(b []byte) (int, error) {
	w.b = b
	cerr := w.rc.Control(w.op)
	n, err := w.n, w.err
	w.b, w.n, w.err = nil, 0, nil
	if cerr != nil {
		return 0, cerr
	}
	return max(n, 0), err
}

// RawConn is the socket written, for tests that shape its buffers.
func (w *RawWriter) RawConn() syscall.RawConn { return w.rc }

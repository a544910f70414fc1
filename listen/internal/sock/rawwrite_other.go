//go:build !(linux && (amd64 || arm64))

package sock

import "syscall"

// RawWriter is never used here: streams are not detached on this platform
// (see CloseWatch), so no stream has a fast writer.
type RawWriter struct{ rc syscall.RawConn }

// NewRawWriter keeps rc only for RawConn.
func NewRawWriter(rc syscall.RawConn) *RawWriter { return &RawWriter{rc: rc} }

// Try takes nothing: the caller leaves the bytes to the stream's goroutine.
func (w *RawWriter) Try([]byte) (int, error) { return 0, syscall.EAGAIN }

// RawConn is the socket written.
func (w *RawWriter) RawConn() syscall.RawConn { return w.rc }

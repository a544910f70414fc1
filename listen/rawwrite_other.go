//go:build !(linux && (amd64 || arm64))

package listen

import "syscall"

// rawWriter is never used here: streams are not detached on this platform
// (see closeWatch), so no stream has a fast writer.
type rawWriter struct{}

func newRawWriter(rawConn) *rawWriter { return &rawWriter{} }

func (w *rawWriter) try([]byte) (int, error) { return 0, syscall.EAGAIN }

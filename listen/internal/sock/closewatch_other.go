//go:build !(linux && (amd64 || arm64))

package sock

// CloseWatch is Linux-only; elsewhere streams are served in place.
type CloseWatch struct{}

// NewCloseWatch has no watcher on this platform.
func NewCloseWatch() *CloseWatch { return nil }

// Add is never called: NewCloseWatch returned nil.
func (w *CloseWatch) Add(int, func()) uint64 { return 0 }

// Remove is never called: NewCloseWatch returned nil.
func (w *CloseWatch) Remove(uint64, int) {}

// Stop is never called: NewCloseWatch returned nil.
func (w *CloseWatch) Stop() {}

// DetachSupported says streams can be detached on this platform.
const DetachSupported = false

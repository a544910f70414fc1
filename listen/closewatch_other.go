//go:build !(linux && (amd64 || arm64))

package listen

// closeWatch is Linux-only; elsewhere ServeDetached serves in place.
type closeWatch struct{}

func newCloseWatch() *closeWatch { return nil }

func (w *closeWatch) add(int, func()) uint64 { return 0 }

func (w *closeWatch) remove(uint64, int) {}

func (w *closeWatch) stop() {}

// detachSupported says streams can be detached on this platform.
const detachSupported = false

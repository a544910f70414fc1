package listen

import (
	"context"
	"net"

	"github.com/commonroom/ce/listen/internal/sock"
)

// A reader that stops reading is invisible to the writer for a long time:
// the kernel keeps accepting our writes until its send buffer (several MiB,
// autotuned, on loopback) is full, so neither the queue nor the write
// deadline notices, and a quiet room would take days to fill it. A socket
// probe looks underneath: how many bytes still wait in our send queue, and
// how many the peer has acknowledged so far. Queued bytes with no new
// acknowledgement for MaxLag mean the peer's window is shut, which is the
// kernel's way of saying nobody reads.

// connKey carries the stream's network connection in the request context.
type connKey struct{}

// ConnContext is for http.Server.ConnContext: it records each connection so
// Serve can probe its socket. Without it streams still end on the queue,
// lag-in-queue and write-deadline rules, only later.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

func connFrom(ctx context.Context) net.Conn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	return c
}

// stallWatch applies the no-progress rule to successive samples.
type stallWatch struct {
	probe    sock.Probe // sock.NewProbe: nil where the platform or the socket has none
	dirty    bool       // written since the last sample
	watching bool       // the last sample saw queued bytes
	acked    uint64
	since    int64 // unix ns of the last progress seen while watching
}

// check takes one sample at now and reports whether the stream has had bytes
// queued without any acknowledgement for at least maxLag.
func (w *stallWatch) check(now int64, maxLag int64) (stalled bool) {
	if w.probe == nil || (!w.dirty && !w.watching) {
		return false
	}
	w.dirty = false
	queued, acked, ok := w.probe.Sample()
	switch {
	case !ok:
		w.probe = nil
	case queued == 0:
		w.watching = false
	case !w.watching || acked != w.acked:
		w.watching, w.acked, w.since = true, acked, now
	default:
		return now-w.since >= maxLag
	}
	return false
}

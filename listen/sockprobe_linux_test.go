//go:build linux && (amd64 || arm64)

package listen

import (
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A reader that stops reading while our bytes still fit in the kernel's
// buffers: no write blocks and the queue stays empty, so before the socket
// probe such a stream was dropped only when megabytes had piled up (42 s in
// the bench; days in a quiet room). The probe sees bytes waiting with no
// acknowledgement and drops it once MaxLag passes on the room's clock. The
// healthy stream beside it, whose socket drains, is never touched even
// though the clock jumps.
func TestStalledPeerDroppedByProbeWhileBuffersHaveRoom(t *testing.T) {
	ctx := testCtx(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	const maxLag = time.Minute // so neither the write deadline nor the queue-age rule can act first
	stuck := make(chan bool, 4096)
	var stalledSub atomic.Pointer[Subscription]
	hk := hooks{afterProbe: func(s *Subscription, watching bool) {
		if s == stalledSub.Load() {
			select {
			case stuck <- watching:
			default:
			}
		}
	}}
	ts := newTestServerHooks(t, Config{MaxLag: maxLag, ProbeEvery: 2 * time.Millisecond,
		Now: func() time.Time { return time.Unix(0, now.Load()) }}, hk)

	healthy := []*clientStream{ts.mustOpen(ctx, "h1", "1", []string{"big"}, 0)}
	tiny := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) })
		if err != nil {
			return err
		}
		return serr
	}}
	stalled, err := ts.openDialer(ctx, tiny, "stalled", `"s"`, []string{"big"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stalled.close)
	stalledSub.Store(ts.sub("stalled", `"s"`))

	// Publish small frames until the stalled socket holds bytes its peer has
	// not taken; each frame is read by the healthy stream first.
	const size = 4 << 10
	seq := 0
	for watching := false; !watching; {
		seq++
		if seq > 64 {
			t.Fatalf("after %d frames of %d KiB the probe never saw bytes waiting", seq-1, size>>10)
		}
		for len(stuck) > 0 { // forget what the probe saw before this frame
			<-stuck
		}
		ts.hub.Publish(Batch{Messages: []Message{bigMsg("big", seq, size)}})
		forEach(t, healthy, func(c *clientStream) error { return c.expectSeqs(seq) })
		// Let the probe look a few times after this write.
		for range 3 {
			select {
			case w := <-stuck:
				watching = watching || w
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	select {
	case e := <-ts.ends:
		t.Fatalf("stream %s ended (%v) before its lag passed", e.session, e.reason)
	default:
	}

	now.Add(int64(maxLag))
	e := ts.waitEnd(ctx)
	if e.session != "stalled" || e.reason != EndLagging {
		t.Fatalf("stream %s ended with %v, want the stalled one as lagging", e.session, e.reason)
	}
	if st := ts.hub.Stats(); st.DroppedSlow != 1 || st.DroppedQueueFull != 0 || st.Subscribers != 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stalled peer dropped after %d frames of %d KiB", seq, size>>10)
	ts.hub.Publish(Batch{Messages: []Message{msg("big", seq+1)}})
	forEach(t, healthy, func(c *clientStream) error { return c.expectSeqs(seq + 1) })
	if err := stalled.expectDroppedEnd(); err != nil {
		t.Fatal(err)
	}
}

package listen

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

// streamID alternates numeric and string request ids, so every fan-out test
// also checks that each keeps its JSON type.
func streamID(i int) string {
	if i%2 == 0 {
		return strconv.Itoa(i)
	}
	return strconv.Quote("req-" + strconv.Itoa(i))
}

// forEach runs f for every stream concurrently and fails on any error.
func forEach(t *testing.T, streams []*clientStream, f func(c *clientStream) error) {
	t.Helper()
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, c := range streams {
		wg.Go(func() { errs[i] = f(c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestThousandStreamsReceiveInOrder(t *testing.T) {
	const n = 1000
	ctx := testCtx(t)
	ts := newTestServer(t, Config{})
	streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "ses-" + strconv.Itoa(i), streamID(i), []string{"events", "task:" + strconv.Itoa(i)}
	})
	ts.hub.Publish(Batch{Messages: []Message{msg("events", 1), msg("elsewhere", -1), msg("events", 2)}})
	ts.hub.Publish(Batch{Messages: []Message{msg("task:7", 3)}})
	ts.hub.Publish(Batch{Messages: []Message{msg("events", 4)}})
	forEach(t, streams, func(c *clientStream) error {
		if c.session == "ses-7" {
			return c.expectSeqs(1, 2, 3, 4)
		}
		return c.expectSeqs(1, 2, 4)
	})
	if st := ts.hub.Stats(); st.Subscribers != n || st.Delivered != 3*n+1 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Clients going away unregister their streams.
	for _, c := range streams {
		c.close()
	}
	for range n {
		if e := ts.waitEnd(ctx); e.reason != EndClientGone {
			t.Fatalf("stream %s/%s ended with %v, want client gone", e.session, e.key, e.reason)
		}
	}
	if st := ts.hub.Stats(); st.Subscribers != 0 || st.Disconnected != n {
		t.Fatalf("after clients left: %+v", st)
	}
}

func TestCloseEndsThousandStreamsGracefully(t *testing.T) {
	const n = 1000
	ctx := testCtx(t)
	ts := newTestServer(t, Config{})
	streams := ts.openMany(ctx, n, func(i int) (string, string, []string) {
		return "ses-" + strconv.Itoa(i%250), streamID(i), []string{"events"}
	})
	ts.hub.Publish(Batch{Messages: []Message{msg("events", 1)}})
	ts.hub.Close() // what was published before Close is still delivered, then Final
	forEach(t, streams, func(c *clientStream) error {
		if err := c.expectSeqs(1); err != nil {
			return err
		}
		return c.expectFinal()
	})
	for range n {
		if e := ts.waitEnd(ctx); e.reason != EndShutdown {
			t.Fatalf("stream %s/%s: Serve returned %v", e.session, e.key, e.reason)
		}
	}
	if st := ts.hub.Stats(); st.Ended != n || st.Subscribers != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// frameSize is the params size of the frames the stall tests publish.
const frameSize = 64 << 10

// publishUntilEnded publishes large frames, one at a time, each read by every
// healthy stream before the next, until the handler reports a stream ended.
func publishUntilEnded(t *testing.T, ts *testServer, healthy []*clientStream, maxFrames int) (streamEnd, int) {
	t.Helper()
	for i := 1; i <= maxFrames; i++ {
		ts.hub.Publish(Batch{Messages: []Message{bigMsg("big", i, frameSize)}})
		forEach(t, healthy, func(c *clientStream) error { return c.expectSeqs(i) })
		select {
		case e := <-ts.ends:
			return e, i
		default:
		}
	}
	t.Fatalf("no stream ended after %d frames of %d KiB", maxFrames, frameSize>>10)
	return streamEnd{}, 0
}

func TestStalledReaderDroppedWhenQueueFull(t *testing.T) {
	ctx := testCtx(t)
	// The lag bound is out of the way: on a loaded machine the 400 frames can
	// take longer than the default 10 s, and this test is about the queue.
	ts := newTestServer(t, Config{MaxLag: 10 * time.Minute})
	healthy := []*clientStream{
		ts.mustOpen(ctx, "h1", "1", []string{"big"}, 0),
		ts.mustOpen(ctx, "h2", `"x"`, []string{"big"}, 0),
		ts.mustOpen(ctx, "h3", "3", []string{"big"}, 0),
	}
	stalled := ts.mustOpen(ctx, "stalled", "9", []string{"big"}, 2) // never read again
	e, frames := publishUntilEnded(t, ts, healthy, 400)
	if e.session != "stalled" || e.reason != EndQueueFull {
		t.Fatalf("stream %s ended with %v, want the stalled one with queue full", e.session, e.reason)
	}
	st := ts.hub.Stats()
	if st.Dropped != 1 || st.DroppedQueueFull != 1 || st.Subscribers != 3 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stalled reader dropped after %d frames of %d KiB", frames, frameSize>>10)
	ts.hub.Publish(Batch{Messages: []Message{msg("big", frames+1)}})
	forEach(t, healthy, func(c *clientStream) error { return c.expectSeqs(frames + 1) })
	if err := stalled.expectDroppedEnd(); err != nil {
		t.Fatal(err)
	}
}

// A client that holds its connection but stops reading: once the kernel
// buffers (several MiB on loopback) are full, the server's write blocks and
// the write deadline (MaxLag) must end it. The stalled stream's queue has room
// for everything and the lag clock is frozen, so only the deadline can drop
// it; the healthy stream reads every frame before the next is published.
// Where streams are detached, its frames go out as fast writes until one
// would block, and the stream's goroutine then finishes it under the deadline.
func TestStalledSocketDroppedByWriteDeadline(t *testing.T) {
	ctx := testCtx(t)
	frozen := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	carried := map[*Subscription]bool{}
	hk := hooks{afterCarry: func(s *Subscription, _, _ int) {
		mu.Lock()
		carried[s] = true
		mu.Unlock()
	}}
	ts := newTestServerHooks(t, Config{MaxLag: 300 * time.Millisecond, Now: func() time.Time { return frozen }}, hk)
	healthy := []*clientStream{ts.mustOpen(ctx, "h1", "1", []string{"big"}, 0)}
	stalled := ts.mustOpen(ctx, "stalled", `"s"`, []string{"big"}, 100_000) // never read again
	e, frames := publishUntilEnded(t, ts, healthy, 2000)
	if e.session != "stalled" || e.reason != EndWriteFailed {
		t.Fatalf("stream %s ended with %v, want the stalled one with write failed", e.session, e.reason)
	}
	st := ts.hub.Stats()
	if st.DroppedSlow != 1 || st.DroppedQueueFull != 0 || st.Subscribers != 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("stalled socket dropped after %d frames of %d KiB", frames, frameSize>>10)
	mu.Lock()
	fellBack := carried[ts.sub("stalled", `"s"`)]
	mu.Unlock()
	if sock.DetachSupported && !fellBack {
		t.Fatal("the stalled stream's fast writes never fell back to its goroutine")
	}
	ts.hub.Publish(Batch{Messages: []Message{msg("big", frames+1)}})
	forEach(t, healthy, func(c *clientStream) error { return c.expectSeqs(frames + 1) })
	if err := stalled.expectDroppedEnd(); err != nil {
		t.Fatal(err)
	}
}

func TestCancelAndEndSessionOverHTTP(t *testing.T) {
	ctx := testCtx(t)
	ts := newTestServer(t, Config{MaxStreamsPerSession: 3})
	a1 := ts.mustOpen(ctx, "A", "1", []string{"t"}, 0)
	a2 := ts.mustOpen(ctx, "A", `"2"`, []string{"t"}, 0)
	a3 := ts.mustOpen(ctx, "A", "3", []string{"t"}, 0)
	b1 := ts.mustOpen(ctx, "B", "1", []string{"t"}, 0)
	b2 := ts.mustOpen(ctx, "B", "2", []string{"t"}, 0)
	var a4 *clientStream

	t.Run("fourth stream of a session is refused", func(t *testing.T) {
		if _, err := ts.open(ctx, "A", "4", []string{"t"}, 0); err == nil || err.Error() != "status 429" {
			t.Fatalf("got %v, want status 429", err)
		}
	})
	t.Run("cancel ends only the matching session and key", func(t *testing.T) {
		ts.cancelGracefully(ctx, t, a1, "A", "1")
		ts.hub.Publish(Batch{Messages: []Message{msg("t", 1)}})
		forEach(t, []*clientStream{a2, a3, b1, b2}, func(c *clientStream) error { return c.expectSeqs(1) })
	})
	t.Run("cancel frees a slot of the session", func(t *testing.T) {
		a4 = ts.mustOpen(ctx, "A", "4", []string{"t"}, 0)
		ts.hub.Publish(Batch{Messages: []Message{msg("t", 2)}})
		forEach(t, []*clientStream{a2, a3, a4, b1, b2}, func(c *clientStream) error { return c.expectSeqs(2) })
	})
	t.Run("session end in a batch comes after its messages", func(t *testing.T) {
		ts.hub.Publish(Batch{Messages: []Message{msg("t", 3)}, EndSessions: []string{"A"}})
		forEach(t, []*clientStream{a2, a3, a4}, func(c *clientStream) error {
			if err := c.expectSeqs(3); err != nil {
				return err
			}
			return c.expectFinal()
		})
		for range 3 {
			if e := ts.waitEnd(ctx); e.session != "A" || e.reason != EndSessionEnded {
				t.Fatalf("end %+v", e)
			}
		}
	})
	t.Run("EndSession ends all of that session's streams", func(t *testing.T) {
		ts.hub.Publish(Batch{Messages: []Message{msg("t", 4)}})
		ts.hub.EndSession("B")
		forEach(t, []*clientStream{b1, b2}, func(c *clientStream) error {
			if err := c.expectSeqs(3, 4); err != nil {
				return err
			}
			return c.expectFinal()
		})
		for range 2 {
			if e := ts.waitEnd(ctx); e.session != "B" || e.reason != EndSessionEnded {
				t.Fatalf("end %+v", e)
			}
		}
		if st := ts.hub.Stats(); st.Ended != 6 || st.Subscribers != 0 || st.Dropped != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestSetTopicsChangesLiveStream(t *testing.T) {
	ctx := testCtx(t)
	ts := newTestServer(t, Config{})
	c := ts.mustOpen(ctx, "A", "1", []string{"resource:a"}, 0)
	sub := ts.sub("A", "1")
	steps := []struct {
		name   string
		topics []string // nil: keep
		want   []int
	}{
		{"initial topic only", nil, []int{10}},
		{"replaced topic", []string{"resource:b"}, []int{21}},
		{"grown set", []string{"resource:b", "resource:a"}, []int{30, 31}},
		{"emptied set stays open", []string{}, nil},
		{"restored", []string{"resource:a"}, []int{50}},
	}
	for i, st := range steps {
		if st.topics != nil {
			sub.SetTopics(st.topics)
		}
		ts.hub.Publish(Batch{Messages: []Message{msg("resource:a", 10*(i+1)), msg("resource:b", 10*(i+1)+1)}})
		if err := c.expectSeqs(st.want...); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
	}
	if got := sub.Topics(); fmt.Sprint(got) != "[resource:a]" {
		t.Fatalf("Topics() = %v", got)
	}
}

func TestKeepAliveOverHTTP(t *testing.T) {
	ctx := testCtx(t)
	ts := newTestServer(t, Config{KeepAlive: 20 * time.Millisecond})
	c := ts.mustOpen(ctx, "A", "1", []string{"t"}, 0)
	ev, err := c.next()
	if err != nil || ev.comment != "keepalive" {
		t.Fatalf("got %+v, %v; want a keepalive comment on a quiet stream", ev, err)
	}
}

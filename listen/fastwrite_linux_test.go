//go:build linux && (amd64 || arm64)

package listen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// carryLog records the fast writes that left bytes to a stream's goroutine.
type carryLog struct {
	mu      sync.Mutex
	partial int // some of the frame went out
	none    int // none of it did
	first   chan struct{}
	once    sync.Once
}

func newCarryLog() *carryLog { return &carryLog{first: make(chan struct{})} }

func (l *carryLog) hook(_ *Subscription, wrote, of int) {
	l.mu.Lock()
	if wrote > 0 {
		l.partial++
	} else {
		l.none++
	}
	l.mu.Unlock()
	l.once.Do(func() { close(l.first) })
}

func (l *carryLog) counts() (partial, none int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.partial, l.none
}

// shrinkSendBuffer makes the server's end of a detached stream take little
// before its writes would block.
func shrinkSendBuffer(t *testing.T, s *Subscription) {
	t.Helper()
	fw := s.fast.Load()
	if fw == nil {
		t.Fatal("the stream was not detached with a fast writer")
	}
	var serr error
	if err := fw.raw.RawConn().Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
	}); err != nil || serr != nil {
		t.Fatalf("SO_SNDBUF: %v %v", err, serr)
	}
}

// A frame the socket takes only in part (or not at all) is finished by the
// stream's goroutine before anything else goes out, and the frames published
// meanwhile queue behind it: a reader that stopped for a while and then reads
// sees every frame, whole (the chunked body parses) and in order, and the
// stream is not dropped.
func TestFastWriteLeftoverIsWrittenFirstAndInOrder(t *testing.T) {
	tests := []struct {
		name   string
		frames int
		size   int
	}{
		{"large frames: the first is taken in part, the rest queue behind it", 24, frameSize},
		{"small frames: the socket fills mid-stream, the rest queue behind", 200, 2 << 10}, // within QueueLen
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			carries := newCarryLog()
			ts := newTestServerHooks(t, Config{MaxLag: time.Minute}, hooks{afterCarry: carries.hook})
			c, err := ts.openDialer(ctx, tinyRecvDialer(t), "s1", "1", []string{"big"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.close)
			select {
			case <-ts.returned: // detached: the fast writer is in place
			case <-ctx.Done():
				t.Fatal("the handler never returned")
			}
			shrinkSendBuffer(t, ts.sub("s1", "1"))
			want := make([]int, tt.frames)
			for i := range tt.frames {
				want[i] = i + 1
				ts.hub.Publish(Batch{Messages: []Message{bigMsg("big", i+1, tt.size)}})
			}
			select {
			case <-carries.first:
			case <-ctx.Done():
				t.Fatal("no fast write ever fell back to the stream's goroutine")
			}
			if err := c.expectSeqs(want...); err != nil {
				t.Fatal(err)
			}
			partial, none := carries.counts()
			t.Logf("fast writes that fell back: %d in part, %d with nothing written", partial, none)
			ts.cancelGracefully(ctx, t, c, "s1", "1")
			if st := ts.hub.Stats(); st.Dropped != 0 || st.Delivered != uint64(tt.frames) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// tinyRecvDialer dials with a small receive buffer, so a reader that does
// not read fills up after a few KiB.
func tinyRecvDialer(t *testing.T) *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// Frames written fast count as the stream's writes for the socket probe: a
// reader that stops reading while every frame still fits in the kernel's
// buffers (so no fast write ever falls back to the stream's goroutine) is
// seen stalled and dropped once MaxLag passes on the room's clock.
func TestFastWritesArmTheSocketProbe(t *testing.T) {
	ctx := testCtx(t)
	var now atomic.Int64
	now.Store(time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	const maxLag = time.Minute // neither the deadline nor the queue-age rule acts first
	seen := make(chan bool, 4096)
	var stalledSub atomic.Pointer[Subscription]
	carries := newCarryLog()
	hk := hooks{
		afterProbe: func(s *Subscription, watching bool) {
			if s == stalledSub.Load() {
				select {
				case seen <- watching:
				default:
				}
			}
		},
		afterCarry: carries.hook,
	}
	ts := newTestServerHooks(t, Config{MaxLag: maxLag, ProbeEvery: 2 * time.Millisecond,
		Now: func() time.Time { return time.Unix(0, now.Load()) }}, hk)
	c, err := ts.openDialer(ctx, tinyRecvDialer(t), "stalled", "1", []string{"t"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	select {
	case <-ts.returned:
	case <-ctx.Done():
		t.Fatal("the handler never returned")
	}
	stalledSub.Store(ts.sub("stalled", "1"))
	// Two samples before any frame: the acknowledgement's write has been
	// looked at, so only the frames' writes can make the probe look again.
	for range 2 {
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	const size = 512
	watching := false
	for seq := 1; !watching; seq++ {
		if seq > 64 {
			t.Fatalf("after %d frames of %d B the probe never saw bytes waiting", seq-1, size)
		}
		for len(seen) > 0 {
			<-seen
		}
		ts.hub.Publish(Batch{Messages: []Message{bigMsg("t", seq, size)}})
		for range 3 {
			select {
			case w := <-seen:
				watching = watching || w
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	if partial, none := carries.counts(); partial+none != 0 {
		t.Fatalf("a fast write fell back (%d in part, %d with nothing) before the probe saw the stall: the test proves nothing", partial, none)
	}
	now.Add(int64(maxLag))
	if e := ts.waitEnd(ctx); e.reason != EndLagging {
		t.Fatalf("ended with %v, want lagging", e.reason)
	}
	if st := ts.hub.Stats(); st.DroppedSlow != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Batches that wait for the broadcaster together go out together, one write
// per stream for the whole run, but a batch that ends streams closes its
// run: the stream it ends gets that batch's frames and then the final frame,
// never a frame published after it; the other stream gets everything, in
// order.
func TestRunOfBatchesEndsWhereABatchEndsStreams(t *testing.T) {
	ctx := testCtx(t)
	g := newRunGate()
	ts := newTestServerHooks(t, Config{}, g.hooks())
	a := ts.mustOpen(ctx, "a", "1", []string{"t"}, 0)
	b := ts.mustOpen(ctx, "b", "2", []string{"t"}, 0)
	for range 2 {
		select {
		case <-ts.returned: // both detached
		case <-ctx.Done():
			t.Fatal("a handler never returned")
		}
	}
	g.hold(ts)
	ts.hub.Publish(Batch{Messages: []Message{msg("t", 1)}})
	ts.hub.Publish(Batch{Messages: []Message{msg("t", 2)}, EndSessions: []string{"a"}})
	ts.hub.Publish(Batch{Messages: []Message{msg("t", 3)}})
	ts.hub.Publish(Batch{Messages: []Message{msg("t", 4)}})
	close(g.release)
	if err := a.expectSeqs(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.expectFinal(); err != nil {
		t.Fatal(err)
	}
	if err := b.expectSeqs(1, 2, 3, 4); err != nil {
		t.Fatal(err)
	}
	if e := ts.waitEnd(ctx); e.session != "a" || e.reason != EndSessionEnded {
		t.Fatalf("stream %s ended with %v, want a with session ended", e.session, e.reason)
	}
	ts.hub.Close() // the broadcaster has counted everything
	// a: 1+2 in one write; b: 1+2, then 3+4 (a run ends after seq 2's
	// batch): three writes of two frames each, and nothing else.
	if w := g.writes(); !slices.Equal(w, []int{2, 2, 2}) {
		t.Fatalf("writes of %v frames, want three of 2: each stream's part of a run in one write", w)
	}
	if st := ts.hub.Stats(); st.Delivered != 6 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A run can hold more frames for one stream than its queue bound; a stream
// whose socket takes them all is keeping up and must not be dropped for it:
// they go out QueueLen frames per write, in order.
func TestRunLongerThanTheQueueBoundReachesAHealthyStream(t *testing.T) {
	ctx := testCtx(t)
	g := newRunGate()
	ts := newTestServerHooks(t, Config{}, g.hooks())
	c := ts.mustOpen(ctx, "s", "1", []string{"t"}, 4) // QueueLen 4
	select {
	case <-ts.returned:
	case <-ctx.Done():
		t.Fatal("the handler never returned")
	}
	g.hold(ts)
	const n = 10
	want := make([]int, n)
	for i := range n {
		want[i] = i + 1
		ts.hub.Publish(Batch{Messages: []Message{msg("t", i+1)}})
	}
	close(g.release)
	if err := c.expectSeqs(want...); err != nil {
		t.Fatal(err)
	}
	ts.hub.Close()
	if err := c.expectFinal(); err != nil {
		t.Fatal(err)
	}
	if st := ts.hub.Stats(); st.Dropped != 0 || st.Delivered != n {
		t.Fatalf("stats %+v", st)
	}
	if w := g.writes(); !slices.Equal(w, []int{2, 4, 4}) {
		t.Fatalf("writes of %v frames, want 4, 4 and 2: at most QueueLen frames per write", w)
	}
}

// runGate holds the broadcaster at the first batch (hold), so the batches
// published meanwhile wait for it together and go out as runs once release
// is closed, and records how many frames each stream's write carried.
type runGate struct {
	held, release chan struct{}
	mu            sync.Mutex
	bursts        []int
}

func newRunGate() *runGate { return &runGate{held: make(chan struct{}), release: make(chan struct{})} }

func (g *runGate) hooks() hooks {
	return hooks{
		beforeBatch: func(seq uint64) {
			if seq == 1 {
				close(g.held)
				<-g.release
			}
		},
		afterWrite: func(_ *Subscription, frames int) {
			g.mu.Lock()
			g.bursts = append(g.bursts, frames)
			g.mu.Unlock()
		},
	}
}

// hold publishes the batch the broadcaster waits at (on a topic nobody
// reads) and returns once it waits.
func (g *runGate) hold(ts *testServer) {
	ts.hub.Publish(Batch{Messages: []Message{msg("elsewhere", 0)}})
	<-g.held
}

// writes is the frames of every write so far, sorted.
func (g *runGate) writes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(slices.Values(g.bursts))
}

// wrapConn stands for a listener's connection wrapper; it counts the bytes
// written through it.
type wrapConn struct {
	net.Conn
	wrote *atomic.Int64
}

// Write counts the bytes handed to it before they reach the socket: the
// test reads the count as soon as its client has the frame, which may be
// before a count taken after the write returned.
func (c *wrapConn) Write(b []byte) (int, error) {
	c.wrote.Add(int64(len(b)))
	return c.Conn.Write(b)
}

// passConn is a wrapper that declares its writes pass through unchanged.
type passConn struct{ wrapConn }

func (c *passConn) PassThrough() net.Conn { return c.Conn }

type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// Frames are written past a connection wrapper only when it says its writes
// reach the socket unchanged (PassThroughConn): a wrapper that might change
// the bytes (TLS, say) gets every frame through its own Write. With
// Config.NoFastWrite nothing is written past it, and frames still arrive.
func TestFastPathOnlyPastPassThroughWrappers(t *testing.T) {
	tests := []struct {
		name   string
		wrap   func(c net.Conn, wrote *atomic.Int64) net.Conn
		noFast bool // Config.NoFastWrite
		fast   bool
	}{
		{"a bare TCP connection is written directly", func(c net.Conn, _ *atomic.Int64) net.Conn { return c }, false, true},
		{"a pass-through wrapper is written past", func(c net.Conn, w *atomic.Int64) net.Conn {
			return &passConn{wrapConn{Conn: c, wrote: w}}
		}, false, true},
		{"with NoFastWrite a pass-through wrapper gets every frame through its Write", func(c net.Conn, w *atomic.Int64) net.Conn {
			return &passConn{wrapConn{Conn: c, wrote: w}}
		}, true, false},
		{"any other wrapper gets every frame through its Write", func(c net.Conn, w *atomic.Int64) net.Conn {
			return &wrapConn{Conn: c, wrote: w}
		}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testCtx(t)
			var wrote atomic.Int64
			ts := &testServer{t: t, hub: newHub(Config{Encode: testEncode, NoFastWrite: tt.noFast}, hooks{}), ends: make(chan streamEnd, 16),
				returned: make(chan string, 16), subs: map[string]*Subscription{}}
			ts.srv = httptest.NewUnstartedServer(http.HandlerFunc(ts.serveHTTP))
			ts.srv.Listener = wrapListener{Listener: ts.srv.Listener, wrap: func(c net.Conn) net.Conn { return tt.wrap(c, &wrote) }}
			ts.srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
				switch w := c.(type) { // the socket itself, as httpapi hands it
				case *wrapConn:
					c = w.Conn
				case *passConn:
					c = w.Conn
				}
				return ConnContext(ctx, c)
			}
			ts.srv.Start()
			t.Cleanup(func() { ts.hub.Close(); ts.srv.CloseClientConnections(); ts.srv.Close() })
			c := ts.mustOpen(ctx, "s", "1", []string{"t"}, 0)
			select {
			case <-ts.returned:
			case <-ctx.Done():
				t.Fatal("the handler never returned")
			}
			if got := ts.sub("s", "1").fast.Load() != nil; got != tt.fast {
				t.Fatalf("written directly: %v, want %v", got, tt.fast)
			}
			before := wrote.Load()
			ts.hub.Publish(Batch{Messages: []Message{bigMsg("t", 1, 4<<10)}})
			if err := c.expectSeqs(1); err != nil {
				t.Fatal(err)
			}
			through := wrote.Load() - before
			if tt.fast && through != 0 {
				t.Fatalf("%d bytes went through the wrapper, want none", through)
			}
			if !tt.fast && through < 4<<10 {
				t.Fatalf("%d bytes went through the wrapper, want the whole frame", through)
			}
		})
	}
}

package listen

import (
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

// ServeDetached is Serve for a handler that need not wait for the stream to
// end. Once the acknowledgement (opts.First) is on the wire it takes the
// connection from net/http (an HTTP/1.1 hijack) and returns: its frames then
// go out as chunks straight to the socket, written by the hub's pool writers
// while the socket takes them at once and by a small goroutine of its own
// otherwise (and for keep-alives and the final frame; see fastwrite.go), and
// the handler's goroutine, its request and net/http's
// per-connection buffers (about 10 KiB) are gone. A client that closes is
// noticed by the hub's close watcher rather than by a reader goroutine per
// connection. Every rule of Serve holds unchanged: queue bound, time bound,
// socket probe, write deadlines, keep-alives, graceful final frame. After a
// graceful end the chunked body is ended and the connection closed (it
// cannot go back to net/http); after a drop it is closed without the end.
//
// ended is called once with the reason the stream ended, on the stream's
// goroutine, or before ServeDetached returns when the stream could not be
// detached (HTTP/2, HTTP/1.0, a connection that is not a socket, a hub
// closing): it is then served in place, as Serve would.
func (s *Subscription) ServeDetached(w http.ResponseWriter, r *http.Request, opts ServeOptions, ended func(EndReason)) {
	if !s.served.CompareAndSwap(false, true) {
		panic("listen: Serve called twice for one Subscription")
	}
	if ended == nil {
		ended = func(EndReason) {}
	}
	rc := http.NewResponseController(w)
	s.setAbort(func() { _ = rc.SetWriteDeadline(time.Unix(1, 0)) })
	nc := connFrom(r.Context())
	fd := -1
	if detachable(r) {
		fd = sock.FD(nc)
	}
	var cw *sock.CloseWatch
	if fd >= 0 {
		cw = s.h.watcher()
	}
	if cw == nil || !s.h.detachAdd() {
		ended(s.serveInPlace(w, r, rc, opts))
		return
	}
	why, conn := s.serveHead(w, r, rc, opts, nc)
	if conn == nil {
		s.h.detached.wg.Done()
		s.setAbort(nil)
		s.afterServe(rc, why)
		ended(why)
		return
	}
	s.setAbort(func() { _ = conn.SetWriteDeadline(time.Unix(1, 0)) })
	if raw := plainSocket(conn); raw != nil && !s.h.cfg.NoFastWrite {
		s.fast.Store(&fastWriter{raw: sock.NewRawWriter(raw), tag: opts.Tag})
	}
	// The watcher ends the stream itself, so the stream waits on one
	// channel fewer.
	id := cw.Add(fd, func() { s.h.clientGone(s) })
	tag, final := opts.Tag, opts.Final // not opts.First: it is written
	go func() {
		defer s.h.detached.wg.Done()
		st := &stream{conn: conn, maxLag: s.h.cfg.MaxLag, tag: tag}
		why := s.loop(st, nil, nc, final)
		s.setAbort(nil)
		cw.Remove(id, fd)
		_ = conn.Close()
		ended(why)
	}()
}

// detachable reports whether r's response is an HTTP/1.1 chunked body we can
// go on writing ourselves after a hijack.
func detachable(r *http.Request) bool {
	return r.ProtoAtLeast(1, 1) && r.ProtoMajor == 1 && r.Method != http.MethodHead
}

// serveInPlace is Serve's body after the once-only check.
func (s *Subscription) serveInPlace(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, opts ServeOptions) EndReason {
	why := s.serve(w, r, rc, opts)
	s.setAbort(nil)
	s.afterServe(rc, why)
	return why
}

// afterServe leaves the connection as a stream served in place must: ready
// for another request after a graceful end, failing every write after a
// drop so net/http closes it.
func (s *Subscription) afterServe(rc *http.ResponseController, why EndReason) {
	if why.Graceful() || why == EndClientGone {
		// The connection may carry another request: no stale deadline.
		_ = rc.SetWriteDeadline(time.Time{})
	} else {
		// Dropped or abandoned: net/http's closing writes must fail too, so the
		// connection is closed rather than kept for a reader that is
		// not reading, and the client sees a broken stream.
		_ = rc.SetWriteDeadline(time.Unix(1, 0))
	}
}

// serveHead writes the headers and the first frame through net/http, then
// takes the connection. It returns the connection, or nil and the reason
// the stream ended (served in place when the hijack failed).
func (s *Subscription) serveHead(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, opts ServeOptions, nc net.Conn) (EndReason, net.Conn) {
	h := s.h
	hdr := w.Header()
	streamHeaders(hdr)
	// The connection is closed when the stream ends (it never goes back to
	// net/http), so the client must not pool it for another request: a
	// request sent on it just as it closes would be lost.
	hdr.Set("Connection", "close")
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: rc, maxLag: h.cfg.MaxLag, tag: opts.Tag}
	if !st.begin(s) {
		return s.reason, nil
	}
	st.write(opts.First)
	if st.end() != nil {
		return h.drop(s, EndWriteFailed), nil
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return s.loop(st, r.Context().Done(), nc, opts.Final), nil
	}
	return 0, conn
}

// PassThroughConn is implemented by a connection wrapper (a listener's
// accounting, say) whose Write hands its bytes unchanged to the connection
// PassThrough returns: no encryption, framing or buffering. The hub's pool
// writers may then write a detached stream's frames straight to that
// socket (fastwrite.go); without it, a wrapped connection's frames all go
// through its own Write, on the stream's goroutine. A wrapper that changes
// the bytes (TLS) must not implement it.
type PassThroughConn interface {
	net.Conn
	PassThrough() net.Conn
}

// plainSocket is the socket a detached stream's frames may be written to
// directly, past net.Conn: c itself when it is a TCP connection, or the
// one under wrappers that all pass writes through; nil otherwise.
func plainSocket(c net.Conn) syscall.RawConn {
	for range 8 { // a wrapper chain this long is a loop
		switch cc := c.(type) {
		case *net.TCPConn:
			raw, err := cc.SyscallConn()
			if err != nil {
				return nil
			}
			return raw
		case PassThroughConn:
			c = cc.PassThrough()
		default:
			return nil
		}
	}
	return nil
}

// detachedStreams are the streams ServeDetached runs on their own
// goroutine, which Close waits for (their final frames), as
// http.Server.Shutdown waits for handlers, and the close watcher that
// notices their clients leaving.
type detachedStreams struct {
	wg sync.WaitGroup
	// closing (under Hub.mu) is set once Close waits, so no stream is
	// added after.
	closing   bool
	watchOnce sync.Once
	watch     *sock.CloseWatch // nil until the first detach, or when unavailable
}

// detachAdd counts one more detached stream for Close to wait for; false
// once Close has started waiting.
func (h *Hub) detachAdd() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.detached.closing {
		return false
	}
	h.detached.wg.Add(1)
	return true
}

// detachClose is Close's wait for the detached streams' final frames; it
// then stops the close watcher.
func (h *Hub) detachClose() {
	h.mu.Lock()
	h.detached.closing = true
	h.mu.Unlock()
	h.detached.wg.Wait()
	d := &h.detached
	d.watchOnce.Do(func() {}) // no watcher starts after this; see one that did
	if d.watch != nil {
		d.watch.Stop()
	}
}

// watcher is the hub's close watcher, started on first use; nil when the
// platform has none, and streams are then served in place.
func (h *Hub) watcher() *sock.CloseWatch {
	d := &h.detached
	d.watchOnce.Do(func() { d.watch = sock.NewCloseWatch() })
	return d.watch
}

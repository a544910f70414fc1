package listen

import (
	"errors"
	"net"
	"net/http"
	"time"
)

// EndReason says why a stream ended, so the handler can log it and knows
// whether the client was told (graceful: it got the final frame) or must
// re-read the authority (dropped: it may have lost frames).
type EndReason uint8

const (
	_ EndReason = iota
	// EndCancelled: Hub.Cancel, for the client's notifications/cancelled.
	EndCancelled
	// EndSessionEnded: the session left or expired (Hub.EndSession or
	// Batch.EndSessions).
	EndSessionEnded
	// EndShutdown: Hub.Close.
	EndShutdown
	// EndClientGone: the client closed the response; nobody is left to tell.
	EndClientGone
	// EndUnsubscribed: Subscription.Close; the handler chose to abandon it.
	EndUnsubscribed
	// EndQueueFull: dropped because the stream fell QueueLen frames behind.
	EndQueueFull
	// EndLagging: dropped because its oldest undelivered frame was older
	// than MaxLag when the writer got to it, or because its peer
	// acknowledged nothing for MaxLag while our bytes waited in the socket.
	EndLagging
	// EndWriteFailed: dropped because a write or flush failed or missed its
	// MaxLag deadline; also returned when the final frame of a graceful end
	// could not be written.
	EndWriteFailed
)

// Graceful reports whether the stream's end carries the final frame, which
// tells the client it missed nothing.
func (r EndReason) Graceful() bool {
	return r == EndCancelled || r == EndSessionEnded || r == EndShutdown
}

// String names the reason for logs and metrics.
func (r EndReason) String() string {
	switch r {
	case EndCancelled:
		return "cancelled"
	case EndSessionEnded:
		return "session ended"
	case EndShutdown:
		return "shutdown"
	case EndClientGone:
		return "client gone"
	case EndUnsubscribed:
		return "unsubscribed"
	case EndQueueFull:
		return "queue full"
	case EndLagging:
		return "lagging"
	case EndWriteFailed:
		return "write failed"
	}
	return "unknown"
}

// ServeOptions carries what the front door encodes and the hub must not
// know about: the stream's own tag and the first and last frames.
type ServeOptions struct {
	// Tag is handed to Frame.AppendTo for every queued frame this stream
	// writes: what the door encoded once for this stream alone (for MCP, the
	// listen request id that goes into each frame's _meta). nil for none.
	Tag []byte
	// First is an encoded frame written and flushed before anything else
	// (the acknowledgement); nil for none.
	First []byte
	// Final is an encoded frame written only when the stream ends
	// gracefully, after every frame already queued; nil for none.
	Final []byte
}

// Serve is the stream's only writer: it writes the subscription as an SSE
// response until it ends and returns why. Call it once, from the handler
// goroutine, after Subscribe. Every wake-up writes all frames already queued
// before one flush, and every flush must finish within MaxLag (at least half
// of it: the deadline is renewed lazily), so a stream costs one syscall per
// burst and a stalled socket cannot hold a handler for long. A peer that
// stops reading while the kernel still takes our writes is caught by the
// socket probe (ConnContext) within about MaxLag. The hub is never locked
// while the network is written. These deadlines replace any write deadline
// the front door set for the request as a whole: a stream lives as long as
// it keeps up.
func (s *Subscription) Serve(w http.ResponseWriter, r *http.Request, opts ServeOptions) EndReason {
	if !s.served.CompareAndSwap(false, true) {
		panic("listen: Serve called twice for one Subscription")
	}
	rc := http.NewResponseController(w)
	s.setAbort(func() { _ = rc.SetWriteDeadline(time.Unix(1, 0)) })
	return s.serveInPlace(w, r, rc, opts)
}

func (s *Subscription) serve(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, opts ServeOptions) EndReason {
	h := s.h

	streamHeaders(w.Header())
	w.WriteHeader(http.StatusOK)

	st := &stream{w: w, rc: rc, maxLag: h.cfg.MaxLag, tag: opts.Tag}
	if !st.begin(s) {
		return s.reason
	}
	st.write(opts.First)
	if st.end() != nil {
		return h.drop(s, EndWriteFailed)
	}
	return s.loop(st, r.Context().Done(), connFrom(r.Context()), opts.Final)
}

// dropped reports whether the hub has already dropped s; a dropped stream
// gets no more writes.
func (s *Subscription) dropped() bool {
	select {
	case <-s.done:
		return !s.reason.Graceful()
	default:
		return false
	}
}

// writeChunk bounds the bytes buffered before they are handed to the
// ResponseWriter, so a burst of large frames does not grow the buffer without
// limit; the single flush still comes only at the end of the burst.
const writeChunk = 64 << 10

// stream is the per-Serve write state: one reusable buffer, the stream's
// tag, and the first error of the current burst.
type stream struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// conn, when set, is the stream's own connection, taken from net/http
	// after the headers (ServeDetached): frames go out as HTTP/1.1 chunks
	// written straight to it, one write per burst, and buf starts with
	// chunkHead bytes kept free for the chunk's size line.
	conn   net.Conn
	last   bool // the burst being written is the stream's last: end the chunked body
	maxLag time.Duration
	tag    []byte
	buf    []byte
	err    error
	// deadline is the write deadline last set. It is left in place between
	// bursts and renewed only when less than half of MaxLag remains, so a
	// busy stream pays for one deadline change every MaxLag/2 instead of
	// two per burst; an idle stream's lapsed deadline harms nothing, since
	// the next burst renews it before writing.
	deadline time.Time
	began    time.Time // when the current burst began
	nframes  int       // queued frames in the current burst
}

// begin makes sure the write deadline is at least MaxLag/2 away, then
// reports whether s may still be written. The order matters: a drop that
// aborts the write deadline after this check cannot be overwritten by the
// deadline set here, and a drop before it is caught by the check.
func (st *stream) begin(s *Subscription) bool {
	st.err = nil
	st.nframes = 0
	if st.conn != nil && len(st.buf) < chunkHead {
		st.buf = append(st.buf[:0], make([]byte, chunkHead)...)
	}
	now := time.Now()
	st.began = now
	if st.deadline.Sub(now) < st.maxLag/2 {
		st.deadline = now.Add(st.maxLag)
		var err error
		if st.conn != nil {
			err = st.conn.SetWriteDeadline(st.deadline)
		} else {
			err = st.rc.SetWriteDeadline(st.deadline)
		}
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			st.err = err
		}
	}
	return !s.dropped()
}

func (st *stream) frame(f *queued) {
	st.nframes++
	st.buf = f.AppendTo(st.buf, st.tag)
	if st.pending() >= writeChunk {
		st.out()
	}
}

// carry writes, first in the burst, the bytes of a frame a fast write left
// over (socketGate.takeCarry, under the gate): a frame the kernel took in
// part is completed before anything else goes on the socket.
func (st *stream) carry(b []byte, frames int) {
	if b == nil {
		return
	}
	if st.err == nil {
		_, st.err = st.conn.Write(b)
	}
	st.nframes += frames
}

func (st *stream) write(b []byte) {
	st.buf = append(st.buf, b...)
	if st.pending() >= writeChunk {
		st.out()
	}
}

// pending is how many bytes of frames wait in buf.
func (st *stream) pending() int {
	if st.conn != nil {
		return len(st.buf) - chunkHead
	}
	return len(st.buf)
}

// frames appends a burst of queued frames, stopping at the first error.
func (st *stream) frames(fs []*queued) {
	for _, f := range fs {
		if st.err != nil {
			return
		}
		st.frame(f)
	}
}

func (st *stream) out() {
	if st.conn != nil {
		st.outChunk(false)
		return
	}
	if st.err == nil && len(st.buf) > 0 {
		_, st.err = st.w.Write(st.buf)
	}
	st.buf = st.buf[:0]
}

// chunkHead is the room kept at the start of a detached stream's buffer for
// a chunk's size line: up to eight hex digits and CRLF (a chunk is at most
// writeChunk plus one frame, far below 4 GiB).
const chunkHead = 10

// lastChunk ends a chunked body.
const lastChunk = "0\r\n\r\n"

// outChunk writes buf as one HTTP/1.1 chunk, and the last chunk after it
// when final, in one write.
func (st *stream) outChunk(final bool) {
	n := len(st.buf) - chunkHead
	if st.err == nil && (n > 0 || final) {
		start := chunkHead
		if n > 0 {
			start = putChunkSize(st.buf)
			st.buf = append(st.buf, '\r', '\n')
		}
		if final {
			st.buf = append(st.buf, lastChunk...)
		}
		_, st.err = st.conn.Write(st.buf[start:])
	}
	st.buf = st.buf[:chunkHead]
}

// end writes what is buffered and flushes once (a detached stream's write
// is its flush).
func (st *stream) end() error {
	if st.conn != nil {
		st.outChunk(st.last)
	} else {
		st.out()
		if st.err == nil {
			if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				st.err = err
			}
		}
	}
	if cap(st.buf) > 4*writeChunk {
		st.buf = nil
	}
	return st.err
}

// streamHeaders are an event stream's response headers: never cached,
// never buffered by a proxy.
func streamHeaders(hdr http.Header) {
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
}

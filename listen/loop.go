package listen

import (
	"net"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

// loop writes queued frames, keep-alives and the final frame until the
// stream ends; gone closes when the client goes away (nil when someone
// else ends s as EndClientGone), and conn is the socket to probe (nil for
// none). It waits on three channels and hands each event to its own
// method: the timer (keep-alive and socket probe), a wake-up (frames
// queued, or bytes a fast write left), and the end (the final frame).
func (s *Subscription) loop(st *stream, gone <-chan struct{}, conn net.Conn, final []byte) EndReason {
	l := streamLoop{s: s, h: s.h, gate: s.gate(), final: final,
		watch: stallWatch{probe: sock.NewProbe(conn), dirty: true}, lastWrite: time.Now()}
	if l.watch.probe != nil {
		l.nextProbe = l.lastWrite.Add(l.h.cfg.ProbeEvery)
	}
	// One timer per stream serves both the keep-alive and the socket probe,
	// so the stream waits on three channels (fewer to lock on every
	// wake-up, which showed in the profile at a thousand streams). It is not
	// reset per burst (a timer change per frame per stream adds up at ten
	// thousand streams): when it fires, it looks at how long the stream has
	// really been quiet and waits out the rest. The probe runs on a fixed
	// cadence, never per frame: at ten thousand streams two extra syscalls
	// per write would cost more than the writes.
	tm := time.NewTimer(l.due())
	defer tm.Stop()
	for {
		select {
		case <-tm.C:
			if why, over := l.onTimer(st); over {
				return why
			}
			tm.Reset(l.due())
		case <-s.q.wake:
			if why, over := l.onWake(st); over {
				return why
			}
		case <-s.done:
			return l.onDone(st)
		case <-gone:
			return l.h.clientGone(s)
		}
	}
}

// streamLoop is what a stream's writer keeps between events. The stream's
// write state (stream) is passed to each event instead of kept here, so it
// stays on the writer's stack.
type streamLoop struct {
	s     *Subscription
	h     *Hub
	gate  socketGate
	final []byte
	watch stallWatch
	// lastWrite is when the stream last put bytes on the wire (its own
	// writes; fast writes are folded in by the timer), nextProbe when the
	// socket is sampled next.
	lastWrite, nextProbe time.Time
}

// due is how long until the timer must fire: the keep-alive or the next
// sample, whichever comes first.
func (l *streamLoop) due() time.Duration {
	next := l.lastWrite.Add(l.h.cfg.KeepAlive)
	if l.watch.probe != nil && l.nextProbe.Before(next) {
		next = l.nextProbe
	}
	return time.Until(next)
}

// onTimer counts the pool writers' writes as the stream's own, samples the
// socket when a sample is due (a stalled peer is dropped), and writes a
// keep-alive to a stream quiet for KeepAlive. over means the stream ended,
// for why.
func (l *streamLoop) onTimer(st *stream) (why EndReason, over bool) {
	h := l.h
	l.lastWrite = l.gate.lastAfter(l.lastWrite)
	if l.gate.wroteFast() {
		l.watch.dirty = true
	}
	if l.watch.probe != nil && !time.Now().Before(l.nextProbe) {
		stalled := l.watch.check(h.cfg.Now().UnixNano(), int64(h.cfg.MaxLag))
		if h.hooks.afterProbe != nil {
			h.hooks.afterProbe(l.s, l.watch.watching)
		}
		if stalled {
			return h.drop(l.s, EndLagging), true
		}
		if l.nextProbe = l.nextProbe.Add(h.cfg.ProbeEvery); !l.nextProbe.After(time.Now()) {
			l.nextProbe = time.Now().Add(h.cfg.ProbeEvery) // a late wake-up skips samples, as a ticker does
		}
	}
	if time.Since(l.lastWrite) >= h.cfg.KeepAlive {
		return l.keepAlive(st)
	}
	return 0, false
}

// keepAlive writes the SSE comment, unless a fast write came in between:
// quiet means quiet.
func (l *streamLoop) keepAlive(st *stream) (why EndReason, over bool) {
	s := l.s
	l.gate.hold()
	if l.lastWrite = l.gate.lastAfter(l.lastWrite); time.Since(l.lastWrite) < l.h.cfg.KeepAlive {
		l.gate.release()
		return 0, false
	}
	if !st.begin(s) {
		l.gate.release()
		return s.reason, true
	}
	st.carry(l.gate.takeCarry())
	st.write([]byte(keepAlive))
	err := st.end()
	l.gate.release()
	if err != nil {
		return l.h.drop(s, EndWriteFailed), true
	}
	l.watch.dirty = true
	l.lastWrite = st.began
	return 0, false
}

// onWake writes every frame queued, after what a fast write left over, in
// one burst and one flush. A stream whose oldest queued frame is older than
// MaxLag is dropped instead.
func (l *streamLoop) onWake(st *stream) (why EndReason, over bool) {
	s, h := l.s, l.h
	l.gate.hold()
	carried := l.gate.hasCarry()
	fs := s.q.take()
	if len(fs) == 0 && !carried {
		l.gate.release()
		return 0, false // a stale token: these frames went out already
	}
	if len(fs) > 0 && h.cfg.Now().UnixNano()-fs[0].at > int64(h.cfg.MaxLag) {
		l.gate.release()
		return h.drop(s, EndLagging), true
	}
	if !st.begin(s) {
		l.gate.release()
		return s.reason, true
	}
	st.carry(l.gate.takeCarry())
	st.frames(fs)
	s.q.release(fs)
	err := st.end()
	l.gate.release()
	if err != nil {
		return h.drop(s, EndWriteFailed), true
	}
	l.watch.dirty = true
	l.lastWrite = st.began
	if h.hooks.afterWrite != nil {
		h.hooks.afterWrite(s, st.nframes)
	}
	return 0, false
}

// onDone ends the stream: after a graceful end, with everything still
// queued and the final frame; after a drop, with nothing.
func (l *streamLoop) onDone(st *stream) EndReason {
	s := l.s
	// Waits out a fast write in flight; none starts after the end.
	l.gate.hold()
	defer l.gate.release()
	if !st.begin(s) {
		return s.reason
	}
	// Ended gracefully: nothing more can be queued, so what is in
	// the queue is everything the client is owed before Final.
	st.carry(l.gate.takeCarry())
	fs := s.q.take()
	st.frames(fs)
	s.q.release(fs)
	st.write(l.final)
	st.last = true
	if st.end() != nil {
		return l.h.drop(s, EndWriteFailed)
	}
	return s.reason
}

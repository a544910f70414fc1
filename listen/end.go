package listen

import "sync/atomic"

// How a stream ends. Every end goes through endLocked, which unregisters
// the stream, tells its writer why and counts it. A drop (the stream could
// not keep up; doc.go lists the triggers) goes through drop, which adds
// the log line and, when the broadcaster noticed, fails a write the
// stream's writer may be blocked in.

// endLocked removes s from every index and tells its stream why it ended.
// The first reason wins; it reports whether this call was the one that ended s.
func (h *Hub) endLocked(s *Subscription, why EndReason) bool {
	if s.endedLocked() {
		return false
	}
	s.reason = why
	if s.timer != nil {
		s.timer.Stop()
	}
	s.q.close()
	h.removeLocked(s)
	close(s.done)
	h.count(why)
	return true
}

// drop ends s without its final frame because it could not keep up: the
// one function every drop trigger calls, with its reason (EndQueueFull,
// EndLagging or EndWriteFailed). It returns the reason the stream's writer
// reports: an earlier end wins, except that a graceful end whose final frame
// could not be written is reported as why.
func (h *Hub) drop(s *Subscription, why EndReason) EndReason {
	won, reported := h.endFromStream(s, why)
	if !won {
		return reported
	}
	h.cfg.Logger.Warn("listen: subscriber dropped", "session", s.session, "reason", why.String(), "queue_len", s.q.max)
	if why == EndQueueFull {
		// The broadcaster noticed, not the stream's writer, which may be
		// blocked in a write: fail it now, off the broadcaster, since on
		// some transports (HTTP/2) aborting a write has to talk to the
		// connection's own goroutine.
		h.aborts.Go(s.abortWrite)
	}
	return why
}

// clientGone ends s because its client went away (the request's context,
// or the close watcher): nobody is left to tell, and it is no drop.
func (h *Hub) clientGone(s *Subscription) EndReason {
	_, reported := h.endFromStream(s, EndClientGone)
	return reported
}

// endFromStream ends s for why unless it has ended already, and says what
// the stream's writer reports. drop, clientGone and
// Subscription.Close end through it; the graceful ends call endLocked.
func (h *Hub) endFromStream(s *Subscription, why EndReason) (won bool, reported EndReason) {
	h.mu.Lock()
	won = h.endLocked(s, why)
	prior := s.reason
	h.mu.Unlock()
	if won || prior.Graceful() {
		return won, why // a graceful end's final frame never went out
	}
	return false, prior
}

// counters are what Stats reports of the hub's traffic and ends.
type counters struct {
	published, delivered     atomic.Uint64
	droppedFull, droppedSlow atomic.Uint64
	ended, disconnected      atomic.Uint64
	malformedParams          atomic.Uint64
}

// count adds one end to the counter of its reason.
func (c *counters) count(why EndReason) {
	switch why {
	case EndCancelled, EndSessionEnded, EndShutdown:
		c.ended.Add(1)
	case EndQueueFull:
		c.droppedFull.Add(1)
	case EndLagging, EndWriteFailed:
		c.droppedSlow.Add(1)
	default: // EndClientGone, EndUnsubscribed
		c.disconnected.Add(1)
	}
}

func (c *counters) stats() Stats {
	full, slow := c.droppedFull.Load(), c.droppedSlow.Load()
	return Stats{
		Published:        c.published.Load(),
		Delivered:        c.delivered.Load(),
		Dropped:          full + slow,
		DroppedQueueFull: full,
		DroppedSlow:      slow,
		Ended:            c.ended.Load(),
		Disconnected:     c.disconnected.Load(),
		Malformed:        c.malformedParams.Load(),
	}
}

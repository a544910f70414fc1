package listen

import "time"

// untilReached is a stream's Until timer: it ends the stream once the
// hub's clock has reached Until. The timer runs on the runtime clock, so
// when Config.Now is behind it (an injected clock) it waits again for what
// is left.
func (h *Hub) untilReached(s *Subscription) {
	h.mu.Lock()
	if s.endedLocked() || s.expiring {
		h.mu.Unlock()
		return
	}
	if left := s.until - h.cfg.Now().UnixNano(); left > 0 {
		s.timer.Reset(time.Duration(left))
		h.mu.Unlock()
		return
	}
	s.expiring = true
	h.mu.Unlock()
	h.in.put(pendingBatch{expire: []*Subscription{s}}) // after Close, Close ends it
}

// admitsLocked is the per-stream check of a message about to be offered
// to s, for streams with a Filter or an Until; at is the hub's clock. A
// stream whose Until has passed gets nothing more and is queued for its
// end (Hub.expiring), behind the frames it already has.
func (h *Hub) admitsLocked(s *Subscription, m *Message, at int64) bool {
	if s.until != 0 {
		if s.expiring {
			return false
		}
		if at >= s.until {
			s.expiring = true
			h.expiring = append(h.expiring, s)
			return false
		}
	}
	return s.filter == nil || s.filter(*m)
}

// endExpiring queues the ends of the streams the last lookup found past
// their Until, behind everything published before; the broadcaster calls
// it with the hub unlocked.
func (h *Hub) endExpiring() {
	if len(h.expiring) == 0 {
		return
	}
	h.in.put(pendingBatch{expire: h.expiring})
	h.expiring = nil
}

package listen

import "testing"

// Each way a stream ends lands in exactly one counter of Stats, and only
// the drops add to Dropped: the list in doc.go's "Expected subscriber
// behavior", pinned.
func TestEachEndReasonHasItsCounter(t *testing.T) {
	tests := []struct {
		name string
		why  EndReason
		want Stats
	}{
		{"a full queue is a queue-full drop", EndQueueFull, Stats{Dropped: 1, DroppedQueueFull: 1}},
		{"lagging is a slow drop", EndLagging, Stats{Dropped: 1, DroppedSlow: 1}},
		{"a failed write is a slow drop", EndWriteFailed, Stats{Dropped: 1, DroppedSlow: 1}},
		{"a cancel is a graceful end", EndCancelled, Stats{Ended: 1}},
		{"a session end is a graceful end", EndSessionEnded, Stats{Ended: 1}},
		{"a shutdown is a graceful end", EndShutdown, Stats{Ended: 1}},
		{"a client gone is a disconnect", EndClientGone, Stats{Disconnected: 1}},
		{"an abandoned stream is a disconnect", EndUnsubscribed, Stats{Disconnected: 1}},
	}
	// A reason added later must get a row: without one it would fall to
	// count's default unnoticed.
	listed := map[EndReason]bool{}
	for _, tt := range tests {
		listed[tt.why] = true
	}
	for why := EndCancelled; why <= EndWriteFailed; why++ {
		if !listed[why] {
			t.Errorf("%v has no row", why)
		}
	}
	if EndReason(EndWriteFailed+1).String() != "unknown" {
		t.Errorf("a reason after EndWriteFailed exists: extend this table and the loop above")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c counters
			c.count(tt.why)
			if got := c.stats(); got != tt.want {
				t.Fatalf("after one %v: %+v, want %+v", tt.why, got, tt.want)
			}
		})
	}
}

// A drop reported by the stream's writer after another end keeps the
// first reason and counts nothing more; after a graceful end (the final
// frame failed) it reports the failure, still counting nothing.
func TestDropAfterAnEndKeepsTheFirst(t *testing.T) {
	tests := []struct {
		name  string
		first func(h *Hub, s *Subscription)
		want  EndReason
		stats Stats
	}{
		{"after an abandon the abandon stands", func(_ *Hub, s *Subscription) { s.Close() }, EndUnsubscribed,
			Stats{Disconnected: 1}},
		{"after a client left the client gone stands", func(h *Hub, s *Subscription) { h.clientGone(s) }, EndClientGone,
			Stats{Disconnected: 1}},
		{"after a graceful end the failed final frame is reported", func(h *Hub, s *Subscription) {
			h.mu.Lock()
			h.endLocked(s, EndCancelled)
			h.mu.Unlock()
		}, EndWriteFailed, Stats{Ended: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(Config{})
			defer h.Close()
			s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
			tt.first(h, s)
			if got := h.drop(s, EndWriteFailed); got != tt.want {
				t.Fatalf("drop reported %v, want %v", got, tt.want)
			}
			st := h.Stats()
			st.Published, st.Delivered = 0, 0
			if st != tt.stats {
				t.Fatalf("stats %+v, want %+v", st, tt.stats)
			}
		})
	}
}

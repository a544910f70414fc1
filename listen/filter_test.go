package listen

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// seqOf reads the test seq of a published message, for filters.
func seqOf(m Message) int {
	c, ok := m.Change.(testChange)
	if !ok {
		return -1
	}
	var r rpcBody
	if err := json.Unmarshal(c.params, &r); err != nil || r.Seq == nil {
		return -1
	}
	return *r.Seq
}

// A stream's Filter decides, per message, whether that stream is offered
// the frame everyone on the topic shares: the door's visibility rule
// without the hub knowing what a message means.
func TestFilterDecidesPerStream(t *testing.T) {
	odd := func(m Message) bool { return seqOf(m)%2 == 1 }
	none := func(Message) bool { return false }
	tests := []struct {
		name   string
		filter func(Message) bool
		want   []int
	}{
		{"a stream without a filter gets every message", nil, []int{1, 2, 3, 4}},
		{"a filtered stream gets only what its filter admits, in order", odd, []int{1, 3}},
		{"a filter that admits nothing gets nothing", none, nil},
	}
	w := newBatchWaiter()
	var encodes atomic.Int64
	h := newHub(Config{Encode: func(m Message) (Frame, bool) { encodes.Add(1); return testEncode(m) }},
		hooks{afterBatch: w.hook})
	defer h.Close()
	subs := make([]*Subscription, len(tests))
	for i, tt := range tests {
		subs[i] = mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}, Filter: tt.filter})
	}
	h.Publish(Batch{Messages: []Message{msg("t", 1), msg("t", 2)}})
	h.Publish(Batch{Messages: []Message{msg("t", 3), msg("t", 4)}})
	w.waitFor(2)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queuedSeqs(t, subs[i]); !slices.Equal(got, tt.want) {
				t.Fatalf("queued %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("each message is still encoded once, and only frames offered count as delivered", func(t *testing.T) {
		if n := encodes.Load(); n != 4 {
			t.Errorf("encoded %d times for 4 messages", n)
		}
		if st := h.Stats(); st.Delivered != 4+2 || st.Dropped != 0 {
			t.Errorf("stats %+v, want 6 delivered and no drop", st)
		}
	})
}

// manualClock is an injected clock for Config.Now.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// SubscribeRequest.Until, on the hub's clock: nothing fanned out at or
// after it reaches the stream, which ends gracefully after what it had.
func TestUntilEndsTheStreamOnTheHubsClock(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration // before the second batch
		want    []int
		ended   bool
	}{
		{"a batch fanned out a millisecond before Until is delivered", time.Hour - time.Millisecond, []int{1, 2}, false},
		{"a batch fanned out at Until is withheld and the stream ends gracefully", time.Hour, []int{1}, true},
		{"a batch fanned out after Until is withheld too", 2 * time.Hour, []int{1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := &manualClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
			h := NewHub(Config{Encode: testEncode, Now: clock.Now})
			defer h.Close()
			s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}, Until: clock.Now().Add(time.Hour)})
			other := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
			h.Publish(Batch{Messages: []Message{msg("t", 1)}})
			settle(t, h)
			clock.Advance(tt.advance)
			h.Publish(Batch{Messages: []Message{msg("t", 2)}})
			settle(t, h)
			if tt.ended {
				// The end is queued by the broadcaster once it has fanned the
				// batch out, which can be after a settle published meanwhile:
				// wait for the end itself (bounded), never for its absence.
				select {
				case <-s.done:
				case <-time.After(10 * time.Second):
					t.Fatal("the stream is still open 10 s after a batch found it past its Until")
				}
				if s.reason != EndSessionEnded || !s.reason.Graceful() {
					t.Fatalf("ended with %v, want a graceful session end", s.reason)
				}
			} else {
				settle(t, h) // an end, had one been queued, would be behind the batch that found it
				select {
				case <-s.done:
					t.Fatalf("the stream ended (%v) before its Until", s.reason)
				default:
				}
			}
			if got := queuedSeqs(t, s); !slices.Equal(got, tt.want) {
				t.Fatalf("the stream was given %v, want %v", got, tt.want)
			}
			if got := queuedSeqs(t, other); !slices.Equal(got, []int{1, 2}) {
				t.Fatalf("a stream without Until was given %v, want [1 2]", got)
			}
		})
	}
}

// A quiet stream ends at its Until by its timer, with no batch to notice
// it; a timer that fires while the injected clock is still behind waits
// for what is left; a stream that ends otherwise leaves no timer armed.
func TestUntilTimerEndsAQuietStream(t *testing.T) {
	for _, tc := range []struct {
		name     string
		injected bool          // Config.Now is a manual clock, else the runtime's
		before   time.Duration // slept before the first look: not ended yet
		advance  time.Duration // the manual clock moves on
		after    time.Duration // slept before the second look: ended
	}{
		{"on the runtime clock the stream ends at Until and not a millisecond before", false, time.Hour - time.Millisecond, 0, time.Millisecond},
		{"an injected clock that is behind the timer makes it wait again", true, time.Hour, time.Hour, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := Config{Encode: testEncode}
				clock := &manualClock{now: time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)}
				if tc.injected {
					cfg.Now = clock.Now
				} else {
					clock.now = time.Now()
				}
				h := NewHub(cfg)
				defer h.Close()
				s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}, Until: clock.Now().Add(time.Hour)})
				time.Sleep(tc.before)
				synctest.Wait()
				if isDone(s) {
					t.Fatal("ended before the hub's clock reached its Until")
				}
				clock.Advance(tc.advance)
				time.Sleep(tc.after)
				synctest.Wait()
				if !isDone(s) || s.reason != EndSessionEnded {
					t.Fatalf("not ended gracefully once the hub's clock reached its Until (done %v, reason %v)", isDone(s), s.reason)
				}
			})
		})
	}
	t.Run("a stream that ends otherwise stops its timer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := NewHub(Config{Encode: testEncode})
			defer h.Close()
			s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Topics: []string{"t"}, Until: time.Now().Add(time.Hour)})
			h.EndSession("a")
			synctest.Wait()
			if !isDone(s) {
				t.Fatal("EndSession did not end it")
			}
			if s.timer.Stop() {
				t.Fatal("the Until timer is still armed after the stream ended")
			}
		})
	})
}

func isDone(s *Subscription) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

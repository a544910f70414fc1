package listen

import (
	"slices"
	"sync"
	"testing"
)

// endLog records what OnSessionEnd reports, with whether the session's
// stream had already ended when the hook ran.
type endLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *endLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *endLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// OnSessionEnd lets state kept beside the hub per session (the legacy
// resource subscriptions) follow the room's session ends.
func TestOnSessionEnd(t *testing.T) {
	tests := []struct {
		name    string
		publish func(h *Hub)
		want    []string
	}{
		{"a batch's EndSessions are reported once each, in order", func(h *Hub) {
			h.Publish(Batch{Messages: []Message{msg("t", 1)}, EndSessions: []string{"a", "b"}})
		}, []string{"a", "b"}},
		{"EndSession is reported like a batch", func(h *Hub) { h.EndSession("a") }, []string{"a"}},
		{"a batch without session ends reports nothing", func(h *Hub) {
			h.Publish(Batch{Messages: []Message{msg("t", 1)}})
		}, nil},
		{"an empty session ref is never reported", func(h *Hub) {
			h.Publish(Batch{EndSessions: []string{""}})
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(Config{Encode: testEncode})
			defer h.Close()
			var log1, log2 endLog
			var streamEndedFirst []bool
			s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Topics: []string{"t"}})
			h.OnSessionEnd(func(sess string) {
				log1.add(sess)
				if sess == "a" {
					h.mu.Lock()
					streamEndedFirst = append(streamEndedFirst, s.endedLocked())
					h.mu.Unlock()
				}
			})
			h.OnSessionEnd(log2.add)
			h.OnSessionEnd(nil) // ignored
			tt.publish(h)
			settle(t, h)
			if got := log1.got(); !slices.Equal(got, tt.want) {
				t.Fatalf("first hook saw %q, want %q", got, tt.want)
			}
			if got := log2.got(); !slices.Equal(got, tt.want) {
				t.Fatalf("second hook saw %q, want %q", got, tt.want)
			}
			for _, ended := range streamEndedFirst {
				if !ended {
					t.Fatal("the hook ran before the session's stream had ended")
				}
			}
		})
	}
}

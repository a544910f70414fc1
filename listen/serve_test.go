package listen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// served runs Serve on a fake writer inside the current synctest bubble and
// returns a channel that yields its EndReason.
func served(s *Subscription, fw *fakeWriter, ctx context.Context, id string) <-chan EndReason {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(ctx)
	opts := ServeOptions{
		Tag:   testTag(id),
		First: testFrameBytes(ackMethod, `{}`, id),
		Final: testData(`{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete"}}`),
	}
	done := make(chan EndReason, 1)
	go func() { done <- s.Serve(fw, r, opts) }()
	return done
}

const (
	fakeAck   = `data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1}}}` + "\n\n"
	fakeFinal = `data: {"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}` + "\n\n"
)

func fakeFrame(seq string) string {
	return `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":1},"seq":` + seq + `}}` + "\n\n"
}

func TestKeepAliveOnQuietStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub(Config{Encode: testEncode, KeepAlive: 15 * time.Second})
		s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
		fw := newFakeWriter()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := served(s, fw, ctx, "1")
		count := func() int {
			synctest.Wait()
			out, _ := fw.output()
			return strings.Count(out, ": keepalive\n\n")
		}
		steps := []struct {
			name    string
			advance time.Duration
			publish bool
			want    int
		}{
			{"none before the period", 15*time.Second - time.Millisecond, false, 0},
			{"one after 15s quiet", time.Millisecond, false, 1},
			{"a frame at 20s", 5 * time.Second, true, 1},
			{"the frame restarts the period", 15*time.Second - time.Millisecond, false, 1},
			{"next one 15s after the frame", time.Millisecond, false, 2},
		}
		for _, st := range steps {
			<-time.After(st.advance) // fake time: only advances the bubble's clock
			if st.publish {
				h.Publish(Batch{Messages: []Message{msg("t", 1)}})
			}
			if got := count(); got != st.want {
				t.Fatalf("%s: %d keep-alives, want %d", st.name, got, st.want)
			}
		}
		if out, _ := fw.output(); !strings.HasPrefix(out, fakeAck+": keepalive\n\n"+fakeFrame("1")) {
			t.Fatalf("output %q", out)
		}
		h.Close()
		if r := <-done; r != EndShutdown {
			t.Fatalf("Serve returned %v", r)
		}
	})
}

// The writer is held mid-flush (as by a slow socket); the test's clock then
// jumps past or short of MaxLag before the writer gets to the queued frame.
func TestLagInTime(t *testing.T) {
	tests := []struct {
		name    string
		advance time.Duration
		want    EndReason
		frames  int
	}{
		{"frame older than MaxLag drops the stream", 10*time.Second + time.Millisecond, EndLagging, 0},
		{"frame within MaxLag is written", 10 * time.Second, EndShutdown, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var now atomic.Int64
				now.Store(time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC).UnixNano())
				h := NewHub(Config{Encode: testEncode, MaxLag: 10 * time.Second, Now: func() time.Time { return time.Unix(0, now.Load()) }})
				s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Topics: []string{"t"}})
				fw := newFakeWriter()
				fw.gate = make(chan struct{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := served(s, fw, ctx, "1")
				synctest.Wait() // Serve is blocked flushing the ack
				h.Publish(Batch{Messages: []Message{msg("t", 1)}})
				synctest.Wait() // the frame is queued, stamped with the injected clock
				now.Add(int64(tt.advance))
				fw.gate <- struct{}{} // the ack flush completes
				if tt.want == EndShutdown {
					fw.gate <- struct{}{} // the frame's flush
					h.Close()
					fw.gate <- struct{}{} // the final's flush
				}
				if r := <-done; r != tt.want {
					t.Fatalf("Serve returned %v, want %v", r, tt.want)
				}
				out, _ := fw.output()
				if got := strings.Count(out, `"seq":1`); got != tt.frames {
					t.Fatalf("%d frames written, want %d: %q", got, tt.frames, out)
				}
				st := h.Stats()
				if dropped := tt.want == EndLagging; dropped != (st.DroppedSlow == 1) || dropped == strings.Contains(out, fakeFinal) {
					t.Fatalf("stats %+v output %q", st, out)
				}
				h.Close()
			})
		})
	}
}

// Frames that queue up while the writer is busy go out in one flush, and a
// graceful end writes what is queued before the final frame.
func TestCoalescingAndGracefulEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := NewHub(Config{Encode: testEncode})
		defer h.Close()
		s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: "1", Topics: []string{"t"}})
		fw := newFakeWriter()
		fw.gate = make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := served(s, fw, ctx, "1")
		synctest.Wait()
		for i := 1; i <= 3; i++ {
			h.Publish(Batch{Messages: []Message{msg("t", i)}})
		}
		synctest.Wait()
		fw.gate <- struct{}{} // ack flushed; the writer takes all three frames
		synctest.Wait()       // and is now blocked in its second flush
		out, flushes := fw.output()
		if want := fakeAck + fakeFrame("1") + fakeFrame("2") + fakeFrame("3"); out != want || flushes != 1 {
			t.Fatalf("after one burst: %d flushes, output %q, want all three frames before the second flush", flushes, out)
		}
		h.Publish(Batch{Messages: []Message{msg("t", 4)}})
		synctest.Wait()
		if !h.Cancel("a", "1") {
			t.Fatal("Cancel found nothing")
		}
		close(fw.gate) // every flush from here on completes at once
		if r := <-done; r != EndCancelled {
			t.Fatalf("Serve returned %v", r)
		}
		out, _ = fw.output()
		if want := fakeAck + fakeFrame("1") + fakeFrame("2") + fakeFrame("3") + fakeFrame("4") + fakeFinal; out != want {
			t.Fatalf("output %q\nwant   %q", out, want)
		}
	})
}

func TestServeEnds(t *testing.T) {
	tests := []struct {
		name      string
		act       func(h *Hub, s *Subscription, cancel context.CancelFunc)
		want      EndReason
		wantOut   string
		wantStats func(Stats) bool
	}{
		{"cancel before Serve still sends ack and final", func(h *Hub, s *Subscription, _ context.CancelFunc) {
			h.Cancel("a", "1")
		}, EndCancelled, fakeAck + fakeFinal, func(st Stats) bool { return st.Ended == 1 }},
		{"drop before Serve sends no final", func(h *Hub, s *Subscription, _ context.CancelFunc) {
			h.Publish(Batch{Messages: []Message{msg("t", 1), msg("t", 2)}})
		}, EndQueueFull, "", func(st Stats) bool { return st.DroppedQueueFull == 1 }},
		{"client gone unregisters without final", func(h *Hub, s *Subscription, cancel context.CancelFunc) {
			cancel()
		}, EndClientGone, fakeAck, func(st Stats) bool { return st.Disconnected == 1 && st.Subscribers == 0 }},
		{"Subscription.Close ends without final", func(h *Hub, s *Subscription, _ context.CancelFunc) {
			s.Close()
		}, EndUnsubscribed, fakeAck, func(st Stats) bool { return st.Disconnected == 1 && st.Subscribers == 0 }},
		{"session end sends final", func(h *Hub, s *Subscription, _ context.CancelFunc) {
			h.EndSession("a")
		}, EndSessionEnded, fakeAck + fakeFinal, func(st Stats) bool { return st.Ended == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := NewHub(Config{Encode: testEncode})
				defer h.Close()
				s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: "1", Topics: []string{"t"}, QueueLen: 1})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				fw := newFakeWriter()
				var done <-chan EndReason
				if strings.Contains(tt.name, "before Serve") {
					tt.act(h, s, cancel)
					synctest.Wait()
					done = served(s, fw, ctx, "1")
				} else {
					done = served(s, fw, ctx, "1")
					synctest.Wait()
					tt.act(h, s, cancel)
				}
				if r := <-done; r != tt.want {
					t.Fatalf("Serve returned %v, want %v", r, tt.want)
				}
				if out, _ := fw.output(); out != tt.wantOut {
					t.Fatalf("output %q, want %q", out, tt.wantOut)
				}
				if fw.hdr.Get("Content-Type") != "text/event-stream" || fw.code != http.StatusOK {
					t.Fatalf("headers %v code %d", fw.hdr, fw.code)
				}
				if st := h.Stats(); !tt.wantStats(st) {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

package listen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// frameSeq decodes params.seq from a queued frame.
func frameSeq(t *testing.T, f *queued) int {
	t.Helper()
	b := f.AppendTo(nil, nil)
	var m rpc
	if err := json.Unmarshal(bytes.TrimSuffix(bytes.TrimPrefix(b, []byte("data: ")), []byte("\n\n")), &m); err != nil {
		t.Fatalf("frame %q: %v", b, err)
	}
	return m.seq()
}

// queuedSeqs empties s's queue without blocking and returns the seqs in order.
func queuedSeqs(t *testing.T, s *Subscription) []int {
	t.Helper()
	var out []int
	for _, f := range s.q.take() {
		out = append(out, frameSeq(t, f))
	}
	return out
}

// popFrame waits for s's next queued frame and takes it alone.
func popFrame(s *Subscription) *queued {
	for {
		s.q.mu.Lock()
		if len(s.q.items) > 0 {
			f := s.q.items[0]
			s.q.items = s.q.items[1:]
			s.q.mu.Unlock()
			return f
		}
		s.q.mu.Unlock()
		<-s.q.wake
	}
}

// batchWaiter lets a test wait for the broadcaster to finish a given batch.
type batchWaiter struct{ ch chan uint64 }

func newBatchWaiter() *batchWaiter { return &batchWaiter{ch: make(chan uint64, 1<<16)} }

func (w *batchWaiter) hook(seq uint64) { w.ch <- seq }

func (w *batchWaiter) waitFor(seq uint64) {
	for s := range w.ch {
		if s >= seq {
			return
		}
	}
}

// settle waits until the broadcaster has handled everything enqueued so far,
// by sending a marker through it: the queue is processed in order.
func settle(t *testing.T, h *Hub) {
	t.Helper()
	m := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"\x00settle"}})
	defer m.Close()
	h.Publish(Batch{Messages: []Message{msg("\x00settle", 0)}})
	popFrame(m)
}

func mustSubscribe(t *testing.T, h *Hub, req SubscribeRequest) *Subscription {
	t.Helper()
	s, err := h.Subscribe(req)
	if err != nil {
		t.Fatalf("Subscribe(%+v): %v", req, err)
	}
	return s
}

func TestSubscribeLimits(t *testing.T) {
	tests := []struct {
		name string
		max  int
		run  func(t *testing.T, h *Hub) error // returns the error of the last Subscribe
		want error
	}{
		{"fifth stream of a session is refused", 0, func(t *testing.T, h *Hub) error {
			for i := range 4 {
				mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: fmt.Sprint(i)})
			}
			mustSubscribe(t, h, SubscribeRequest{Session: "b", Key: "1"})
			_, err := h.Subscribe(SubscribeRequest{Session: "a", Key: "5"})
			return err
		}, ErrTooManyStreams},
		{"streams without a session are not counted", 0, func(t *testing.T, h *Hub) error {
			for range 10 {
				mustSubscribe(t, h, SubscribeRequest{Key: "1"})
			}
			return nil
		}, nil},
		{"negative limit means none", -1, func(t *testing.T, h *Hub) error {
			for i := range 10 {
				mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: fmt.Sprint(i)})
			}
			return nil
		}, nil},
		{"an ended stream frees its slot", 2, func(t *testing.T, h *Hub) error {
			mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: "1"})
			s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: "2"})
			if _, err := h.Subscribe(SubscribeRequest{Session: "a", Key: "3"}); !errors.Is(err, ErrTooManyStreams) {
				t.Fatalf("third stream: %v, want ErrTooManyStreams", err)
			}
			s.Close()
			_, err := h.Subscribe(SubscribeRequest{Session: "a", Key: "3"})
			return err
		}, nil},
		{"subscribe after close is refused", 0, func(t *testing.T, h *Hub) error {
			h.Close()
			_, err := h.Subscribe(SubscribeRequest{Session: "a"})
			return err
		}, ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(Config{Encode: testEncode, MaxStreamsPerSession: tt.max})
			defer h.Close()
			if err := tt.run(t, h); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDeliveryFollowsPublishOrder(t *testing.T) {
	const batches = 1000
	h := NewHub(Config{Encode: testEncode, QueueLen: 3 * batches})
	a := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
	both := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t", "u", "t"}})
	for i := range batches {
		h.Publish(Batch{Messages: []Message{msg("t", 3*i), msg("u", 3*i+1), msg("t", 3*i+2)}})
	}
	h.Close() // fans out everything already published first
	var wantA, wantBoth []int
	for i := range batches {
		wantA = append(wantA, 3*i, 3*i+2)
		wantBoth = append(wantBoth, 3*i, 3*i+1, 3*i+2)
	}
	if got := queuedSeqs(t, a); !slicesEqual(got, wantA) {
		t.Errorf("topic t subscriber got %d frames out of order or wrong", len(got))
	}
	if got := queuedSeqs(t, both); !slicesEqual(got, wantBoth) {
		t.Errorf("two-topic subscriber got %d frames out of order or wrong (duplicate topic must not duplicate frames)", len(got))
	}
	if st := h.Stats(); st.Published != 3*batches || st.Delivered != 5*batches {
		t.Errorf("stats %+v", st)
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A batch published before Subscribe returned is not delivered even if the
// broadcaster gets to it later; one published after is.
func TestRegistrationIsEffectiveWhenSubscribeReturns(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := newHub(Config{Encode: testEncode}, hooks{beforeBatch: func(seq uint64) {
		if seq == 1 {
			close(entered)
			<-release
		}
	}})
	h.Publish(Batch{Messages: []Message{msg("t", 1)}})
	<-entered // the broadcaster holds batch 1 but has not fanned it out
	s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
	h.Publish(Batch{Messages: []Message{msg("t", 2)}})
	close(release)
	h.Close()
	if got := queuedSeqs(t, s); !slicesEqual(got, []int{2}) {
		t.Fatalf("got seqs %v, want [2]", got)
	}
}

func TestPublishNeverBlocks(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name  string
		setup func(t *testing.T, h *Hub) (after func())
		check func(t *testing.T, st Stats)
	}{
		{"returns while the broadcaster cannot run", func(t *testing.T, h *Hub) func() {
			mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}, QueueLen: 1})
			h.mu.Lock() // the broadcaster needs this for every batch
			return h.mu.Unlock
		}, func(t *testing.T, st Stats) {
			if st.DroppedQueueFull != 1 {
				t.Errorf("stalled subscriber not dropped: %+v", st)
			}
		}},
		{"returns while every subscriber is stalled", func(t *testing.T, h *Hub) func() {
			for range 100 {
				mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}, QueueLen: 1})
			}
			return func() {}
		}, func(t *testing.T, st Stats) {
			if st.DroppedQueueFull != 100 || st.Delivered != 100 {
				t.Errorf("want each of 100 stalled subscribers dropped after one frame: %+v", st)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHub(Config{Encode: testEncode, MaxStreamsPerSession: -1})
			after := tt.setup(t, h)
			b := Batch{Messages: []Message{msg("t", 1)}}
			for range n {
				h.Publish(b)
			}
			after()
			h.Close()
			st := h.Stats()
			if st.Published != n || st.Pending != 0 {
				t.Errorf("published %d pending %d, want %d and 0", st.Published, st.Pending, n)
			}
			tt.check(t, st)
		})
	}
}

// 10,000 subscribers each on their own topic: a message reaches only its
// topic's subscriber (and the index makes that cheap; see the benchmarks).
func TestTopicIndexDeliversOnlyToMatching(t *testing.T) {
	const n = 10_000
	w := newBatchWaiter()
	h := newHub(Config{Encode: testEncode, MaxStreamsPerSession: -1}, hooks{afterBatch: w.hook})
	defer h.Close()
	subs := make([]*Subscription, n)
	for i := range subs {
		subs[i] = mustSubscribe(t, h, SubscribeRequest{Topics: []string{fmt.Sprintf("task:%d", i)}})
	}
	h.Publish(Batch{Messages: []Message{msg("task:5000", 1), msg("task:none", 2)}})
	w.waitFor(1)
	if st := h.Stats(); st.Delivered != 1 {
		t.Fatalf("delivered %d frames, want 1", st.Delivered)
	}
	for i, s := range subs {
		if got := s.q.len(); (i == 5000) != (got == 1) {
			t.Fatalf("subscriber %d has %d frames", i, got)
		}
	}
}

func TestBatchEndSessionsComeAfterItsMessages(t *testing.T) {
	h := NewHub(Config{Encode: testEncode})
	defer h.Close()
	a := mustSubscribe(t, h, SubscribeRequest{Session: "a", Topics: []string{"t"}})
	b := mustSubscribe(t, h, SubscribeRequest{Session: "b", Topics: []string{"t"}})
	h.Publish(Batch{Messages: []Message{msg("t", 1)}, EndSessions: []string{"a"}})
	<-a.done
	if a.reason != EndSessionEnded {
		t.Fatalf("reason %v", a.reason)
	}
	if got := queuedSeqs(t, a); !slicesEqual(got, []int{1}) {
		t.Fatalf("ended session's queue holds %v, want [1]", got)
	}
	select {
	case <-b.done:
		t.Fatal("other session ended too")
	default:
	}
}

// syncBuffer is an io.Writer safe for the hub's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestDropIsCountedAndLoggedOnce(t *testing.T) {
	var logs syncBuffer
	h := NewHub(Config{Encode: testEncode, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s := mustSubscribe(t, h, SubscribeRequest{Session: "ses_ref1", Key: "9", Topics: []string{"task:secret-topic"}, QueueLen: 1})
	for i := range 5 {
		h.Publish(Batch{Messages: []Message{msg("task:secret-topic", i)}})
	}
	h.Close()
	if s.reason != EndQueueFull {
		t.Fatalf("reason %v, want queue full", s.reason)
	}
	st := h.Stats()
	if st.Dropped != 1 || st.DroppedQueueFull != 1 || st.DroppedSlow != 0 || st.Ended != 0 || st.Subscribers != 0 {
		t.Fatalf("stats %+v", st)
	}
	out := logs.String()
	if n := strings.Count(out, "subscriber dropped"); n != 1 {
		t.Fatalf("%d drop log lines, want 1:\n%s", n, out)
	}
	for _, want := range []string{"level=WARN", "session=ses_ref1", `reason="queue full"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret-topic") {
		t.Errorf("log names the topic:\n%s", out)
	}
}

func TestMalformedChangeIsCountedAndSentAsTheStandIn(t *testing.T) {
	var logs syncBuffer
	h := NewHub(Config{Encode: testEncode, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
	h.Publish(Batch{Messages: []Message{{Topic: "t", Change: testChange{testMethod, json.RawMessage(`[1,2]`)}}}})
	h.Close()
	f := popFrame(s)
	if got, want := string(f.AppendTo(nil, nil)), `data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{}}`+"\n\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if st := h.Stats(); st.Malformed != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("malformed %d, logs %q", st.Malformed, logs.String())
	}
}

// TestChangeTheEncoderRefusesIsNotSent: a change with no frame at all (nil
// from the encoder, or a non-Frame with no encoder) is counted and skipped,
// and the stream goes on with the next one.
func TestChangeTheEncoderRefusesIsNotSent(t *testing.T) {
	h := NewHub(Config{Logger: slog.New(slog.DiscardHandler)})
	s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
	f, _ := newTestFrame(testMethod, json.RawMessage(`{"seq":2}`))
	h.Publish(Batch{Messages: []Message{{Topic: "t", Change: "not a frame"}, {Topic: "t", Change: f}}})
	h.Close()
	if s.q.len() != 1 {
		t.Fatalf("%d frames queued, want only the encodable one", s.q.len())
	}
	if got := frameSeq(t, popFrame(s)); got != 2 {
		t.Fatalf("queued seq %d, want 2", got)
	}
	if st := h.Stats(); st.Malformed != 1 || st.Delivered != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestEncodeOncePerMessage pins the fan-out's cost model: the encoder runs
// once per published message that has subscribers, however many there are,
// and never for a message nobody follows.
func TestEncodeOncePerMessage(t *testing.T) {
	var calls atomic.Int64
	h := NewHub(Config{MaxStreamsPerSession: -1, Encode: func(m Message) (Frame, bool) {
		calls.Add(1)
		return testEncode(m)
	}})
	subs := make([]*Subscription, 50)
	for i := range subs {
		subs[i] = mustSubscribe(t, h, SubscribeRequest{Topics: []string{"busy"}})
	}
	h.Publish(Batch{Messages: []Message{msg("busy", 1), msg("nobody", 2), msg("busy", 3)}})
	h.Close()
	if n := calls.Load(); n != 2 {
		t.Fatalf("encoder called %d times for 2 followed messages and 50 subscribers, want 2", n)
	}
	for i, s := range subs {
		if s.q.len() != 2 {
			t.Fatalf("subscriber %d has %d frames queued, want 2", i, s.q.len())
		}
	}
	if a, b := popFrame(subs[0]), popFrame(subs[1]); a.Frame != b.Frame {
		t.Fatal("subscribers of one message got different frames: encoded per subscriber")
	}
}

func TestCloseIsIdempotentAndStopsPublish(t *testing.T) {
	h := NewHub(Config{Encode: testEncode})
	s := mustSubscribe(t, h, SubscribeRequest{Topics: []string{"t"}})
	h.Close()
	h.Close()
	h.Publish(Batch{Messages: []Message{msg("t", 1)}})
	if st := h.Stats(); st.Published != 0 || st.Ended != 1 {
		t.Fatalf("stats after close %+v", st)
	}
	if s.q.len() != 0 || s.reason != EndShutdown {
		t.Fatalf("queue %d reason %v", s.q.len(), s.reason)
	}
}

func TestCancelMatchesSessionAndKey(t *testing.T) {
	h := NewHub(Config{Encode: testEncode})
	defer h.Close()
	a1 := mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: "1"})
	aStr := mustSubscribe(t, h, SubscribeRequest{Session: "a", Key: `"1"`})
	b1 := mustSubscribe(t, h, SubscribeRequest{Session: "b", Key: "1"})
	anon := mustSubscribe(t, h, SubscribeRequest{Key: "1"})
	tests := []struct {
		name           string
		session, key   string
		want           bool
		ended, running []*Subscription
	}{
		{"cancel with no session matches nothing", "", "1", false, nil, []*Subscription{a1, aStr, b1, anon}},
		{"unknown key matches nothing", "a", "2", false, nil, []*Subscription{a1, aStr, b1, anon}},
		{"matching session and key ends only that stream", "a", "1", true, []*Subscription{a1}, []*Subscription{aStr, b1, anon}},
		{"a second cancel finds nothing", "a", "1", false, nil, []*Subscription{aStr, b1, anon}},
		{"string and number ids differ", "a", `"1"`, true, []*Subscription{aStr}, []*Subscription{b1, anon}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.Cancel(tt.session, tt.key); got != tt.want {
				t.Fatalf("Cancel = %v, want %v", got, tt.want)
			}
			settle(t, h)
			for _, s := range tt.ended {
				<-s.done
				if s.reason != EndCancelled {
					t.Errorf("reason %v", s.reason)
				}
			}
			for _, s := range tt.running {
				select {
				case <-s.done:
					t.Errorf("stream %s/%s ended", s.session, s.key)
				default:
				}
			}
		})
	}
}

func TestSubscriptionCloseUnregisters(t *testing.T) {
	h := NewHub(Config{Encode: testEncode})
	defer h.Close()
	s := mustSubscribe(t, h, SubscribeRequest{Session: "a", Topics: []string{"t"}})
	s.Close()
	s.SetTopics([]string{"u"}) // ignored once ended
	h.Publish(Batch{Messages: []Message{msg("t", 1), msg("u", 2)}})
	h.Close()
	st := h.Stats()
	if st.Subscribers != 0 || st.Disconnected != 1 || st.Delivered != 0 || s.reason != EndUnsubscribed {
		t.Fatalf("stats %+v reason %v", st, s.reason)
	}
}

package listen

import (
	"sync"
	"time"
)

// Hub fans committed batches out to subscribers. It is three things, in
// this file's order: a registry of who listens to what (Subscribe, Cancel,
// EndSession, Close), a broadcaster goroutine that takes what Publish
// queued, and the offer of each frame to the queues of its topic's
// subscribers, dropping those that cannot take it (doc.go lists every way a
// subscriber is dropped). The room's writer must never wait on a subscriber,
// so Publish only appends to the hub's inbox. A detached stream whose socket
// is ready is written by the broadcaster's pool writers directly
// (fastwrite.go); otherwise each stream's writer (its handler, or its own
// goroutine once detached) does the network writes.
type Hub struct {
	cfg   Config
	hooks hooks

	in          inbox           // Publish's side: batches the broadcaster has not taken yet
	registry                    // who listens to what; its mu guards each Subscription's end
	broadcaster                 // the broadcaster goroutine's own state
	writerPool                  // the broadcaster's pool writers (fastwrite.go)
	detached    detachedStreams // streams on their own goroutine (detach.go)
	counters                    // what Stats reports (end.go)
	// endHooks are OnSessionEnd's functions (sessionend.go), under mu.
	endHooks []func(session string)
}

// broadcaster is the state of the hub's broadcaster goroutine: its runs and
// merges (merge.go), the streams its last lookup found past their Until
// (until.go), the aborts it started, and how Close stops it.
type broadcaster struct {
	merging
	expiring  []*Subscription
	aborts    sync.WaitGroup // abortWrite calls started for queue-full drops
	quit      chan struct{}  // closed by Close
	stopped   chan struct{}  // closed when the broadcaster has returned
	closeOnce sync.Once
}

// hooks let in-package tests and benchmarks observe or pause the broadcaster
// without sleeping. They are per hub, set before the broadcaster starts.
type hooks struct {
	beforeBatch func(seq uint64) // before a batch is fanned out
	afterBatch  func(seq uint64) // after a batch is fanned out and drops are logged
	// afterProbe runs in a stream's Serve after each socket sample, with
	// whether the sample found bytes waiting for the peer.
	afterProbe func(s *Subscription, watching bool)
	// afterWrite runs after a stream's burst of queued frames reached its
	// socket (written and flushed), with how many frames the burst held.
	afterWrite func(s *Subscription, frames int)
	// afterCarry runs on a pool writer when a fast write put only wrote of
	// a frame's of bytes on the socket and left the rest to the stream's
	// goroutine.
	afterCarry func(s *Subscription, wrote, of int)
}

// NewHub starts the hub's broadcaster goroutine, which runs until Close:
// every hub must be closed.
func NewHub(cfg Config) *Hub { return newHub(cfg, hooks{}) }

func newHub(cfg Config, hk hooks) *Hub {
	h := &Hub{
		cfg:      cfg.withDefaults(),
		hooks:    hk,
		in:       newInbox(),
		registry: newRegistry(),
		broadcaster: broadcaster{
			quit:    make(chan struct{}),
			stopped: make(chan struct{}),
		},
		writerPool: newWriterPool(writerCount()),
	}
	go h.run()
	return h
}

// The registry: who listens to what.

// Subscribe registers a stream. Registration is effective on return: every
// batch published afterwards is offered to it and no batch published before
// is, even one the broadcaster has not reached yet. So a snapshot read after
// Subscribe, plus the frames that follow, covers every commit at least once
// (twice only for one committed but not yet published), and never replays
// older ones.
func (h *Hub) Subscribe(req SubscribeRequest) (*Subscription, error) {
	s := h.newSubscription(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if s.session != "" && h.cfg.MaxStreamsPerSession > 0 && len(h.bySession[s.session]) >= h.cfg.MaxStreamsPerSession {
		return nil, ErrTooManyStreams
	}
	h.addLocked(s, h.in.seq.Load())
	if s.until != 0 {
		s.timer = time.AfterFunc(time.Duration(s.until-h.cfg.Now().UnixNano()), func() { h.untilReached(s) })
	}
	return s, nil
}

// Cancel ends the stream a notifications/cancelled names, gracefully. It
// matches on (session, key), never key alone, because request ids are only
// unique within one client; a session-less stream cannot be cancelled this
// way. It reports whether a live stream matched (all of them end if a client
// reused an id). The end is queued behind every batch already published,
// because the final frame promises the client it missed nothing; it takes
// effect as soon as the broadcaster gets there, without waiting.
func (h *Hub) Cancel(session, key string) bool {
	if session == "" {
		return false
	}
	var subs []*Subscription
	h.mu.Lock()
	for s := range h.bySession[session] {
		if s.key == key && !s.cancelling {
			s.cancelling = true
			subs = append(subs, s)
		}
	}
	h.mu.Unlock()
	if len(subs) == 0 {
		return false
	}
	h.in.put(pendingBatch{cancel: subs}) // after Close, Close ends them
	return true
}

// EndSession gracefully ends every stream of a session that left or expired.
// Like Cancel it is queued behind what was already published, so it is the
// same as publishing a Batch with only EndSessions.
func (h *Hub) EndSession(session string) {
	if session == "" {
		return
	}
	h.in.put(pendingBatch{b: Batch{EndSessions: []string{session}}})
}

// Close is the shutdown step "end streams gracefully": it refuses new
// subscriptions and further publishes, fans out what was already published
// (a graceful end promises the client it missed nothing), ends every stream
// gracefully and waits for the broadcaster to stop and for the streams
// ServeDetached runs to write their final frames (each within MaxLag). It
// does not wait for stream handlers serving in place; they return within
// MaxLag at worst.
func (h *Hub) Close() {
	h.closeOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		h.in.close()
		close(h.quit)
	})
	<-h.stopped
	h.detachClose()
}

// Stats is cheap enough for every metrics scrape: two short lock holds and
// atomic loads.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.all)
	h.mu.Unlock()
	st := h.counters.stats()
	st.Subscribers, st.Pending = n, h.in.len()
	return st
}

// The broadcaster: Publish's batches, in commit order, in runs.

// Publish hands one committed batch to the broadcaster without waiting for
// it, so a slow or stuck subscriber can never stall a commit. The hub keeps
// b's slices: the caller must not modify them afterwards. After Close it does
// nothing.
func (h *Hub) Publish(b Batch) {
	if len(b.Messages) == 0 && len(b.EndSessions) == 0 {
		return
	}
	if h.in.put(pendingBatch{b: b}) {
		h.published.Add(uint64(len(b.Messages)))
	}
}

// pendingBatch is one entry of the broadcaster's queue: a published batch,
// or graceful ends (Cancel, EndSession) that must come after everything
// published before them.
type pendingBatch struct {
	seq    uint64
	b      Batch
	cancel []*Subscription
	// expire are streams whose SubscribeRequest.Until has passed: ended
	// like cancel, with EndSessionEnded.
	expire []*Subscription
}

// ends reports whether the batch ends streams (EndSessions, Cancel).
func (pb *pendingBatch) ends() bool {
	return len(pb.b.EndSessions) > 0 || len(pb.cancel) > 0 || len(pb.expire) > 0
}

// run is the broadcaster: it sleeps until signalled, then drains every pending
// batch in one go.
func (h *Hub) run() {
	defer close(h.stopped)
	defer h.aborts.Wait()
	for {
		select {
		case <-h.in.signal:
			h.drain()
		case <-h.quit:
			h.drain()
			h.mu.Lock()
			for s := range h.all {
				h.endLocked(s, EndShutdown)
			}
			h.mu.Unlock()
			return
		}
	}
}

// maxRun bounds how many batches one run takes, at its start and by
// merges together.
const maxRun = 64

func (h *Hub) drain() {
	for {
		h.refill()
		if h.qhead == len(h.queue) {
			if cap(h.queue) > 4096 {
				h.queue = nil // do not keep a one-off backlog's memory forever
			}
			h.queue, h.qhead = h.queue[:0], 0
			if len(h.carry) == 0 {
				return
			}
		}
		// A run of batches that end nothing goes out together, so a
		// stream gets all of the run's frames in one write; a batch that
		// ends streams closes its run, since its ends must come after its
		// own frames and before the next batch's. Batches published while
		// the run is written may join it (merge.go).
		i, j := h.qhead, h.qhead
		for j < len(h.queue) && j-i < maxRun {
			j++
			if h.queue[j-1].ends() {
				break
			}
		}
		h.qhead = j
		h.deliver(h.queue[i:j])
		clear(h.queue[i:h.qhead]) // let the messages be collected, merged ones too
	}
}

// The offer: each frame to the queues of its topic's subscribers.

// deliver fans a run of batches out, in order; only the last may end
// streams. The run starts with the frames earlier runs left for the streams
// they had already written (Hub.carry), then this run's batches; while it
// is written, batches published meanwhile may join it (merge). Cost is
// proportional to the subscribers of the batches' topics, and each message
// is encoded once however many receive it. The hub is locked only to look
// the subscribers up and, after the frames are offered (fanOut, unlocked),
// to end streams: a stream whose queue was full is dropped first, and
// graceful ends come after every frame of their batch.
func (h *Hub) deliver(run []pendingBatch) {
	if h.hooks.beforeBatch != nil {
		for i := range run {
			h.hooks.beforeBatch(run[i].seq)
		}
	}
	at := h.cfg.Now().UnixNano()
	h.startRun(len(run), len(run) == 0 || !run[len(run)-1].ends())
	total := h.takeCarry()
	h.mu.Lock()
	total += h.lookupLocked(run, at)
	h.mu.Unlock()
	n, full := h.fanOut(total)
	for _, s := range full {
		h.drop(s, EndQueueFull)
	}
	h.endRun(run)
	h.delivered.Add(n)
	for _, bad := range h.malformed {
		h.malformedParams.Add(uint64(bad))
		h.cfg.Logger.Error("listen: published changes could not be encoded as given; sent as the encoder's stand-in", "messages", bad)
	}
	h.finishRun(run)
}

// offer gives s its frames of the run, in order, each once: written
// straight to its socket while nothing of s waits (fastwrite.go), queued
// otherwise. It returns how many frames were written or queued, and
// whether the queue was full, for which the caller drops s. now is the
// injected clock when the writers started: a frame already older than
// MaxLag is queued, so the stream's goroutine applies the time bound to it.
func (h *Hub) offer(s *Subscription, fs []*queued, now int64, buf []byte) (int, bool, []byte) {
	q := &s.q
	n := 0
	for len(fs) > 0 {
		q.mu.Lock()
		if fw := s.fast.Load(); fw != nil && !q.closed && len(q.items) == 0 && now-fs[0].at <= int64(h.cfg.MaxLag) {
			var k int
			if k, buf = h.writeFastLocked(s, fw, fs, buf); k > 0 {
				n += k
				fs = fs[k:]
				continue // what is left queues behind a leftover, if any
			}
		}
		m, res := q.pushAllLocked(fs)
		return n + m, res == offerFull, buf
	}
	return n, false, buf
}

// endRun gracefully ends the streams the run's batches end (EndSessions,
// Cancel, an Until passed), after their frames, and tells OnSessionEnd.
func (h *Hub) endRun(run []pendingBatch) {
	h.mu.Lock()
	for bi := range run {
		pb := &run[bi]
		for _, sess := range pb.b.EndSessions {
			for s := range h.bySession[sess] {
				h.endLocked(s, EndSessionEnded)
			}
		}
		for _, s := range pb.cancel {
			h.endLocked(s, EndCancelled)
		}
		for _, s := range pb.expire {
			h.endLocked(s, EndSessionEnded)
		}
	}
	h.mu.Unlock()
	h.endExpiring()
	for bi := range run {
		h.sessionsEnded(run[bi].b.EndSessions)
	}
}

// encode is the hub's one place where a change becomes bytes: Config.Encode,
// or the change itself when it is already a Frame.
func (h *Hub) encode(m Message) (Frame, bool) {
	if h.cfg.Encode != nil {
		return h.cfg.Encode(m)
	}
	f, ok := m.Change.(Frame)
	return f, ok
}

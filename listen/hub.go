package listen

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/listen/internal/sock"
)

// Message is one committed change to deliver to the subscribers of Topic.
// The hub never looks inside it: the room decides what changed and which
// topic names it, the Encoder the front door gave the hub decides how it is
// spelled on the wire, and the hub only routes it.
type Message struct {
	Topic string // e.g. "task:task_0123…", "resource:commonroom://workspace/…", "events"
	// Change is what happened, as the publisher describes it (a task's
	// snapshot, a resource that changed, an event). It is shared by every
	// subscriber and must not be modified after Publish.
	Change any
}

// Batch is everything one commit published, in commit order. Publishing a
// commit as one unit keeps the writer's hand-off to a single call and lets
// session ends land after the changes committed with them.
type Batch struct {
	Messages []Message
	// EndSessions names sessions (by their non-secret ref) that left or
	// expired in this commit. Their streams end gracefully after Messages are
	// queued, so they still see everything their session was shown.
	EndSessions []string
}

// Config bounds what one subscriber may cost the room. Zero values take the
// defaults documented on each field.
type Config struct {
	// QueueLen is the number of frames a subscriber may fall behind before
	// it is dropped; default 256.
	QueueLen int
	// MaxLag bounds lag in time, because a quiet room fills a queue slowly
	// while kernel buffers hide a dead reader for hours: a stream whose
	// oldest undelivered frame is older than this, whose write has not
	// completed within it, or whose peer has acknowledged nothing for this
	// long while our bytes wait in its socket, is dropped. Default 10s.
	MaxLag time.Duration
	// ProbeEvery is how often a stream with unacknowledged bytes samples its
	// socket (see ConnContext): a peer that acknowledges nothing for MaxLag
	// while bytes wait is dropped as lagging. Default MaxLag/4.
	ProbeEvery time.Duration
	// KeepAlive is how long a stream may stay silent before it gets an SSE
	// comment, so proxies keep it open and a dead peer shows up as a write
	// error. Default 15s.
	KeepAlive time.Duration
	// MaxStreamsPerSession stops one session from holding unbounded streams;
	// default 4, negative for no limit. Subscriptions without a session are
	// not counted.
	MaxStreamsPerSession int
	// Now timestamps queued frames for the lag rule; default time.Now. Write
	// deadlines and keep-alive timers always use the runtime clock.
	Now func() time.Time
	// Logger receives one Warn per dropped subscriber (session ref and
	// reason, never topics or secrets); default discards.
	Logger *slog.Logger
	// Encode turns each published change into its frame, once per message
	// however many streams receive it. The front door that serves the
	// streams supplies it, because the hub knows no wire format. nil means
	// every Message.Change is already a Frame.
	Encode Encoder
}

// Errors from Subscribe, distinct so the handler can answer each correctly.
var (
	// ErrTooManyStreams means the session already holds
	// Config.MaxStreamsPerSession streams; the client should close one.
	ErrTooManyStreams = errors.New("listen: too many streams for this session")
	// ErrClosed means the hub is shutting down; no new stream may start.
	ErrClosed = errors.New("listen: hub closed")
)

// Stats lets operators and tests see whether subscribers keep up.
type Stats struct {
	Subscribers      int    `json:"subscribers"`        // registered now
	Pending          int    `json:"pending_batches"`    // batches published but not yet fanned out
	Published        uint64 `json:"published"`          // messages accepted by Publish
	Delivered        uint64 `json:"delivered"`          // frames put into subscriber queues
	Dropped          uint64 `json:"dropped"`            // subscribers dropped for not keeping up (the next two summed)
	DroppedQueueFull uint64 `json:"dropped_queue_full"` // their queue was full when a frame arrived
	DroppedSlow      uint64 `json:"dropped_slow"`       // lagging in time, write deadline passed, or write failed
	Ended            uint64 `json:"ended"`              // ended gracefully: Cancel, EndSession (or Batch.EndSessions), Close
	Disconnected     uint64 `json:"disconnected"`       // client went away, or Subscription.Close
	Malformed        uint64 `json:"malformed"`          // changes the Encoder could not encode as published (sent as its stand-in, if any)
}

// Hub fans committed batches out to subscribers. The room's writer must never
// wait on a subscriber, so Publish only appends to a queue; a broadcaster
// goroutine owned by the hub does the fan-out. A detached stream whose
// socket is ready is written by the broadcaster's pool writers directly
// (fastwrite.go); otherwise each stream's writer (its handler, or its own
// goroutine once detached) does the network writes.
type Hub struct {
	cfg   Config
	log   *slog.Logger
	hooks hooks

	endHooks sessionEndHooks // OnSessionEnd's functions

	// Publish side: a mutex-guarded slice plus a one-slot signal, so Publish
	// costs an append and never waits for the broadcaster.
	pmu     sync.Mutex
	pending []pendingBatch
	pclosed bool
	seq     atomic.Uint64 // sequence of the last accepted batch
	signal  chan struct{}

	quit      chan struct{}
	closeOnce sync.Once
	// detached counts streams running on their own goroutine after
	// ServeDetached took their connection: Close waits for their final
	// frames, as http.Server.Shutdown waits for handlers. noDetach (under
	// mu) is set once Close waits, so no stream is added after.
	detached  sync.WaitGroup
	noDetach  bool
	watchOnce sync.Once
	watch     *sock.CloseWatch // nil until the first detach, or when unavailable
	stopped   chan struct{}
	aborts    sync.WaitGroup // abortWrite calls started by the broadcaster

	// mu guards the subscriber indexes and every Subscription's topics and
	// ended state. The broadcaster holds it for one batch at a time; nobody
	// holds it across network I/O.
	mu     sync.Mutex
	closed bool
	// byTopic maps a topic to its subscribers, each with the sequence of the
	// last batch published before it took the topic: older batches are not
	// its to see.
	byTopic   map[string]map[*Subscription]uint64
	bySession map[string]map[*Subscription]struct{}
	all       map[*Subscription]struct{}

	// The broadcaster's pool writers (fastwrite.go): the streams of the run
	// being fanned out, each with its frames in Subscription.pend, taken a
	// slice at a time from wnext (under wmu, since a merge appends to work
	// while the writers take from it); a scratch buffer, a result and a
	// running flag per writer. Only the broadcaster and the writers it runs
	// touch them.
	wmu     sync.Mutex
	work    []*Subscription
	wnext   int
	scratch [][]byte
	results []writerResult
	running []atomic.Bool
	writers sync.WaitGroup
	runNow  int64 // the injected clock when the run's writers started

	// The broadcaster's own state (merge.go): batches taken from pending
	// and not yet fanned out (queue[qhead:]), and what a run merged.
	merging

	// expiring lists the streams the broadcaster's last lookup found past
	// their Until, for endExpiring (the broadcaster's own).
	expiring []*Subscription

	published, delivered                 atomic.Uint64
	droppedFull, droppedSlow             atomic.Uint64
	ended, disconnected, malformedParams atomic.Uint64
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

// NewHub starts the hub's broadcaster goroutine, which runs until Close:
// every hub must be closed.
func NewHub(cfg Config) *Hub { return newHub(cfg, hooks{}) }

func newHub(cfg Config, hk hooks) *Hub {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 256
	}
	if cfg.MaxLag <= 0 {
		cfg.MaxLag = 10 * time.Second
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = cfg.MaxLag / 4
	}
	if cfg.MaxStreamsPerSession == 0 {
		cfg.MaxStreamsPerSession = 4
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Hub{
		cfg:       cfg,
		log:       log,
		hooks:     hk,
		signal:    make(chan struct{}, 1),
		quit:      make(chan struct{}),
		stopped:   make(chan struct{}),
		byTopic:   make(map[string]map[*Subscription]uint64),
		bySession: make(map[string]map[*Subscription]struct{}),
		all:       make(map[*Subscription]struct{}),
	}
	n := writerCount()
	h.scratch, h.results, h.running = make([][]byte, n), make([]writerResult, n), make([]atomic.Bool, n)
	go h.run()
	return h
}

// Publish hands one committed batch to the broadcaster without waiting for
// it, so a slow or stuck subscriber can never stall a commit. The hub keeps
// b's slices: the caller must not modify them afterwards. After Close it does
// nothing.
func (h *Hub) Publish(b Batch) {
	if len(b.Messages) == 0 && len(b.EndSessions) == 0 {
		return
	}
	if h.enqueue(pendingBatch{b: b}) {
		h.published.Add(uint64(len(b.Messages)))
	}
}

// enqueue appends to the broadcaster's queue and wakes it; false after Close.
func (h *Hub) enqueue(pb pendingBatch) bool {
	h.pmu.Lock()
	if h.pclosed {
		h.pmu.Unlock()
		return false
	}
	// The sequence is taken under pmu so it matches queue order, which is
	// what lets Subscribe tell batches published before it from after it.
	pb.seq = h.seq.Add(1)
	h.pending = append(h.pending, pb)
	h.pmu.Unlock()
	select {
	case h.signal <- struct{}{}:
	default: // the broadcaster has a wake-up pending and will see this entry
	}
	return true
}

// SubscribeRequest carries what the hub needs to route frames to one stream,
// limit it, and find it again for Cancel and EndSession.
type SubscribeRequest struct {
	// Session is the subscriber's non-secret session ref: Cancel and
	// EndSession find streams by it and the per-session limit counts it.
	// "" is allowed and counted nowhere.
	Session string
	// Key is the listen request id as raw JSON text, so Cancel can find the
	// stream that notifications/cancelled names; "" if none.
	Key    string
	Topics []string
	// QueueLen overrides Config.QueueLen for this stream when > 0.
	QueueLen int
	// Filter, when set, is asked about every message of the stream's
	// topics before it is offered, and a message it refuses is not sent to
	// this stream (and not counted as delivered). It exists because one
	// frame is encoded for every subscriber of a topic while who may see
	// a change can differ from one subscriber to the next: the door that
	// knows the rule decides, from the message, and the hub stays blind
	// to what the message means. It runs on the broadcaster with the hub
	// locked, once per message and filtered subscriber, so it must be
	// quick, must not block, and must not call the hub.
	Filter func(Message) bool
	// Until, when set, is when the credential the stream was opened with
	// stops being valid, on Config.Now's clock. Nothing fanned out at or
	// after it reaches the stream, which then ends gracefully
	// (EndSessionEnded) after what it was already given; a timer ends a
	// quiet stream on time. Streams of a session need none: the room ends
	// sessions itself (Batch.EndSessions). It is for credentials the room
	// does not track, such as the owner page's cookie.
	Until time.Time
}

// Subscribe registers a stream. Registration is effective on return: every
// batch published afterwards is offered to it and no batch published before
// is, even one the broadcaster has not reached yet. So a snapshot read after
// Subscribe, plus the frames that follow, covers every commit at least once
// (twice only for one committed but not yet published), and never replays
// older ones.
func (h *Hub) Subscribe(req SubscribeRequest) (*Subscription, error) {
	qlen := req.QueueLen
	if qlen <= 0 {
		qlen = h.cfg.QueueLen
	}
	s := &Subscription{
		h:       h,
		session: req.Session,
		key:     req.Key,
		q:       newFrameQueue(qlen),
		done:    make(chan struct{}),
		topics:  uniq(req.Topics),
		filter:  req.Filter,
	}
	if !req.Until.IsZero() {
		s.until = max(req.Until.UnixNano(), 1) // 0 means none
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	if s.session != "" && h.cfg.MaxStreamsPerSession > 0 && len(h.bySession[s.session]) >= h.cfg.MaxStreamsPerSession {
		return nil, ErrTooManyStreams
	}
	h.all[s] = struct{}{}
	if s.session != "" {
		set := h.bySession[s.session]
		if set == nil {
			set = make(map[*Subscription]struct{})
			h.bySession[s.session] = set
		}
		set[s] = struct{}{}
	}
	h.indexLocked(s, s.topics, h.seq.Load())
	if s.until != 0 {
		s.timer = time.AfterFunc(time.Duration(s.until-h.cfg.Now().UnixNano()), func() { h.untilReached(s) })
	}
	return s, nil
}

// untilReached is a stream's Until timer: it ends the stream once the
// hub's clock has reached Until. The timer runs on the runtime clock, so
// when Config.Now is behind it (an injected clock) it waits again for what
// is left.
func (h *Hub) untilReached(s *Subscription) {
	h.mu.Lock()
	if s.ended || s.expiring {
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
	h.enqueue(pendingBatch{expire: []*Subscription{s}}) // after Close, Close ends it
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
	h.enqueue(pendingBatch{expire: h.expiring})
	h.expiring = nil
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
	h.enqueue(pendingBatch{cancel: subs}) // after Close, Close ends them
	return true
}

// EndSession gracefully ends every stream of a session that left or expired.
// Like Cancel it is queued behind what was already published, so it is the
// same as publishing a Batch with only EndSessions.
func (h *Hub) EndSession(session string) {
	if session == "" {
		return
	}
	h.enqueue(pendingBatch{b: Batch{EndSessions: []string{session}}})
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
		h.pmu.Lock()
		h.pclosed = true
		h.pmu.Unlock()
		close(h.quit)
	})
	<-h.stopped
	h.mu.Lock()
	h.noDetach = true
	h.mu.Unlock()
	h.detached.Wait()
	h.watchOnce.Do(func() {}) // no watcher starts after this; see one that did
	if h.watch != nil {
		h.watch.Stop()
	}
}

// watcher is the hub's close watcher, started on first use; nil when the
// platform has none, and streams are then served in place.
func (h *Hub) watcher() *sock.CloseWatch {
	h.watchOnce.Do(func() { h.watch = sock.NewCloseWatch() })
	return h.watch
}

// Stats is cheap enough for every metrics scrape: two short lock holds and
// atomic loads.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	n := len(h.all)
	h.mu.Unlock()
	h.pmu.Lock()
	p := len(h.pending)
	h.pmu.Unlock()
	full, slow := h.droppedFull.Load(), h.droppedSlow.Load()
	return Stats{
		Subscribers:      n,
		Pending:          p,
		Published:        h.published.Load(),
		Delivered:        h.delivered.Load(),
		Dropped:          full + slow,
		DroppedQueueFull: full,
		DroppedSlow:      slow,
		Ended:            h.ended.Load(),
		Disconnected:     h.disconnected.Load(),
		Malformed:        h.malformedParams.Load(),
	}
}

// run is the broadcaster: it sleeps until signalled, then drains every pending
// batch in one go.
func (h *Hub) run() {
	defer close(h.stopped)
	defer h.aborts.Wait()
	for {
		select {
		case <-h.signal:
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

// maxRun bounds how many batches one run takes, at its start and by
// merges together.
const maxRun = 64

// ends reports whether the batch ends streams (EndSessions, Cancel).
func (pb *pendingBatch) ends() bool {
	return len(pb.b.EndSessions) > 0 || len(pb.cancel) > 0 || len(pb.expire) > 0
}

// deliver fans a run of batches out, in order; only the last may end
// streams. The run starts with the frames earlier runs left for the streams
// they had already written (Hub.carry), then this run's batches; while it
// is written, batches published meanwhile may join it (merge). Cost is
// proportional to the subscribers of the batches' topics, and each message
// is encoded once however many receive it. The hub is locked only to look
// the subscribers up and, after the frames are offered (fanOut, unlocked),
// to end streams: graceful ends come after every frame of their batch.
func (h *Hub) deliver(run []pendingBatch) {
	if h.hooks.beforeBatch != nil {
		for i := range run {
			h.hooks.beforeBatch(run[i].seq)
		}
	}
	at := h.cfg.Now().UnixNano()
	var dropped []*Subscription
	h.startRun(len(run), len(run) == 0 || !run[len(run)-1].ends())
	total := h.takeCarry()
	h.mu.Lock()
	total += h.lookupLocked(run, at)
	h.mu.Unlock()
	n, full := h.fanOut(total)
	h.mu.Lock()
	for _, s := range full {
		if h.endLocked(s, EndQueueFull) {
			dropped = append(dropped, s)
		}
	}
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
	h.delivered.Add(n)
	for _, s := range dropped {
		h.logDrop(s, EndQueueFull)
		// Off the broadcaster: on some transports (HTTP/2) aborting a
		// write has to talk to the connection's own goroutine.
		h.aborts.Go(s.abortWrite)
	}
	for _, bad := range h.malformed {
		h.malformedParams.Add(uint64(bad))
		h.log.Error("listen: published changes could not be encoded as given; sent as the encoder's stand-in", "messages", bad)
	}
	h.finishRun(run)
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

// endLocked removes s from every index and tells its stream why it ended.
// The first reason wins; it reports whether this call was the one that ended s.
func (h *Hub) endLocked(s *Subscription, why EndReason) bool {
	if s.ended {
		return false
	}
	s.ended = true
	s.reason = why
	if s.timer != nil {
		s.timer.Stop()
	}
	s.q.close()
	h.unindexLocked(s)
	if set := h.bySession[s.session]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.bySession, s.session)
		}
	}
	delete(h.all, s)
	close(s.done)
	switch {
	case why.Graceful():
		h.ended.Add(1)
	case why == EndQueueFull:
		h.droppedFull.Add(1)
	case why == EndLagging || why == EndWriteFailed:
		h.droppedSlow.Add(1)
	default:
		h.disconnected.Add(1)
	}
	return true
}

// finish ends s on behalf of its own stream writer (drop or disconnect) and
// returns the reason the stream ended with: an earlier end wins.
func (h *Hub) finish(s *Subscription, why EndReason) EndReason {
	h.mu.Lock()
	won := h.endLocked(s, why)
	prior := s.reason
	h.mu.Unlock()
	if won {
		if !why.Graceful() && why != EndClientGone && why != EndUnsubscribed {
			h.logDrop(s, why)
		}
		return why
	}
	if prior.Graceful() {
		return why // asked to end gracefully, but the final frame never went out
	}
	return prior
}

func (h *Hub) logDrop(s *Subscription, why EndReason) {
	h.log.Warn("listen: subscriber dropped", "session", s.session, "reason", why.String(), "queue_len", s.q.max)
}

func (h *Hub) indexLocked(s *Subscription, topics []string, after uint64) {
	for _, t := range topics {
		set := h.byTopic[t]
		if set == nil {
			set = make(map[*Subscription]uint64)
			h.byTopic[t] = set
		}
		set[s] = after
	}
}

func (h *Hub) unindexLocked(s *Subscription) {
	h.unindexTopicsLocked(s, s.topics)
}

func (h *Hub) unindexTopicsLocked(s *Subscription, topics []string) {
	for _, t := range topics {
		if set := h.byTopic[t]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(h.byTopic, t)
			}
		}
	}
}

func uniq(topics []string) []string {
	out := slices.Clone(topics)
	slices.Sort(out)
	return slices.Compact(out)
}

// Subscription is one registered stream. It is written by exactly one Serve
// call; the hub only queues frames for it and signals its end.
type Subscription struct {
	h       *Hub
	session string
	key     string
	q       frameQueue // bounded: full means the stream is too far behind
	done    chan struct{}
	// fast is set once the stream is detached with a raw socket: the pool
	// writers may then write its frames straight to it (fastwrite.go).
	fast atomic.Pointer[fastWriter]
	// pend holds the frames of the run the broadcaster is fanning out for
	// this stream, in order, and later the frames of batches merged into
	// the run after a pool writer took the stream, for the next run
	// (merge.go). Guarded by pmu while the run is written; run and took
	// say which run the stream is in and which run has taken it.
	pmu       sync.Mutex
	pend      []*queued
	later     []*queued
	run, took uint64

	// Guarded by h.mu. reason is written before done is closed, so after
	// <-done it may be read without the lock.
	topics     []string // sorted, unique
	ended      bool
	cancelling bool // a Cancel for it is queued
	reason     EndReason
	// Set at Subscribe and then only read: SubscribeRequest.Filter, and
	// Until in Unix ns (0: none) with its timer.
	filter func(Message) bool
	until  int64
	timer  *time.Timer
	// expiring: its Until has passed and its end is queued (under h.mu).
	expiring bool

	served atomic.Bool
	amu    sync.Mutex
	abort  func() // set while Serve runs: fails a blocked write at once
}

// SetTopics replaces the filter of a live subscription, so the legacy
// resources/subscribe can grow (or unsubscribe shrink) a stream that is
// already open. Like Subscribe it is effective on return: an added topic
// gets only batches published afterwards, a removed one nothing more, and a
// kept one is not disturbed. An ended subscription ignores it.
func (s *Subscription) SetTopics(topics []string) {
	next := uniq(topics)
	h := s.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.ended {
		return
	}
	var added, removed []string
	for _, t := range next {
		if _, ok := slices.BinarySearch(s.topics, t); !ok {
			added = append(added, t)
		}
	}
	for _, t := range s.topics {
		if _, ok := slices.BinarySearch(next, t); !ok {
			removed = append(removed, t)
		}
	}
	h.unindexTopicsLocked(s, removed)
	h.indexLocked(s, added, h.seq.Load())
	s.topics = next
}

// Topics returns the current filter, so a caller can grow it with SetTopics.
func (s *Subscription) Topics() []string {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	return slices.Clone(s.topics)
}

// Close unregisters the subscription without a final frame: for a handler
// that registered but could not start the stream, or that abandons it. A
// running Serve returns EndUnsubscribed promptly.
func (s *Subscription) Close() {
	h := s.h
	h.mu.Lock()
	won := h.endLocked(s, EndUnsubscribed)
	h.mu.Unlock()
	if won {
		s.abortWrite()
	}
}

// abortWrite makes a write blocked on a stalled socket fail now rather than
// at its deadline, so a dropped stream frees its handler promptly.
func (s *Subscription) abortWrite() {
	s.amu.Lock()
	defer s.amu.Unlock()
	if s.abort != nil {
		s.abort()
	}
}

func (s *Subscription) setAbort(f func()) {
	s.amu.Lock()
	s.abort = f
	s.amu.Unlock()
}

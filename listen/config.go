package listen

import (
	"errors"
	"log/slog"
	"time"
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
	// NoFastWrite turns the fast write path off (fastwrite.go): every frame
	// then goes through its stream's queue and goroutine, as on a platform
	// without raw sockets. The delivery rules are the same either way; it
	// exists to bisect a fault or a figure to one road or the other.
	NoFastWrite bool
}

// withDefaults fills the zero values with the documented defaults.
func (cfg Config) withDefaults() Config {
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
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

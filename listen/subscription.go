package listen

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

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
	fast      atomic.Pointer[fastWriter]
	runFrames // its frames of the run being fanned out (merge.go)

	// Guarded by h.mu. reason is set (non-zero) when the stream ends,
	// before done is closed, so after <-done it may be read without the lock.
	topics     []string // sorted, unique
	cancelling bool     // a Cancel for it is queued
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

// newSubscription is the stream req asks for, not yet registered.
func (h *Hub) newSubscription(req SubscribeRequest) *Subscription {
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
	return s
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
	if s.endedLocked() {
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
	h.indexLocked(s, added, h.in.seq.Load())
	s.topics = next
}

// endedLocked reports whether s has ended (under h.mu): it has a reason.
func (s *Subscription) endedLocked() bool { return s.reason != 0 }

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
	if won, _ := s.h.endFromStream(s, EndUnsubscribed); won {
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

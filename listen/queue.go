package listen

import "sync"

// frameQueue is one subscriber's bounded queue of frames on their way to
// its stream. A channel of QueueLen slots would cost its full size (2 KiB
// at the default 256) for every stream, idle or not; this holds only what is
// queued now, and a stream that keeps up holds one or two frames at a time
// in slices it reuses. The bound is the same: push refuses the frame
// past max, and the hub drops the subscriber.
type frameQueue struct {
	mu    sync.Mutex
	items []*queued // oldest first
	spare []*queued // the stream's last taken batch, emptied, for reuse
	max   int
	// wake gets a token when items goes from empty to non-empty, or when
	// a fast write left bytes for the stream's goroutine (fastWriter.carry):
	// the stream then takes everything there is. A token may be stale (its
	// frames taken already); take then returns nothing.
	wake chan struct{}
	// closed is set when the subscription ends: nothing more is queued or
	// written fast, and a frame offered after is not counted as delivered.
	closed bool
}

func newFrameQueue(max int) frameQueue {
	return frameQueue{max: max, wake: make(chan struct{}, 1)}
}

// offerResult is what became of a frame offered to one stream.
type offerResult uint8

const (
	offerQueued  offerResult = iota // queued, or written to the socket
	offerFull                       // the queue already held max frames: drop the stream
	offerRefused                    // the stream has ended; not counted
)

// pushAllLocked queues fs in order with q.mu held, and unlocks it. It
// returns how many were queued and, when not all were, why: offerFull when
// the queue reached max frames (it then refuses everything after, so a
// stream that lost a frame is never written a later one), offerRefused once
// the stream has ended.
func (q *frameQueue) pushAllLocked(fs []*queued) (int, offerResult) {
	if q.closed {
		q.mu.Unlock()
		return 0, offerRefused
	}
	first := len(q.items) == 0
	n := min(len(fs), q.max-len(q.items))
	q.items = append(q.items, fs[:n]...)
	res := offerQueued
	if n < len(fs) {
		q.closed = true
		res = offerFull
	}
	q.mu.Unlock()
	if first && n > 0 {
		q.poke()
	}
	return n, res
}

// poke leaves a wake-up token for the stream's goroutine.
func (q *frameQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close refuses every later push: the subscription has ended.
func (q *frameQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// take removes and returns every queued frame, oldest first (at most max,
// so one burst is bounded). Hand the slice back with release when done.
func (q *frameQueue) take() []*queued {
	q.mu.Lock()
	items := q.items
	q.items, q.spare = q.spare, nil
	q.mu.Unlock()
	return items
}

// release gives a taken slice back for the next frames, unless it grew
// large for a one-off backlog.
func (q *frameQueue) release(b []*queued) {
	if b == nil || cap(b) > 16 {
		return
	}
	clear(b)
	q.mu.Lock()
	if q.spare == nil {
		q.spare = b[:0]
	}
	q.mu.Unlock()
}

// len is how many frames wait.
func (q *frameQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

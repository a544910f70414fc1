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
	// wake gets a token when items goes from empty to non-empty: the
	// stream then takes everything there is. A token may be stale (its
	// frames taken already); take then returns nothing.
	wake chan struct{}
}

func newFrameQueue(max int) frameQueue {
	return frameQueue{max: max, wake: make(chan struct{}, 1)}
}

// push queues f; false when the queue already holds max frames.
func (q *frameQueue) push(f *queued) bool {
	q.mu.Lock()
	if len(q.items) >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, f)
	first := len(q.items) == 1
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return true
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

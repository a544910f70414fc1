package listen

import (
	"sync"
	"sync/atomic"
)

// inbox is where Publish leaves batches for the broadcaster: a
// mutex-guarded slice plus a one-slot signal, so Publish costs an append and
// never waits for the broadcaster.
type inbox struct {
	mu      sync.Mutex
	pending []pendingBatch
	closed  bool
	seq     atomic.Uint64 // sequence of the last accepted batch
	signal  chan struct{}
}

func newInbox() inbox { return inbox{signal: make(chan struct{}, 1)} }

// put appends to the broadcaster's queue and wakes it; false after Close.
func (in *inbox) put(pb pendingBatch) bool {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return false
	}
	// The sequence is taken under mu so it matches queue order, which is
	// what lets Subscribe tell batches published before it from after it.
	pb.seq = in.seq.Add(1)
	in.pending = append(in.pending, pb)
	in.mu.Unlock()
	select {
	case in.signal <- struct{}{}:
	default: // the broadcaster has a wake-up pending and will see this entry
	}
	return true
}

// takeAll appends everything queued since the last take to queue, and
// returns it with the sequence of the last batch taken.
func (in *inbox) takeAll(queue []pendingBatch) ([]pendingBatch, uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.pending) > 0 {
		queue = append(queue, in.pending...)
		clear(in.pending)
		if cap(in.pending) > 4096 {
			in.pending = nil
		} else {
			in.pending = in.pending[:0]
		}
	}
	return queue, in.seq.Load()
}

// len is how many batches wait.
func (in *inbox) len() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.pending)
}

// close refuses every later put.
func (in *inbox) close() {
	in.mu.Lock()
	in.closed = true
	in.mu.Unlock()
}

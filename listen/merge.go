package listen

import "sync"

// Merging. At ten thousand streams one run (every stream written once) takes
// 100–190 ms of wall time, nearly all of it write(2). When runs went out one
// after the other, a change committed just after a run began waited for the
// whole run and then for its own stream's turn in the next: up to twice a
// run. Now the broadcaster, between the slices of streams it writes itself,
// takes the batches published meanwhile and merges them into the run being
// written: a stream no writer has taken yet gets their frames in the same
// write as the run's own, and a stream already written keeps them (in
// Subscription.later) for the next run, which starts with them, before any
// newer batch. So a change waits about one run, and a stream gets fewer,
// larger writes under load.
//
// What stays as it was: per stream, frames go out in commit order, each
// once (a stream is in a run at most once and is taken by one writer, which
// takes its frames under pmu; the broadcaster places every batch in order);
// a stream gets no batch published before it took the topic (the lookup is
// the same, under the hub lock). A batch that ends streams is never merged:
// it waits for the next run, which it closes, and nothing merges into a run
// that ends streams, so the ends come after their batch's frames and before
// any later batch's. A merged batch counts as fanned out (afterBatch) once
// the run that finishes its frames is done: this run, or the next one when
// it left frames for streams already written.

// merging is the broadcaster's own state for runs and merges. Only the
// broadcaster's goroutine touches it (pool writer 0 is the broadcaster).
type merging struct {
	// queue[qhead:] is what the broadcaster took from pending and has not
	// yet put into a run; seen is the sequence of the last batch it took.
	queue []pendingBatch
	qhead int
	seen  uint64
	// runID numbers runs, for Subscription.run and took.
	runID uint64
	// mergeOK says batches may still join the run being written: not when
	// the run ends streams, nor once a batch that ends streams (or the
	// maxRun budget) stopped a merge.
	mergeOK    bool
	runBatches int // batches in the run, its own and merged
	// carry lists the streams with frames in Subscription.later: merged
	// into a run after a writer had taken them, for the next run.
	carry []*Subscription
	// merged are the sequences of batches merged into the run being
	// written; deferred those merged into the previous one, whose frames
	// this run finishes.
	merged, deferred []uint64
	malformed        []int // per batch of the run (merged too), messages that did not encode
}

// runFrames is a stream's part in the broadcaster's runs. pend holds the
// frames of the run being fanned out for this stream, in order, and later
// the frames of batches merged into the run after a pool writer took the
// stream, for the next run. Guarded by pmu while the run is written; run
// and took say which run the stream is in and which run has taken it.
type runFrames struct {
	pmu       sync.Mutex
	pend      []*queued
	later     []*queued
	run, took uint64
}

// refill moves what Publish queued since the last look into the
// broadcaster's queue.
func (h *Hub) refill() {
	h.queue, h.seen = h.in.takeAll(h.queue)
}

// startRun begins a run that starts with n batches of its own; mayMerge is
// false when the run ends streams.
func (h *Hub) startRun(n int, mayMerge bool) {
	h.runID++
	h.mergeOK = mayMerge
	h.runBatches = n
	clear(h.malformed)
	h.malformed = h.malformed[:0]
}

// takeCarry puts the streams earlier runs left frames for at the head of
// the run, with those frames; it returns how many.
func (h *Hub) takeCarry() int {
	if len(h.carry) == 0 {
		return 0
	}
	total := 0
	for _, s := range h.carry {
		s.pmu.Lock()
		s.run = h.runID
		s.pend, s.later = s.later, s.pend[:0]
		total += len(s.pend)
		s.pmu.Unlock()
	}
	h.wmu.Lock()
	h.work = append(h.work, h.carry...)
	h.wmu.Unlock()
	clear(h.carry)
	if cap(h.carry) > 4096 {
		h.carry = nil
	} else {
		h.carry = h.carry[:0]
	}
	return total
}

// lookupLocked encodes the batches' messages and places each frame with
// every subscriber of its topic that took the topic before the batch was
// published. It returns how many frames it placed. The hub is locked.
func (h *Hub) lookupLocked(batches []pendingBatch, at int64) int {
	total := 0
	for bi := range batches {
		pb := &batches[bi]
		bad := 0
		for i := range pb.b.Messages {
			m := &pb.b.Messages[i]
			set := h.byTopic[m.Topic]
			if len(set) == 0 {
				continue
			}
			enc, ok := h.encode(*m)
			if !ok {
				bad++
			}
			if enc == nil {
				continue
			}
			f := &queued{Frame: enc, at: at}
			for s, after := range set {
				if after >= pb.seq {
					continue // published before s took this topic
				}
				if (s.filter != nil || s.until != 0) && !h.admitsLocked(s, m, at) {
					continue
				}
				h.place(s, f)
				total++
			}
		}
		if bad > 0 {
			h.malformed = append(h.malformed, bad)
		}
	}
	return total
}

// place gives f to s in the run being formed or written: with the frames
// it will be written with when no writer has taken it yet (adding it to the
// run if it is not in it), and for the next run when one has.
func (h *Hub) place(s *Subscription, f *queued) {
	s.pmu.Lock()
	switch {
	case s.run != h.runID:
		s.run = h.runID
		s.pend = append(s.pend, f)
		s.pmu.Unlock()
		h.wmu.Lock()
		h.work = append(h.work, s)
		h.wmu.Unlock()
		return
	case s.took != h.runID:
		s.pend = append(s.pend, f)
	default:
		if len(s.later) == 0 {
			h.carry = append(h.carry, s)
		}
		s.later = append(s.later, f)
	}
	s.pmu.Unlock()
}

// mergePending is called by the broadcaster between the slices of streams
// it writes: when batches were published since it last looked, the ones at
// the head of the queue that end nothing join the run being written.
func (h *Hub) mergePending() {
	if !h.mergeOK || h.in.seq.Load() == h.seen {
		return
	}
	h.refill()
	i, j := h.qhead, h.qhead
	for j < len(h.queue) && h.runBatches < maxRun && !h.queue[j].ends() {
		j++
		h.runBatches++
	}
	if j < len(h.queue) {
		// A batch that ends streams, or the budget: the rest waits for
		// the next run, and nothing may overtake it.
		h.mergeOK = false
	}
	if i == j {
		return
	}
	h.qhead = j
	batches := h.queue[i:j]
	if h.hooks.beforeBatch != nil {
		for k := range batches {
			h.hooks.beforeBatch(batches[k].seq)
		}
	}
	at := h.cfg.Now().UnixNano()
	h.mu.Lock()
	placed := h.lookupLocked(batches, at)
	h.mu.Unlock()
	h.endExpiring()
	for k := range batches {
		h.merged = append(h.merged, batches[k].seq)
	}
	if placed >= fanOutInline {
		h.spawnWriters()
	}
}

// finishRun tells the afterBatch hook which batches are fanned out now: those
// merged into the previous run (this one finished their frames), this run's
// own, and the ones merged into this run unless it left frames for the next.
func (h *Hub) finishRun(run []pendingBatch) {
	if h.hooks.afterBatch != nil {
		for _, seq := range h.deferred {
			h.hooks.afterBatch(seq)
		}
		for i := range run {
			h.hooks.afterBatch(run[i].seq)
		}
	}
	h.deferred = h.deferred[:0]
	if len(h.carry) > 0 {
		h.deferred, h.merged = h.merged, h.deferred
	} else if h.hooks.afterBatch != nil {
		for _, seq := range h.merged {
			h.hooks.afterBatch(seq)
		}
	}
	h.merged = h.merged[:0]
}

package actor

import (
	"context"
)

// The checkpointer copies the WAL into the sidecar's database file off the
// writer's goroutine. SQLite's automatic checkpoint runs inside COMMIT on
// the committing connection: in a profile of a room under the bench's
// lifecycle it was about a tenth of the writer's CPU, and every caller of
// the batch waited while it copied pages and synced the database file.
// When the store has a checkpoint connection (room.Store.SetWALAutocheckpoint
// with pages > 0, which also turns the writer's own checkpoints off), the
// writer nudges this goroutine after each commit without waiting; the
// goroutine reads how many WAL pages are not yet in the database file and,
// past the threshold, runs a PASSIVE checkpoint, which neither waits for
// nor blocks the writer or a reader.
//
// A checkpoint that runs beside the writer never catches up with it under
// load: the writer commits new frames while the pages are copied, so the
// WAL is never wholly in the database file when the writer begins its next
// transaction, and only then does SQLite start the WAL over from its first
// frame; the file would grow without bound. So the checkpointer finishes
// in two steps: the bulk of the copy beside the writer, then a second
// PASSIVE checkpoint that copies only what was committed meanwhile, which
// it hands to the writer as one more message (ckptFinish) so that it runs
// between two batches, with no write transaction open: the writer's own
// serialization, not a lock beside it. The writer's next BEGIN finds the
// WAL wholly copied and restarts it, as it did when it checkpointed inside
// COMMIT.

// startCheckpointer starts the checkpointer when the store asks for one.
func (r *Room) startCheckpointer() {
	pages := r.store.CheckpointPages()
	if pages <= 0 {
		return
	}
	r.ckptNudge = make(chan struct{}, 1)
	r.ckptDone = make(chan struct{})
	r.ckptFinish = make(chan *ckptStep)
	go r.checkpointer(pages)
}

// nudgeCheckpointer tells the checkpointer that a commit grew the WAL.
// It never blocks: nudges made while one waits are one nudge.
func (r *Room) nudgeCheckpointer() {
	if r.ckptNudge == nil {
		return
	}
	select {
	case r.ckptNudge <- struct{}{}:
	default:
	}
}

// checkpointer runs until the writer has stopped; the sidecar is closed
// only after Close has waited for both.
func (r *Room) checkpointer(pages int) {
	defer close(r.ckptDone)
	ctx := context.Background()
	w := walCounter{}
	for {
		select {
		case <-r.done:
			return
		case <-r.ckptNudge:
		}
		log, done, err := r.store.WALFrames(ctx)
		if err != nil {
			r.log.Warn("checkpointer: reading the WAL's size failed", "err", err)
			continue
		}
		r.stats.WALFrames.Add(w.saw(log))
		if log-done < pages {
			continue
		}
		if _, _, err := r.store.Checkpoint(ctx); err != nil {
			r.log.Warn("checkpointer: checkpoint failed; the next commit tries again", "err", err)
			continue
		}
		step := &ckptStep{done: make(chan struct{})}
		select {
		case r.ckptFinish <- step:
		case <-r.done:
			return
		}
		<-step.done // the writer closes it before it takes another message
		if log, err = step.log, step.err; err != nil {
			r.log.Warn("checkpointer: checkpoint failed; the next commit tries again", "err", err)
			continue
		}
		r.stats.WALFrames.Add(w.saw(log))
		r.stats.Checkpoints.Add(1)
	}
}

// ckptStep is the checkpointer's last step, run by the writer: its result,
// and done, closed once it has run.
type ckptStep struct {
	log  int
	err  error
	done chan struct{}
}

// finishCheckpoint runs the checkpointer's last step on the writer's
// goroutine, between two batches (see above).
func (r *Room) finishCheckpoint(step *ckptStep) {
	step.log, _, step.err = r.store.Checkpoint(context.Background())
	close(step.done)
}

// walCounter turns the WAL's frame count, read now and then, into the
// frames written since the last reading. The count falls when the writer
// starts the WAL over, which it does only at the first commit after a
// checkpoint that copied it wholly; from then the count is of new frames.
// (A restart followed by more frames than the WAL held before, all between
// two readings, would be undercounted; the checkpointer reads after every
// commit it is nudged for, so that needs it starved for a thousand pages.)
type walCounter struct{ last int }

func (w *walCounter) saw(log int) uint64 {
	grew := log - w.last
	if log < w.last {
		grew = log
	}
	w.last = log
	return uint64(max(grew, 0))
}

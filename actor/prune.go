package actor

import (
	"context"
	"time"

	"github.com/commonroom/ce/room"
)

// Retention's pruning on the writer (issue 26, item 2). The sweeper's
// timer is armed for the next prune turn too; a turn is its own short
// transaction (room.Engine.PruneStep with at most Config.PruneBudget
// records, foreign keys off, then at most one participant with them on),
// so the writer is never held longer than one small batch. A turn that
// leaves work makes the next one due at once: the timer fires again, after
// (or between) the commands already queued, until nothing is left; then
// the sweeper looks again after Config.PruneEvery.

type pruneReply struct {
	counts room.PruneCounts
	err    error
}

// pruneDue reports whether a prune turn is due now.
func (r *Room) pruneDue() bool {
	return !r.pruneAt.IsZero() && !r.eng.Now().Before(r.pruneAt)
}

// pruneTurn runs one prune turn and schedules the next.
func (r *Room) pruneTurn() (room.PruneCounts, bool, error) {
	var counts room.PruneCounts
	more := false
	step := &call{ctx: context.Background(), name: "prune", reply: make(chan error, 1), fkOff: true,
		run: runFunc(func(tx *room.Tx) error {
			c, m, err := r.eng.PruneStep(tx, r.cfg.PruneBudget)
			counts, more = c, m
			return err
		})}
	start := time.Now()
	r.runBatch([]*call{step})
	err := <-step.reply
	if err == nil && r.eng.Retention.Participants > 0 {
		var pc room.PruneCounts
		var pmore bool
		one := &call{ctx: context.Background(), name: "prune-participant", reply: make(chan error, 1),
			run: runFunc(func(tx *room.Tx) error {
				c, m, err := r.eng.PruneParticipant(tx)
				pc, pmore = c, m
				return err
			})}
		r.runBatch([]*call{one})
		err = <-one.reply
		counts.Participants += pc.Participants
		more = more || pmore
	}
	took := uint64(time.Since(start))
	r.stats.PruneTurns.Add(1)
	r.stats.PruneNanos.Add(took)
	for {
		old := r.stats.PruneMaxNanos.Load()
		if took <= old || r.stats.PruneMaxNanos.CompareAndSwap(old, took) {
			break
		}
	}
	now := r.eng.Now()
	switch {
	case err != nil:
		// An archive that cannot be written, say: nothing was deleted;
		// try again later rather than spin.
		r.log.Error("retention: a prune turn failed; nothing was deleted, it is tried again later", "err", err)
		r.pruneAt = now.Add(r.cfg.PruneEvery)
	case more:
		r.pruneAt = now
	default:
		r.pruneAt = now.Add(r.cfg.PruneEvery)
	}
	return counts, more, err
}

// pruneAll runs prune turns until nothing is left (Prune).
func (r *Room) pruneAll() pruneReply {
	var total room.PruneCounts
	for {
		c, more, err := r.pruneTurn()
		total.Add(c)
		if err != nil {
			return pruneReply{total, err}
		}
		if !more {
			return pruneReply{total, nil}
		}
	}
}

// Prune runs retention's prune turns now, until nothing more is due, and
// returns what they removed (tests with a fake clock, the bench). The
// writer runs them one transaction each, as its timer would. A room
// without a retention policy removes nothing.
func (r *Room) Prune(ctx context.Context) (room.PruneCounts, error) {
	if !r.eng.Retention.Enabled() {
		return room.PruneCounts{}, nil
	}
	rep := make(chan pruneReply, 1)
	select {
	case r.pruneReq <- rep:
	case <-ctx.Done():
		return room.PruneCounts{}, ctx.Err()
	case <-r.done:
		return room.PruneCounts{}, room.Errorf(room.KindUnavailable, "the room has stopped")
	}
	select {
	case out := <-rep:
		return out.counts, out.err
	case <-ctx.Done():
		return room.PruneCounts{}, ctx.Err()
	}
}

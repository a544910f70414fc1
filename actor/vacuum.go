package actor

import (
	"context"
	"time"

	"github.com/commonroom/ce/room"
)

// Space comes back in small steps (issue 26 item 3). The sidecar is in
// incremental auto-vacuum mode (room/vacuum.go): the pages that deletes
// free stay in the file, reused first, until something asks SQLite to give
// them back. The writer does, when the room is idle: after each sweep (the
// sweeper is where the time rules, and retention, delete in bulk) it reads
// how many pages are free, and past Config.VacuumFreePages it runs one step
// of Config.VacuumStepPages pages whenever it finds no command waiting,
// until none are free. Each step is one short transaction of its own
// between two batches, never inside one, so a command waits at most one
// step; the longest step is counted (Stats.VacuumLongestNanos). The file
// itself shrinks at the next checkpoint that copies the whole WAL.
//
// ce compact, through the running room, runs the same steps back to back
// (Compact), each still a turn of its own that commands are taken between.

const (
	// defaultVacuumStepPages is how many pages one step gives back: 32
	// (128 KiB at SQLite's 4 KiB pages). BenchmarkVacuumStep, free pages
	// spread over the file, the WAL synced at each step's commit, on the
	// bench's 2-core machine shared with other work: 16 pages 0.6–1.3 ms a
	// step, 32 pages 2.1–2.8 ms, 64 pages 3.7–4.3 ms, 256 pages 9.6–12 ms.
	// At 32 a command arriving meanwhile waits about as long as for one
	// group commit, and a GB of free pages is given back in ~8,000 steps.
	defaultVacuumStepPages = 32
	// defaultVacuumFreePages is how many free pages make the writer start
	// giving them back: 1,024 (4 MiB). Below it the pages are left for the
	// room to reuse: the event ring frees and takes back a few pages with
	// every batch, and giving those back only to grow the file again would
	// be work for nothing.
	defaultVacuumFreePages = 1024
	// compactCheckpointWait is how long ce compact's last checkpoint waits
	// for readers still using the WAL before it leaves the WAL to the next
	// ordinary checkpoint: the writer waits with it.
	compactCheckpointWait = 100 * time.Millisecond
)

// vacuumReq is one step of ce compact, run by the writer between batches:
// its size, and what it did, set before done is closed.
type vacuumReq struct {
	pages    int
	truncate bool // the last request: a truncating checkpoint, no step
	freed    int64
	left     int64
	took     time.Duration
	ok       bool // truncate: the WAL was emptied
	err      error
	done     chan struct{}
}

// initVacuum reads the sidecar's mode once (it only changes at start, when
// OpenStore converts it) and whether free pages are already waiting.
func (r *Room) initVacuum(ctx context.Context) {
	r.vacuumAsk = make(chan *vacuumReq)
	r.ready = make(chan struct{})
	close(r.ready)
	inc, err := room.IncrementalAutoVacuum(ctx, r.q)
	if err != nil {
		r.log.Warn("writer: reading the sidecar's auto_vacuum mode failed; free pages are not given back", "err", err)
		return
	}
	r.incremental = inc
	r.checkVacuum()
}

// checkVacuum decides whether idle steps are due: the sidecar is in
// incremental mode and at least Config.VacuumFreePages pages are free.
func (r *Room) checkVacuum() {
	if !r.incremental || r.cfg.VacuumStepPages < 0 {
		return
	}
	free, err := room.FreePages(context.Background(), r.q)
	if err != nil {
		r.log.Warn("writer: reading the sidecar's free pages failed", "err", err)
		return
	}
	r.vacuumDue = free >= int64(r.cfg.VacuumFreePages)
}

// idle is a ready channel while idle steps are due, nil otherwise (a nil
// channel is never ready in a select).
func (r *Room) idle() <-chan struct{} {
	if r.vacuumDue {
		return r.ready
	}
	return nil
}

// idleVacuum runs one idle step, and stops the steps once nothing is left
// to give back, or a step gave nothing back or failed (a full disk: the
// WAL could not grow); the next sweep looks again.
func (r *Room) idleVacuum() {
	freed, left, _, err := r.vacuumStep(r.cfg.VacuumStepPages)
	if err != nil {
		r.log.Warn("writer: giving free pages back failed; the next sweep tries again", "err", err)
	}
	if err != nil || freed == 0 || left == 0 {
		r.vacuumDue = false
	}
}

// vacuumStep gives back up to pages free pages and counts the step.
func (r *Room) vacuumStep(pages int) (freed, left int64, took time.Duration, err error) {
	t0 := time.Now()
	before, after, err := room.VacuumStep(context.Background(), r.q, pages)
	took = time.Since(t0)
	r.stats.VacuumSteps.Add(1)
	if err != nil {
		r.stats.VacuumFailed.Add(1)
		return 0, before, took, err
	}
	freed = max(before-after, 0)
	r.stats.VacuumPages.Add(uint64(freed))
	for {
		longest := r.stats.VacuumLongestNanos.Load()
		if uint64(took) <= longest || r.stats.VacuumLongestNanos.CompareAndSwap(longest, uint64(took)) {
			break
		}
	}
	return freed, after, took, nil
}

// runVacuumReq runs one of Compact's requests on the writer.
func (r *Room) runVacuumReq(req *vacuumReq) {
	defer close(req.done)
	if req.truncate {
		req.ok, req.err = room.TruncateWAL(context.Background(), r.q, compactCheckpointWait)
		return
	}
	req.freed, req.left, req.took, req.err = r.vacuumStep(req.pages)
	if req.err == nil && req.left == 0 {
		r.vacuumDue = false
	}
}

// CompactResult is what one Compact call did.
type CompactResult struct {
	Steps      int           `json:"steps"`
	PagesFreed int64         `json:"pages_freed"`
	Longest    time.Duration `json:"-"` // the longest step of this call
	// Done says every free page has been given back; false when the time
	// budget ran out first (call again to go on).
	Done bool `json:"done"`
	// Checkpointed says the WAL was copied into the database file and
	// emptied, so the files are at their new size now. It is false when
	// ce leaves checkpoints to Litestream (--wal-autocheckpoint 0), or a
	// reader kept the WAL busy: then the next checkpoint shrinks them.
	Checkpointed bool `json:"checkpointed"`
}

// Compact gives every free page back through the writer, one step at a time
// (each a turn of its own: commands are taken between steps), for at most
// budget, then empties the WAL with a truncating checkpoint unless
// checkpoints are left to Litestream. One compaction at a time: a second
// one is refused while the first runs.
func (r *Room) Compact(ctx context.Context, budget time.Duration) (CompactResult, error) {
	var res CompactResult
	if !r.incremental {
		return res, room.Errorf(room.KindInvalidRequest,
			"the sidecar is not in incremental auto-vacuum mode yet (its conversion at start did not succeed: see the log); "+
				"stop the room and run `ce compact`, which converts it")
	}
	if !r.compacting.CompareAndSwap(false, true) {
		return res, room.Errorf(room.KindRoomBusy, "a compaction of this room is already running; wait for it to finish")
	}
	defer r.compacting.Store(false)
	deadline := time.Now().Add(budget)
	for {
		req, err := r.ask(ctx, &vacuumReq{pages: max(r.cfg.VacuumStepPages, defaultVacuumStepPages)})
		if err != nil {
			return res, err
		}
		if req.err != nil {
			return res, req.err
		}
		res.Steps++
		res.PagesFreed += req.freed
		res.Longest = max(res.Longest, req.took)
		if req.left == 0 || req.freed == 0 {
			res.Done = true
			break
		}
		if !time.Now().Before(deadline) {
			break
		}
	}
	if !res.Done || r.store.CheckpointsLeftToOthers() {
		return res, nil
	}
	req, err := r.ask(ctx, &vacuumReq{truncate: true})
	if err != nil {
		return res, err
	}
	if req.err != nil {
		return res, req.err
	}
	res.Checkpointed = req.ok
	return res, nil
}

// ask hands req to the writer and waits until it has run: the writer runs
// a request it has taken to its end, so once sent the wait is short.
func (r *Room) ask(ctx context.Context, req *vacuumReq) (*vacuumReq, error) {
	req.done = make(chan struct{})
	select {
	case r.vacuumAsk <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-r.quit:
		return nil, room.Errorf(room.KindUnavailable, "the room is stopping")
	case <-r.done:
		return nil, room.Errorf(room.KindUnavailable, "the room has stopped")
	}
	<-req.done
	return req, nil
}

// Space reads the sidecar's size (room.Store.Space).
func (r *Room) Space(ctx context.Context) (room.Space, error) { return r.store.Space(ctx) }

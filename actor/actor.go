// Package actor is the room's runtime: one writer goroutine owns the only
// write connection to the sidecar and runs every mutation, batch by batch,
// each command in its own SAVEPOINT inside one transaction per batch. After
// COMMIT it hands what changed to the fan-out hub, then answers the callers
// (see answer for why in that order).
// Reads never come here; they use the read-only pool.
package actor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/internal/cpuclock"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Publisher receives what each commit changed. *listen.Hub is one; its
// Publish must not block, because the writer calls it.
type Publisher interface {
	Publish(listen.Batch)
}

// Config wires a room. Zero values take the defaults.
type Config struct {
	Engine    *room.Engine
	Store     *room.Store
	Publisher Publisher // nil: nothing is published
	Logger    *slog.Logger
	HostName  string // the host participant's name on first open

	QueueLen     int           // commands waiting for the writer; default 1024
	MaxBatch     int           // commands per transaction; default 64 (1 = no group commit)
	MaxSweepWait time.Duration // longest the sweeper sleeps; default 30s
	FlushEvery   time.Duration // last_seen flush period; default 1 minute

	// CPUSampleEvery measures the writer's CPU on one turn in this many
	// (default 8; 1 measures every turn, for benchmarks and tests). A
	// measured turn pins the writer to its OS thread, and a pinned
	// goroutine that blocks in fsync is handed back to that one thread,
	// which cost a fifth of the throughput without group commit when every
	// turn was measured; one in eight keeps the estimate and not the cost.
	CPUSampleEvery int

	// Watch makes outside edits of the document versions within a
	// second, instead of at the next read or sweep (see watch.go).
	Watch WatchConfig

	// VacuumStepPages is how many free pages one idle step gives back to
	// the filesystem (default 32; negative: no idle steps), and
	// VacuumFreePages how many free pages make the writer start (default
	// 1,024). See vacuum.go.
	VacuumStepPages int
	VacuumFreePages int

	// PruneEvery is how often the sweeper looks for records the engine's
	// retention policy lets go (default 1 minute); it comes back at once
	// while a pass leaves work. PruneBudget bounds the records one prune
	// transaction removes (default room.DefaultPruneBudget). See prune.go.
	PruneEvery  time.Duration
	PruneBudget int
}

// Room is a running room actor.
type Room struct {
	cfg    Config
	eng    *room.Engine
	store  *room.Store
	conn   *sql.Conn
	q      *room.ConnQuerier // the writer's statements, prepared once
	reads  *room.StmtCache   // the read pool's statements, prepared once
	log    *slog.Logger
	tasks  taskCache // tasks/get's view of recently read tasks; see taskcache.go
	pub    Publisher
	cmds   chan *call
	wake   chan struct{} // ask the writer to sweep and sync now
	resync chan struct{} // ask the writer to sync the file only (the watcher)
	quit   chan struct{} // closed by Close: stop accepting, drain, stop
	done   chan struct{} // closed when the writer has stopped
	closed sync.Once

	watchDone chan struct{} // closed when the file watcher has stopped; nil without one

	ckptNudge  chan struct{}  // a commit grew the WAL (see checkpointer.go); nil without a checkpointer
	ckptDone   chan struct{}  // closed when the checkpointer has stopped; nil without one
	ckptFinish chan *ckptStep // the checkpointer's last step, run by the writer between batches; nil without one

	nextWake  atomic.Int64 // unix ms the sweeper is armed for (0 = idle wait), for tests and /debug
	lastFlush time.Time

	// pruneAt is when the next prune turn is due (the engine's clock);
	// zero when the room has no retention policy. Only the writer touches it.
	pruneAt  time.Time
	pruneReq chan chan pruneReply // Prune's requests, run by the writer

	stats Stats

	// Giving free pages back (vacuum.go). incremental and vacuumDue are
	// the writer's own; compacting is Compact's, one at a time.
	incremental bool            // the sidecar is in incremental auto-vacuum mode
	vacuumDue   bool            // idle steps are due: pages were free at the last look
	vacuumAsk   chan *vacuumReq // Compact's steps, run by the writer between batches
	ready       chan struct{}   // closed: what idle returns while steps are due
	compacting  atomic.Bool

	// replies keeps the reply channels of answered commands (Do). The
	// writer sends exactly one reply per command (answer), so a channel
	// whose reply was received is empty and nobody sends on it again: only
	// such a channel goes back. A caller that gave up (its context, the room
	// stopping) leaves its channel to the collector: the writer may still
	// answer it.
	replies sync.Pool
}

// Stats counts the writer's work, for the debug endpoint and benchmarks.
type Stats struct {
	Commands   atomic.Uint64 // commands run
	Failed     atomic.Uint64 // commands rolled back to their savepoint
	Batches    atomic.Uint64 // transactions committed
	Overloaded atomic.Uint64 // commands refused because the queue was full
	Sweeps     atomic.Uint64

	// The writer's cost. CPUNanos is the CPU time (user and system) of the
	// writer's own thread over the turns it measured (CPUTurns of them; see
	// Config.CPUSampleEvery), read from the thread's CPU clock (Linux; 0
	// elsewhere): it leaves out waiting on fsync and every other goroutine,
	// so it is the writer's price however loaded the machine is.
	// CPUSeconds scales it to every turn. Statements counts every SQL
	// statement run on the write connection, transaction control included.
	CPUNanos   atomic.Uint64
	CPUTurns   atomic.Uint64
	Statements atomic.Uint64
	// Turns counts the writer's turns (a batch, a sweep or a sync, and
	// re-arming the sweeper after it); it moves only once the turn's CPU
	// and statements are counted, so a benchmark that waits for it reads
	// exactly one command's cost.
	Turns atomic.Uint64

	// The file watcher's work. Events on other files of the document's
	// directory (the sidecar's -wal on every commit) are only counted as
	// ignored; a sync runs only when the file's stamp changed, checked by
	// the watcher (SyncRequests) and again by the writer (FileSyncs), so
	// the room's own writes never cost a sync.
	WatchEvents  atomic.Uint64 // filesystem events naming the document
	WatchIgnored atomic.Uint64 // events on other files in its directory, dropped by name
	WatchArms    atomic.Uint64 // times the directory watch was put in place (more than 1: re-armed)
	WatchPolls   atomic.Uint64 // poll periods the watcher ran (each looks where the directory is and stats the file)
	SyncRequests atomic.Uint64 // times the watcher saw the file changed and asked the writer
	FileSyncs    atomic.Uint64 // file syncs the writer ran at the watcher's request

	// Checkpoints counts the checkpoints the checkpointer ran (see
	// checkpointer.go); the writer itself runs none when there is one.
	// WALFrames counts the frames (pages) the writer's commits appended to
	// the WAL, as the checkpointer reads them after commits: what COMMIT
	// writes, two pwrites a page, and what a checkpoint later copies. Only
	// counted when there is a checkpointer.
	Checkpoints atomic.Uint64
	WALFrames   atomic.Uint64

	// Free pages given back (vacuum.go): the steps run (idle ones and ce
	// compact's), the pages they gave back, the steps that failed, and the
	// longest step, which is how long a command may have waited for one.
	VacuumSteps        atomic.Uint64
	VacuumPages        atomic.Uint64
	VacuumFailed       atomic.Uint64
	VacuumLongestNanos atomic.Uint64

	// Retention's prune turns (prune.go): how many ran, and the longest
	// and total time each held the writer (its own transaction, COMMIT
	// included), in nanoseconds. What they removed is the engine's
	// PruneTotals.
	PruneTurns    atomic.Uint64
	PruneMaxNanos atomic.Uint64
	PruneNanos    atomic.Uint64

	// CommitSeconds is how long each batch's COMMIT took (the WAL append
	// and its fsync), and BatchCommands how many commands each committed
	// batch ran: /metrics shows them as histograms, so an operator sees a
	// slow disk or group commit at work, not only averages.
	CommitSeconds *Histogram
	BatchCommands *Histogram
}

// CPUSeconds estimates the writer's CPU over all its turns from the turns
// it measured (every one when Config.CPUSampleEvery is 1).
func (s *Stats) CPUSeconds() float64 {
	measured := s.CPUTurns.Load()
	if measured == 0 {
		return 0
	}
	return float64(s.CPUNanos.Load()) / 1e9 * float64(s.Turns.Load()) / float64(measured)
}

type call struct {
	ctx   context.Context
	name  string
	run   runner
	reply chan error // capacity 1: the writer never blocks on a caller
	// fkOff runs the call alone in a transaction with foreign keys off
	// (retention's prune turn, which keeps references whole by itself).
	fkOff bool
}

// runner is what a command runs on the writer. Do's commands are a
// *doCall, one allocation holding the call, the function and its result;
// the writer's own commands are a runFunc.
type runner interface{ exec(tx *room.Tx) error }

// runFunc is a plain function as a runner.
type runFunc func(tx *room.Tx) error

func (f runFunc) exec(tx *room.Tx) error { return f(tx) }

// Open bootstraps the room (first transaction, run before Open returns, so a
// bad sidecar fails here) and starts the writer goroutine.
func Open(ctx context.Context, cfg Config) (*Room, error) {
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 1024
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 64
	}
	if cfg.MaxSweepWait <= 0 {
		cfg.MaxSweepWait = 30 * time.Second
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = time.Minute
	}
	if cfg.CPUSampleEvery <= 0 {
		cfg.CPUSampleEvery = 8
	}
	if cfg.PruneEvery <= 0 {
		cfg.PruneEvery = time.Minute
	}
	if cfg.PruneBudget <= 0 {
		cfg.PruneBudget = room.DefaultPruneBudget
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.VacuumStepPages == 0 {
		cfg.VacuumStepPages = defaultVacuumStepPages
	}
	if cfg.VacuumFreePages <= 0 {
		cfg.VacuumFreePages = defaultVacuumFreePages
	}
	conn, err := cfg.Store.Writer.Conn(ctx)
	if err != nil {
		return nil, room.Internal(err)
	}
	r := &Room{
		cfg: cfg, eng: cfg.Engine, store: cfg.Store, conn: conn, log: cfg.Logger, pub: cfg.Publisher,
		reads: room.NewStmtCache(cfg.Store.Reader),
		cmds:  make(chan *call, cfg.QueueLen), wake: make(chan struct{}, 1), resync: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{}),
		lastFlush: cfg.Engine.Now(), pruneReq: make(chan chan pruneReply),
	}
	if cfg.Engine.Retention.Enabled() {
		r.pruneAt = cfg.Engine.Now() // a first look as soon as the room is up
	}
	r.q = room.NewConnQuerier(conn, &r.stats.Statements)
	r.stats.CommitSeconds, r.stats.BatchCommands = NewHistogram(commitBounds...), NewHistogram(batchBounds...)
	if err := r.eng.EnableWriterCache(ctx, conn); err != nil {
		r.log.Warn("writer: every lifecycle step reads its handoff (no pre-update hook)", "err", err)
	}
	boot := &call{ctx: ctx, name: "bootstrap", reply: make(chan error, 1), run: runFunc(func(tx *room.Tx) error {
		if err := r.eng.Bootstrap(tx, cfg.HostName); err != nil {
			return err
		}
		return r.eng.Sweep(tx)
	})}
	r.runBatch([]*call{boot})
	if err := <-boot.reply; err != nil {
		r.q.Close()
		r.reads.Close()
		conn.Close()
		return nil, err
	}
	r.eng.AttachStore(r.store)
	r.initVacuum(ctx)
	r.startCheckpointer() // before the writer starts: it reads ckptNudge
	go r.loop()
	if cfg.Watch.Enabled {
		r.startWatcher()
	}
	return r, nil
}

// Engine is the room's rules, for read methods.
func (r *Room) Engine() *room.Engine { return r.eng }

// Done is closed once the writer has stopped; callers select on it so nothing
// hangs on a dead room.
func (r *Room) Done() <-chan struct{} { return r.done }

// Queued is how many commands wait for the writer now.
func (r *Room) Queued() int { return len(r.cmds) }

// Stats exposes the writer's counters.
func (r *Room) Stats() *Stats { return &r.stats }

// NextWake is when the sweeper is armed to run next.
func (r *Room) NextWake() time.Time {
	v := r.nextWake.Load()
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// Close stops accepting commands and the file watcher, lets the writer run
// everything already queued (every caller gets an answer), commits, and
// closes the write connection. It waits for the writer, the watcher and the
// checkpointer, or for ctx.
func (r *Room) Close(ctx context.Context) error {
	r.closed.Do(func() { close(r.quit) })
	for _, done := range []chan struct{}{r.done, r.watchDone, r.ckptDone} {
		if done == nil {
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Do runs fn as one command in the writer and returns its result once the
// batch holding it has committed. The caller never hangs: it also returns
// when its ctx ends or the room stops, and a full queue answers overloaded.
func Do[T any](ctx context.Context, r *Room, name string, fn func(tx *room.Tx) (T, error)) (T, error) {
	var zero T
	c := &doCall[T]{call: call{ctx: ctx, name: name, reply: r.getReply()}, fn: fn}
	c.run = c
	select {
	case <-r.quit:
		return zero, room.Errorf(room.KindUnavailable, "the room is stopping")
	default:
	}
	select {
	case r.cmds <- &c.call:
	default:
		r.stats.Overloaded.Add(1)
		return zero, room.Errorf(room.KindOverloaded, "the room is busy; retry shortly").With("retry_after_seconds", 1)
	}
	select {
	case err := <-c.reply:
		r.putReply(c.reply)
		return c.out, err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-r.done:
		select {
		case err := <-c.reply: // answered just before the writer stopped
			r.putReply(c.reply)
			return c.out, err
		default:
			return zero, room.Errorf(room.KindUnavailable, "the room stopped before running this request")
		}
	}
}

// doCall is one Do: the call the writer runs, the caller's function, and
// where the writer leaves its result. A write through Do cost five
// allocations (the call, its reply channel, the closure around fn, the
// result it wrote to, and the generic wrapper); it is now this one, and a
// reply channel from the room's replies.
type doCall[T any] struct {
	call
	fn  func(tx *room.Tx) (T, error)
	out T // set by the writer before it replies; read by Do after the reply
}

func (c *doCall[T]) exec(tx *room.Tx) error {
	v, err := c.fn(tx)
	if err == nil {
		c.out = v
	}
	return err
}

// getReply is a reply channel for one command: an empty one from
// Room.replies, or a new one.
func (r *Room) getReply() chan error {
	if c, ok := r.replies.Get().(chan error); ok {
		return c
	}
	return make(chan error, 1)
}

// putReply keeps c, whose one reply has been received, for another command.
func (r *Room) putReply(c chan error) { r.replies.Put(c) }

// Read runs fn on a read-only snapshot of the sidecar. If the file changed on
// disk it first asks the writer to record the edit, so a read never shows a
// version older than the file the user sees.
//
// While the document's directory is not where the room opened it, reads
// are served from the sidecar alone, which the room holds by descriptor:
// they show the last version the room recorded, and the edit that may be
// waiting in the moved directory is recorded once it is back. Only what
// would change or depend on the file answers unavailable (room.DocAway).
func Read[T any](ctx context.Context, r *Room, fn func(q room.Querier) (T, error)) (T, error) {
	var zero T
	if r.eng.FileChanged() {
		if _, err := Do(ctx, r, "sync", func(tx *room.Tx) (struct{}, error) {
			return struct{}{}, r.eng.SyncFile(tx)
		}); err != nil {
			if ctx.Err() != nil {
				return zero, err
			}
			// Recording the edit failed (a full disk, say): serve what the
			// sidecar holds rather than failing every read; the sweeper
			// tries the sync again. A directory moved away is not a
			// failure to warn about on every read: the watcher logs it
			// once.
			if !errors.Is(err, room.ErrDocMoved) {
				r.log.Warn("reading without the file's latest edit: recording it failed", "err", err)
			}
		}
	}
	tx, err := r.store.Reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		// A new read connection could not open the sidecar: if the
		// document's directory is away (removed, say), say that, not
		// "internal".
		if away := r.eng.DocAway(); away != nil {
			return zero, away
		}
		return zero, room.Internal(err)
	}
	defer tx.Rollback()
	return fn(r.reads.Querier(tx))
}

// Sweep runs the time-based rules now and waits for them (tests with a fake
// clock, and operators who want expiry applied at once).
func (r *Room) Sweep(ctx context.Context) error {
	_, err := Do(ctx, r, "sweep", func(tx *room.Tx) (struct{}, error) {
		return struct{}{}, r.sweep(tx, true)
	})
	return err
}

func (r *Room) sweep(tx *room.Tx, flush bool) error {
	r.stats.Sweeps.Add(1)
	// The time rules run whether or not the document can be read: while
	// its directory is away the sync is skipped, never the sweep.
	if err := r.eng.SyncFile(tx); err != nil && !errors.Is(err, room.ErrDocMoved) {
		return err
	}
	if err := r.eng.Sweep(tx); err != nil {
		return err
	}
	if flush || tx.Now().Sub(r.lastFlush) >= r.cfg.FlushEvery {
		r.lastFlush = tx.Now()
		return r.eng.FlushLastSeen(tx)
	}
	return nil
}

// ctl runs a transaction control statement (BEGIN, SAVEPOINT, …) on the
// write connection. They run several times per batch, so they go through
// the statement cache like the others: prepared once, never parsed again.
func (r *Room) ctl(ctx context.Context, query string) (sql.Result, error) {
	return r.q.ExecContext(ctx, query)
}

// measured runs one turn of the writer (a batch and re-arming the
// sweeper) and counts it; one turn in Config.CPUSampleEvery also has its
// CPU measured. The goroutine is locked to its thread only for a measured
// turn, so the two clock readings are of one thread.
func (r *Room) measured(turn func()) {
	defer r.stats.Turns.Add(1)
	if r.stats.Turns.Load()%uint64(r.cfg.CPUSampleEvery) != 0 {
		turn()
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok := cpuclock.Thread()
	turn()
	if t1, ok1 := cpuclock.Thread(); ok && ok1 && t1 >= t0 {
		r.stats.CPUNanos.Add(uint64(t1 - t0))
		r.stats.CPUTurns.Add(1)
	}
}

func (r *Room) loop() {
	defer close(r.done)
	defer r.conn.Close()
	defer r.q.Close()
	defer r.reads.Close()
	timer := time.NewTimer(r.armSweeper())
	defer timer.Stop()
	batch := make([]*call, 0, r.cfg.MaxBatch)
	for {
		var run []*call
		swept := false
		select {
		case c := <-r.cmds:
			batch = append(batch[:0], c)
			run = r.drain(batch)
		case <-timer.C:
			if r.pruneDue() {
				r.measured(func() {
					r.pruneTurn()
					r.checkVacuum() // what a turn removed may free pages to give back
					timer.Reset(r.armSweeper())
				})
				continue
			}
			run, swept = []*call{r.sweepCall()}, true
		case rep := <-r.pruneReq:
			r.measured(func() {
				rep <- r.pruneAll()
				r.checkVacuum()
				timer.Reset(r.armSweeper())
			})
			continue
		case <-r.wake:
			run, swept = []*call{r.sweepCall()}, true
		case <-r.resync:
			// Look again here: the room's own write may have committed
			// since the watcher looked, and then there is nothing to do.
			if !r.eng.FileChanged() {
				continue // the sweeper's timer is still armed
			}
			r.stats.FileSyncs.Add(1)
			run = []*call{r.syncCall()}
		case step := <-r.ckptFinish:
			r.finishCheckpoint(step)
			continue // no batch ran: the sweeper's timer is still armed
		case req := <-r.vacuumAsk:
			r.measured(func() { r.runVacuumReq(req) })
			continue // likewise
		case <-r.idle():
			// Idle means no command waits: one that came meanwhile goes
			// first, and the step waits for the next quiet moment.
			if len(r.cmds) == 0 {
				r.measured(r.idleVacuum)
			}
			continue
		case <-r.quit:
			r.measured(r.stop)
			return
		}
		r.measured(func() {
			r.runBatch(run)
			if swept {
				r.checkVacuum()
			}
			timer.Reset(r.armSweeper())
		})
	}
}

// drain appends what is already queued, up to MaxBatch, without waiting.
func (r *Room) drain(batch []*call) []*call {
	for len(batch) < r.cfg.MaxBatch {
		select {
		case c := <-r.cmds:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

// stop answers everything still queued, in batches, then returns. Do refuses
// new commands once quit is closed; one racing past that check is answered
// "unavailable" by Done.
func (r *Room) stop() {
	for {
		batch := r.drain(nil)
		if len(batch) == 0 {
			return
		}
		r.runBatch(batch)
	}
}

func (r *Room) sweepCall() *call {
	return &call{ctx: context.Background(), name: "sweep", reply: make(chan error, 1),
		run: runFunc(func(tx *room.Tx) error { return r.sweep(tx, false) })}
}

// armSweeper returns how long to sleep until the next due time, capped.
func (r *Room) armSweeper() time.Duration {
	wait := r.cfg.MaxSweepWait
	now := r.eng.Now()
	if due, ok, err := r.eng.NextDue(context.Background(), r.q); err != nil {
		r.log.Error("sweeper: reading the next due time failed", "err", err)
	} else if ok {
		wait = min(wait, max(due.Sub(now), 0)+time.Millisecond)
	}
	if !r.pruneAt.IsZero() {
		wait = min(wait, max(r.pruneAt.Sub(now), 0)+time.Millisecond)
	}
	r.nextWake.Store(now.Add(wait).UnixMilli())
	return wait
}

// RequestSweep asks the writer to sweep and look at the file soon, without waiting.
func (r *Room) RequestSweep() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// RequestFileSync asks the writer to record an outside edit of the file
// soon, without waiting and without a full sweep: the watcher calls it when
// the file's stamp changed. Requests made before the writer gets to it
// coalesce into one sync, which reads the file as it is then.
func (r *Room) RequestFileSync() {
	select {
	case r.resync <- struct{}{}:
	default:
	}
}

func (r *Room) syncCall() *call {
	return &call{ctx: context.Background(), name: "sync", reply: make(chan error, 1),
		run: runFunc(func(tx *room.Tx) error { return r.eng.SyncFile(tx) })}
}

// runBatch is the heart of the writer: one transaction, a savepoint per
// command after the first, one COMMIT, then one publish and the answers.
func (r *Room) runBatch(batch []*call) {
	if len(batch) == 1 && batch[0].fkOff {
		if _, err := r.ctl(context.Background(), "PRAGMA foreign_keys = OFF"); err != nil {
			batch[0].reply <- room.Internal(err)
			return
		}
		defer func() {
			if _, err := r.ctl(context.Background(), "PRAGMA foreign_keys = ON"); err != nil {
				r.log.Error("writer: could not turn foreign keys back on", "err", err)
			}
		}()
	}
	committed := false
	defer func() { r.eng.EndWriterBatch(committed) }()
	ctx := context.Background() // SQL is never interrupted by a caller going away
	now := r.eng.Now()
	results := make([]error, len(batch))
	ran := make([]bool, len(batch))
	var outcomes []room.Outcome
	// The transaction opens with the first command that runs. A command
	// needs its own savepoint only when the transaction already holds
	// another's work: the first one, if it fails, rolls the whole
	// transaction back instead, and the next command opens a new one. With
	// one command per batch (no group commit, or a quiet room) that saves
	// a SAVEPOINT and a RELEASE per command.
	open := false
	for i, c := range batch {
		if _, ok := c.run.(ping); ok {
			continue // answered nil, not counted: it only shows the writer turns
		}
		if err := c.ctx.Err(); err != nil {
			results[i] = err // the caller has gone; do not act for it
			continue
		}
		ran[i] = true
		if !open {
			if _, err := r.ctl(ctx, "BEGIN IMMEDIATE"); err != nil {
				r.log.Error("writer: BEGIN failed", "err", err)
				results[i] = room.Internal(err)
				continue
			}
			open = true
		}
		out, err := r.runOne(ctx, c, now, len(outcomes) > 0)
		results[i] = err
		switch {
		case err == nil:
			outcomes = append(outcomes, out)
			results[i] = out.Err // nil, or a refusal whose state change commits
		case len(outcomes) == 0:
			open = false // runOne rolled the transaction back
		}
	}
	if !open {
		r.answer(batch, results, ran, nil)
		return
	}
	err := room.WriteEvents(ctx, r.q, outcomes)
	if err == nil {
		err = room.TrimRing(ctx, r.q, r.eng.Limits.EventRing)
	}
	if err == nil {
		t0 := time.Now()
		if _, err = r.ctl(ctx, "COMMIT"); err == nil {
			r.stats.CommitSeconds.Observe(time.Since(t0).Seconds())
		}
	}
	if err != nil {
		r.log.Error("writer: COMMIT failed; the batch is rolled back", "err", err, "commands", len(batch))
		r.ctl(ctx, "ROLLBACK")
		for i := len(outcomes) - 1; i >= 0; i-- {
			for _, uerr := range room.RunUndo(outcomes[i]) {
				r.log.Error("writer: could not undo a command's file write; the next sync records it", "err", uerr)
			}
		}
		for i := range batch {
			if ran[i] {
				results[i] = room.Internal(err)
			}
		}
		outcomes = nil
	} else {
		committed = true
		r.stats.Batches.Add(1)
		n := 0
		for _, ok := range ran {
			if ok {
				n++
			}
		}
		r.stats.BatchCommands.Observe(float64(n))
		r.nudgeCheckpointer()
		r.forgetTasks(outcomes)
	}
	for _, o := range outcomes {
		for _, f := range o.After {
			f()
		}
	}
	r.answer(batch, results, ran, outcomes)
}

// answer publishes what a committed batch changed, then answers its
// callers and counts its commands.
func (r *Room) answer(batch []*call, results []error, ran []bool, outcomes []room.Outcome) {
	// Publish before answering: a caller that opens a listen right after its
	// answer must not receive the change it was already answered for.
	// Publish never blocks, so this costs the callers nothing.
	if r.pub != nil && len(outcomes) > 0 {
		if b := toBatch(outcomes); len(b.Messages) > 0 || len(b.EndSessions) > 0 {
			r.pub.Publish(b)
		}
	}
	for i, c := range batch {
		if ran[i] {
			r.stats.Commands.Add(1)
			if results[i] != nil {
				r.stats.Failed.Add(1)
			}
		}
		c.reply <- results[i]
	}
}

// forgetTasks drops from the task cache every task a committed batch
// changed, and every task when the batch purged rows (retention sends no
// notice naming them).
func (r *Room) forgetTasks(outcomes []room.Outcome) {
	var ids []string
	all := false
	for _, o := range outcomes {
		for _, n := range o.Tasks {
			ids = append(ids, n.TaskID)
		}
		all = all || o.TasksPurged
	}
	if len(ids) > 0 || all {
		r.tasks.forget(ids, all)
	}
}

// runOne runs one command, inside its own savepoint when the transaction
// already holds other commands' work (savepoint), else alone in the
// transaction. A failure (or a panic) rolls back exactly that command: its
// rows, its events and its notices; without a savepoint that is the whole
// transaction, which is then closed.
func (r *Room) runOne(ctx context.Context, c *call, now time.Time, savepoint bool) (out room.Outcome, err error) {
	if savepoint {
		if _, err := r.ctl(ctx, "SAVEPOINT cmd"); err != nil {
			return out, room.Internal(err)
		}
	}
	tx := r.eng.NewTx(ctx, r.q, now)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("writer: command panicked; rolled back", "command", c.name, "panic", fmt.Sprint(p))
			err = room.Internal(fmt.Errorf("panic in %s: %v", c.name, p))
		}
		if err != nil {
			rollback := "ROLLBACK"
			if savepoint {
				rollback = "ROLLBACK TO cmd"
			}
			if _, rbErr := r.ctl(ctx, rollback); rbErr != nil {
				r.log.Error("writer: "+rollback+" failed", "err", rbErr)
			}
			for _, uerr := range tx.Abandon() {
				r.log.Error("writer: could not undo a command's file write; the next sync records it", "command", c.name, "err", uerr)
			}
		}
		if !savepoint {
			return
		}
		if _, relErr := r.ctl(ctx, "RELEASE cmd"); relErr != nil && err == nil {
			err = room.Internal(relErr)
		}
	}()
	if err = c.run.exec(tx); err != nil {
		return out, err
	}
	return tx.Finish()
}

package room

import (
	"context"
	"database/sql"
	"slices"
	"time"
)

// Querier is what both the write connection and a read snapshot offer, so
// one query function serves the writer (inside its transaction) and readers.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Tx is one command's view of the room actor's write transaction. The actor
// wraps it in a SAVEPOINT: if the command fails, everything it did — rows,
// events and post-commit notices — is discarded together.
type Tx struct {
	ctx context.Context
	q   Querier
	e   *Engine
	now time.Time

	events        []Event
	tasks         []string     // task ids whose state changed, in order, de-duplicated
	snaps         []TaskNotice // tasks as the command last left them, known without reading (see snapshot)
	tasksPurged   bool         // task rows were deleted without a notice (retention)
	resources     []string     // resource URIs whose content changed
	endedSessions []string
	after         []func()       // in-memory effects to apply only once the batch commits
	undo          []func() error // outside effects (the document file) to reverse if the command or its batch does not commit
	failAfter     error          // reported to the caller although the command's changes commit

	changes0 uint64      // the writer cache's row count when the command began (handoff_wcache.go)
	kept     *handoffRow // the handoff a lifecycle step leaves, to keep if it wrote only keptOwn rows
	keptOwn  uint64
	// The live task a create started or a complete ended (task_live_wcache.go).
	liveAdd     string
	liveAddTask liveTask
	liveEnd     string
}

// CommitAndFail records err as the command's answer while keeping what the
// command changed: a refusal that is itself a state change (an approved
// proposal found stale becomes conflicted, and the caller gets stale_version).
func (tx *Tx) CommitAndFail(err error) { tx.failAfter = err }

// NewTx starts a command on q (the writer's connection, inside BEGIN and a
// SAVEPOINT owned by the caller). now is the command's single clock reading.
func (e *Engine) NewTx(ctx context.Context, q Querier, now time.Time) *Tx {
	return &Tx{ctx: ctx, q: q, e: e, now: now, changes0: e.wc.changes}
}

// Context and Querier let a command read inside its own transaction (for
// example to resolve a participant before acting as it).
func (tx *Tx) Context() context.Context { return tx.ctx }

// Querier is the transaction's connection.
func (tx *Tx) Querier() Querier { return tx.q }

// Now is the time the command runs at; one reading per command keeps its rows consistent.
func (tx *Tx) Now() time.Time { return tx.now }

func (tx *Tx) nowMS() int64 { return ms(tx.now) }

func (tx *Tx) exec(query string, args ...any) (sql.Result, error) {
	return tx.q.ExecContext(tx.ctx, query, args...)
}

func (tx *Tx) execN(query string, args ...any) (int64, error) {
	res, err := tx.q.ExecContext(tx.ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Outcome is what a successful command hands to the actor for after COMMIT:
// the event rows it wrote (with ids) and the live notices they imply.
type Outcome struct {
	Events        []Event
	Tasks         []TaskNotice
	Resources     []string // resource URIs (document, sections) whose content changed
	EndedSessions []string // session refs whose live streams must end
	// TasksPurged says task rows were deleted by retention, which sends no
	// notice: anything holding tasks by id must forget them all.
	TasksPurged bool
	After       []func()
	// Undo reverses the command's effects outside the sidecar, newest
	// first, when the batch holding it fails to commit.
	Undo []func() error
	// Err is the answer of a command that committed but refused (CommitAndFail).
	Err error
}

// TaskNotice carries a task as it stood when the command finished, so a
// live subscriber sees exactly what tasks/get would. It is a snapshot, read
// in the command's transaction; encoding it is the front door's business,
// done off the writer and only when someone follows the task.
type TaskNotice struct {
	TaskID string
	Task   DetailedTask
}

func (tx *Tx) taskChanged(id string) {
	tx.snaps = slices.DeleteFunc(tx.snaps, func(n TaskNotice) bool { return n.TaskID == id })
	for _, t := range tx.tasks {
		if t == id {
			return
		}
	}
	tx.tasks = append(tx.tasks, id)
}

// snapshot records t as its task stands after the command's last change to
// it, so Finish need not read it back. A later taskChanged drops it.
func (tx *Tx) snapshot(t DetailedTask) {
	tx.snaps = append(tx.snaps, TaskNotice{TaskID: t.TaskID, Task: t})
}

// Abandon reverses the command's effects outside the sidecar, newest first;
// the actor calls it when the command's savepoint is rolled back.
func (tx *Tx) Abandon() []error {
	return runUndo(tx.undo)
}

func runUndo(undo []func() error) []error {
	var errs []error
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// RunUndo reverses a committed-then-failed batch's outside effects, newest
// command first (the actor passes the outcomes in reverse batch order).
func RunUndo(o Outcome) []error { return runUndo(o.Undo) }

// Finish gives the command's events about a handoff that handoff's audience
// (event_audience.go), snapshots the changed tasks inside the transaction
// and returns the command's outcome. The actor calls it after the command succeeded, before
// RELEASE of the savepoint.
func (tx *Tx) Finish() (Outcome, error) {
	if err := tx.setEventAudiences(); err != nil {
		return Outcome{}, err
	}
	out := Outcome{Events: tx.events, Resources: tx.resources, EndedSessions: tx.endedSessions,
		Undo: tx.undo, Err: tx.failAfter, TasksPurged: tx.tasksPurged}
	for _, id := range tx.tasks {
		if i := slices.IndexFunc(tx.snaps, func(n TaskNotice) bool { return n.TaskID == id }); i >= 0 {
			out.Tasks = append(out.Tasks, tx.snaps[i])
			continue
		}
		t, err := tx.e.taskByID(tx.ctx, tx.q, id)
		if err != nil {
			if ErrorKind(err) == KindTaskNotFound {
				continue // purged in the same command: nothing to show
			}
			return Outcome{}, err
		}
		out.Tasks = append(out.Tasks, TaskNotice{TaskID: id, Task: t})
	}
	// Last: nothing of the command may fail after the writer's copies
	// take it in.
	if err := tx.finishWriterCache(); err != nil {
		return Outcome{}, err
	}
	out.After = tx.after
	return out, nil
}

// queryStrings reads a one-column query fully before the caller writes: the
// writer's statements must not interleave with an open cursor.
func queryStrings(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, Internal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

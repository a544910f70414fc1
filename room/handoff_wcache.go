package room

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"

	"modernc.org/sqlite"
)

// The writer's handoff rows (issue 17). Every lifecycle step after create
// began by reading its handoff back (loadHandoffForWrite: a three-table
// read of 32 columns, 11% of the writer's CPU in a room under the
// lifecycle), although the writer itself wrote that row one step earlier
// and nothing else writes the sidecar. So the writer keeps each live
// handoff as the last committed step left it, and the next step starts
// from that copy instead of a statement.
//
// The copy must be exactly what the read would return, so the rules are
// strict and checked by SQLite rather than by discipline:
//
//   - SQLite's pre-update hook on the writer's connection counts every row
//     written to handoffs, tasks and task_inputs, by any statement
//     (cascades included).
//   - A step keeps its handoff only on its plain path, and only if the rows
//     the command wrote are exactly the step's own (create 2, accept 2,
//     complete 2, a decision 1). Any other command that wrote one of those
//     tables — a sweep, an expiry inside a step, a cancel, an input request,
//     raw SQL — empties the whole copy when its batch commits, and in its own
//     batch nothing is read from the copy after it.
//   - Copies are applied only once their batch has committed (Outcome.After,
//     in command order); a rolled-back command or batch changes nothing. A
//     handoff kept in the running batch is read from the sidecar for the
//     rest of that batch.
//   - A settled handoff (approved, rejected) is dropped: nothing more
//     happens to it on the plain path.
//
// Without the hook (a connection that is not modernc's, or an Engine used
// without the actor) there is no copy and every step reads its handoff.
// In this package's tests every copy used is compared with the read it
// replaces (verifyWriterCache).

// maxWriterHandoffs bounds the copy; past it the copy starts over empty.
const maxWriterHandoffs = 4096

// verifyWriterCache makes every use of a copy also read the row and fail
// the command if they differ (set by this package's tests).
var verifyWriterCache bool

type writerCache struct {
	enabled bool
	changes uint64                // rows written to handoffs, tasks and task_inputs (the hook)
	used    uint64                // copies used instead of a read
	rows    map[string]handoffRow // committed copies, by handoff id
	// For the running batch: a command wrote the three tables other than
	// by a kept step (spoiled), and the handoffs kept in it (touched).
	spoiled bool
	touched map[string]bool
	live    liveSet // the live tasks (task_live_wcache.go)
}

// EnableWriterCache registers the pre-update hook on the writer's
// connection, which lets the writer keep its handoff rows (see above).
// The actor calls it once, on its own connection, before any command.
func (e *Engine) EnableWriterCache(ctx context.Context, conn *sql.Conn) error {
	err := conn.Raw(func(dc any) error {
		h, ok := dc.(interface {
			RegisterPreUpdateHook(sqlite.PreUpdateHookFn)
		})
		if !ok {
			return fmt.Errorf("the writer's connection (%T) has no pre-update hook", dc)
		}
		h.RegisterPreUpdateHook(func(d sqlite.SQLitePreUpdateData) {
			switch d.TableName {
			case "handoffs", "tasks", "task_inputs":
				e.wc.changes++
			}
		})
		return nil
	})
	if err != nil {
		return Internal(err)
	}
	e.wc = writerCache{enabled: true, rows: map[string]handoffRow{}, touched: map[string]bool{}}
	return nil
}

// EndWriterBatch closes the running batch's bookkeeping; the actor calls it
// after every batch, saying whether the batch committed.
func (e *Engine) EndWriterBatch(committed bool) {
	e.wc.live.endBatch(committed)
	e.wc.spoiled = false
	clear(e.wc.touched)
}

// copiesUsable says the command may answer from the writer's copies (the
// handoffs here, the live tasks in task_live_wcache.go): they are kept, no
// command of the running batch wrote the three tables other than by a kept
// step, and this command has written none of their rows yet.
func (tx *Tx) copiesUsable() bool {
	wc := &tx.e.wc
	return wc.enabled && !wc.spoiled && wc.changes == tx.changes0
}

// cachedHandoff is the committed copy of handoff id, when it may be used in
// this batch.
func (tx *Tx) cachedHandoff(id string) (*handoffRow, bool) {
	wc := &tx.e.wc
	if !tx.copiesUsable() || wc.touched[id] {
		return nil, false
	}
	h, ok := wc.rows[id]
	if !ok {
		return nil, false
	}
	wc.used++
	return &h, true
}

// keepHandoff records that the command, a lifecycle step on its plain
// path, leaves handoff h as it now stands, having written exactly own rows
// of handoffs, tasks and task_inputs. Finish decides whether it is kept.
func (tx *Tx) keepHandoff(h *handoffRow, own uint64) {
	if !tx.e.wc.enabled {
		return
	}
	c := *h
	tx.kept, tx.keptOwn = &c, own
}

// finishWriterCache runs in Finish: it settles what the command does to the
// copy, in the batch now and once the batch commits.
func (tx *Tx) finishWriterCache() error {
	wc := &tx.e.wc
	if !wc.enabled {
		return nil
	}
	wrote := wc.changes - tx.changes0
	e := tx.e
	kept := tx.kept != nil && wrote == tx.keptOwn
	switch {
	case kept:
		h := *tx.kept
		wc.touched[h.id] = true
		settled := h.status == HandoffApproved || h.status == HandoffRejected
		tx.after = append(tx.after, func() {
			if settled {
				delete(e.wc.rows, h.id)
				return
			}
			if len(e.wc.rows) >= maxWriterHandoffs {
				clear(e.wc.rows)
			}
			e.wc.rows[h.id] = h
		})
	case wrote > 0:
		wc.spoiled = true
		tx.after = append(tx.after, func() { clear(e.wc.rows) })
	}
	return tx.finishLive(kept, wrote > 0)
}

// verifyCachedHandoff compares a copy with the row it stands for.
func verifyCachedHandoff(tx *Tx, id string, h *handoffRow) error {
	db, err := readHandoffForWrite(tx, id)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(*db, *h) {
		return Errorf(KindInternal, "the writer's copy of handoff %s differs from the sidecar:\ncopy %+v\nrow  %+v", id, *h, *db)
	}
	return nil
}

package room

import (
	"maps"
)

// The writer's live tasks (issue 17). Every create counted the room's live
// tasks with a statement (checkActiveTaskCaps: the count, the caller's
// share and the first due time), about 5% of the writer's CPU under the
// lifecycle, although at most MaxActiveTasks tasks are live and the writer
// itself made every one of them live or ended it. So the writer keeps the
// live tasks (id, owner, due time) beside its handoff copies and answers the
// count from them, under the same rules (handoff_wcache.go):
//
//   - The set describes the running transaction: a create kept on its plain
//     path adds its task, a complete kept on its plain path removes it,
//     accept and the decisions change no task. Any other command that wrote
//     handoffs, tasks or task_inputs (a sweep, an expiry, a cancel, an input
//     request, raw SQL: the pre-update hook counts them) drops the set.
//   - It is filled by one statement, by a create that has written nothing
//     yet (so the set does not depend on that command, and stays right if
//     it is rolled back), and only when the set is not held.
//   - A command's change is applied in Finish, once nothing of the command
//     can fail any more; a batch that changed or filled the set and did not
//     commit drops it (EndWriterBatch).
//
// In this package's tests every use is compared with the statement it
// replaces, and every command that leaves the set held compares it with the
// sidecar (verifyWriterCache).

// liveTask is a live task as the cap check needs it.
type liveTask struct {
	owner string
	due   int64 // created_at + ttl_ms
}

// liveTasksQuery lists the live tasks (read through tasks_expiry_due, like
// the count it replaces; a plan test pins it).
const liveTasksQuery = `SELECT task_id, owner_id, created_at + ttl_ms FROM tasks
	WHERE status IN ('working','input_required')`

// liveSet is the writer's set of live tasks.
type liveSet struct {
	ok      bool                // tasks is the running transaction's live tasks
	tasks   map[string]liveTask // by task id
	inBatch bool                // the running batch filled or changed tasks
	used    uint64              // counts answered from the set
}

// drop forgets the set; the next create that may fill it reads it again.
func (l *liveSet) drop() {
	l.ok = false
	clear(l.tasks)
}

// liveCounts answers the cap check's statement from the writer's set when
// the command may use it: the live tasks, owner's among them, and the first
// due time (anyLive false: none live). held is false when the caller must run
// the statement.
func (tx *Tx) liveCounts(owner string) (live, mine int, firstDue int64, anyLive, held bool, err error) {
	wc := &tx.e.wc
	if !tx.copiesUsable() {
		return 0, 0, 0, false, false, nil
	}
	ls := &wc.live
	if !ls.ok {
		if err := tx.fillLive(); err != nil {
			return 0, 0, 0, false, false, err
		}
	}
	ls.used++
	for _, t := range ls.tasks {
		live++
		if t.owner == owner {
			mine++
		}
		if !anyLive || t.due < firstDue {
			firstDue = t.due
		}
		anyLive = true
	}
	return live, mine, firstDue, anyLive, true, nil
}

// fillLive reads the live tasks into the writer's set.
func (tx *Tx) fillLive() error {
	tasks, err := readLiveTasks(tx)
	if err != nil {
		return err
	}
	ls := &tx.e.wc.live
	if ls.tasks == nil {
		ls.tasks = map[string]liveTask{}
	}
	clear(ls.tasks)
	maps.Copy(ls.tasks, tasks)
	ls.ok, ls.inBatch = true, true
	return nil
}

func readLiveTasks(tx *Tx) (map[string]liveTask, error) {
	rows, err := tx.q.QueryContext(tx.ctx, liveTasksQuery)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := map[string]liveTask{}
	for rows.Next() {
		var id string
		var t liveTask
		if err := rows.Scan(&id, &t.owner, &t.due); err != nil {
			return nil, Internal(err)
		}
		out[id] = t
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// startsLive records that the command, a create on its plain path, made
// task id live; endsLive that a complete on its plain path ended it. They
// take effect in Finish if the command wrote only its own rows.
func (tx *Tx) startsLive(id string, t liveTask) { tx.liveAdd, tx.liveAddTask = id, t }

func (tx *Tx) endsLive(id string) { tx.liveEnd = id }

// finishLive settles what a command that finished does to the set: kept
// says it wrote exactly its lifecycle step's own rows, wrote whether it
// wrote any row of the three tables.
func (tx *Tx) finishLive(kept, wrote bool) error {
	ls := &tx.e.wc.live
	switch {
	case !ls.ok:
		return nil
	case kept:
		if tx.liveAdd != "" {
			ls.tasks[tx.liveAdd] = tx.liveAddTask
			ls.inBatch = true
		}
		if tx.liveEnd != "" {
			delete(ls.tasks, tx.liveEnd)
			ls.inBatch = true
		}
	case wrote:
		ls.drop()
		return nil
	}
	if verifyWriterCache {
		return verifyLive(tx)
	}
	return nil
}

// verifyLive compares the writer's set with the sidecar.
func verifyLive(tx *Tx) error {
	db, err := readLiveTasks(tx)
	if err != nil {
		return err
	}
	if !maps.Equal(db, tx.e.wc.live.tasks) {
		return Errorf(KindInternal, "the writer's live tasks differ from the sidecar:\nset  %v\nrows %v", tx.e.wc.live.tasks, db)
	}
	return nil
}

// endBatch drops the set if the batch that changed or filled it did
// not commit.
func (l *liveSet) endBatch(committed bool) {
	if l.inBatch && !committed {
		l.drop()
	}
	l.inBatch = false
}

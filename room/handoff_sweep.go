package room

import (
	"database/sql"
	"errors"
)

// expiredTaskFailure is what a task's error_json records when its TTL ran
// out before it finished: the reason, which front doors render in their own
// words (for MCP, D34's error object; see failureOf for older rows).
const expiredTaskFailure = `{"reason":"` + TaskFailureExpired + `"}`

// expiredTaskMessage is the statusMessage of a task failed by its TTL (D34).
const expiredTaskMessage = "task expired"

// sweepTasks fails live tasks older than their TTL (cancelling their open or
// accepted handoffs in the same transaction, D5) and purges terminal task rows
// one TTL after their last update. Purging writes no event: it is retention,
// not a state change; the handoff keeps the result.
func (e *Engine) sweepTasks(tx *Tx) error {
	if err := e.expireDueTasks(tx); err != nil {
		return err
	}
	// task_inputs go with their task (ON DELETE CASCADE).
	n, err := tx.execN(purgeTasksQuery, tx.nowMS())
	if err != nil {
		return Internal(err)
	}
	tx.tasksPurged = tx.tasksPurged || n > 0
	return nil
}

// purgeChunk bounds the task rows one sweep deletes. A room restarted after
// a day away may find a million rows due at once; deleting them in one
// transaction held the writer (and startup) for most of a minute. A sweep
// that leaves rows due makes NextDue say "now", so the sweeper comes back
// at once, between other commands, until none are left.
const purgeChunk = 1000

// purgeTasksQuery deletes the oldest terminal task rows one TTL after their
// last update, at most purgeChunk of them; the expression index of
// migration 0002 finds them in order.
var purgeTasksQuery = `DELETE FROM tasks WHERE task_id IN (
		SELECT task_id FROM tasks WHERE status IN ('completed','failed','cancelled')
		AND last_updated_at + ttl_ms <= ? ORDER BY last_updated_at + ttl_ms` + limitSQL(purgeChunk) + `)`

// expireDueTasksQuery lists live tasks past their TTL, oldest first.
const expireDueTasksQuery = `SELECT task_id, correlation_id FROM tasks
		WHERE status IN ('working','input_required') AND created_at + ttl_ms <= ?
		ORDER BY created_at, task_id`

// expireDueTasks fails every live task whose TTL has run out, oldest first.
func (e *Engine) expireDueTasks(tx *Tx) error {
	rows, err := tx.q.QueryContext(tx.ctx, expireDueTasksQuery, tx.nowMS())
	if err != nil {
		return Internal(err)
	}
	type due struct{ task, handoff string }
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.task, &d.handoff); err != nil {
			rows.Close()
			return Internal(err)
		}
		list = append(list, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Internal(err)
	}
	for _, d := range list {
		if err := e.expireTask(tx, d.task, d.handoff); err != nil {
			return err
		}
	}
	return nil
}

// expireTaskIfDue applies the TTL rule to one task a command is about to act
// on, so no command acts on work that has already expired but has not been
// swept yet (D39).
func (e *Engine) expireTaskIfDue(tx *Tx, taskID string) error {
	var handoffID string
	err := tx.q.QueryRowContext(tx.ctx, `SELECT correlation_id FROM tasks WHERE task_id = ?
		AND status IN ('working','input_required') AND created_at + ttl_ms <= ?`, taskID, tx.nowMS()).Scan(&handoffID)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return Internal(err)
	}
	return e.expireTask(tx, taskID, handoffID)
}

// expireTask fails one live task with "task expired", closes its open input
// requests, and cancels its open or accepted handoff (D5): one event per
// changed record, actor NULL (the system).
func (e *Engine) expireTask(tx *Tx, taskID, handoffID string) error {
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE tasks SET status = 'failed', status_message = ?, error_json = ?, last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, expiredTaskMessage, expiredTaskFailure, now, taskID)
	if err != nil {
		return Internal(err)
	}
	if n == 0 {
		return nil
	}
	if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'cancelled'
		WHERE task_id = ? AND closed_at IS NULL`, now, taskID); err != nil {
		return Internal(err)
	}
	if err := tx.handoffEvent("task.failed", "", handoffID, taskID, map[string]any{
		"status": TaskFailed, "reason": TaskFailureExpired,
	}); err != nil {
		return err
	}
	tx.taskChanged(taskID)
	n, err = tx.execN(`UPDATE handoffs SET status = 'cancelled', cancelled_at = ?, cancel_reason = 'task_expired', updated_at = ?
		WHERE handoff_id = ? AND status IN ('open','accepted')`, now, now, handoffID)
	if err != nil {
		return Internal(err)
	}
	if n == 1 {
		if err := tx.handoffEvent("handoff.cancelled", "", handoffID, taskID, map[string]any{
			"status": HandoffCancelled, "reason": "task_expired",
		}); err != nil {
			return err
		}
	}
	return nil
}

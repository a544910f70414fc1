package room

// expiredTaskError is the JSON-RPC error a task carries when its TTL ran out
// before it finished (D34).
const expiredTaskError = `{"code":-32603,"message":"task expired"}`

// sweepTasks fails live tasks older than their TTL (cancelling their open or
// accepted handoffs in the same transaction, D5) and purges terminal task rows
// one TTL after their last update. Purging writes no event: it is retention,
// not a state change; the handoff keeps the result.
func (e *Engine) sweepTasks(tx *Tx) error {
	now := tx.nowMS()
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT task_id, correlation_id FROM tasks
		WHERE status IN ('working','input_required') AND created_at + ttl_ms <= ?`, now)
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
		if _, err := tx.exec(`UPDATE tasks SET status = 'failed', status_message = 'task expired', error_json = ?,
			last_updated_at = ? WHERE task_id = ?`, expiredTaskError, now, d.task); err != nil {
			return Internal(err)
		}
		if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'cancelled'
			WHERE task_id = ? AND closed_at IS NULL`, now, d.task); err != nil {
			return Internal(err)
		}
		if err := tx.emit("task.failed", refs{handoff: d.handoff, task: d.task}, map[string]any{
			"task_id": d.task, "handoff_id": d.handoff, "status": TaskFailed, "reason": "task_expired",
		}); err != nil {
			return err
		}
		tx.taskChanged(d.task)
		n, err := tx.execN(`UPDATE handoffs SET status = 'cancelled', cancelled_at = ?, cancel_reason = 'task_expired', updated_at = ?
			WHERE handoff_id = ? AND status IN ('open','accepted')`, now, now, d.handoff)
		if err != nil {
			return Internal(err)
		}
		if n == 1 {
			if err := tx.emit("handoff.cancelled", refs{handoff: d.handoff, task: d.task}, map[string]any{
				"handoff_id": d.handoff, "task_id": d.task, "status": "cancelled", "reason": "task_expired",
			}); err != nil {
				return err
			}
		}
	}
	if _, err := tx.exec(`DELETE FROM tasks WHERE status IN ('completed','failed','cancelled') AND last_updated_at + ttl_ms <= ?`, now); err != nil {
		return Internal(err)
	}
	return nil
}

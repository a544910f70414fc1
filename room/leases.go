package room

// releaseLeases ends the live leases matching where, with one event each.
// reason is released|expired|left|admin; eventType is lease.released or lease.expired.
func (e *Engine) releaseLeases(tx *Tx, where string, args []any, reason, eventType string) error {
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT lease_id, participant_id, target FROM leases WHERE released_at IS NULL AND `+where, args...)
	if err != nil {
		return Internal(err)
	}
	type lease struct{ id, pid, target string }
	var list []lease
	for rows.Next() {
		var l lease
		if err := rows.Scan(&l.id, &l.pid, &l.target); err != nil {
			rows.Close()
			return Internal(err)
		}
		list = append(list, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Internal(err)
	}
	for _, l := range list {
		if _, err := tx.exec(`UPDATE leases SET released_at = ?, release_reason = ? WHERE lease_id = ?`, tx.nowMS(), reason, l.id); err != nil {
			return Internal(err)
		}
		if err := tx.emit(eventType, refs{actor: l.pid}, map[string]any{
			"lease_id": l.id, "participant_id": l.pid, "target": l.target,
		}); err != nil {
			return err
		}
	}
	return nil
}

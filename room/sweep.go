package room

import (
	"context"
	"database/sql"
	"time"
)

// Sweep applies every time-based rule that is due: sessions and leases past
// their expiry end, invitations past theirs are recorded as lapsed, tasks past
// their TTL fail (and their unfinished handoffs are cancelled), and terminal
// task rows one TTL old are purged. Each change writes its event.
func (e *Engine) Sweep(tx *Tx) error {
	now := tx.nowMS()
	if err := e.slideDue(tx, now); err != nil {
		return err
	}
	if err := e.endSessions(tx, `expires_at <= ?`, []any{now}, "expired"); err != nil {
		return err
	}
	if err := e.releaseLeases(tx, `expires_at <= ?`, []any{now}, "expired", "lease.expired"); err != nil {
		return err
	}
	if err := e.lapseInvites(tx); err != nil {
		return err
	}
	if err := e.sweepTasks(tx); err != nil {
		return err
	}
	return nil
}

func (e *Engine) lapseInvites(tx *Tx) error {
	ids, err := queryStrings(tx.ctx, tx.q, `SELECT invite_id FROM invites
		WHERE lapsed_at IS NULL AND revoked_at IS NULL AND expires_at <= ?`, tx.nowMS())
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.exec(`UPDATE invites SET lapsed_at = ? WHERE invite_id = ?`, tx.nowMS(), id); err != nil {
			return Internal(err)
		}
		if err := tx.emit("invite.expired", refs{}, map[string]any{"invite_id": id}); err != nil {
			return err
		}
	}
	return nil
}

// nextDueQuery asks for the earliest moment any time-based rule falls due.
// It runs after every write batch, so each branch must be answered from an
// index (migration 0002 indexes the task expressions); sweep_plan_test.go
// checks that no branch walks a table.
const nextDueQuery = `SELECT min(t) FROM (
		SELECT min(expires_at) AS t FROM sessions WHERE ended_at IS NULL
		UNION ALL SELECT min(expires_at) FROM leases WHERE released_at IS NULL
		UNION ALL SELECT min(expires_at) FROM invites WHERE lapsed_at IS NULL AND revoked_at IS NULL
		UNION ALL SELECT min(created_at + ttl_ms) FROM tasks WHERE status IN ('working','input_required')
		UNION ALL SELECT min(last_updated_at + ttl_ms) FROM tasks WHERE status IN ('completed','failed','cancelled')
	)`

// NextDue returns when the next time-based rule falls due, so the actor can
// arm one timer instead of polling. ok is false when nothing is scheduled.
func (e *Engine) NextDue(ctx context.Context, q Querier) (time.Time, bool, error) {
	var next sql.NullInt64
	err := q.QueryRowContext(ctx, nextDueQuery).Scan(&next)
	if err != nil {
		return time.Time{}, false, Internal(err)
	}
	if !next.Valid {
		return time.Time{}, false, nil
	}
	return fromMS(next.Int64), true, nil
}

// slideDue writes the slide of the sessions whose row says they are due but
// whose use since the last flush (in memory) keeps them live, so the sweeper
// ends a session exactly when authentication starts refusing it.
func (e *Engine) slideDue(tx *Tx, now int64) error {
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT session_ref, issued_at, idle_ms FROM sessions WHERE ended_at IS NULL AND expires_at <= ?`, now)
	if err != nil {
		return Internal(err)
	}
	type due struct {
		ref          string
		issued, idle int64
	}
	var list []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.ref, &d.issued, &d.idle); err != nil {
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
		at, ok := e.seen.get(d.ref)
		if !ok {
			continue
		}
		if next := slideTo(d.issued, d.idle, at, e.maxLifeMS()); next > now {
			if _, err := tx.exec(`UPDATE sessions SET expires_at = ?, last_seen_at = max(last_seen_at, ?) WHERE session_ref = ?`, next, at, d.ref); err != nil {
				return Internal(err)
			}
		}
	}
	return nil
}

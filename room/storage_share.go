package room

import (
	"database/sql"
	"errors"
)

// StoredRecordOverhead is what each stored record counts against a
// participant's daily share on top of its own bytes: a handoff, a result,
// an input request or answer, a proposal. It stands for the row, its
// index entries and its events (a lifecycle keeps ~1.3 KB after its task
// is purged), so a flood of tiny records is bounded as well as one of
// large ones.
const StoredRecordOverhead = 1024

// dayMS is the length of the share's window: one UTC day.
const dayMS = 24 * 60 * 60 * 1000

// ScopeStorage is the scope a refusal of the daily storage share names.
const ScopeStorage = "participant_storage"

// chargeStorage counts n bytes (plus StoredRecordOverhead) against the
// participant's share for today (UTC), in the caller's transaction, or
// refuses with limit_exceeded naming the scope and when the share frees
// (the next UTC midnight). The host is exempt; so is everything when the
// bound is off. It runs in the writer's transaction, so every door (MCP,
// HTTP, CLI) meets it, and a command that fails later rolls its charge
// back with it.
func (e *Engine) chargeStorage(tx *Tx, participantID string, n int) error {
	limit := e.Limits.MaxStoredBytesPerDay
	if limit <= 0 || participantID == "" || participantID == e.HostID {
		return nil
	}
	now := tx.nowMS()
	day := now / dayMS
	cost := int64(n) + StoredRecordOverhead
	// One statement: count the bytes, then look. Over the share, the
	// command fails and its savepoint (or transaction) takes the count
	// back with everything else it did.
	var total int64
	if err := tx.q.QueryRowContext(tx.ctx, `INSERT INTO storage_usage(participant_id, day, bytes) VALUES (?, ?, ?)
		ON CONFLICT(participant_id) DO UPDATE SET bytes = CASE WHEN day = excluded.day THEN bytes + excluded.bytes ELSE excluded.bytes END,
		day = excluded.day RETURNING bytes`, participantID, day, cost).Scan(&total); err != nil {
		return Internal(err)
	}
	if total > limit {
		used := total - cost
		frees := (day + 1) * dayMS
		return Errorf(KindLimitExceeded,
			"your actions have made the room store %d bytes today, your share is %d bytes a day (UTC); this would add %d; the share frees at %s",
			used, limit, cost, WireTime(frees)).
			With("scope", ScopeStorage).With("limit", limit).With("used", used).With("requested", cost).
			With("frees_at", WireTime(frees)).With("retry_after_seconds", (frees-now+999)/1000)
	}
	return nil
}

// StorageUsed is what a participant's actions made the room store today
// (UTC), as its share counts it; 0 for a participant with no row.
func (e *Engine) StorageUsed(tx *Tx, participantID string) (int64, error) {
	var rowDay, used int64
	err := tx.q.QueryRowContext(tx.ctx, `SELECT day, bytes FROM storage_usage WHERE participant_id = ?`, participantID).Scan(&rowDay, &used)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && rowDay != tx.nowMS()/dayMS) {
		return 0, nil
	}
	if err != nil {
		return 0, Internal(err)
	}
	return used, nil
}

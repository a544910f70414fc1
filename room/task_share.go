package room

import (
	"context"
	"database/sql"
	"errors"
)

// The room holds at most Limits.MaxActiveTasks active tasks (working or
// input_required, D33). On its own that cap let one session take every slot
// and lock everyone, the host included, out for a task TTL (issue 13 item 10).
// So each participant also has a share, Limits.MaxTasksPerParticipant, of
// the active tasks of the handoffs it created; and an admin can clear a
// participant's open handoffs in one command.
//
// A task counts against its owner, the participant who created the handoff:
// the owner is who asked for the slot, and the owner (or an admin) is who can
// free it by cancelling. Counting it against the assignee instead would let
// anyone fill a victim's share by handing them work.

// maxParticipantIDBytes bounds a participant id given as an argument, so a
// huge bad input is refused without a lookup or an echo.
const maxParticipantIDBytes = 128

// ValidateTaskShare checks MaxTasksPerParticipant against the room cap: a
// share of 0 would forbid every handoff, one above the cap means nothing.
func (l Limits) ValidateTaskShare() error {
	if l.MaxTasksPerParticipant < 1 || l.MaxTasksPerParticipant > l.MaxActiveTasks {
		return Errorf(KindInvalidRequest, "the per-participant task share must be between 1 and the room's cap of %d active tasks (got %d)",
			l.MaxActiveTasks, l.MaxTasksPerParticipant).With("field", "max_tasks_per_participant").With("limit", l.MaxActiveTasks)
	}
	return nil
}

// taskShare is the share in force: a share outside 1..MaxActiveTasks (Limits
// built by hand without ValidateTaskShare) falls back to the room cap, so a
// zero value never forbids all work.
func (e *Engine) taskShare() int {
	if s := e.Limits.MaxTasksPerParticipant; s >= 1 && s < e.Limits.MaxActiveTasks {
		return s
	}
	return e.Limits.MaxActiveTasks
}

// The live-task queries: at most 32 tasks are live, and each reads them
// through the live-task partial index (tasks_expiry_due); a plan test pins it.
const (
	// liveTaskCountQuery counts the live tasks, the caller's among them, and
	// says when the first falls due.
	liveTaskCountQuery = `SELECT count(*), coalesce(sum(owner_id = ?), 0), min(created_at + ttl_ms) FROM tasks
		WHERE status IN ('working','input_required')`
	// ownerLiveTasksQuery is one participant's live tasks, oldest first.
	ownerLiveTasksQuery = `SELECT task_id, correlation_id FROM tasks
		WHERE status IN ('working','input_required') AND owner_id = ? ORDER BY created_at, rowid`
	// liveTasksByOwnerQuery counts the live tasks of each owner.
	liveTasksByOwnerQuery = `SELECT owner_id, count(*) FROM tasks
		WHERE status IN ('working','input_required') GROUP BY owner_id`
)

// checkActiveTaskCaps refuses a create that would exceed the creator's share
// or the room's cap. The share is checked first: it is the one the caller can
// act on (cancel one of its own). Both refusals say which cap was hit (scope),
// its limit and the count, so a client can tell "wait for the room" from "you
// hold your share". The host is exempt from the share, never from the cap.
//
// Tasks past their TTL that the sweeper has not reached yet must not hold
// slots (D39): they are failed first (if this command fails, the
// sweeper redoes it). One statement counts the live tasks and says when the
// first of them falls due, so a create pays for the expiry walk only when
// there is something to expire.
//
// The writer answers the count from its set of live tasks when it holds
// one (task_live_wcache.go), else by the statement.
func (e *Engine) checkActiveTaskCaps(tx *Tx, p Principal) error {
	var live, mine int
	var firstDue sql.NullInt64
	count := func() error {
		if err := tx.q.QueryRowContext(tx.ctx, liveTaskCountQuery, p.ParticipantID).Scan(&live, &mine, &firstDue); err != nil {
			return Internal(err)
		}
		return nil
	}
	l, m, due, anyLive, held, err := tx.liveCounts(p.ParticipantID)
	switch {
	case err != nil:
		return err
	case held:
		live, mine, firstDue = l, m, sql.NullInt64{Int64: due, Valid: anyLive}
		if verifyWriterCache {
			if err := count(); err != nil {
				return err
			}
			if live != l || mine != m || firstDue != (sql.NullInt64{Int64: due, Valid: anyLive}) {
				return Errorf(KindInternal, "the writer's live tasks count %d (%d mine, first due %d/%v), the sidecar %d (%d, %v)",
					l, m, due, anyLive, live, mine, firstDue)
			}
		}
	default:
		if err := count(); err != nil {
			return err
		}
	}
	if firstDue.Valid && firstDue.Int64 <= tx.nowMS() {
		if err := e.expireDueTasks(tx); err != nil {
			return err
		}
		if err := count(); err != nil {
			return err
		}
	}
	if share := e.taskShare(); p.ParticipantID != e.HostID && mine >= share {
		return Errorf(KindLimitExceeded,
			"you already have %d active tasks, your share of the room's %d; wait for one to finish or cancel one of yours",
			mine, e.Limits.MaxActiveTasks).
			With("scope", "participant").With("limit", share).With("count", mine).With("room_limit", e.Limits.MaxActiveTasks)
	}
	if live >= e.Limits.MaxActiveTasks {
		return Errorf(KindLimitExceeded,
			"the room already has %d active tasks; wait for one to finish or cancel one", e.Limits.MaxActiveTasks).
			With("scope", "room").With("limit", e.Limits.MaxActiveTasks).With("count", live)
	}
	return nil
}

// CancelHandoffsResult is what clearing a participant's handoffs did.
type CancelHandoffsResult struct {
	ParticipantID string `json:"participant_id"`
	// Cancelled is how many handoffs were cancelled (0 when none was live).
	Cancelled int `json:"cancelled"`
	// HandoffIDs are the cancelled handoffs, oldest first.
	HandoffIDs []string `json:"handoff_ids"`
}

// CancelParticipantHandoffs is the host's one action against a participant
// flooding the room (POST /workspace/participant/cancel_handoffs, the owner
// page, ce cancel-handoffs): every handoff participantID created whose task is
// still active (handoff open or accepted, task working or input_required) is
// cancelled exactly as tasks/cancel would cancel it, with the same rows,
// events and notifications, the admin as the actor. Handoffs waiting for a
// decision (result_ready) are not touched: they hold no slot and the state
// machine never cancels them. A participant who has left is still cleared
// (leaving changes no handoff, D32). Admin only.
func (e *Engine) CancelParticipantHandoffs(tx *Tx, p Principal, in CancelHandoffsInput) (CancelHandoffsResult, error) {
	participantID := in.ParticipantID
	if err := p.Require(CapAdmin); err != nil {
		return CancelHandoffsResult{}, err
	}
	if participantID == "" {
		return CancelHandoffsResult{}, invalid("participant_id", "participant_id is required: whose handoffs to cancel")
	}
	if len(participantID) > maxParticipantIDBytes {
		return CancelHandoffsResult{}, invalid("participant_id", "participant_id is not a participant id (longer than %d bytes)", maxParticipantIDBytes)
	}
	var one int
	err := tx.q.QueryRowContext(tx.ctx, `SELECT 1 FROM participants WHERE participant_id = ?`, participantID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return CancelHandoffsResult{}, Errorf(KindNotFound, "unknown participant").With("participant_id", participantID)
	}
	if err != nil {
		return CancelHandoffsResult{}, Internal(err)
	}
	// Work already past its TTL is failed as expired, not cancelled, as a
	// single cancel would find it (D39).
	if err := e.expireDueTasks(tx); err != nil {
		return CancelHandoffsResult{}, err
	}
	rows, err := tx.q.QueryContext(tx.ctx, ownerLiveTasksQuery, participantID)
	if err != nil {
		return CancelHandoffsResult{}, Internal(err)
	}
	type live struct{ task, handoff string }
	var list []live
	for rows.Next() {
		var l live
		if err := rows.Scan(&l.task, &l.handoff); err != nil {
			rows.Close()
			return CancelHandoffsResult{}, Internal(err)
		}
		list = append(list, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return CancelHandoffsResult{}, Internal(err)
	}
	out := CancelHandoffsResult{ParticipantID: participantID, HandoffIDs: []string{}}
	for _, l := range list {
		done, err := cancelLiveTask(tx, p.ParticipantID, l.task, l.handoff)
		if err != nil {
			return CancelHandoffsResult{}, err
		}
		if done {
			out.HandoffIDs = append(out.HandoffIDs, l.handoff)
		}
	}
	out.Cancelled = len(out.HandoffIDs)
	return out, nil
}

// TaskShares is how the room's active tasks are spread over participants,
// for admins (the owner page shows it on each participant's row, so the host
// can see who holds the room's cap).
type TaskShares struct {
	Share     int `json:"share"`      // each participant's share (the host has none)
	RoomLimit int `json:"room_limit"` // the room's cap
	Active    int `json:"active"`     // the room's active tasks
	// ByParticipant maps a participant id to the active tasks of the
	// handoffs it created; participants with none are absent.
	ByParticipant map[string]int `json:"by_participant"`
}

// ActiveTaskShares reads TaskShares. It is admin only: counts of other
// participants' work are not for every reader (D2).
func (e *Engine) ActiveTaskShares(ctx context.Context, q Querier, p Principal) (TaskShares, error) {
	if err := p.Require(CapAdmin); err != nil {
		return TaskShares{}, err
	}
	out := TaskShares{Share: e.taskShare(), RoomLimit: e.Limits.MaxActiveTasks, ByParticipant: map[string]int{}}
	rows, err := q.QueryContext(ctx, liveTasksByOwnerQuery)
	if err != nil {
		return TaskShares{}, Internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return TaskShares{}, Internal(err)
		}
		out.ByParticipant[id] = n
		out.Active += n
	}
	if err := rows.Err(); err != nil {
		return TaskShares{}, Internal(err)
	}
	return out, nil
}

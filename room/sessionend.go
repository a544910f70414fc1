package room

import (
	"database/sql"
	"errors"
)

// Reasons a session ends other than leaving or expiring. They are recorded
// in sessions.end_reason and carried by session.ended and participant.left,
// so the history says who cut a participant off and why.
const (
	// EndByHost: the host (the local operator, or its owner page) ended it.
	EndByHost = "ended_by_host"
	// EndByAdmin: a participant holding admin ended it.
	EndByAdmin = "ended_by_admin"
	// EndInviteRevoked: the invitation that admitted the participant was
	// revoked with end_sessions.
	EndInviteRevoked = "invite_revoked"
)

// EndSessionInput names what to end: one session by its handle, or every
// session of one participant (which also removes the participant). Exactly
// one of the two.
type EndSessionInput struct {
	SessionRef    string `json:"session_ref"`
	ParticipantID string `json:"participant_id"`
}

// EndSessionResult says what ended. EndedSessions is empty when everything
// named had already ended: ending twice changes nothing the second time.
type EndSessionResult struct {
	Status        string   `json:"status"`
	ParticipantID string   `json:"participant_id"`
	EndedSessions []string `json:"ended_sessions"`
	// ParticipantLeft is true when the participant was removed (ending by
	// participant_id): its leases are released and it leaves the listing.
	ParticipantLeft bool `json:"participant_left"`
}

// EndSession lets the host (or an admin) cut a participant off, which
// nothing else could: revoking an invitation left its sessions working, and
// one many-use invitation could hold every session of the room (issue 13,
// item 11). Ending goes through endSessions, exactly as leaving does: the
// sessions end in the sidecar (so they stay ended across a restart), the
// session cache forgets them when the batch commits, and their live streams
// are closed. Ending a participant also releases its leases and marks it
// left; ending one session leaves the participant and its other sessions
// alone. The host cannot be ended this way: it holds the room.
func (e *Engine) EndSession(tx *Tx, p Principal, in EndSessionInput) (EndSessionResult, error) {
	if err := p.Require(CapAdmin); err != nil {
		return EndSessionResult{}, err
	}
	if (in.SessionRef == "") == (in.ParticipantID == "") {
		return EndSessionResult{}, invalid("session_ref", "name exactly one of session_ref and participant_id")
	}
	reason := EndByAdmin
	if p.Trusted || p.ParticipantID == e.HostID {
		reason = EndByHost
	}
	res := EndSessionResult{Status: "ok", EndedSessions: []string{}}
	if in.SessionRef != "" {
		var pid string
		var ended sql.NullInt64
		err := tx.q.QueryRowContext(tx.ctx, `SELECT participant_id, ended_at FROM sessions WHERE session_ref = ?`, in.SessionRef).Scan(&pid, &ended)
		if errors.Is(err, sql.ErrNoRows) {
			return EndSessionResult{}, Errorf(KindNotFound, "no session %q in this room", clipID(in.SessionRef)).With("field", "session_ref")
		}
		if err != nil {
			return EndSessionResult{}, Internal(err)
		}
		if pid == e.HostID {
			return EndSessionResult{}, invalid("session_ref", "the host's sessions cannot be ended; stop `ce serve` to close the room")
		}
		res.ParticipantID = pid
		if ended.Valid {
			return res, nil
		}
		before := len(tx.endedSessions)
		if err := e.endSessions(tx, `session_ref = ?`, []any{in.SessionRef}, reason); err != nil {
			return EndSessionResult{}, err
		}
		res.EndedSessions = append(res.EndedSessions, tx.endedSessions[before:]...)
		return res, nil
	}
	var isHost bool
	var left sql.NullInt64
	err := tx.q.QueryRowContext(tx.ctx, `SELECT is_host, left_at FROM participants WHERE participant_id = ?`, in.ParticipantID).Scan(&isHost, &left)
	if errors.Is(err, sql.ErrNoRows) {
		return EndSessionResult{}, Errorf(KindNotFound, "no participant %q in this room", clipID(in.ParticipantID)).With("field", "participant_id")
	}
	if err != nil {
		return EndSessionResult{}, Internal(err)
	}
	if isHost || in.ParticipantID == e.HostID {
		return EndSessionResult{}, invalid("participant_id", "the host cannot be ended; stop `ce serve` to close the room")
	}
	res.ParticipantID = in.ParticipantID
	if left.Valid {
		return res, nil
	}
	ended, err := e.removeParticipants(tx, p, []string{in.ParticipantID}, reason)
	if err != nil {
		return EndSessionResult{}, err
	}
	res.EndedSessions, res.ParticipantLeft = ended, true
	return res, nil
}

// removeParticipants ends the participants named (never the host): their
// sessions end with reason, their leases are released, and they leave. It
// returns the refs of the sessions it ended.
func (e *Engine) removeParticipants(tx *Tx, by Principal, pids []string, reason string) ([]string, error) {
	ended := []string{}
	for _, pid := range pids {
		n, err := tx.execN(`UPDATE participants SET left_at = ? WHERE participant_id = ? AND left_at IS NULL AND is_host = 0`, tx.nowMS(), pid)
		if err != nil {
			return nil, Internal(err)
		}
		if n == 0 {
			continue
		}
		before := len(tx.endedSessions)
		if err := e.endSessions(tx, `participant_id = ?`, []any{pid}, reason); err != nil {
			return nil, err
		}
		ended = append(ended, tx.endedSessions[before:]...)
		if err := e.releaseLeases(tx, `participant_id = ?`, []any{pid}, "admin", "lease.released"); err != nil {
			return nil, err
		}
		if err := tx.emit("participant.left", refs{actor: pid}, map[string]any{
			"participant_id": pid, "reason": reason, "by": by.ParticipantID,
		}); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// clipID keeps an echoed identifier short: ids are short, and a client that
// sends a megabyte as an id gets its first bytes back, not all of them.
func clipID(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	r := []rune(s[:max])
	return string(r[:len(r)-1]) + "…"
}

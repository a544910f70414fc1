package room

import (
	"database/sql"
	"errors"
	"time"
)

// Re-admission (issue 16, item 4): an agent whose session ran out used to
// join again as a new participant, lose sight of its own tasks and, retrying
// with its idempotency key, create a duplicate handoff. The host can instead
// mint an invitation bound to the existing participant; redeeming it issues
// a new session for that same participant, so its tasks, keys and handoffs
// are its own again.
//
// The rules: only an admin (the host included) may bind an invitation to a
// participant; the invitation grants at most what the participant holds
// (asking for more is refused when it is made, and the grant is intersected
// again when it is redeemed); a participant who left cannot come back; and a
// participant the host cut off (EndSession, or a revoke with end_sessions)
// cannot come back through an invitation made before that, because each
// such cut bumps participants.revocations and the invitation must still
// carry the count it was made under.

// revokingReasons are the end reasons that bump a participant's
// revocations: the host or an admin cut it off. Leaving and expiry do not.
var revokingReasons = map[string]bool{EndByHost: true, EndByAdmin: true, EndInviteRevoked: true}

// inviteBinding is the participant a re-admission invitation brings back,
// as it stood when the invitation was made.
type inviteBinding struct {
	pid         string
	revocations int64
	caps        Caps
}

// bindInvite checks a request for a re-admission invitation and returns the
// capabilities it grants: the participant's own when none were asked for.
func (e *Engine) bindInvite(tx *Tx, p Principal, in InviteInput) (*inviteBinding, error) {
	if !p.IsAdmin() {
		return nil, Errorf(KindPermissionDenied, "only the host or an admin may re-admit a participant").
			With("required", string(CapAdmin)).With("field", "participant_id")
	}
	var capsText string
	var isHost bool
	var left sql.NullInt64
	var revs int64
	err := tx.q.QueryRowContext(tx.ctx, `SELECT capabilities, is_host, left_at, revocations FROM participants WHERE participant_id = ?`,
		in.ParticipantID).Scan(&capsText, &isHost, &left, &revs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(KindNotFound, "no participant %q in this room", clipID(in.ParticipantID)).With("field", "participant_id")
	}
	if err != nil {
		return nil, Internal(err)
	}
	if isHost || in.ParticipantID == e.HostID {
		return nil, invalid("participant_id", "the host is not re-admitted: it holds the room")
	}
	if left.Valid {
		return nil, invalid("participant_id", "participant %q has left the room and cannot be re-admitted; invite it as a new participant", clipID(in.ParticipantID))
	}
	have, err := capsFromJSON(capsText)
	if err != nil {
		return nil, err
	}
	want := have
	if in.Capabilities != nil || in.Permissions != nil {
		if want, err = in.grant(); err != nil {
			return nil, err
		}
		for _, c := range want {
			if !have.Has(c) {
				return nil, invalid("capabilities", "cannot grant %s: participant %q does not hold it, and a re-admission grants at most what it had",
					c, clipID(in.ParticipantID)).With("required", string(c))
			}
		}
	}
	return &inviteBinding{pid: in.ParticipantID, revocations: revs, caps: want}, nil
}

// readmitted is the participant a re-admission invitation brings back, as
// it stands at redemption.
type readmitted struct {
	pid, kind, name string
	caps            Caps
}

// readmitTarget checks, at redemption, that the bound participant may come
// back, and intersects the invitation's grant with what it holds now.
func (e *Engine) readmitTarget(tx *Tx, pid string, mintedUnder int64, inviteCaps string) (*readmitted, error) {
	var capsText string
	var left sql.NullInt64
	var revs int64
	r := readmitted{pid: pid}
	err := tx.q.QueryRowContext(tx.ctx, `SELECT kind, name, capabilities, left_at, revocations FROM participants WHERE participant_id = ?`,
		pid).Scan(&r.kind, &r.name, &capsText, &left, &revs)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(KindInvitationRevoked, "the participant this invitation re-admits is gone")
	}
	if err != nil {
		return nil, Internal(err)
	}
	if left.Valid {
		return nil, Errorf(KindInvitationRevoked, "the participant this invitation re-admits has left the room")
	}
	if revs != mintedUnder {
		return nil, Errorf(KindInvitationRevoked, "the host cut this participant off after the invitation was made; ask for a new one")
	}
	have, err := capsFromJSON(capsText)
	if err != nil {
		return nil, err
	}
	granted, err := capsFromJSON(inviteCaps)
	if err != nil {
		return nil, err
	}
	for _, c := range granted {
		if have.Has(c) {
			r.caps = append(r.caps, c)
		}
	}
	if len(r.caps) == 0 {
		return nil, Errorf(KindInvitationRevoked, "the participant no longer holds any capability this invitation grants")
	}
	return &r, nil
}

// readmit issues the new session of a re-admitted participant. The join
// event says so (readmitted, the invitation's handle; never a secret).
func (e *Engine) readmit(tx *Tx, r *readmitted, inviteID, transport string, life time.Duration) (SessionGrant, error) {
	if err := tx.emit("participant.joined", refs{actor: r.pid}, map[string]any{
		"participant_id": r.pid, "kind": r.kind, "name": r.name, "capabilities": r.caps.Strings(),
		"transport": transport, "invite_id": inviteID, "readmitted": true,
	}); err != nil {
		return SessionGrant{}, err
	}
	return e.issueSession(tx, r.pid, r.kind, r.name, r.caps, transport, life)
}

// noteRevocation bumps the revocations of participants cut off for reason,
// so re-admission invitations made before the cut stop working.
func noteRevocation(tx *Tx, reason string, pids map[string]bool) error {
	if !revokingReasons[reason] {
		return nil
	}
	for pid := range pids {
		if _, err := tx.exec(`UPDATE participants SET revocations = revocations + 1 WHERE participant_id = ?`, pid); err != nil {
			return Internal(err)
		}
	}
	return nil
}

package room

import (
	"context"
	"database/sql"
	"errors"
)

// Principal is who a call acts for. Identity comes from the session (or the
// local operator credential), never from request bodies.
type Principal struct {
	ParticipantID string
	SessionRef    string // non-secret handle of the session; "" for the operator
	Caps          Caps
	// Trusted marks the local operator: whoever can read the room's files
	// (in-process CLI calls, the owner credential). It passes capability
	// checks; party rules that name a participant still apply to ParticipantID.
	Trusted bool
}

// Operator is the principal of the local operator acting as the host.
func Operator(hostID string) Principal {
	return Principal{ParticipantID: hostID, Caps: Caps{CapAll}, Trusted: true}
}

// IsAdmin reports whether the principal may act on records it is not a party to.
func (p Principal) IsAdmin() bool { return p.Trusted || p.Caps.Has(CapAdmin) }

// PrincipalFor is how ce task --participant P acts: as P, with P's own
// capabilities and party rules, never as the trusted operator, because a
// task id alone is not authorization (the brief). An unknown participant, or
// one who has left, is refused.
func (e *Engine) PrincipalFor(ctx context.Context, q Querier, participantID string) (Principal, error) {
	var capsText string
	var left sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT capabilities, left_at FROM participants WHERE participant_id = ?`, participantID).
		Scan(&capsText, &left)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && left.Valid) {
		return Principal{}, invalid("participant", "%q is not a present participant of this room", participantID).
			With("participant_id", participantID)
	}
	if err != nil {
		return Principal{}, Internal(err)
	}
	caps, err := capsFromJSON(capsText)
	if err != nil {
		return Principal{}, err
	}
	return Principal{ParticipantID: participantID, Caps: caps}, nil
}

package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
)

// Participant is a person or agent in the room. Every join makes a new one.
type Participant struct {
	ParticipantID string   `json:"participant_id"`
	Kind          string   `json:"kind"`
	Name          string   `json:"name"`
	Capabilities  []string `json:"capabilities"`
	IsHost        bool     `json:"is_host"`
	JoinedAt      string   `json:"joined_at"`
	LastSeen      string   `json:"last_seen"`
	Transport     *string  `json:"transport"`
	// InviteID is the invitation that admitted it (null for the host).
	InviteID *string `json:"invite_id"`
	// Sessions are its live sessions, oldest first: what the host names to
	// end one (session_ref is a handle, never the bearer token).
	Sessions []SessionInfo `json:"sessions"`
}

// ensureHost finds or creates the host participant: the human who owns the
// file, holding every capability. The local operator acts as this participant.
func (e *Engine) ensureHost(tx *Tx, name string) error {
	if name == "" {
		name = "host"
	}
	name = truncateRunes(name, e.Limits.MaxNameChars)
	var id string
	err := tx.q.QueryRowContext(tx.ctx, `SELECT participant_id FROM participants
		WHERE is_host = 1 AND left_at IS NULL ORDER BY joined_at LIMIT 1`).Scan(&id)
	if err == nil {
		e.HostID = id
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Internal(err)
	}
	id = newID("participant", 8)
	if _, err := tx.exec(`INSERT INTO participants(participant_id, kind, name, capabilities, is_host, joined_at, last_seen_at)
		VALUES (?, 'human', ?, '["*"]', 1, ?, ?)`, id, name, tx.nowMS(), tx.nowMS()); err != nil {
		return Internal(err)
	}
	if err := tx.emit("participant.joined", refs{actor: id}, map[string]any{
		"participant_id": id, "kind": "human", "name": name, "capabilities": []string{"*"}, "host": true,
	}); err != nil {
		return err
	}
	e.HostID = id
	return nil
}

// ParticipantsResult is the answer to a participants read: an object, so an
// MCP tool result can carry it as structured content.
type ParticipantsResult struct {
	Participants []Participant `json:"participants"`
}

// Participants lists the participants who have not left, oldest first.
func (e *Engine) Participants(ctx context.Context, q Querier, p Principal, _ Empty) (ParticipantsResult, error) {
	ps, err := e.participants(ctx, q, p)
	return ParticipantsResult{Participants: ps}, err
}

func (e *Engine) participants(ctx context.Context, q Querier, p Principal) ([]Participant, error) {
	if err := p.Require(CapRead); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, `SELECT participant_id, kind, name, capabilities, is_host, joined_at, last_seen_at,
		(SELECT transport FROM sessions s WHERE s.participant_id = p.participant_id AND s.ended_at IS NULL
		 ORDER BY issued_at DESC LIMIT 1), invite_id
		FROM participants p WHERE left_at IS NULL ORDER BY is_host DESC, joined_at, rowid`+limitSQL(e.Limits.MaxListItems))
	if err != nil {
		return nil, Internal(err)
	}
	out := []Participant{}
	index := map[string]int{}
	for rows.Next() {
		var pt Participant
		var caps string
		var joined, seen int64
		var transport, invite sql.NullString
		if err := rows.Scan(&pt.ParticipantID, &pt.Kind, &pt.Name, &caps, &pt.IsHost, &joined, &seen, &transport, &invite); err != nil {
			rows.Close()
			return nil, Internal(err)
		}
		_ = json.Unmarshal([]byte(caps), &pt.Capabilities)
		pt.JoinedAt, pt.LastSeen = WireTime(joined), WireTime(seen)
		if transport.Valid {
			pt.Transport = &transport.String
		}
		if invite.Valid {
			pt.InviteID = &invite.String
		}
		pt.Sessions = []SessionInfo{}
		index[pt.ParticipantID] = len(out)
		out = append(out, pt)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, e.attachSessions(ctx, q, out, index)
}

// attachSessions fills each listed participant's live sessions. The room's
// session cap bounds the rows (a lowered cap after a restart is covered by
// the list bound).
func (e *Engine) attachSessions(ctx context.Context, q Querier, out []Participant, index map[string]int) error {
	rows, err := q.QueryContext(ctx, `SELECT session_ref, participant_id, transport, issued_at, expires_at, last_seen_at
		FROM sessions WHERE ended_at IS NULL AND expires_at > ? ORDER BY issued_at, session_ref`+
		limitSQL(max(e.Limits.MaxLiveSessions, e.Limits.MaxListItems)), ms(e.Now()))
	if err != nil {
		return Internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var si SessionInfo
		var pid string
		var issued, expires, seen int64
		if err := rows.Scan(&si.SessionRef, &pid, &si.Transport, &issued, &expires, &seen); err != nil {
			return Internal(err)
		}
		i, ok := index[pid]
		if !ok {
			continue
		}
		si.IssuedAt, si.ExpiresAt, si.LastSeen = WireTime(issued), WireTime(expires), WireTime(seen)
		out[i].Sessions = append(out[i].Sessions, si)
	}
	return rows.Err()
}

// Leave ends the caller's participation: its sessions end, its leases are
// released. Handoffs and tasks are untouched (D32).
func (e *Engine) Leave(tx *Tx, p Principal, _ Empty) (Ack, error) {
	return ack(e.leave(tx, p))
}

func (e *Engine) leave(tx *Tx, p Principal) error {
	if p.SessionRef == "" {
		// The local operator acts as the host but holds no session; the host
		// leaving would orphan the room's owner.
		return Errorf(KindInvalidRequest, "only a participant with a session can leave; the local operator has none")
	}
	n, err := tx.execN(`UPDATE participants SET left_at = ? WHERE participant_id = ? AND left_at IS NULL`, tx.nowMS(), p.ParticipantID)
	if err != nil {
		return Internal(err)
	}
	if n == 0 {
		return nil
	}
	if err := e.endSessions(tx, `participant_id = ?`, []any{p.ParticipantID}, "left"); err != nil {
		return err
	}
	if err := e.releaseLeases(tx, `participant_id = ?`, []any{p.ParticipantID}, "left", "lease.released"); err != nil {
		return err
	}
	return tx.emit("participant.left", refs{actor: p.ParticipantID}, map[string]any{"participant_id": p.ParticipantID})
}

package room

import (
	"context"
	"database/sql"
	"errors"
	"time"
	"unicode/utf8"
)

// SessionInfo is a live session as listings show it.
type SessionInfo struct {
	SessionRef string `json:"session_ref"`
	Transport  string `json:"transport"`
	IssuedAt   string `json:"issued_at"`
	ExpiresAt  string `json:"expires_at"`
	LastSeen   string `json:"last_seen"`
}

// JoinInput redeems an invitation. SessionMinutes is the session's idle
// window: each authenticated use extends its expiry by that much, up to
// Limits.SessionMaxLifetime from when it was issued.
type JoinInput struct {
	Secret         string
	Name           string
	Kind           string
	Transport      string
	SessionMinutes int
}

// SessionGrant is what a joiner keeps: the bearer token appears only here.
type SessionGrant struct {
	// SessionToken is the bearer secret; empty (and left out) in a
	// ProvenGrant, which carries it sealed instead.
	SessionToken  string   `json:"session_token,omitempty"`
	SessionRef    string   `json:"session_ref"`
	ParticipantID string   `json:"participant_id"`
	WorkspaceID   string   `json:"workspace_id"`
	Kind          string   `json:"kind"`
	Name          string   `json:"name"`
	Capabilities  []string `json:"capabilities"`
	Transport     string   `json:"transport"`
	IssuedAt      string   `json:"issued_at"`
	ExpiresAt     string   `json:"expires_at"`
}

// Join redeems an invitation, named by its secret, for a new participant and
// session: the one-step join, kept for the clients that already send the
// secret (`ce` itself uses JoinProven). The session cap is checked before
// the use is spent (the original spent it first), and the use is spent by a
// conditional update so the last one cannot go twice.
func (e *Engine) Join(tx *Tx, in JoinInput) (SessionGrant, error) {
	return e.redeem(tx, `secret_sha256 = ?`, HashSecret(in.Secret), in)
}

// redeem is the join of both forms once the invitation is found (where,
// over invites, with arg) and, for the proven form, its proof checked.
// in.Secret is not read here.
func (e *Engine) redeem(tx *Tx, where string, arg any, in JoinInput) (SessionGrant, error) {
	if in.Kind == "" {
		in.Kind = "agent"
	}
	if in.Kind != "agent" && in.Kind != "human" {
		return SessionGrant{}, Errorf(KindInvalidRequest, "kind must be agent or human").With("field", "kind")
	}
	if in.Name == "" {
		in.Name = "participant"
	}
	if utf8.RuneCountInString(in.Name) > e.Limits.MaxNameChars {
		return SessionGrant{}, Errorf(KindInvalidRequest, "name is longer than %d characters", e.Limits.MaxNameChars).With("field", "name")
	}
	if in.Transport == "" {
		in.Transport = "remote"
	}
	in.Transport = truncateRunes(in.Transport, e.Limits.MaxTransportChars)
	minutes := in.SessionMinutes
	if minutes == 0 {
		minutes = int(e.Limits.SessionDefault / time.Minute)
	}
	if maxMin := int(e.Limits.SessionMax / time.Minute); minutes < 0 || minutes > maxMin {
		// The caller's mistake (400), not a bound the room reached (429).
		return SessionGrant{}, invalid("session_minutes", "session length must be 1..%d minutes", maxMin).With("limit", maxMin)
	}
	var id, capsText string
	var expires int64
	var maxUses sql.NullInt64
	var used int
	var revoked, liveCap, boundRevs sql.NullInt64
	var bound sql.NullString
	err := tx.q.QueryRowContext(tx.ctx, `SELECT invite_id, capabilities, expires_at, max_uses, used_count, revoked_at, max_live_sessions,
		participant_id, participant_revocations
		FROM invites WHERE `+where, arg).Scan(&id, &capsText, &expires, &maxUses, &used, &revoked, &liveCap,
		&bound, &boundRevs)
	if errors.Is(err, sql.ErrNoRows) {
		return SessionGrant{}, Errorf(KindUnauthorized, "unknown invitation")
	}
	if err != nil {
		return SessionGrant{}, Internal(err)
	}
	switch {
	case revoked.Valid:
		return SessionGrant{}, Errorf(KindInvitationRevoked, "this invitation was revoked")
	case expires <= tx.nowMS():
		return SessionGrant{}, Errorf(KindInvitationExpired, "this invitation has expired")
	case maxUses.Valid && int64(used) >= maxUses.Int64:
		if used > 0 {
			return SessionGrant{}, Errorf(KindInvitationRedeemed, "this invitation has been used")
		}
		return SessionGrant{}, Errorf(KindLimitExceeded, "this invitation has no uses left")
	}
	var back *readmitted
	if bound.Valid {
		// Checked before the use is spent, like the caps below.
		if back, err = e.readmitTarget(tx, bound.String, boundRevs.Int64, capsText); err != nil {
			return SessionGrant{}, err
		}
	}
	var live int
	if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM sessions WHERE ended_at IS NULL AND expires_at > ?`, tx.nowMS()).Scan(&live); err != nil {
		return SessionGrant{}, Internal(err)
	}
	if live >= e.Limits.MaxLiveSessions {
		return SessionGrant{}, Errorf(KindLimitExceeded, "the room already has %d live sessions", e.Limits.MaxLiveSessions)
	}
	var own *int64
	if liveCap.Valid {
		own = &liveCap.Int64
	}
	if perInvite := e.inviteSessionCap(own); perInvite > 0 {
		// Checked before the use is spent: a refused join costs nothing.
		var mine int
		q, arg := `SELECT count(*) FROM sessions s JOIN participants p ON p.participant_id = s.participant_id
			WHERE p.invite_id = ? AND s.ended_at IS NULL AND s.expires_at > ?`, any(id)
		if back != nil {
			// A re-admission's joiner is one participant: its own live sessions.
			q, arg = `SELECT count(*) FROM sessions s WHERE s.participant_id = ? AND s.ended_at IS NULL AND s.expires_at > ?`, back.pid
		}
		if err := tx.q.QueryRowContext(tx.ctx, q, arg, tx.nowMS()).Scan(&mine); err != nil {
			return SessionGrant{}, Internal(err)
		}
		if mine >= perInvite {
			return SessionGrant{}, Errorf(KindLimitExceeded,
				"this invitation's joiners already hold %d live sessions, its limit; the host can end one or make another invitation", perInvite).
				With("limit", perInvite)
		}
	}
	n, err := tx.execN(`UPDATE invites SET used_count = used_count + 1
		WHERE invite_id = ? AND revoked_at IS NULL AND (max_uses IS NULL OR used_count < max_uses)`, id)
	if err != nil {
		return SessionGrant{}, Internal(err)
	}
	if n != 1 {
		return SessionGrant{}, Errorf(KindInvitationRedeemed, "this invitation has been used")
	}
	life := time.Duration(minutes) * time.Minute
	if back != nil {
		return e.readmit(tx, back, id, in.Transport, life)
	}
	caps, err := capsFromJSON(capsText)
	if err != nil {
		return SessionGrant{}, err
	}
	pid := newID("participant", 8)
	now := tx.nowMS()
	if _, err := tx.exec(`INSERT INTO participants(participant_id, kind, name, capabilities, invite_id, joined_at, last_seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, pid, in.Kind, in.Name, capsText, id, now, now); err != nil {
		return SessionGrant{}, Internal(err)
	}
	if err := tx.emit("participant.joined", refs{actor: pid}, map[string]any{
		"participant_id": pid, "kind": in.Kind, "name": in.Name, "capabilities": caps.Strings(),
		"transport": in.Transport, "invite_id": id,
	}); err != nil {
		return SessionGrant{}, err
	}
	return e.issueSession(tx, pid, in.Kind, in.Name, caps, in.Transport, life)
}

// issueSession issues a session whose idle window is life: it expires life
// after its last authenticated use, and never later than the room's
// maximum lifetime after now.
func (e *Engine) issueSession(tx *Tx, pid, kind, name string, caps Caps, transport string, life time.Duration) (SessionGrant, error) {
	token := newSecret("ses_")
	ref := newID("sref", 8)
	now := tx.nowMS()
	idle := life.Milliseconds()
	expires := slideTo(now, idle, now, e.maxLifeMS())
	if _, err := tx.exec(`INSERT INTO sessions(session_ref, token_sha256, participant_id, capabilities, transport, issued_at, expires_at, last_seen_at, idle_ms)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, ref, HashSecret(token), pid, capsJSON(caps), transport, now, expires, now, idle); err != nil {
		return SessionGrant{}, Internal(err)
	}
	if err := tx.emit("session.created", refs{actor: pid}, map[string]any{
		"participant_id": pid, "session_ref": ref, "transport": transport, "expires_at": WireTime(expires),
	}); err != nil {
		return SessionGrant{}, err
	}
	return SessionGrant{SessionToken: token, SessionRef: ref, ParticipantID: pid, WorkspaceID: e.WorkspaceID,
		Kind: kind, Name: name, Capabilities: caps.Strings(), Transport: transport,
		IssuedAt: WireTime(now), ExpiresAt: WireTime(expires)}, nil
}

// Authenticate turns a bearer token into a principal. It only reads; the
// session's last_seen, and with it the slide of its expiry, is noted in
// memory and flushed by the sweeper (FlushLastSeen), never written per
// request.
func (e *Engine) Authenticate(ctx context.Context, q Querier, token string) (Principal, error) {
	if token == "" {
		return Principal{}, Errorf(KindUnauthorized, "a session is required: send Authorization: Bearer <session_token>")
	}
	return e.AuthenticateHash(ctx, q, HashSecret(token))
}

// AuthenticateHash is Authenticate for a caller that holds only the
// token's hash (HashSecret): a participant's page cookie stands for its
// session by that hash, so the cookie passes the very checks the bearer
// token does and fails the moment the session ends or expires.
func (e *Engine) AuthenticateHash(ctx context.Context, q Querier, hash []byte) (Principal, error) {
	if len(hash) == 0 {
		return Principal{}, Errorf(KindUnauthorized, "a session is required: send Authorization: Bearer <session_token>")
	}
	if p, ok, err := e.CachedPrincipalHash(hash); ok {
		return p, err
	}
	now := ms(e.Now())
	var ref, pid, capsText string
	var issued, idle, expires int64
	var ended sql.NullInt64
	var reason sql.NullString
	err := q.QueryRowContext(ctx, `SELECT session_ref, participant_id, capabilities, issued_at, idle_ms, expires_at, ended_at, end_reason
		FROM sessions WHERE token_sha256 = ?`, hash).Scan(&ref, &pid, &capsText, &issued, &idle, &expires, &ended, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, Errorf(KindUnauthorized, "unknown or ended session")
	}
	if err != nil {
		return Principal{}, Internal(err)
	}
	if ended.Valid {
		if reason.String == "expired" {
			return Principal{}, Errorf(KindSessionExpired, "this session has expired; join again with a new invitation")
		}
		return Principal{}, Errorf(KindUnauthorized, "unknown or ended session")
	}
	if at, ok := e.seen.get(ref); ok {
		// A use not yet flushed slid the expiry the row still lacks.
		expires = max(expires, slideTo(issued, idle, at, e.maxLifeMS()))
	}
	if expires <= now {
		return Principal{}, Errorf(KindSessionExpired, "this session has expired; join again with a new invitation")
	}
	caps, err := capsFromJSON(capsText)
	if err != nil {
		return Principal{}, err
	}
	p := Principal{ParticipantID: pid, SessionRef: ref, Caps: caps}
	expires = max(expires, slideTo(issued, idle, now, e.maxLifeMS()))
	e.sessions.put(hash, cachedSession{p: p, expires: expires, issued: issued, idle: idle})
	e.seen.touch(ref, now)
	return p, nil
}

// CachedPrincipal answers Authenticate from memory when the session is
// cached (ok = true), so front doors can skip opening a read transaction.
func (e *Engine) CachedPrincipal(token string) (p Principal, ok bool, err error) {
	if token == "" {
		return Principal{}, false, nil
	}
	return e.CachedPrincipalHash(HashSecret(token))
}

// CachedPrincipalHash is CachedPrincipal by the token's hash
// (AuthenticateHash's twin).
func (e *Engine) CachedPrincipalHash(hash []byte) (p Principal, ok bool, err error) {
	if len(hash) == 0 {
		return Principal{}, false, nil
	}
	now := ms(e.Now())
	s, ok := e.sessions.use(hash, now, e.maxLifeMS())
	if !ok {
		return Principal{}, false, nil
	}
	if s.expires <= now {
		return Principal{}, true, Errorf(KindSessionExpired, "this session has expired; join again with a new invitation")
	}
	e.seen.touch(s.p.SessionRef, now)
	return s.p, true, nil
}

// endSessions ends the live sessions matching where, records why, and tells
// the live streams of those sessions to end.
func (e *Engine) endSessions(tx *Tx, where string, args []any, reason string) error {
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT session_ref, participant_id FROM sessions WHERE ended_at IS NULL AND `+where, args...)
	if err != nil {
		return Internal(err)
	}
	type ended struct{ ref, pid string }
	var list []ended
	for rows.Next() {
		var s ended
		if err := rows.Scan(&s.ref, &s.pid); err != nil {
			rows.Close()
			return Internal(err)
		}
		list = append(list, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Internal(err)
	}
	for _, s := range list {
		if _, err := tx.exec(`UPDATE sessions SET ended_at = ?, end_reason = ? WHERE session_ref = ?`, tx.nowMS(), reason, s.ref); err != nil {
			return Internal(err)
		}
		if reason == "expired" {
			if err := tx.emit("session.expired", refs{actor: s.pid}, map[string]any{"participant_id": s.pid, "session_ref": s.ref}); err != nil {
				return err
			}
		} else {
			if err := tx.emit("session.ended", refs{actor: s.pid}, map[string]any{"participant_id": s.pid, "session_ref": s.ref, "reason": reason}); err != nil {
				return err
			}
		}
		tx.endedSessions = append(tx.endedSessions, s.ref)
		ref := s.ref
		tx.after = append(tx.after, func() { e.sessions.end(ref) })
	}
	pids := map[string]bool{}
	for _, s := range list {
		pids[s.pid] = true
	}
	return noteRevocation(tx, reason, pids)
}

// FlushLastSeen writes the activity noted in memory, and with it the slide
// of each used session's expiry (slideTo). This is the only write a slide
// costs: one row per used session per flush (at most once a minute, and at
// a graceful stop), so after a crash a session's expiry is at most one
// flush period behind its last use. Stale entries for sessions that ended
// meanwhile are harmless: an ended session's expiry is left alone.
func (e *Engine) FlushLastSeen(tx *Tx) error {
	m := e.seen.take()
	for ref, at := range m {
		var issued, idle int64
		err := tx.q.QueryRowContext(tx.ctx, `SELECT issued_at, idle_ms FROM sessions WHERE session_ref = ?`, ref).Scan(&issued, &idle)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Internal(err)
		}
		if _, err := tx.exec(`UPDATE sessions SET last_seen_at = max(last_seen_at, ?1),
			expires_at = CASE WHEN ended_at IS NULL THEN max(expires_at, ?2) ELSE expires_at END
			WHERE session_ref = ?3`, at, slideTo(issued, idle, at, e.maxLifeMS()), ref); err != nil {
			return Internal(err)
		}
		if _, err := tx.exec(`UPDATE participants SET last_seen_at = max(last_seen_at, ?)
			WHERE participant_id = (SELECT participant_id FROM sessions WHERE session_ref = ?)`, at, ref); err != nil {
			return Internal(err)
		}
	}
	return nil
}

package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"
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

// SessionInfo is a live session as listings show it.
type SessionInfo struct {
	SessionRef string `json:"session_ref"`
	Transport  string `json:"transport"`
	IssuedAt   string `json:"issued_at"`
	ExpiresAt  string `json:"expires_at"`
	LastSeen   string `json:"last_seen"`
}

func capsJSON(c Caps) string {
	b, _ := json.Marshal(c.Strings())
	return string(b)
}

func capsFromJSON(s string) (Caps, error) {
	var names []string
	if err := json.Unmarshal([]byte(s), &names); err != nil {
		return nil, Internal(err)
	}
	return ParseCaps(names)
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

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}

// InviteInput asks for an invitation. Capabilities wins over Permissions (the
// original's legacy words). Only an absent field takes the default agent
// set: Capabilities is nil when the field was left out, and a present but
// empty (or null) list is refused, as is an empty Permissions, because an
// invitation that grants nothing is a mistake, never a request for the
// default (issue 13, item 12).
type InviteInput struct {
	Capabilities     []string `json:"capabilities,omitzero" jsonschema:"capabilities to grant (at most your own unless you are admin); leave it out for read, observe, propose, checkout, commit; an empty list is refused" schemaitems:"read, observe, propose, checkout, commit, approve, invite, admin or *"`
	Permissions      *string  `json:"permissions,omitempty" schema:"hidden"`
	Target           string   `json:"target" jsonschema:"a region the invitation is meant for (recorded, not enforced)"`
	ExpiresInMinutes *int     `json:"expires_in_minutes" jsonschema:"minutes until it expires (default 60, at most 10080)" schema:"minimum=1"`
	MaxUses          *int     `json:"max_uses" jsonschema:"how many joins it admits (default 1, 0 = unlimited)" schema:"minimum=0"` // 0 = unlimited; absent = 1
	// MaxLiveSessions caps the live sessions of this invitation's joiners;
	// absent = the room's MaxSessionsPerInvite.
	MaxLiveSessions *int `json:"max_live_sessions,omitempty" jsonschema:"live sessions its joiners may hold at once (default: the room's; only an admin may raise it)" schema:"minimum=1"`
}

// InviteGrant is a new invitation. The secret and URI exist only in this
// answer: the sidecar keeps a hash.
type InviteGrant struct {
	InviteID     string   `json:"invite_id"`
	Token        string   `json:"token"`
	URI          string   `json:"uri"`
	WorkspaceID  string   `json:"workspace_id"`
	Capabilities []string `json:"capabilities"`
	Target       *string  `json:"target"`
	ExpiresAt    string   `json:"expires_at"`
	MaxUses      *int     `json:"max_uses"`
	// MaxLiveSessions is the cap on its joiners' live sessions (0 = none).
	MaxLiveSessions int `json:"max_live_sessions"`
}

// CreateInvite issues an invitation. A non-admin inviter can grant only what
// it holds itself, so `invite` never becomes a path to more power.
func (e *Engine) CreateInvite(tx *Tx, p Principal, in InviteInput) (InviteGrant, error) {
	if err := p.Require(CapInvite); err != nil {
		return InviteGrant{}, err
	}
	caps, err := in.grant()
	if err != nil {
		return InviteGrant{}, err
	}
	if !p.IsAdmin() {
		for _, c := range caps {
			if c == CapAll || !p.Caps.Has(c) {
				return InviteGrant{}, Errorf(KindPermissionDenied, "cannot grant %s: the inviter does not hold it", c).With("required", string(c))
			}
		}
	}
	minutes := int(e.Limits.InviteDefault / time.Minute)
	if in.ExpiresInMinutes != nil {
		minutes = *in.ExpiresInMinutes
	}
	if minutes <= 0 {
		return InviteGrant{}, Errorf(KindInvalidRequest, "expires_in_minutes must be positive").With("field", "expires_in_minutes")
	}
	if maxMin := int(e.Limits.InviteMax / time.Minute); minutes > maxMin { // compared in minutes: a huge value must not overflow a Duration
		// A value out of range is the caller's mistake (400), not a bound
		// the room reached (429 invites a retry that can never succeed).
		return InviteGrant{}, invalid("expires_in_minutes", "expires_in_minutes is above the maximum of %d", maxMin).With("limit", maxMin)
	}
	maxUses := 1
	if in.MaxUses != nil {
		maxUses = *in.MaxUses
	}
	if maxUses < 0 {
		return InviteGrant{}, Errorf(KindInvalidRequest, "max_uses must be 0 (unlimited) or positive").With("field", "max_uses")
	}
	liveCap, err := e.inviteLiveCap(p, in.MaxLiveSessions)
	if err != nil {
		return InviteGrant{}, err
	}
	var target *string
	if in.Target != "" {
		d, err := e.CurrentDoc(tx.ctx, tx.q)
		if err != nil {
			return InviteGrant{}, err
		}
		if _, _, err := d.FindSection(in.Target); err != nil {
			return InviteGrant{}, err
		}
		t := in.Target
		target = &t
	}
	id := newID("invite", 8)
	secret := newSecret("")
	expires := tx.now.Add(time.Duration(minutes) * time.Minute)
	var maxUsesCol any
	var maxUsesOut *int
	if maxUses > 0 {
		maxUsesCol, maxUsesOut = maxUses, &maxUses
	}
	var createdBy any
	if p.ParticipantID != "" {
		createdBy = p.ParticipantID
	}
	if _, err := tx.exec(`INSERT INTO invites(invite_id, secret_sha256, capabilities, target, created_by, created_at, expires_at, max_uses, max_live_sessions)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, HashSecret(secret), capsJSON(caps), target, createdBy, tx.nowMS(), ms(expires), maxUsesCol, liveCap); err != nil {
		return InviteGrant{}, Internal(err)
	}
	if err := tx.emit("invite.created", refs{actor: p.ParticipantID}, map[string]any{
		"invite_id": id, "capabilities": caps.Strings(), "expires_at": WireTime(ms(expires)), "max_uses": maxUsesOut,
	}); err != nil {
		return InviteGrant{}, err
	}
	hints := e.currentHints()
	uri := EncodeInvitation(Invitation{
		Protocol: "commonroom", Version: "1", Transport: hints[0], Transports: hints,
		WorkspaceID: e.WorkspaceID, Secret: secret, ExpiresAt: WireTime(ms(expires)), Capabilities: caps.Strings(),
	})
	return InviteGrant{InviteID: id, Token: secret, URI: uri, WorkspaceID: e.WorkspaceID, Capabilities: caps.Strings(),
		Target: target, ExpiresAt: WireTime(ms(expires)), MaxUses: maxUsesOut, MaxLiveSessions: e.inviteSessionCap(liveCapPtr(liveCap))}, nil
}

// InviteInfo is an invitation as listings show it: handles, never secrets.
type InviteInfo struct {
	InviteID     string   `json:"invite_id"`
	Capabilities []string `json:"capabilities"`
	Target       *string  `json:"target"`
	ExpiresAt    string   `json:"expires_at"`
	MaxUses      *int     `json:"max_uses"`
	UsedCount    int      `json:"used_count"`
	RevokedAt    *string  `json:"revoked_at"`
	CreatedAt    string   `json:"created_at"`
	// CreatedBy is the participant that made it (the host for the operator).
	CreatedBy *string `json:"created_by"`
	// LiveSessions of its joiners now, against MaxLiveSessions (0 = no cap).
	LiveSessions    int `json:"live_sessions"`
	MaxLiveSessions int `json:"max_live_sessions"`
}

// ListInvites returns the newest invitations first. The host and admins see
// every invitation; anyone else holding invite sees only those it created
// (issue 13, item 13), so `invite` is no window on the host's invitations.
func (e *Engine) ListInvites(ctx context.Context, q Querier, p Principal, _ Empty) ([]InviteInfo, error) {
	if err := p.Require(CapInvite); err != nil {
		return nil, err
	}
	scope, args := inviteScope(p)
	args = append([]any{ms(e.Now())}, append(args, e.Limits.MaxListItems)...)
	rows, err := q.QueryContext(ctx, `SELECT invite_id, capabilities, target, expires_at, max_uses, used_count, revoked_at, created_at,
		created_by, max_live_sessions,
		(SELECT count(*) FROM sessions s JOIN participants pt ON pt.participant_id = s.participant_id
		 WHERE pt.invite_id = i.invite_id AND s.ended_at IS NULL AND s.expires_at > ?)
		FROM invites i WHERE `+scope+` ORDER BY created_at DESC, rowid DESC LIMIT ?`, args...)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := []InviteInfo{}
	for rows.Next() {
		var in InviteInfo
		var caps string
		var target, createdBy sql.NullString
		var expires, created int64
		var maxUses, revoked, liveCap sql.NullInt64
		if err := rows.Scan(&in.InviteID, &caps, &target, &expires, &maxUses, &in.UsedCount, &revoked, &created,
			&createdBy, &liveCap, &in.LiveSessions); err != nil {
			return nil, Internal(err)
		}
		_ = json.Unmarshal([]byte(caps), &in.Capabilities)
		if target.Valid {
			in.Target = &target.String
		}
		if maxUses.Valid {
			v := int(maxUses.Int64)
			in.MaxUses = &v
		}
		if revoked.Valid {
			in.RevokedAt = wireTimePtr(&revoked.Int64)
		}
		if createdBy.Valid {
			in.CreatedBy = &createdBy.String
		}
		var own *int64
		if liveCap.Valid {
			own = &liveCap.Int64
		}
		in.MaxLiveSessions = e.inviteSessionCap(own)
		in.ExpiresAt, in.CreatedAt = WireTime(expires), WireTime(created)
		out = append(out, in)
	}
	return out, rows.Err()
}

// inviteScope is the WHERE clause (over invites) of what p may list and
// revoke: everything for an admin, its own invitations for anyone else.
func inviteScope(p Principal) (string, []any) {
	if p.IsAdmin() {
		return `1`, nil
	}
	return `created_by = ?`, []any{p.ParticipantID}
}

// RevokeInput names an invitation by handle or by secret. EndSessions also
// ends the sessions of every participant it admitted.
type RevokeInput struct {
	InviteID    string `json:"invite_id"`
	Token       string `json:"token"`
	EndSessions bool   `json:"end_sessions"`
}

// RevokeResult says what a revoke did.
type RevokeResult struct {
	Status        string   `json:"status"`
	InviteID      string   `json:"invite_id"`
	EndedSessions []string `json:"ended_sessions"` // session refs; empty unless end_sessions
}

// RevokeInvite stops an invitation from admitting anyone else. Revoking twice
// is harmless and changes nothing the second time (unless it is asked to end
// sessions that are still live). A non-admin may revoke only invitations it
// created; anyone else's answers exactly as an unknown one, so invitation
// ids cannot be probed.
func (e *Engine) RevokeInvite(tx *Tx, p Principal, in RevokeInput) (RevokeResult, error) {
	if err := p.Require(CapInvite); err != nil {
		return RevokeResult{}, err
	}
	scope, args := inviteScope(p)
	var id string
	var revoked sql.NullInt64
	var err error
	switch {
	case in.InviteID != "":
		err = tx.q.QueryRowContext(tx.ctx, `SELECT invite_id, revoked_at FROM invites WHERE invite_id = ? AND `+scope,
			append([]any{in.InviteID}, args...)...).Scan(&id, &revoked)
	case in.Token != "":
		err = tx.q.QueryRowContext(tx.ctx, `SELECT invite_id, revoked_at FROM invites WHERE secret_sha256 = ? AND `+scope,
			append([]any{HashSecret(in.Token)}, args...)...).Scan(&id, &revoked)
	default:
		return RevokeResult{}, Errorf(KindInvalidRequest, "invite_id or token is required").With("field", "invite_id")
	}
	if errors.Is(err, sql.ErrNoRows) {
		return RevokeResult{}, Errorf(KindUnauthorized, "unknown invitation")
	}
	if err != nil {
		return RevokeResult{}, Internal(err)
	}
	res := RevokeResult{Status: "ok", InviteID: id, EndedSessions: []string{}}
	if !revoked.Valid {
		if _, err := tx.exec(`UPDATE invites SET revoked_at = ? WHERE invite_id = ?`, tx.nowMS(), id); err != nil {
			return RevokeResult{}, Internal(err)
		}
		if err := tx.emit("invite.revoked", refs{actor: p.ParticipantID}, map[string]any{"invite_id": id, "end_sessions": in.EndSessions}); err != nil {
			return RevokeResult{}, err
		}
	}
	if in.EndSessions {
		pids, err := queryStrings(tx.ctx, tx.q, `SELECT participant_id FROM participants
			WHERE invite_id = ? AND left_at IS NULL ORDER BY joined_at, rowid`, id)
		if err != nil {
			return RevokeResult{}, err
		}
		if res.EndedSessions, err = e.removeParticipants(tx, p, pids, EndInviteRevoked); err != nil {
			return RevokeResult{}, err
		}
	}
	return res, nil
}

// JoinInput redeems an invitation.
type JoinInput struct {
	Secret         string
	Name           string
	Kind           string
	Transport      string
	SessionMinutes int
}

// SessionGrant is what a joiner keeps: the bearer token appears only here.
type SessionGrant struct {
	SessionToken  string   `json:"session_token"`
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

// Join redeems an invitation for a new participant and session. The session
// cap is checked before the use is spent (the original spent it first), and
// the use is spent by a conditional update so the last one cannot go twice.
func (e *Engine) Join(tx *Tx, in JoinInput) (SessionGrant, error) {
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
	var revoked, liveCap sql.NullInt64
	err := tx.q.QueryRowContext(tx.ctx, `SELECT invite_id, capabilities, expires_at, max_uses, used_count, revoked_at, max_live_sessions
		FROM invites WHERE secret_sha256 = ?`, HashSecret(in.Secret)).Scan(&id, &capsText, &expires, &maxUses, &used, &revoked, &liveCap)
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
		if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM sessions s JOIN participants p ON p.participant_id = s.participant_id
			WHERE p.invite_id = ? AND s.ended_at IS NULL AND s.expires_at > ?`, id, tx.nowMS()).Scan(&mine); err != nil {
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
	return e.issueSession(tx, pid, in.Kind, in.Name, caps, in.Transport, time.Duration(minutes)*time.Minute)
}

func (e *Engine) issueSession(tx *Tx, pid, kind, name string, caps Caps, transport string, life time.Duration) (SessionGrant, error) {
	token := newSecret("ses_")
	ref := newID("sref", 8)
	now := tx.nowMS()
	expires := ms(tx.now.Add(life))
	if _, err := tx.exec(`INSERT INTO sessions(session_ref, token_sha256, participant_id, capabilities, transport, issued_at, expires_at, last_seen_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, ref, HashSecret(token), pid, capsJSON(caps), transport, now, expires, now); err != nil {
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
// session's last_seen is noted in memory and flushed by the sweeper.
func (e *Engine) Authenticate(ctx context.Context, q Querier, token string) (Principal, error) {
	if token == "" {
		return Principal{}, Errorf(KindUnauthorized, "a session is required: send Authorization: Bearer <session_token>")
	}
	if p, ok, err := e.CachedPrincipal(token); ok {
		return p, err
	}
	hash := HashSecret(token)
	now := ms(e.Now())
	var ref, pid, capsText string
	var expires int64
	var ended sql.NullInt64
	var reason sql.NullString
	err := q.QueryRowContext(ctx, `SELECT session_ref, participant_id, capabilities, expires_at, ended_at, end_reason
		FROM sessions WHERE token_sha256 = ?`, hash).Scan(&ref, &pid, &capsText, &expires, &ended, &reason)
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
	if expires <= now {
		return Principal{}, Errorf(KindSessionExpired, "this session has expired; join again with a new invitation")
	}
	caps, err := capsFromJSON(capsText)
	if err != nil {
		return Principal{}, err
	}
	p := Principal{ParticipantID: pid, SessionRef: ref, Caps: caps}
	e.sessions.put(hash, cachedSession{p: p, expires: expires})
	e.seen.touch(ref, now)
	return p, nil
}

// CachedPrincipal answers Authenticate from memory when the session is
// cached (ok = true), so front doors can skip opening a read transaction.
func (e *Engine) CachedPrincipal(token string) (p Principal, ok bool, err error) {
	if token == "" {
		return Principal{}, false, nil
	}
	s, ok := e.sessions.get(HashSecret(token))
	if !ok {
		return Principal{}, false, nil
	}
	now := ms(e.Now())
	if s.expires <= now {
		return Principal{}, true, Errorf(KindSessionExpired, "this session has expired; join again with a new invitation")
	}
	e.seen.touch(s.p.SessionRef, now)
	return s.p, true, nil
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
		FROM participants p WHERE left_at IS NULL ORDER BY is_host DESC, joined_at, rowid LIMIT ?`, e.Limits.MaxListItems)
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
		FROM sessions WHERE ended_at IS NULL AND expires_at > ? ORDER BY issued_at, session_ref LIMIT ?`,
		ms(e.Now()), max(e.Limits.MaxLiveSessions, e.Limits.MaxListItems))
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
	return nil
}

// FlushLastSeen writes the activity noted in memory. Stale entries for
// sessions that ended meanwhile are harmless (the update matches nothing).
func (e *Engine) FlushLastSeen(tx *Tx) error {
	m := e.seen.take()
	for ref, at := range m {
		if _, err := tx.exec(`UPDATE sessions SET last_seen_at = max(last_seen_at, ?) WHERE session_ref = ?`, at, ref); err != nil {
			return Internal(err)
		}
		if _, err := tx.exec(`UPDATE participants SET last_seen_at = max(last_seen_at, ?)
			WHERE participant_id = (SELECT participant_id FROM sessions WHERE session_ref = ?)`, at, ref); err != nil {
			return Internal(err)
		}
	}
	return nil
}

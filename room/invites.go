package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode"
)

// InviteInput asks for an invitation. Capabilities wins over Permissions (the
// original's legacy words). Only an absent field takes the default agent
// set: Capabilities is nil when the field was left out, and a present but
// empty (or null) list is refused, as is an empty Permissions, because an
// invitation that grants nothing is a mistake, never a request for the
// default (issue 13, item 12).
type InviteInput struct {
	Capabilities     []string `json:"capabilities,omitzero" jsonschema:"capabilities to grant (at most your own unless you are admin); leave it out for read, observe, propose, checkout, commit; an empty list is refused" schema:"enum=read|observe|propose|checkout|commit|approve|invite|admin|*" schemaitems:"a capability: read, observe, propose, checkout, commit, approve, invite, admin or * (everything)"`
	Permissions      *string  `json:"permissions,omitempty" schema:"hidden"`
	Target           string   `json:"target" jsonschema:"a region the invitation is meant for (recorded, not enforced)"`
	ExpiresInMinutes *int     `json:"expires_in_minutes" jsonschema:"minutes until it expires (default 60, at most 10080)" schema:"minimum=1"`
	MaxUses          *int     `json:"max_uses" jsonschema:"how many joins it admits (default 1, 0 = unlimited)" schema:"minimum=0"` // 0 = unlimited; absent = 1
	// MaxLiveSessions caps the live sessions of this invitation's joiners;
	// absent = the room's MaxSessionsPerInvite.
	MaxLiveSessions *int `json:"max_live_sessions,omitempty" jsonschema:"live sessions its joiners may hold at once (default: the room's; only an admin may raise it)" schema:"minimum=1"`
	// ParticipantID makes a re-admission invitation: redeeming it gives a
	// new session to this existing participant instead of admitting a new
	// one (admins and the host only; see readmit.go).
	ParticipantID string `json:"participant_id,omitempty" jsonschema:"re-admit this existing participant (admin only): the joiner gets a new session as that participant, with at most its capabilities (default: all of them)"`
	// Label is the host's own name for the invitation (who or what it is
	// for), shown wherever invitations are listed; never a secret.
	Label string `json:"label,omitempty" jsonschema:"a short note saying who or what the invitation is for (at most 80 characters, no control characters), shown in invitation listings"`
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
	// ParticipantID is set on a re-admission invitation: the participant
	// its joiner comes back as.
	ParticipantID string `json:"participant_id,omitempty"`
	// Label is the label it was given, if any.
	Label string `json:"label,omitempty"`
}

// CreateInvite issues an invitation. A non-admin inviter can grant only what
// it holds itself, so `invite` never becomes a path to more power.
func (e *Engine) CreateInvite(tx *Tx, p Principal, in InviteInput) (InviteGrant, error) {
	if err := p.Require(CapInvite); err != nil {
		return InviteGrant{}, err
	}
	var bound *inviteBinding
	var boundPID, boundRevs any
	if in.ParticipantID != "" {
		var err error
		if bound, err = e.bindInvite(tx, p, in); err != nil {
			return InviteGrant{}, err
		}
		boundPID, boundRevs = bound.pid, bound.revocations
	}
	label, err := checkInviteLabel(in.Label)
	if err != nil {
		return InviteGrant{}, err
	}
	caps, err := in.grant()
	if err != nil {
		return InviteGrant{}, err
	}
	if bound != nil {
		caps = bound.caps
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
	if _, err := tx.exec(`INSERT INTO invites(invite_id, secret_sha256, capabilities, target, created_by, created_at, expires_at, max_uses, max_live_sessions,
		participant_id, participant_revocations)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, HashSecret(secret), capsJSON(caps), target, createdBy, tx.nowMS(), ms(expires), maxUsesCol, liveCap,
		boundPID, boundRevs); err != nil {
		return InviteGrant{}, Internal(err)
	}
	// The label is its own statement, written only when there is one, so
	// the invitation insert stays the statement schemas before 13 know (the
	// migration tests write older sidecars with this engine).
	if label != nil {
		if _, err := tx.exec(`UPDATE invites SET label = ? WHERE invite_id = ?`, label, id); err != nil {
			return InviteGrant{}, Internal(err)
		}
	}
	ev := map[string]any{
		"invite_id": id, "capabilities": caps.Strings(), "expires_at": WireTime(ms(expires)), "max_uses": maxUsesOut,
	}
	if bound != nil {
		ev["participant_id"] = bound.pid
	}
	if label != nil {
		ev["label"] = in.Label
	}
	if err := tx.emit("invite.created", refs{actor: p.ParticipantID}, ev); err != nil {
		return InviteGrant{}, err
	}
	hints := e.inviteHints()
	uri := EncodeInvitation(Invitation{
		Protocol: "commonroom", Version: "1", Transport: hints[0], Transports: hints,
		WorkspaceID: e.WorkspaceID, InviteID: id, Secret: secret, ExpiresAt: WireTime(ms(expires)), Capabilities: caps.Strings(),
		ParticipantID: in.ParticipantID,
	})
	return InviteGrant{InviteID: id, Token: secret, URI: uri, WorkspaceID: e.WorkspaceID, Capabilities: caps.Strings(),
		Target: target, ExpiresAt: WireTime(ms(expires)), MaxUses: maxUsesOut, MaxLiveSessions: e.inviteSessionCap(liveCapPtr(liveCap)),
		ParticipantID: in.ParticipantID, Label: in.Label}, nil
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
	// Label is the host's note on what the invitation is for ("" for none).
	Label string `json:"label"`
}

// ListInvites returns the newest invitations first. The host and admins see
// every invitation; anyone else holding invite sees only those it created
// (issue 13, item 13), so `invite` is no window on the host's invitations.
func (e *Engine) ListInvites(ctx context.Context, q Querier, p Principal, _ Empty) ([]InviteInfo, error) {
	if err := p.Require(CapInvite); err != nil {
		return nil, err
	}
	scope, args := inviteScope(p)
	args = append([]any{ms(e.Now())}, args...)
	rows, err := q.QueryContext(ctx, `SELECT invite_id, capabilities, target, expires_at, max_uses, used_count, revoked_at, created_at,
		created_by, max_live_sessions, coalesce(label, ''),
		(SELECT count(*) FROM sessions s JOIN participants pt ON pt.participant_id = s.participant_id
		 WHERE pt.invite_id = i.invite_id AND s.ended_at IS NULL AND s.expires_at > ?)
		FROM invites i WHERE `+scope+` ORDER BY created_at DESC, rowid DESC`+limitSQL(e.Limits.MaxListItems), args...)
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
			&createdBy, &liveCap, &in.Label, &in.LiveSessions); err != nil {
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

// maxInviteLabelChars bounds an invitation's label (migration 11 checks
// the same bound): a note, not a document.
const maxInviteLabelChars = 80

// checkInviteLabel validates an invitation label and returns what to store
// (nil for none). Surrounding spaces, control characters and
// the bidirectional overrides that make a listing read other than it is
// are refused, since the label is shown to the host verbatim.
func checkInviteLabel(label string) (any, error) {
	if err := checkText("label", label, maxInviteLabelChars); err != nil {
		return nil, err
	}
	if strings.TrimSpace(label) != label {
		return nil, invalid("label", "label must not start or end with spaces")
	}
	for _, r := range label {
		if unicode.IsControl(r) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
			return nil, invalid("label", "label must not contain control characters (found U+%04X)", r)
		}
	}
	if label == "" {
		return nil, nil
	}
	return label, nil
}

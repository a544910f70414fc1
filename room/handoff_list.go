package room

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
)

// The inbox (issue 16): handoff_list, GET /workspace/handoffs, the
// caller-scoped ce handoffs, and the handoffs of GET /workspace/room and the
// owner page. One query for all of them, so what a session is shown in a
// listing is exactly what handoff_get would show it.

// The roles a listing can be narrowed to. They describe p's relation to a
// handoff; none of them widens what p may see (D2 still applies).
const (
	// RoleAssignedToMe: handoffs p accepted, or that were addressed to p.
	RoleAssignedToMe = "assigned_to_me"
	// RoleCreatedByMe: handoffs p owns.
	RoleCreatedByMe = "created_by_me"
	// RoleOpenToAccept: open handoffs p could accept now (D3).
	RoleOpenToAccept = "open_to_accept"
)

var handoffRoles = []string{RoleAssignedToMe, RoleCreatedByMe, RoleOpenToAccept}

// HandoffRoles are the roles a listing can be narrowed to
// (ListHandoffsInput.Role), the closed set its tool schema offers.
func HandoffRoles() []string { return slices.Clone(handoffRoles) }

// handoffPageDefault is the page size when the caller names none.
const handoffPageDefault = 50

// maxHandoffCursorChars bounds a cursor a client sends; ours are about 200.
const maxHandoffCursorChars = 512

// handoffCursorVersion starts every inbox cursor, so a later format can tell
// old ones apart.
const handoffCursorVersion = "h1"

// cursorKeyMeta names the meta row (migration 0005) holding the key that
// signs inbox cursors.
const cursorKeyMeta = "inbox_cursor_key"

// ListHandoffsInput selects one page of the handoffs the caller may see.
type ListHandoffsInput struct {
	Role   string `json:"role,omitempty" jsonschema:"only handoffs where you are in this role: assigned_to_me (you accepted it or it is addressed to you), created_by_me (you own it) or open_to_accept (open, and you could accept it now). Absent: every handoff you may see" schema:"enum=assigned_to_me|created_by_me|open_to_accept"`
	Status string `json:"status,omitempty" jsonschema:"only this status: open, accepted, result_ready, approved, rejected or cancelled. Absent: every status" schema:"enum=open|accepted|result_ready|approved|rejected|cancelled"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)" schema:"minimum=0"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor from the previous page, to continue the listing (same role and status)"`
}

// HandoffPage is one page of a handoff listing, newest first. NextCursor is
// set when older handoffs may follow. It marks a position, so walking the
// pages while handoffs are created lists each handoff that existed when the
// walk began exactly once.
type HandoffPage struct {
	Handoffs   []Handoff `json:"handoffs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// handoffPos is a place in the listing's order (created_at, rowid), both
// descending; a page holds the rows strictly before it. The rowid breaks
// ties between handoffs of the same millisecond in the order they were
// written (handoff rows are never deleted), so a handoff created while a
// client pages always sorts before the client's position, never after it,
// even within the millisecond; a random id as the tie-breaker would let it
// land in a later page.
type handoffPos struct {
	createdAt, rowid int64
}

// listStart is before every handoff: created_at never reaches MaxInt64.
var listStart = handoffPos{createdAt: math.MaxInt64}

// ListHandoffs is the inbox: the handoffs p may see (D2, the same predicate
// as handoff_get), narrowed by role and status, newest first, one page at a
// time, each shown as handoff_get shows it to p. The operator's ce handoffs
// is this for the trusted operator, which sees the whole room.
func (e *Engine) ListHandoffs(ctx context.Context, q Querier, p Principal, in ListHandoffsInput) (HandoffPage, error) {
	if err := p.Require(CapRead); err != nil {
		return HandoffPage{}, err
	}
	if in.Role != "" && !slices.Contains(handoffRoles, in.Role) {
		return HandoffPage{}, invalid("role", "role must be one of assigned_to_me, created_by_me, open_to_accept (or absent for all)")
	}
	if in.Status != "" && !validHandoffStatus(in.Status) {
		return HandoffPage{}, invalid("status", "status must be one of open, accepted, result_ready, approved, rejected, cancelled")
	}
	if in.Limit < 0 || in.Limit > e.Limits.MaxListItems { // refused both ways, never clamped (issue 25)
		return HandoffPage{}, invalid("limit", "limit must be 1 to %d (0 or absent takes %d)", e.Limits.MaxListItems, handoffPageDefault).With("limit", e.Limits.MaxListItems)
	}
	limit := e.boundLimit(in.Limit, handoffPageDefault)
	key, err := cursorKey(ctx, q)
	if err != nil {
		return HandoffPage{}, err
	}
	pos, err := decodeHandoffCursor(ctx, q, key, p, in)
	if err != nil {
		return HandoffPage{}, err
	}
	page := HandoffPage{Handoffs: []Handoff{}}
	srcs := handoffSources(p, in.Role)
	if len(srcs) == 0 {
		return page, nil
	}
	// The SQL picks candidates in order; the Go predicates decide. The SQL is
	// written to pick exactly the rows they accept, so this is one round; if
	// it ever picked more, the loop reads on rather than return a short page.
	var keep []*handoffRow
	for {
		batch, last, err := handoffCandidates(ctx, q, p, srcs, in.Status, pos, limit+1)
		if err != nil {
			return HandoffPage{}, err
		}
		for _, h := range batch {
			if h.visibleTo(p) && h.inRole(p, in.Role) && (in.Status == "" || h.status == in.Status) {
				keep = append(keep, h)
			}
		}
		if len(batch) <= limit || len(keep) > limit {
			break
		}
		pos = last
	}
	if len(keep) > limit {
		keep = keep[:limit]
		page.NextCursor = encodeHandoffCursor(key, p, in, keep[limit-1].id)
	}
	for _, h := range keep {
		// The candidates came with their input requests (one statement for
		// the page, not one more per handoff).
		v, err := h.view(ctx, q, p)
		if err != nil {
			return HandoffPage{}, err
		}
		page.Handoffs = append(page.Handoffs, v)
	}
	return page, nil
}

// inRole is the role filter as a predicate on one handoff.
func (h *handoffRow) inRole(p Principal, role string) bool {
	id := p.ParticipantID
	switch role {
	case RoleCreatedByMe:
		return id != "" && h.owner == id
	case RoleAssignedToMe:
		return id != "" && (h.assignee.String == id || h.requested.String == id)
	case RoleOpenToAccept:
		return h.canAccept(p)
	}
	return true
}

// A handoffSource is one index-backed stream of candidates, newest first.
type handoffSource int

const (
	srcAll             handoffSource = iota // every handoff (admins, approvers)
	srcOwner                                // owner_id = p
	srcAssignee                             // assignee_id = p
	srcRequested                            // requested_assignee_id = p
	srcOpenCall                             // open and addressed to nobody
	srcOpenToMe                             // open and addressed to p
	srcOpenCallNotMine                      // open, addressed to nobody, not owned by p
)

// handoffSources says where the rows p may see in role can be: the union of
// these streams holds every one of them (and, as written, nothing else).
func handoffSources(p Principal, role string) []handoffSource {
	id := p.ParticipantID
	mine := func(s ...handoffSource) []handoffSource {
		if id == "" {
			return nil
		}
		return s
	}
	switch role {
	case RoleCreatedByMe:
		return mine(srcOwner)
	case RoleAssignedToMe:
		return mine(srcAssignee, srcRequested)
	case RoleOpenToAccept:
		if !p.Caps.Has(CapCheckout) {
			return nil
		}
		return mine(srcOpenToMe, srcOpenCallNotMine)
	}
	if p.IsAdmin() || p.Caps.Has(CapApprove) {
		return []handoffSource{srcAll}
	}
	srcs := mine(srcOwner, srcAssignee, srcRequested)
	if p.Caps.Has(CapCheckout) {
		srcs = append(srcs, srcOpenCall)
	}
	return srcs
}

// handoffCandidatesQuery is handoffCandidates' statement and its
// arguments ("" when srcs is empty).
func handoffCandidatesQuery(p Principal, srcs []handoffSource, status string, pos handoffPos, n int) (string, []any) {
	var parts []string
	var args []any
	lim := limitSQL(pageLimit(n))
	for _, s := range srcs {
		var where string
		var who []any
		statuses := handoffStatuses
		switch s {
		case srcAll:
			where = "1"
		case srcOwner:
			where, who = "owner_id = ?", []any{p.ParticipantID}
		case srcAssignee:
			where, who = "assignee_id = ?", []any{p.ParticipantID}
		case srcRequested, srcOpenToMe:
			where, who = "requested_assignee_id = ?", []any{p.ParticipantID}
		case srcOpenCall:
			where = "requested_assignee_id IS NULL"
		case srcOpenCallNotMine:
			where, who = "requested_assignee_id IS NULL AND owner_id <> ?", []any{p.ParticipantID}
		}
		if s == srcOpenCall || s == srcOpenToMe || s == srcOpenCallNotMine {
			statuses = []string{HandoffOpen}
		}
		// One range per status: every index leads with the participant (if
		// any) and the status, then created_at, so each range is exact and
		// already in order, whatever share of the room the filter keeps.
		// The status is written into the query (one of handoffStatuses,
		// never the caller's text) rather than bound: a participant's
		// live and settled handoffs are in two partial indexes (migration
		// 9), and SQLite picks a partial index only for a query whose text
		// implies the index's WHERE.
		for _, st := range statuses {
			if status != "" && st != status {
				continue
			}
			parts = append(parts, `SELECT rowid FROM (SELECT rowid FROM handoffs WHERE `+where+
				` AND status = '`+st+`' AND (created_at, rowid) < (?, ?) ORDER BY created_at DESC, rowid DESC`+lim+`)`)
			args = append(append(args, who...), pos.createdAt, pos.rowid)
		}
	}
	if len(parts) == 0 {
		return "", nil
	}
	return `SELECT h.rowid, ` + strings.TrimPrefix(handoffWithInputsSelect, "SELECT ") +
		` WHERE h.rowid IN (` + strings.Join(parts, " UNION ALL ") + `)
		ORDER BY h.created_at DESC, h.rowid DESC` + lim, args
}

// handoffCandidates reads the first n handoffs after pos from the union of
// srcs, newest first, and the position of the last. Each source is a
// keyset range per status on its index (migrations 5 and 9), limited to n, so a
// page costs the same at a thousand handoffs as at a million.
func handoffCandidates(ctx context.Context, q Querier, p Principal, srcs []handoffSource, status string, pos handoffPos, n int) ([]*handoffRow, handoffPos, error) {
	query, args := handoffCandidatesQuery(p, srcs, status, pos, n)
	if query == "" {
		return nil, handoffPos{}, nil
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, handoffPos{}, Internal(err)
	}
	defer rows.Close()
	var out []*handoffRow
	var last handoffPos
	// The statement may read up to pageLimit(n) rows: scan only n.
	for len(out) < n && rows.Next() {
		var rowid int64
		h, err := scanHandoffWithInputs(withRowid{rows, &rowid})
		if err != nil {
			return nil, handoffPos{}, Internal(err)
		}
		out = append(out, h)
		last = handoffPos{h.created, rowid}
	}
	if err := rows.Err(); err != nil {
		return nil, handoffPos{}, Internal(err)
	}
	return out, last, nil
}

// withRowid scans a rowid ahead of the columns scanHandoff reads.
type withRowid struct {
	s     scanner
	rowid *int64
}

func (w withRowid) Scan(dest ...any) error { return w.s.Scan(append([]any{w.rowid}, dest...)...) }

// cursorKey reads the room's cursor key.
func cursorKey(ctx context.Context, q Querier) ([]byte, error) {
	v, ok, err := getMeta(ctx, q, cursorKeyMeta)
	if err != nil {
		return nil, err
	}
	key, derr := hex.DecodeString(v)
	if !ok || derr != nil || len(key) < 16 {
		return nil, Errorf(KindInternal, "the sidecar has no cursor key")
	}
	return key, nil
}

// cursorMAC signs a cursor's fields together with who it was issued to and
// for which filter, so a cursor works only for the listing that issued it.
func cursorMAC(key []byte, p Principal, in ListHandoffsInput, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(p.ParticipantID + "\x00" + in.Role + "\x00" + in.Status + "\x00" + body))
	return m.Sum(nil)[:16]
}

// encodeHandoffCursor names the last handoff of a page. It is opaque to
// clients and signed; it carries only that handoff's id, which the holder
// has just been shown.
func encodeHandoffCursor(key []byte, p Principal, in ListHandoffsInput, handoffID string) string {
	body := handoffCursorVersion + "." + handoffID
	return base64.RawURLEncoding.EncodeToString([]byte(body)) + "." +
		base64.RawURLEncoding.EncodeToString(cursorMAC(key, p, in, body))
}

// decodeHandoffCursor checks a cursor: one this room issued to this
// participant for this role and status. Anything else is invalid_request,
// never echoed back. A cursor only says where to start; the listing applies
// visibility to every row, so a cursor is never a capability.
func decodeHandoffCursor(ctx context.Context, q Querier, key []byte, p Principal, in ListHandoffsInput) (handoffPos, error) {
	if in.Cursor == "" {
		return listStart, nil
	}
	bad := invalid("cursor", "the cursor is not one this listing issued to you with this role and status (forged, stale or from another filter); list again without it")
	if len(in.Cursor) > maxHandoffCursorChars {
		return handoffPos{}, bad
	}
	b64body, b64mac, ok := strings.Cut(in.Cursor, ".")
	if !ok {
		return handoffPos{}, bad
	}
	body, err1 := base64.RawURLEncoding.DecodeString(b64body)
	mac, err2 := base64.RawURLEncoding.DecodeString(b64mac)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, cursorMAC(key, p, in, string(body))) {
		return handoffPos{}, bad
	}
	version, id, ok := strings.Cut(string(body), ".")
	if !ok || version != handoffCursorVersion || id == "" {
		return handoffPos{}, bad
	}
	var pos handoffPos
	err := q.QueryRowContext(ctx, `SELECT created_at, rowid FROM handoffs WHERE handoff_id = ?`, id).Scan(&pos.createdAt, &pos.rowid)
	if errors.Is(err, sql.ErrNoRows) {
		return handoffPos{}, bad
	}
	if err != nil {
		return handoffPos{}, Internal(err)
	}
	return pos, nil
}

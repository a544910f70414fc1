package room

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
)

// ProposalInfo is a proposal as listings show it: everything but the
// proposed text, whose size it gives instead. A change may be 256 KiB, so a
// listing that carried the text could be tens of megabytes (issue 13);
// GetProposal reads one proposal with its text.
type ProposalInfo struct {
	ProposalID       string     `json:"proposal_id"`
	WorkspaceID      string     `json:"workspace_id"`
	ParticipantID    string     `json:"participant_id"`
	Target           string     `json:"target"`
	Scope            string     `json:"scope"` // as Proposal.Scope: "section" or "document"
	BaseVersion      int64      `json:"base_version"`
	Summary          string     `json:"summary"`
	Change           ChangeInfo `json:"change"`
	Status           string     `json:"status"`
	ReviewedBy       *string    `json:"reviewed_by"`
	ReviewedAt       *string    `json:"reviewed_at"`
	CommittedVersion *int64     `json:"committed_version"`
	// CommittedBy is who committed it (the version's author), so a card
	// can say who did once someone has.
	CommittedBy *string `json:"committed_by,omitempty"`
	CreatedAt   string  `json:"created_at"`
}

// ChangeInfo describes a stored change without its text.
type ChangeInfo struct {
	Section string `json:"section,omitempty"`
	// ContentBytes is the size of the proposed text in bytes (UTF-8).
	ContentBytes int64 `json:"content_bytes"`
}

// ProposalsInput selects one page of the listing: Status filters (empty
// for all), Limit bounds the page (0 takes 50, more than MaxListItems takes
// MaxListItems), and Cursor continues after the previous page (its
// NextCursor).
type ProposalsInput struct {
	Status string `json:"status" jsonschema:"only this status: pending, approved, rejected, committed, conflicted or superseded. Absent: every status" schema:"enum=pending|approved|rejected|committed|conflicted|superseded"`
	Limit  int    `json:"limit" jsonschema:"at most this many (default 50, at most 200)" schema:"minimum=0"`
	Cursor string `json:"cursor" jsonschema:"next_cursor from the previous page, to continue the listing (same status)"`
}

// ProposalPage is one page of proposals, newest first. NextCursor is set
// when older proposals follow; it stays valid while proposals are added, so
// walking the pages lists every proposal that existed when the walk began
// exactly once.
type ProposalPage struct {
	Proposals  []ProposalInfo `json:"proposals"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// proposalPageDefault is the page size when the caller names none.
const proposalPageDefault = 50

// maxCursorChars bounds a cursor a client sends; ours are under 60.
const maxCursorChars = 256

// cursorVersion starts every cursor, so a later format can tell old ones.
const cursorVersion = "p1"

// proposalInfoColumns reads what a listing shows. The text's size comes
// from SQLite, so a listing never loads the text into the process.
const proposalInfoColumns = `proposal_id, participant_id, target, base_version, summary,
	json_extract(change_json, '$.section'), length(CAST(json_extract(change_json, '$.content') AS BLOB)),
	status, reviewed_by, reviewed_at, committed_version, created_at,
	(SELECT v.participant_id FROM versions v WHERE v.version = committed_version)`

func (e *Engine) scanProposalInfo(s interface{ Scan(...any) error }) (ProposalInfo, error) {
	var p ProposalInfo
	var section, reviewedBy, committedBy sql.NullString
	var size, reviewedAt, committed sql.NullInt64
	var created int64
	if err := s.Scan(&p.ProposalID, &p.ParticipantID, &p.Target, &p.BaseVersion, &p.Summary, &section, &size,
		&p.Status, &reviewedBy, &reviewedAt, &committed, &created, &committedBy); err != nil {
		return ProposalInfo{}, err
	}
	p.WorkspaceID = e.WorkspaceID
	p.Change = ChangeInfo{Section: section.String, ContentBytes: size.Int64}
	p.Scope = scopeOf(section.String)
	p.ReviewedBy = optStr(reviewedBy)
	p.ReviewedAt = optTime(reviewedAt)
	if committed.Valid {
		v := committed.Int64
		p.CommittedVersion = &v
		p.CommittedBy = optStr(committedBy)
	}
	p.CreatedAt = WireTime(created)
	return p, nil
}

func (e *Engine) collectProposalInfos(rows *sql.Rows) ([]ProposalInfo, error) {
	defer rows.Close()
	out := []ProposalInfo{}
	for rows.Next() {
		p, err := e.scanProposalInfo(rows)
		if err != nil {
			return nil, Internal(err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// Proposals lists proposals newest first, optionally of one status, one
// page at a time and without their text.
func (e *Engine) Proposals(ctx context.Context, q Querier, p Principal, in ProposalsInput) (ProposalPage, error) {
	if err := p.Require(CapRead); err != nil {
		return ProposalPage{}, err
	}
	if in.Status != "" && !slices.Contains(proposalStatuses, in.Status) {
		return ProposalPage{}, invalid("status", "status must be one of pending, approved, rejected, committed, conflicted, superseded")
	}
	if in.Limit < 0 {
		return ProposalPage{}, invalid("limit", "limit must be 1 to %d (0 or absent takes %d)", e.Limits.MaxListItems, proposalPageDefault)
	}
	limit := e.boundLimit(in.Limit, proposalPageDefault)
	after, err := e.proposalCursor(ctx, q, in.Cursor, in.Status)
	if err != nil {
		return ProposalPage{}, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+proposalInfoColumns+` FROM proposals
		WHERE (?1 = '' OR status = ?1) AND (NOT ?2 OR (created_at, rowid) < (?3, ?4))
		ORDER BY created_at DESC, rowid DESC`+limitSQL(pageLimit(limit+1)),
		in.Status, after.set, after.createdAt, after.rowid)
	if err != nil {
		return ProposalPage{}, Internal(err)
	}
	ps, err := e.collectProposalInfos(rows)
	if err != nil {
		return ProposalPage{}, err
	}
	page := ProposalPage{Proposals: ps}
	if len(ps) > limit {
		page.Proposals = ps[:limit]
		page.NextCursor = encodeProposalCursor(in.Status, ps[limit-1].ProposalID)
	}
	return page, nil
}

// cursorAnchor is where a page starts: strictly older than this row.
type cursorAnchor struct {
	set              bool
	createdAt, rowid int64
}

// encodeProposalCursor names the last proposal of a page and the filter it
// was listed under. It is opaque to clients; the engine checks it on the
// way back in.
func encodeProposalCursor(status, proposalID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "\x00" + status + "\x00" + proposalID))
}

// proposalCursor validates a cursor: one this room issued, for the same
// status filter, naming a proposal that exists. Anything else is
// invalid_request, never echoed back.
func (e *Engine) proposalCursor(ctx context.Context, q Querier, cursor, status string) (cursorAnchor, error) {
	if cursor == "" {
		return cursorAnchor{}, nil
	}
	bad := func() (cursorAnchor, error) {
		return cursorAnchor{}, invalid("cursor", "cursor is not one this listing issued; list again without it")
	}
	if len(cursor) > maxCursorChars {
		return bad()
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return bad()
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 || parts[0] != cursorVersion || parts[2] == "" {
		return bad()
	}
	if parts[1] != status {
		return cursorAnchor{}, invalid("cursor", "the cursor belongs to a listing with another status filter; keep the filter you started with, or list again without the cursor")
	}
	a := cursorAnchor{set: true}
	err = q.QueryRowContext(ctx, `SELECT created_at, rowid FROM proposals WHERE proposal_id = ?`, parts[2]).Scan(&a.createdAt, &a.rowid)
	if errors.Is(err, sql.ErrNoRows) {
		return cursorAnchor{}, invalid("cursor", "the cursor names a proposal this room does not have (stale or forged); list again without it")
	}
	if err != nil {
		return cursorAnchor{}, Internal(err)
	}
	return a, nil
}

// GetProposal reads one proposal with its proposed text. The rule is the
// listing's (read): whoever may list proposals may read each of them.
func (e *Engine) GetProposal(ctx context.Context, q Querier, p Principal, in ProposalInput) (Proposal, error) {
	proposalID := in.ProposalID
	if err := p.Require(CapRead); err != nil {
		return Proposal{}, err
	}
	pr, err := e.loadProposal(ctx, q, proposalID)
	if ErrorKind(err) == KindProposalNotFound {
		if at, ok := PrunedAt(ctx, q, "proposal", proposalID); ok {
			return Proposal{}, prunedError(AsError(err), "proposal", proposalID, at)
		}
	}
	if err != nil {
		return Proposal{}, err
	}
	return *pr, nil
}

package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/commonroom/ce/room/markdown"
)

// Proposal statuses (ARCHITECTURE.md D36). pending and approved are open;
// the other four are terminal.
const (
	ProposalPending    = "pending"
	ProposalApproved   = "approved"
	ProposalRejected   = "rejected"
	ProposalCommitted  = "committed"
	ProposalConflicted = "conflicted"
	ProposalSuperseded = "superseded"
)

var proposalStatuses = []string{ProposalPending, ProposalApproved, ProposalRejected, ProposalCommitted, ProposalConflicted, ProposalSuperseded}

// ProposalStatuses are the statuses a proposal can have: the closed set
// the proposal listing filters by (ProposalsInput.Status).
func ProposalStatuses() []string { return slices.Clone(proposalStatuses) }

// ChangeInput is the body of a proposal: Content replaces change.section (a
// region, heading line through the end of the region) or, without a
// section, the whole document. Content is a pointer so that a missing
// content (a client mistake) differs from an empty one (delete the section).
// Which of the two a proposal is must be said one way (Propose): a section
// target needs change.section naming that same section, and only target
// "workspace" without change.section replaces the whole document.
type ChangeInput struct {
	Content *string `json:"content" jsonschema:"the new text: of the section named by section (its heading line included), or, with target \"workspace\" and no section, of the whole document" schema:"required"`
	Section string  `json:"section,omitempty" jsonschema:"the section to replace, a title or path: required when target names a section, and must name that same section. Leave it out only with target \"workspace\" to replace the whole document"`
}

// ProposeInput asks for a change against the version the caller read.
type ProposeInput struct {
	Target      string      `json:"target" jsonschema:"the section the change replaces (title or path; change.section must name the same one), or \"workspace\" to replace the whole document (then leave change.section out)" schema:"required"`
	BaseVersion int64       `json:"base_version" jsonschema:"the version you read" schema:"required,minimum=1"`
	Summary     string      `json:"summary" jsonschema:"one line saying what the change does"`
	Change      ChangeInput `json:"change" schema:"required"`
}

// The scopes of a proposal (Proposal.Scope): what approving and committing
// it replaces.
const (
	// ScopeSection: one section, change.section.
	ScopeSection = "section"
	// ScopeDocument: the whole document, every section of it.
	ScopeDocument = "document"
)

// scopeOf is the scope of a stored change: a change without a section
// replaces the whole document.
func scopeOf(section string) string {
	if section == "" {
		return ScopeDocument
	}
	return ScopeSection
}

// Change is a stored proposal body.
type Change struct {
	Content string `json:"content"`
	Section string `json:"section,omitempty"`
}

// Proposal is a change waiting for (or past) review.
type Proposal struct {
	ProposalID    string `json:"proposal_id"`
	WorkspaceID   string `json:"workspace_id"`
	ParticipantID string `json:"participant_id"`
	Target        string `json:"target"`
	// Scope says what the proposal replaces, so a whole-document
	// replacement is unmistakable wherever a proposal is shown:
	// "section" (change.section) or "document" (every section).
	Scope            string  `json:"scope"`
	BaseVersion      int64   `json:"base_version"`
	Summary          string  `json:"summary"`
	Change           Change  `json:"change"`
	Status           string  `json:"status"`
	ReviewedBy       *string `json:"reviewed_by"`
	ReviewedAt       *string `json:"reviewed_at"`
	CommittedVersion *int64  `json:"committed_version"`
	CreatedAt        string  `json:"created_at"`
	// BaseIsCurrent is set on the propose answer only: false means the
	// document moved on since base_version and a commit will conflict.
	BaseIsCurrent *bool `json:"base_is_current,omitempty"`
}

// ReviewInput approves (true) or rejects (false) a pending proposal. Approve
// is required: a missing decision must not reject by default.
type ReviewInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the pending proposal" schema:"required"`
	Approve    *bool  `json:"approve" jsonschema:"true approves, false rejects" schema:"required"`
}

// ReviewResult is the answer to a review.
type ReviewResult struct {
	ProposalID string `json:"proposal_id"`
	ReviewerID string `json:"reviewer_id"`
	Status     string `json:"status"`
}

const proposalColumns = `proposal_id, participant_id, target, base_version, summary, change_json, status,
	reviewed_by, reviewed_at, committed_version, created_at`

func (e *Engine) scanProposal(s interface{ Scan(...any) error }) (*Proposal, error) {
	var p Proposal
	var changeJSON string
	var reviewedBy sql.NullString
	var reviewedAt, committed sql.NullInt64
	var created int64
	if err := s.Scan(&p.ProposalID, &p.ParticipantID, &p.Target, &p.BaseVersion, &p.Summary, &changeJSON, &p.Status,
		&reviewedBy, &reviewedAt, &committed, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(changeJSON), &p.Change); err != nil {
		return nil, err
	}
	p.Scope = scopeOf(p.Change.Section)
	p.WorkspaceID = e.WorkspaceID
	p.ReviewedBy = optStr(reviewedBy)
	p.ReviewedAt = optTime(reviewedAt)
	if committed.Valid {
		v := committed.Int64
		p.CommittedVersion = &v
	}
	p.CreatedAt = WireTime(created)
	return &p, nil
}

func proposalNotFound(id string) *Error {
	return Errorf(KindProposalNotFound, "proposal %s not found", id).With("proposal_id", id)
}

func proposalConflict(p *Proposal, format string, args ...any) *Error {
	return Errorf(KindProposalConflict, format, args...).With("proposal_id", p.ProposalID).With("status", p.Status)
}

// maxProposalIDChars bounds a proposal id a client sends: ours are
// "proposal_" and 16 hex digits.
const maxProposalIDChars = 64

// loadProposal reads one proposal; unknown ids are proposal_not_found.
func (e *Engine) loadProposal(ctx context.Context, q Querier, id string) (*Proposal, error) {
	if id == "" {
		return nil, invalid("proposal_id", "proposal_id is required")
	}
	if len(id) > maxProposalIDChars {
		// Longer than any id this room issues: not found, without the echo.
		return nil, Errorf(KindProposalNotFound, "no such proposal: proposal_id is longer than %d characters", maxProposalIDChars).
			With("limit", maxProposalIDChars)
	}
	p, err := e.scanProposal(q.QueryRowContext(ctx, `SELECT `+proposalColumns+` FROM proposals WHERE proposal_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, proposalNotFound(id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	return p, nil
}

// Propose records a change for review. The target and change.section must
// name regions of the current document (stored canonically, as paths); the
// base must be a version that exists. A stale base is accepted and reported
// (base_is_current=false): the commit will then refuse it.
func (e *Engine) Propose(tx *Tx, p Principal, in ProposeInput) (Proposal, error) {
	if err := p.Require(CapPropose); err != nil {
		return Proposal{}, err
	}
	if in.Change.Content == nil {
		return Proposal{}, invalid("change.content", "change.content is required (a string; empty deletes the section)")
	}
	content := *in.Change.Content
	if !utf8.ValidString(content) {
		return Proposal{}, invalid("change.content", "change.content is not valid UTF-8")
	}
	if !utf8.ValidString(in.Change.Section) {
		return Proposal{}, invalid("change.section", "change.section is not valid UTF-8")
	}
	if err := checkText("summary", in.Summary, e.Limits.MaxSummaryChars); err != nil {
		return Proposal{}, err
	}
	if err := e.checkChangeSize(Change{Content: content, Section: in.Change.Section}); err != nil {
		return Proposal{}, err
	}
	if in.BaseVersion <= 0 {
		return Proposal{}, invalid("base_version", "base_version is required: the version you read")
	}
	if err := e.checkPendingCaps(tx, p.ParticipantID); err != nil {
		return Proposal{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return Proposal{}, err
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return Proposal{}, err
	}
	if in.BaseVersion > d.Version {
		return Proposal{}, invalid("base_version", "base_version %d is in the future; the document is at version %d", in.BaseVersion, d.Version).
			With("current_version", d.Version)
	}
	target, err := canonicalTarget(d, in.Target)
	if err != nil {
		return Proposal{}, err
	}
	change := Change{Content: content}
	if in.Change.Section != "" {
		r, whole, err := d.FindSection(in.Change.Section)
		if err != nil {
			return Proposal{}, err
		}
		if !whole {
			change.Section = r.Path
		}
	}
	if err := oneScope(target, change.Section, in.Change.Section != ""); err != nil {
		return Proposal{}, err
	}
	body, err := e.encodeChange(change)
	if err != nil {
		return Proposal{}, err
	}
	if err := e.chargeStorage(tx, p.ParticipantID, len(body)+len(in.Summary)); err != nil {
		return Proposal{}, err
	}
	now := tx.nowMS()
	out := Proposal{ProposalID: newID("proposal", 8), WorkspaceID: e.WorkspaceID, ParticipantID: p.ParticipantID,
		Target: target, Scope: scopeOf(change.Section), BaseVersion: in.BaseVersion, Summary: in.Summary, Change: change, Status: ProposalPending,
		CreatedAt: WireTime(now)}
	if _, err := tx.exec(`INSERT INTO proposals(proposal_id, participant_id, target, base_version, summary, change_json, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
		out.ProposalID, out.ParticipantID, out.Target, out.BaseVersion, out.Summary, string(body), now, now); err != nil {
		return Proposal{}, Internal(err)
	}
	if err := tx.emit("proposal.created", refs{actor: p.ParticipantID}, map[string]any{
		"proposal_id": out.ProposalID, "participant_id": out.ParticipantID, "target": target,
		"base_version": out.BaseVersion, "status": ProposalPending,
	}); err != nil {
		return Proposal{}, err
	}
	current := in.BaseVersion == d.Version
	out.BaseIsCurrent = &current
	return out, nil
}

// oneScope is the rule that a proposal names what it replaces one way
// (issue 24): target and change.section, both canonical ("workspace" for
// the whole document; section "" for the whole document, given says
// whether the caller named it or left it out), must agree. A section
// target without change.section used to be taken as a whole-document
// replacement, so approving a proposal "for Venue" cut the file down to
// that one section; it is refused now, as is a change.section that names
// another section than the target, with the fix in the message.
func oneScope(target, section string, given bool) error {
	switch {
	case target == markdown.Workspace && section == "":
		return nil
	case section == "" && given:
		return invalid("change.section", "change.section names the whole document but target names the section %q; "+
			"set change.section to %q to replace that section, or set target to %q and leave change.section out to replace the whole document",
			target, target, markdown.Workspace).With("target", target)
	case target == markdown.Workspace:
		return invalid("change.section", "target %q replaces the whole document but change.section names the section %q; "+
			"set target to %q to replace that section, or leave change.section out to replace the whole document",
			target, section, section).With("target", target)
	case section == "":
		return invalid("change.section", "target names the section %q but change.section is missing, which would replace the whole document; "+
			"set change.section to %q to replace that section, or set target to %q (without change.section) to replace the whole document",
			target, target, markdown.Workspace).With("target", target)
	case section != target:
		return invalid("change.section", "change.section names %q but target names %q; they must name the same section "+
			"(or set target to %q without change.section to replace the whole document)", section, target, markdown.Workspace).
			With("target", target)
	}
	return nil
}

// checkPendingCaps refuses a new proposal when its author, or the room,
// already has the most pending proposals allowed: each holds up to
// MaxChangeBytes in the sidecar and waits in the host's review queue, so
// without a cap one agent could fill both (issue 13). A cap of 0 or less
// means none.
func (e *Engine) checkPendingCaps(tx *Tx, participantID string) error {
	perParticipant, perRoom := e.Limits.MaxPendingProposalsPerParticipant, e.Limits.MaxPendingProposals
	if perParticipant <= 0 && perRoom <= 0 {
		return nil
	}
	var mine, all int
	if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FILTER (WHERE participant_id = ?), count(*)
		FROM proposals WHERE status = 'pending'`, participantID).Scan(&mine, &all); err != nil {
		return Internal(err)
	}
	if perParticipant > 0 && mine >= perParticipant {
		return Errorf(KindLimitExceeded,
			"you already have %d pending proposals, the most one participant may have; wait until one is reviewed or superseded", mine).
			With("limit", perParticipant).With("pending", mine).With("scope", "participant")
	}
	if perRoom > 0 && all >= perRoom {
		return Errorf(KindLimitExceeded,
			"the room already has %d pending proposals, the most it allows; wait until some are reviewed or superseded", all).
			With("limit", perRoom).With("pending", all).With("scope", "room")
	}
	return nil
}

// checkChangeSize bounds the JSON encoding of a change (what the proposals
// table stores) to MaxChangeBytes.
func (e *Engine) checkChangeSize(c Change) error {
	_, err := e.encodeChange(c)
	return err
}

func (e *Engine) encodeChange(c Change) ([]byte, error) {
	b, err := encodeJSON(c)
	if err != nil {
		return nil, Internal(err)
	}
	if len(b) > e.Limits.MaxChangeBytes {
		return nil, Errorf(KindLimitExceeded, "the change is %d bytes of JSON; at most %d are allowed", len(b), e.Limits.MaxChangeBytes).
			With("field", "change").With("limit", e.Limits.MaxChangeBytes)
	}
	return b, nil
}

// Review approves or rejects a pending proposal. Anyone holding approve may
// review, including the proposer (the original's rule, kept for proposals).
func (e *Engine) Review(tx *Tx, p Principal, in ReviewInput) (ReviewResult, error) {
	if err := p.Require(CapApprove); err != nil {
		return ReviewResult{}, err
	}
	if in.Approve == nil {
		return ReviewResult{}, invalid("approve", "approve is required: true approves, false rejects")
	}
	pr, err := e.loadProposal(tx.ctx, tx.q, in.ProposalID)
	if err != nil {
		return ReviewResult{}, err
	}
	if pr.Status != ProposalPending {
		return ReviewResult{}, proposalConflict(pr, "proposal %s is %s; only a pending proposal can be reviewed", pr.ProposalID, pr.Status)
	}
	status := ProposalRejected
	if *in.Approve {
		status = ProposalApproved
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE proposals SET status = ?, reviewed_by = ?, reviewed_at = ?, updated_at = ?
		WHERE proposal_id = ? AND status = 'pending'`, status, p.ParticipantID, now, now, pr.ProposalID)
	if err != nil {
		return ReviewResult{}, Internal(err)
	}
	if n != 1 {
		return ReviewResult{}, proposalConflict(pr, "proposal %s is no longer pending", pr.ProposalID)
	}
	res := ReviewResult{ProposalID: pr.ProposalID, ReviewerID: p.ParticipantID, Status: status}
	if err := tx.emit("proposal."+status, refs{actor: p.ParticipantID}, map[string]any{
		"proposal_id": res.ProposalID, "reviewer_id": res.ReviewerID, "status": status,
	}); err != nil {
		return ReviewResult{}, err
	}
	return res, nil
}

// supersedePending ends every pending proposal after a commit landed at
// version v: their bases can no longer be current. Approved proposals are
// left alone (they will conflict if someone commits them).
func (e *Engine) supersedePending(tx *Tx, actor string, v int64) error {
	ids, err := queryStrings(tx.ctx, tx.q, `SELECT proposal_id FROM proposals WHERE status = 'pending' ORDER BY created_at, rowid`)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.exec(`UPDATE proposals SET status = 'superseded', updated_at = ? WHERE proposal_id = ? AND status = 'pending'`,
			tx.nowMS(), id); err != nil {
			return Internal(err)
		}
		if err := tx.emit("proposal.superseded", refs{actor: actor}, map[string]any{
			"proposal_id": id, "status": ProposalSuperseded, "by_version": v,
		}); err != nil {
			return err
		}
	}
	return nil
}

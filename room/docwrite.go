package room

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/commonroom/ce/room/markdown"
	"github.com/pmezard/go-difflib/difflib"
)

// CommitInput is either a proposal commit ({proposal_id}, needs commit) or a
// raw commit ({base_version, summary, content, target?}, needs admin). A raw
// commit with a target replaces that region (heading line through the end of
// the region) in the current text; without one, or with "workspace", content
// replaces the whole document.
type CommitInput struct {
	ProposalID  string  `json:"proposal_id,omitempty" jsonschema:"the approved proposal to write into the file"`
	BaseVersion *int64  `json:"base_version,omitempty" jsonschema:"raw commit only (admin): the version the content is based on" schema:"minimum=1"`
	Summary     string  `json:"summary,omitempty" jsonschema:"raw commit only (admin): what changed"`
	Content     *string `json:"content,omitempty" jsonschema:"raw commit only (admin): the new text"`
	Target      string  `json:"target,omitempty" jsonschema:"raw commit only (admin): replace only this section"`
}

// CommitResult names the version a commit created. Target (canonical) is set
// for raw commits that named one.
type CommitResult struct {
	Version       int64   `json:"version"`
	Summary       string  `json:"summary"`
	ParticipantID string  `json:"participant_id"`
	Target        *string `json:"target,omitempty"`
}

// VersionChange summarises one version (changes_since, stale_version).
type VersionChange struct {
	Version       int64   `json:"version"`
	Summary       string  `json:"summary"`
	ParticipantID *string `json:"participant_id"`
	CreatedAt     string  `json:"created_at"`
}

// staleChanges is how many versions a stale_version error lists.
const staleChanges = 10

// Commit writes a new version of the document: the file first (atomically,
// owner, group and mode kept, symlink target resolved at open, and only
// while the file holds the text the commit is based on), then the version
// row, all before the actor's COMMIT. An out-of-band edit of the file —
// found before the commit or while it writes — is recorded as its own
// version before anything else, so it is never lost; a section commit is
// re-applied onto an edit that left its section alone, and any other
// commit against an older base is refused with stale_version and the data
// to recover. Every pending proposal is superseded by a commit.
func (e *Engine) Commit(tx *Tx, p Principal, in CommitInput) (CommitResult, error) {
	if in.ProposalID != "" {
		if in.Content != nil || in.BaseVersion != nil || in.Target != "" || in.Summary != "" {
			return CommitResult{}, invalid("proposal_id",
				"commit takes either proposal_id alone, or base_version, summary, content and an optional target")
		}
		return e.commitProposal(tx, p, in.ProposalID)
	}
	if in.Content == nil && in.BaseVersion == nil {
		return CommitResult{}, invalid("proposal_id", "proposal_id is required (raw commits of content need admin)")
	}
	return e.commitRaw(tx, p, in)
}

func (e *Engine) commitProposal(tx *Tx, p Principal, id string) (CommitResult, error) {
	if err := p.Require(CapCommit); err != nil {
		return CommitResult{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return CommitResult{}, err
	}
	pr, err := e.loadProposal(tx.ctx, tx.q, id)
	if err != nil {
		return CommitResult{}, err
	}
	if pr.Status != ProposalApproved {
		return CommitResult{}, proposalConflict(pr, "proposal %s is %s; only an approved proposal can be committed", pr.ProposalID, pr.Status)
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return CommitResult{}, err
	}
	if pr.BaseVersion != d.Version {
		return e.conflictProposal(tx, p, pr, d)
	}
	text := pr.Change.Content
	edit := docEdit{content: pr.Change.Content}
	if pr.Change.Section != "" {
		r, ok := markdown.FindRegion(d.Regions, pr.Change.Section)
		if !ok {
			return CommitResult{}, Errorf(KindInvalidRegion, "section %q is no longer in the document", pr.Change.Section).
				With("region", pr.Change.Section).With("proposal_id", pr.ProposalID)
		}
		edit.section = r.Path
		text = markdown.ReplaceRegion(d.Content, r, pr.Change.Content)
	}
	summary := pr.Summary
	if summary == "" {
		summary = "proposal " + pr.ProposalID
	}
	v, cur, err := e.writeVersion(tx, d, edit, text, summary, "proposal", p.ParticipantID, pr.ProposalID)
	if err != nil {
		return CommitResult{}, err
	}
	if cur != nil { // an outside edit touched the proposal's section while it was written
		return e.conflictProposal(tx, p, pr, cur)
	}
	n, err := tx.execN(`UPDATE proposals SET status = 'committed', committed_version = ?, updated_at = ?
		WHERE proposal_id = ? AND status = 'approved'`, v, tx.nowMS(), pr.ProposalID)
	if err != nil {
		return CommitResult{}, Internal(err)
	}
	if n != 1 {
		return CommitResult{}, proposalConflict(pr, "proposal %s is no longer approved", pr.ProposalID)
	}
	if err := tx.emit("proposal.committed", refs{actor: p.ParticipantID, version: v}, map[string]any{
		"proposal_id": pr.ProposalID, "version": v, "status": ProposalCommitted,
	}); err != nil {
		return CommitResult{}, err
	}
	if err := e.supersedePending(tx, p.ParticipantID, v); err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Version: v, Summary: summary, ParticipantID: p.ParticipantID}, nil
}

// conflictProposal answers stale_version for an approved proposal whose base
// is no longer the current version d, and marks it conflicted: that state
// change (and any outside edit recorded on the way) commits while the
// caller hears the refusal.
func (e *Engine) conflictProposal(tx *Tx, p Principal, pr *Proposal, d *Doc) (CommitResult, error) {
	attempted, err := e.attemptedText(tx, pr.BaseVersion, d, pr.Change.Section, pr.Change.Content)
	if err != nil {
		return CommitResult{}, err
	}
	stale, err := e.staleError(tx, pr.BaseVersion, d, attempted)
	if err != nil {
		return CommitResult{}, err
	}
	n, err := tx.execN(`UPDATE proposals SET status = 'conflicted', updated_at = ? WHERE proposal_id = ? AND status = 'approved'`,
		tx.nowMS(), pr.ProposalID)
	if err != nil {
		return CommitResult{}, Internal(err)
	}
	if n != 1 {
		return CommitResult{}, proposalConflict(pr, "proposal %s is no longer approved", pr.ProposalID)
	}
	if err := tx.emit("proposal.conflicted", refs{actor: p.ParticipantID}, map[string]any{
		"proposal_id": pr.ProposalID, "status": ProposalConflicted,
		"base_version": pr.BaseVersion, "current_version": d.Version,
	}); err != nil {
		return CommitResult{}, err
	}
	// The proposal's new state commits; the caller still hears stale_version.
	tx.CommitAndFail(stale.With("proposal_id", pr.ProposalID))
	return CommitResult{}, nil
}

func (e *Engine) commitRaw(tx *Tx, p Principal, in CommitInput) (CommitResult, error) {
	if err := p.Require(CapAdmin); err != nil {
		return CommitResult{}, err
	}
	if in.BaseVersion == nil {
		return CommitResult{}, invalid("base_version", "base_version is required: the version you read")
	}
	if in.Content == nil {
		return CommitResult{}, invalid("content", "content is required")
	}
	content := *in.Content
	if !utf8.ValidString(content) {
		return CommitResult{}, invalid("content", "content is not valid UTF-8")
	}
	if err := checkText("summary", in.Summary, e.Limits.MaxSummaryChars); err != nil {
		return CommitResult{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return CommitResult{}, err
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return CommitResult{}, err
	}
	base := *in.BaseVersion
	switch {
	case base < 1:
		return CommitResult{}, Errorf(KindVersionNotFound, "version %d does not exist", base).With("base_version", base)
	case base > d.Version:
		return CommitResult{}, invalid("base_version", "base_version %d is in the future; the document is at version %d", base, d.Version).
			With("current_version", d.Version)
	case base != d.Version:
		attempted, err := e.attemptedText(tx, base, d, in.Target, content)
		if err != nil {
			return CommitResult{}, err
		}
		stale, err := e.staleError(tx, base, d, attempted)
		if err != nil {
			return CommitResult{}, err
		}
		// The base may be stale because of an outside edit SyncFile just
		// recorded: that version commits; the caller hears stale_version.
		tx.CommitAndFail(stale)
		return CommitResult{}, nil
	}
	text := content
	edit := docEdit{content: content}
	var target *string
	if in.Target != "" {
		r, whole, err := d.FindSection(in.Target)
		if err != nil {
			return CommitResult{}, err
		}
		canon := markdown.Workspace
		if !whole {
			canon = r.Path
			edit.section = r.Path
			text = markdown.ReplaceRegion(d.Content, r, content)
		}
		target = &canon
	}
	summary := in.Summary
	if summary == "" {
		summary = "raw commit"
	}
	v, cur, err := e.writeVersion(tx, d, edit, text, summary, "raw_commit", p.ParticipantID, "")
	if err != nil {
		return CommitResult{}, err
	}
	if cur != nil { // an outside edit made the commit impossible; it is a version now
		stale, err := e.staleError(tx, base, cur, text)
		if err != nil {
			return CommitResult{}, err
		}
		tx.CommitAndFail(stale)
		return CommitResult{}, nil
	}
	if err := e.supersedePending(tx, p.ParticipantID, v); err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Version: v, Summary: summary, ParticipantID: p.ParticipantID, Target: target}, nil
}

// attemptedText is the document the caller meant to produce: the change
// applied to the base it read (a section missing there is looked up in the
// current text; failing both, the content stands alone).
func (e *Engine) attemptedText(tx *Tx, base int64, cur *Doc, section, content string) (string, error) {
	if section == "" || markdown.WholeDocument(section) {
		return content, nil
	}
	b, err := e.versionRow(tx.ctx, tx.q, base)
	if err != nil {
		return "", err
	}
	if r, ok := markdown.FindRegion(markdown.ParseRegions(b.content), section); ok {
		return markdown.ReplaceRegion(b.content, r, content), nil
	}
	if r, ok := markdown.FindRegion(cur.Regions, section); ok {
		return markdown.ReplaceRegion(cur.Content, r, content), nil
	}
	return content, nil
}

// staleError builds stale_version with everything needed to recover: the
// versions involved, the diff from the current text to the attempted one,
// and the versions committed since the base.
func (e *Engine) staleError(tx *Tx, base int64, cur *Doc, attempted string) (*Error, error) {
	changes, err := versionChanges(tx.ctx, tx.q, base, staleChanges)
	if err != nil {
		return nil, err
	}
	diff, cut := e.unifiedDiff(cur.Content, attempted, fmt.Sprintf("v%d", cur.Version), fmt.Sprintf("attempted@v%d", base))
	stale := Errorf(KindStaleVersion, "base version %d is stale: the document is at version %d; read the diff and propose again",
		base, cur.Version).
		With("base_version", base).With("expected_version", base).With("current_version", cur.Version).
		With("diff", diff).With("changes", changes)
	if cut {
		stale.With("diff_truncated", true)
	}
	return stale, nil
}

// versionChanges lists up to limit versions after `after`, oldest first.
func versionChanges(ctx context.Context, q Querier, after int64, limit int) ([]VersionChange, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, summary, participant_id, created_at FROM versions
		WHERE version > ? ORDER BY version`+limitSQL(pageLimit(limit)), after)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := []VersionChange{}
	for len(out) < limit && rows.Next() {
		var c VersionChange
		var pid sql.NullString
		var created int64
		if err := rows.Scan(&c.Version, &c.Summary, &pid, &created); err != nil {
			return nil, Internal(err)
		}
		c.ParticipantID = optStr(pid)
		c.CreatedAt = WireTime(created)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// optStr and optTime turn nullable columns into optional wire values.
func optStr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func optTime(v sql.NullInt64) *string {
	if !v.Valid {
		return nil
	}
	s := WireTime(v.Int64)
	return &s
}

// unifiedDiff renders the unified diff from a to b (3 lines of context),
// bounded by the request body limit and cut on a line boundary; cut reports
// whether it was bounded. A last line without a newline is marked the way
// diff(1) does.
func (e *Engine) unifiedDiff(a, b, fromLabel, toLabel string) (diff string, cut bool) {
	if a == b {
		return "", false
	}
	out, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(a), B: diffLines(b), FromFile: fromLabel, ToFile: toLabel, Context: 3,
	})
	if err != nil { // only a failing writer can fail, and a strings.Builder does not
		return "", false
	}
	max := int(e.Limits.MaxBodyBytes)
	if max <= 0 || len(out) <= max {
		return out, false
	}
	out = out[:max]
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[:i+1]
	}
	return out, true
}

func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "\n") {
		lines[len(lines)-1] = last + "\n\\ No newline at end of file\n"
	}
	return lines
}

// txDoc is the current version as this transaction sees it, parsed.
func (e *Engine) txDoc(tx *Tx) (*Doc, error) { return e.CurrentDoc(tx.ctx, tx.q) }

// docEdit is what a commit does to the text: replace one section (by its
// path) or, with no section, the whole document. It is kept so the commit
// can be re-applied to an outside edit that lands while it is written.
type docEdit struct {
	section string
	content string
}

// rebase re-applies a section edit decided on base to cur, the text an
// outside edit left, if that edit did not touch the section (its text is
// the same in both). A whole-document edit never rebases.
func (ed docEdit) rebase(base, cur *Doc) (string, bool) {
	if ed.section == "" {
		return "", false
	}
	was, ok1 := regionByPath(base.Regions, ed.section)
	now, ok2 := regionByPath(cur.Regions, ed.section)
	if !ok1 || !ok2 || base.Content[was.Start:was.End] != cur.Content[now.Start:now.End] {
		return "", false
	}
	return markdown.ReplaceRegion(cur.Content, now, ed.content), true
}

// regionByPath finds a region by its exact path (first match, as selectors).
func regionByPath(regions []Region, path string) (Region, bool) {
	for _, r := range regions {
		if r.Path == path {
			return r, true
		}
	}
	return Region{}, false
}

// writeVersion writes the edit's text to the file and records it as the
// next version. An outside edit that lands meanwhile becomes a version
// first; the edit is then re-applied to it when it can be (see
// docEdit.rebase). When it cannot, nothing of the edit stays in the file
// and cur is the current document, for the caller's stale_version.
func (e *Engine) writeVersion(tx *Tx, base *Doc, edit docEdit, text, summary, source, participantID, proposalID string) (v int64, cur *Doc, err error) {
	text, cur, err = e.writeDoc(tx, base, edit, text)
	if err != nil || cur != nil {
		return 0, cur, err
	}
	v, err = e.addVersion(tx, text, summary, source, participantID, proposalID)
	return v, nil, err
}

// writeDoc replaces the document with text, guarded (see guardedFile):
// atomically, with the old file's owner, group and mode, symlink target
// resolved at open, and only while the file holds the text the commit is
// based on. Every outside text it meets is recorded as a version at once.
// It returns the text it wrote (the edit re-applied, if an outside edit
// came in), or, when the edit cannot be re-applied, cur: the current
// document, with the file holding the outside text.
//
// The stamp of the new file is remembered once the transaction commits,
// so the writer does not mistake its own write for an outside edit; if
// the transaction does not commit, the undo puts the text that was there
// back — only while the file still holds ours.
func (e *Engine) writeDoc(tx *Tx, base *Doc, edit docEdit, text string) (string, *Doc, error) {
	// The file is written only where the user finds it: not while its
	// directory is somewhere else (the write would go to the directory the
	// room holds, which the path no longer shows).
	if err := e.DocAway(); err != nil {
		return "", nil, err
	}
	cur, expect := base, base.Content
	// What the undo puts back: the newest text that is not ours, in place
	// of ours. One undo per command, kept current as the loop goes.
	var ours, prev string
	undoSet := false
	setUndo := func() {
		ours, prev = text, cur.Content
		if !undoSet {
			undoSet = true
			tx.undo = append(tx.undo, func() error { return e.file.restore(ours, prev) })
		}
	}
	for attempt := 1; ; attempt++ {
		res, err := e.file.replace(expect, text)
		if err != nil {
			return "", nil, err
		}
		recorded := false
		for _, o := range res.outside {
			if o == cur.Content {
				continue
			}
			if _, err := e.addVersion(tx, o, "external substrate edit", "external", "", ""); err != nil {
				return "", nil, err
			}
			if cur, err = e.txDoc(tx); err != nil {
				return "", nil, err
			}
			recorded = true
		}
		switch {
		case res.placed:
			expect = text
		case len(res.outside) > 0:
			expect = res.outside[len(res.outside)-1]
		}
		if res.placed && !recorded {
			if hook := e.afterFileWrite; hook != nil {
				// The crash seam: a failure here stands for the process dying right
				// after the rename, so nothing below (not even the undo) happens.
				if err := hook(); err != nil {
					return "", nil, Internal(err)
				}
			}
			setUndo()
			if res.syncErr != nil {
				return "", nil, fileError("cannot sync the document's directory", res.syncErr)
			}
			st := res.stamp
			tx.after = append(tx.after, func() { e.stamp.Store(&st) })
			return text, nil, nil
		}
		if res.placed {
			setUndo() // ours is in the file while the loop goes on
		}
		if !recorded {
			// Nothing new to re-apply to (the file vanished, or the fallback's
			// check failed): the same text again.
			if attempt >= maxReplaceAttempts {
				return "", nil, Errorf(KindUnavailable, "the document kept changing while ce wrote it; try again").
					With("retry_after_seconds", 1)
			}
			continue
		}
		next, ok := edit.rebase(base, cur)
		if !ok || attempt >= maxReplaceAttempts {
			if res.placed {
				// Ours went in, then an outside edit came to light: put the
				// outside text back in place of ours.
				if err := e.file.restore(text, cur.Content); err != nil {
					return "", nil, err
				}
			}
			return "", cur, nil
		}
		text = next
	}
}

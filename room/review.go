package room

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/commonroom/ce/room/markdown"
	"github.com/pmezard/go-difflib/difflib"
)

// Reviewing like a pull request (issue 27, item 1): the diffs a host reads
// before deciding on a proposal, and the document's history one version at
// a time. They are read queries over the same rows the commit uses
// (attemptedText's rule for what a section change replaces), computed here
// so every door shows the same diff. Each diff is bounded like every other
// diff the room sends (unifiedDiff: the request body limit, cut on a line
// boundary, with a flag saying so); the texts compared are bounded by the
// proposal limit (MaxChangeBytes) on one side and the document on the
// other.

// ProposalDiff is what a proposal would change, as a reviewer reads it.
type ProposalDiff struct {
	ProposalID string `json:"proposal_id"`
	Status     string `json:"status"`
	// Scope is "section" or "document" (a whole-document replacement).
	Scope string `json:"scope"`
	// Section is the section it replaces ("" for the whole document).
	Section        string `json:"section,omitempty"`
	BaseVersion    int64  `json:"base_version"`
	CurrentVersion int64  `json:"current_version"`
	// Stale says the document changed since the proposal's base: a commit
	// will answer stale_version (and mark it conflicted).
	Stale bool `json:"stale"`
	// SectionMissing says the section is no longer in the current
	// document; Diff is then against nothing.
	SectionMissing bool `json:"section_missing,omitempty"`
	// Diff is the unified diff from the current text (of the section, or
	// the whole document) to the proposed text, with its line counts.
	Diff          string `json:"diff"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	Added         int    `json:"added"`
	Removed       int    `json:"removed"`
	// BaseDiff is, for a stale proposal only, the diff from the text it
	// was based on to the proposed text: what its author meant to change.
	BaseDiff          string `json:"base_diff,omitempty"`
	BaseDiffTruncated bool   `json:"base_diff_truncated,omitempty"`
}

// ProposalDiffInput names the proposal to diff.
type ProposalDiffInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal" schema:"required" query:",required"`
}

// ProposalDiff answers the diff of a proposal against the section's
// current text (and, when the document moved since its base, against the
// text at its base). Needs read, as reading the proposal does.
func (e *Engine) ProposalDiff(ctx context.Context, q Querier, p Principal, in ProposalDiffInput) (ProposalDiff, error) {
	if err := p.Require(CapRead); err != nil {
		return ProposalDiff{}, err
	}
	pr, err := e.loadProposal(ctx, q, in.ProposalID)
	if err != nil {
		return ProposalDiff{}, err
	}
	cur, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return ProposalDiff{}, err
	}
	out := ProposalDiff{ProposalID: pr.ProposalID, Status: pr.Status, Scope: pr.Scope, Section: pr.Change.Section,
		BaseVersion: pr.BaseVersion, CurrentVersion: cur.Version, Stale: pr.BaseVersion != cur.Version}
	now, found := sectionText(cur.Content, cur.Regions, pr.Change.Section)
	out.SectionMissing = !found
	out.Diff, out.DiffTruncated = e.reviewDiff(now, pr.Change.Content, fmt.Sprintf("v%d", cur.Version), "proposed")
	out.Added, out.Removed = diffCounts(out.Diff)
	if out.Stale {
		b, err := e.versionRow(ctx, q, pr.BaseVersion)
		var re *Error
		switch {
		case errors.As(err, &re) && re.Kind == KindVersionNotFound:
			// The base is gone (pruned): the diff against now stands alone.
		case err != nil:
			return ProposalDiff{}, err
		default:
			then, _ := sectionText(b.content, markdown.ParseRegions(b.content), pr.Change.Section)
			out.BaseDiff, out.BaseDiffTruncated = e.reviewDiff(then, pr.Change.Content, fmt.Sprintf("v%d", pr.BaseVersion), "proposed")
		}
	}
	return out, nil
}

// maxReviewLineBytes bounds one line of a review diff: a longer line (a
// 1 MB single line) is shown cut, with how much was left out, so one line
// cannot take the whole diff's bound and hide the lines after it.
const maxReviewLineBytes = 8 << 10

// reviewDiff is unifiedDiff for a reader: each line at most
// maxReviewLineBytes (cut on a character boundary, saying how many bytes
// were left out), the whole at most half the body bound, so an answer
// carrying two diffs stays under it; cut reports either bound was hit.
func (e *Engine) reviewDiff(a, b, fromLabel, toLabel string) (string, bool) {
	if a == b {
		return "", false
	}
	full, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(a), B: diffLines(b), FromFile: fromLabel, ToFile: toLabel, Context: 3,
	})
	if err != nil {
		return "", false
	}
	limit := max(int(e.Limits.MaxBodyBytes)/2, 4*maxReviewLineBytes)
	var out strings.Builder
	cut := false
	for line := range strings.Lines(full) {
		if len(line) > maxReviewLineBytes {
			keep := maxReviewLineBytes
			for keep > 0 && !utf8.RuneStart(line[keep]) {
				keep--
			}
			line = fmt.Sprintf("%s … [%d more bytes]\n", line[:keep], len(line)-keep)
			cut = true
		}
		if out.Len()+len(line) > limit {
			return out.String(), true
		}
		out.WriteString(line)
	}
	return out.String(), cut
}

// sectionText is the text a change to section replaces in content: the
// region (heading line through its end), or the whole text for "".
func sectionText(content string, regions []Region, section string) (string, bool) {
	if section == "" || markdown.WholeDocument(section) {
		return content, true
	}
	r, ok := markdown.FindRegion(regions, section)
	if !ok {
		return "", false
	}
	return content[r.Start:r.End], true
}

// diffCounts counts the added and removed lines of a unified diff.
func diffCounts(diff string) (added, removed int) {
	for line := range strings.Lines(diff) {
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"):
		case strings.HasPrefix(line, "+"):
			added++
		case strings.HasPrefix(line, "-"):
			removed++
		}
	}
	return added, removed
}

// VersionInput names one version of the document.
type VersionInput struct {
	Version int64 `json:"version" jsonschema:"the version (1 is the document as the room first read it)" schema:"required,minimum=1" query:",required"`
}

// VersionStep is one version of the document as history shows it: who
// made it, how, and the diff from the version before.
type VersionStep struct {
	Version int64 `json:"version"`
	// Latest is the current version, so a reader knows how far it can step.
	Latest        int64   `json:"latest"`
	Summary       string  `json:"summary"`
	Source        string  `json:"source"` // bootstrap, raw_commit, proposal or external
	ParticipantID *string `json:"participant_id"`
	ProposalID    *string `json:"proposal_id"`
	CreatedAt     string  `json:"created_at"`
	// Diff is from the previous version (from nothing for version 1).
	Diff          string `json:"diff"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
	Added         int    `json:"added"`
	Removed       int    `json:"removed"`
}

// VersionStep answers one version with its diff from the one before.
// Needs read.
func (e *Engine) VersionStep(ctx context.Context, q Querier, p Principal, in VersionInput) (VersionStep, error) {
	if err := p.Require(CapRead); err != nil {
		return VersionStep{}, err
	}
	if in.Version < 1 {
		return VersionStep{}, Errorf(KindVersionNotFound, "version %d does not exist", in.Version).With("version", in.Version)
	}
	out := VersionStep{Version: in.Version}
	var pid, prop sql.NullString
	var created int64
	err := q.QueryRowContext(ctx, `SELECT summary, source, participant_id, proposal_id, created_at,
		(SELECT max(version) FROM versions) FROM versions WHERE version = ?`, in.Version).
		Scan(&out.Summary, &out.Source, &pid, &prop, &created, &out.Latest)
	if errors.Is(err, sql.ErrNoRows) {
		return VersionStep{}, Errorf(KindVersionNotFound, "version %d does not exist", in.Version).With("version", in.Version)
	}
	if err != nil {
		return VersionStep{}, Internal(err)
	}
	out.ParticipantID, out.ProposalID, out.CreatedAt = optStr(pid), optStr(prop), WireTime(created)
	text, err := e.versionRow(ctx, q, in.Version)
	if err != nil {
		return VersionStep{}, err
	}
	before := ""
	if in.Version > 1 {
		prev, err := e.versionRow(ctx, q, in.Version-1)
		if err != nil {
			return VersionStep{}, err
		}
		before = prev.content
	}
	out.Diff, out.DiffTruncated = e.reviewDiff(before, text.content, fmt.Sprintf("v%d", in.Version-1), fmt.Sprintf("v%d", in.Version))
	out.Added, out.Removed = diffCounts(out.Diff)
	return out, nil
}

// DocumentText is the text of one version (the current one for version 0),
// for a door that renders it (the owner page). Needs read.
func (e *Engine) DocumentText(ctx context.Context, q Querier, p Principal, version int64) (int64, string, error) {
	if err := p.Require(CapRead); err != nil {
		return 0, "", err
	}
	if version < 0 {
		return 0, "", Errorf(KindVersionNotFound, "version %d does not exist", version).With("version", version)
	}
	if version == 0 {
		d, err := e.CurrentDoc(ctx, q)
		if err != nil {
			return 0, "", err
		}
		return d.Version, d.Content, nil
	}
	r, err := e.versionRow(ctx, q, version)
	if err != nil {
		return 0, "", err
	}
	return r.version, r.content, nil
}

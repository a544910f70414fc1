package room_test

import (
	"context"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

func (d docRoom) proposalDiff(p room.Principal, id string) (room.ProposalDiff, error) {
	return read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalDiff, error) {
		return eng.ProposalDiff(context.Background(), q, p, room.ProposalDiffInput{ProposalID: id})
	})
}

func (d docRoom) versionStep(p room.Principal, v int64) (room.VersionStep, error) {
	return read(d.env, func(eng *room.Engine, q room.Querier) (room.VersionStep, error) {
		return eng.VersionStep(context.Background(), q, p, room.VersionInput{Version: v})
	})
}

// TestProposalDiff: a section proposal diffs against the section's current
// text; once the document moved it also diffs against its base and says it
// is stale; a whole-document proposal diffs against the whole document.
func TestProposalDiff(t *testing.T) {
	d := newDocRoom(t)
	a := d.join("a", agent()...)
	reader := d.join("reader", room.CapRead)

	p1 := d.mustPropose(a, "Goals", "## Goals\n\nship it twice\n\n")
	got, err := d.proposalDiff(reader, p1.ProposalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Stale || got.Scope != room.ScopeSection || got.Section != "Idea/Goals" || got.BaseDiff != "" || got.Added != 1 || got.Removed != 1 {
		t.Fatalf("fresh section diff = %+v", got)
	}
	if !strings.Contains(got.Diff, "-ship it\n") || !strings.Contains(got.Diff, "+ship it twice\n") || strings.Contains(got.Diff, "none yet") {
		t.Fatalf("the diff is not the section's:\n%s", got.Diff)
	}

	// Another commit moves the document: p1 (approved before) is stale.
	d.mustApprove(p1.ProposalID)
	d.rawCommit(strings.Replace(testDoc, "ship it", "ship it soon", 1))
	got, err = d.proposalDiff(reader, p1.ProposalID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Stale || got.BaseVersion != 1 || got.CurrentVersion != 2 {
		t.Fatalf("stale diff = %+v", got)
	}
	if !strings.Contains(got.Diff, "-ship it soon\n") || !strings.Contains(got.BaseDiff, "-ship it\n") || !strings.Contains(got.BaseDiff, "+ship it twice\n") {
		t.Fatalf("diffs against now and against the base:\n%s\n---\n%s", got.Diff, got.BaseDiff)
	}

	whole := d.mustPropose(a, "", "# Idea\n\nall new\n")
	got, err = d.proposalDiff(reader, whole.ProposalID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Scope != room.ScopeDocument || got.Stale || !strings.Contains(got.Diff, "-none yet\n") || !strings.Contains(got.Diff, "+all new\n") {
		t.Fatalf("whole-document diff = %+v", got)
	}

	for _, tc := range []struct {
		name string
		p    room.Principal
		id   string
		kind room.Kind
	}{
		{"unknown_id_is_proposal_not_found", reader, "proposal_0000000000000000", room.KindProposalNotFound},
		{"empty_id_is_invalid_request", reader, "", room.KindInvalidRequest},
		{"an_overlong_id_is_proposal_not_found", reader, strings.Repeat("p", 200), room.KindProposalNotFound},
		{"without_read_is_permission_denied", d.join("blind", room.CapObserve), p1.ProposalID, room.KindPermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.proposalDiff(tc.p, tc.id)
			wantKind(t, err, tc.kind)
		})
	}
}

// TestVersionStep: each version with who made it and its diff from the
// one before; version 1 diffs from nothing.
func TestVersionStep(t *testing.T) {
	d := newDocRoom(t)
	reader := d.join("reader", room.CapRead)
	d.rawCommit(testDoc + "\n## More\n\ntext\n")
	v1, err := d.versionStep(reader, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Latest != 2 || v1.Source != "bootstrap" || v1.Removed != 0 || v1.Added != strings.Count(testDoc, "\n") {
		t.Fatalf("v1 = %+v", v1)
	}
	v2, err := d.versionStep(reader, 2)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Source != "raw_commit" || v2.ParticipantID == nil || v2.Added != 4 || v2.Removed != 0 || !strings.Contains(v2.Diff, "+## More\n") {
		t.Fatalf("v2 = %+v\n%s", v2, v2.Diff)
	}
	for _, tc := range []struct {
		name string
		v    int64
	}{{"zero_is_version_not_found", 0}, {"negative_is_version_not_found", -3}, {"future_is_version_not_found", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.versionStep(reader, tc.v)
			wantKind(t, err, room.KindVersionNotFound)
		})
	}
	_, err = d.versionStep(d.join("blind", room.CapObserve), 1)
	wantKind(t, err, room.KindPermissionDenied)
}

// TestProposalInfoNamesWhoCommitted: a listing says who committed a
// committed proposal (the page's "committed by"), and nothing for others.
func TestProposalInfoNamesWhoCommitted(t *testing.T) {
	d := newDocRoom(t)
	a := d.join("a", agent()...)
	p1 := d.mustPropose(a, "Goals", "## Goals\n\nx\n")
	d.mustApprove(p1.ProposalID)
	if _, err := d.commitProposal(a, p1.ProposalID); err != nil {
		t.Fatal(err)
	}
	p2 := d.mustPropose(a, "Risks", "## Risks\n\ny\n")
	page, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
		return eng.Proposals(context.Background(), q, d.op(), room.ProposalsInput{})
	})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]*string{}
	for _, p := range page.Proposals {
		by[p.ProposalID] = p.CommittedBy
	}
	if got := by[p1.ProposalID]; got == nil || *got != a.ParticipantID {
		t.Fatalf("committed_by = %v, want %s", got, a.ParticipantID)
	}
	if by[p2.ProposalID] != nil {
		t.Fatalf("a pending proposal names a committer: %v", *by[p2.ProposalID])
	}
}

// TestProposalDiffLongLines: a 1 MB single line is shown cut in the diff,
// saying how much was left out, and the lines after it are still there.
func TestProposalDiffLongLines(t *testing.T) {
	d := newDocRoom(t, withDocText("# Doc\n\n## Notes\n\nA very long line: "+strings.Repeat("x", 1<<20)+"\n"))
	a := d.join("a", agent()...)
	p := d.mustPropose(a, "Notes", "## Notes\n\n<script>x()</script>\n"+strings.Repeat("y", 200_000)+"\n")
	got, err := d.proposalDiff(d.op(), p.ProposalID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.DiffTruncated || !strings.Contains(got.Diff, "+<script>x()</script>\n") || !strings.Contains(got.Diff, "more bytes]") || len(got.Diff) > 64<<10 {
		t.Fatalf("diff of %d bytes, truncated=%v:\n%.400s", len(got.Diff), got.DiffTruncated, got.Diff)
	}
}

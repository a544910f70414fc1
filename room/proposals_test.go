package room_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/commonroom/ce/room"
)

// The proposal state machine, from one table: every proposal state × every
// action × every capability set, with the exact outcome. The outcome column
// lists the four roles in this order:
//
//	reviewer (read+approve), committer (the default agent set), reader (read), admin
//
// Outcomes: "ok" = the row's transition (new status + exactly these events);
// "stale" = the proposal becomes conflicted with proposal.conflicted, and the
// caller still gets stale_version; "perm" / "pnf" / "conflict" =
// permission_denied / proposal_not_found / proposal_conflict, with no row,
// no event and no byte of the file changed.

type pState string

const (
	psPending       pState = "pending"
	psApproved      pState = "approved"
	psApprovedStale pState = "approved-stale" // approved, then the document moved on
	psRejected      pState = "rejected"
	psCommitted     pState = "committed"
	psConflicted    pState = "conflicted"
	psSuperseded    pState = "superseded"
	psUnknown       pState = "unknown" // no such proposal
)

var proposalStates = []pState{psPending, psApproved, psApprovedStale, psRejected, psCommitted, psConflicted, psSuperseded, psUnknown}

type pAction string

const (
	paApprove pAction = "approve"
	paReject  pAction = "reject"
	paCommit  pAction = "commit"
	paRaw     pAction = "raw-commit-lands" // a raw commit of the whole document at the current version
)

var proposalActions = []pAction{paApprove, paReject, paCommit, paRaw}

var proposalRoles = []string{"reviewer", "committer", "reader", "admin"}

var proposalRoleCaps = map[string][]room.Capability{
	"reviewer":  {room.CapRead, room.CapApprove},
	"committer": agentCaps,
	"reader":    {room.CapRead},
	"admin":     {room.CapAdmin},
}

type pTransition struct {
	state  pState
	action pAction
	out    string // four outcomes, by role
	to     string // the proposal's status after "ok" ("" = no proposal)
	events string // after "ok", space separated, in order
}

var closedRows = func(s pState) []pTransition {
	return []pTransition{
		{s, paApprove, "conflict perm perm conflict", "", ""},
		{s, paReject, "conflict perm perm conflict", "", ""},
		{s, paCommit, "perm conflict perm conflict", "", ""},
		{s, paRaw, "perm perm perm ok", string(s), "change.committed"},
	}
}

var proposalTransitions = slices.Concat([]pTransition{
	{psPending, paApprove, "ok perm perm ok", "approved", "proposal.approved"},
	{psPending, paReject, "ok perm perm ok", "rejected", "proposal.rejected"},
	{psPending, paCommit, "perm conflict perm conflict", "", ""},
	{psPending, paRaw, "perm perm perm ok", "superseded", "change.committed proposal.superseded"},

	{psApproved, paApprove, "conflict perm perm conflict", "", ""},
	{psApproved, paReject, "conflict perm perm conflict", "", ""},
	{psApproved, paCommit, "perm ok perm ok", "committed", "change.committed proposal.committed"},
	{psApproved, paRaw, "perm perm perm ok", "approved", "change.committed"},

	{psApprovedStale, paApprove, "conflict perm perm conflict", "", ""},
	{psApprovedStale, paReject, "conflict perm perm conflict", "", ""},
	{psApprovedStale, paCommit, "perm stale perm stale", "conflicted", "proposal.conflicted"},
	{psApprovedStale, paRaw, "perm perm perm ok", "approved", "change.committed"},
},
	closedRows(psRejected), closedRows(psCommitted), closedRows(psConflicted), closedRows(psSuperseded),
	[]pTransition{
		{psUnknown, paApprove, "pnf perm perm pnf", "", ""},
		{psUnknown, paReject, "pnf perm perm pnf", "", ""},
		{psUnknown, paCommit, "perm pnf perm pnf", "", ""},
		{psUnknown, paRaw, "perm perm perm ok", "", "change.committed"},
	})

var proposalErrKinds = map[string]room.Kind{
	"perm": room.KindPermissionDenied, "pnf": room.KindProposalNotFound, "conflict": room.KindProposalConflict,
	"stale": room.KindStaleVersion,
}

const goalsEdit = "## Goals\n\nship it twice\n\n"

// prepareProposal brings a new proposal to state s and returns the proposal id.
func prepareProposal(t *testing.T, d docRoom, author room.Principal, s pState) string {
	t.Helper()
	if s == psUnknown {
		return "proposal_0000000000000000"
	}
	id := d.mustPropose(author, "Goals", goalsEdit).ProposalID
	switch s {
	case psApproved, psApprovedStale, psCommitted, psConflicted:
		d.mustApprove(id)
	case psRejected:
		if _, err := d.review(d.op(), id, false); err != nil {
			t.Fatal(err)
		}
	}
	switch s {
	case psApprovedStale, psConflicted, psSuperseded:
		d.rawCommit(d.fileText() + "\nmoved on\n")
	case psCommitted:
		if _, err := d.commitProposal(d.op(), id); err != nil {
			t.Fatal(err)
		}
	}
	if s == psConflicted {
		_, err := d.commitProposal(d.op(), id)
		wantKind(t, err, room.KindStaleVersion)
	}
	want := map[pState]string{psApprovedStale: "approved"}[s]
	if want == "" {
		want = string(s)
	}
	if got := d.proposalStatus(id); got != want {
		t.Fatalf("prepared %s, proposal is %s", s, got)
	}
	return id
}

// TestProposalStateMachine runs each row in one room: every role acts on a
// proposal of its own, freshly brought to the row's state (leftover pending
// proposals are rejected first, so a commit supersedes nothing but the row's).
func TestProposalStateMachine(t *testing.T) {
	t.Parallel()
	for _, row := range proposalTransitions {
		outs := strings.Fields(row.out)
		if len(outs) != len(proposalRoles) {
			t.Fatalf("row %s/%s has %d outcomes", row.state, row.action, len(outs))
		}
		t.Run(fmt.Sprintf("%s/%s", row.state, row.action), func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			author := d.join("author", agentCaps...)
			actors := map[string]room.Principal{}
			for _, role := range proposalRoles {
				actors[role] = d.join(role, proposalRoleCaps[role]...)
			}
			for i, role := range proposalRoles {
				out := outs[i]
				t.Run(role+"_gets_"+out, func(t *testing.T) {
					rowT := d.tb
					d.tb = t // helpers fail this subtest, not the row
					defer func() { d.tb = rowT }()
					d.rejectPending()
					runProposalTransition(t, d, author, actors[role], row, out)
				})
			}
		})
	}
}

func runProposalTransition(t *testing.T, d docRoom, author, actor room.Principal, row pTransition, out string) {
	id := prepareProposal(t, d, author, row.state)
	before, mark := d.docDump(), d.lastEventID()
	fileBefore, versionBefore := d.fileText(), d.version()

	var err error
	switch row.action {
	case paApprove, paReject:
		var res room.ReviewResult
		res, err = d.review(actor, id, row.action == paApprove)
		if err == nil && (res.ProposalID != id || res.ReviewerID != actor.ParticipantID || res.Status != row.to) {
			t.Fatalf("review answered %+v", res)
		}
	case paCommit:
		_, err = d.commitProposal(actor, id)
	case paRaw:
		_, err = d.commit(actor, room.CommitInput{BaseVersion: refOf(versionBefore), Summary: "raw",
			Content: refOf(fileBefore + "\nraw\n")})
	}

	if out == "ok" {
		if err != nil {
			t.Fatalf("want success, got %v", err)
		}
	} else {
		wantKind(t, err, proposalErrKinds[out])
	}
	if out == "ok" || out == "stale" {
		if row.to != "" {
			if got := d.proposalStatus(id); got != row.to {
				t.Fatalf("status %s, want %s", got, row.to)
			}
		}
		if got, want := types(d.eventsAfter(mark)), strings.Fields(row.events); !slices.Equal(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	switch out {
	case "stale":
		if errField(t, err, "proposal_id") != id {
			t.Fatalf("stale_version names %v", errField(t, err, "proposal_id"))
		}
		if d.fileText() != fileBefore || d.version() != versionBefore {
			t.Fatal("a conflicted commit wrote the document")
		}
	case "perm", "pnf", "conflict":
		if after := d.docDump(); after != before {
			t.Fatalf("a refused %s changed state:\nbefore %s\nafter  %s", row.action, before, after)
		}
		if d.lastEventID() != mark {
			t.Fatalf("a refused %s wrote events %v", row.action, types(d.eventsAfter(mark)))
		}
	}
}

// Every state meets every action exactly once.
func TestProposalStateMachine_TableIsComplete(t *testing.T) {
	seen := map[string]int{}
	for _, r := range proposalTransitions {
		seen[string(r.state)+"/"+string(r.action)]++
	}
	for _, s := range proposalStates {
		for _, a := range proposalActions {
			if n := seen[string(s)+"/"+string(a)]; n != 1 {
				t.Errorf("%s/%s appears %d times", s, a, n)
			}
		}
	}
}

func TestPropose_AnswersTheStoredProposal(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	mark := d.lastEventID()
	pr, err := d.propose(a, room.ProposeInput{Target: "section:Goals", BaseVersion: 1, Summary: "sharper goals",
		Change: room.ChangeInput{Content: refOf(goalsEdit), Section: "Goals"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("target_and_section_are_canonical_paths", func(t *testing.T) {
		if pr.Target != "Idea/Goals" || pr.Change.Section != "Idea/Goals" {
			t.Fatalf("target %q, section %q", pr.Target, pr.Change.Section)
		}
	})
	t.Run("the_answer_has_every_wire_field", func(t *testing.T) {
		var m map[string]any
		if err := json.Unmarshal([]byte(mustJSON(t, pr)), &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"proposal_id", "workspace_id", "participant_id", "target", "scope", "base_version", "summary",
			"change", "status", "reviewed_by", "reviewed_at", "committed_version", "created_at", "base_is_current"} {
			if _, ok := m[k]; !ok {
				t.Errorf("missing %s in %v", k, m)
			}
		}
		if m["base_is_current"] != true || m["status"] != "pending" || m["workspace_id"] != d.eng.WorkspaceID || m["scope"] != "section" {
			t.Fatalf("answer %v", m)
		}
	})
	t.Run("the_event_carries_no_body", func(t *testing.T) {
		evs := d.eventsAfter(mark)
		if len(evs) != 1 || evs[0].Type != "proposal.created" {
			t.Fatalf("events %v", types(evs))
		}
		if strings.Contains(evs[0].Payload, "twice") || strings.Contains(evs[0].Payload, "sharper") {
			t.Fatalf("payload carries text: %s", evs[0].Payload)
		}
	})
	t.Run("a_stale_base_is_accepted_and_reported", func(t *testing.T) {
		d.rawCommit(d.fileText() + "more\n")
		old, err := d.propose(a, room.ProposeInput{Target: "Goals", BaseVersion: 1, Change: room.ChangeInput{Content: refOf("x"), Section: "Goals"}})
		if err != nil {
			t.Fatal(err)
		}
		if old.BaseIsCurrent == nil || *old.BaseIsCurrent {
			t.Fatalf("base_is_current %v", old.BaseIsCurrent)
		}
	})
	t.Run("listings_do_not_carry_base_is_current", func(t *testing.T) {
		list, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
			return eng.Proposals(t.Context(), q, a, room.ProposalsInput{})
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(mustJSON(t, list), "base_is_current") {
			t.Fatal("a listing reports base_is_current")
		}
	})
}

func TestPropose_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	const fenced = "# Title\n\nintro\n\n```\n# Not a heading\n```\n\n## Real\n\ntext\n"
	d := newDocRoom(t, withDocText(fenced))
	a := d.join("a", agentCaps...)
	reader := d.join("reader", room.CapRead)
	big := strings.Repeat("x", 256<<10)
	in := func(f func(*room.ProposeInput)) room.ProposeInput {
		p := room.ProposeInput{Target: "Real", BaseVersion: 1, Summary: "s", Change: room.ChangeInput{Content: refOf("## Real\n\nnew\n"), Section: "Real"}}
		f(&p)
		return p
	}
	cases := []struct {
		name string
		who  room.Principal
		in   room.ProposeInput
		kind room.Kind
	}{
		{"base_version_in_the_future_is_invalid_request", a, in(func(p *room.ProposeInput) { p.BaseVersion = 2 }), room.KindInvalidRequest},
		{"missing_base_version_is_invalid_request", a, in(func(p *room.ProposeInput) { p.BaseVersion = 0 }), room.KindInvalidRequest},
		{"negative_base_version_is_invalid_request", a, in(func(p *room.ProposeInput) { p.BaseVersion = -3 }), room.KindInvalidRequest},
		{"unknown_target_is_invalid_region", a, in(func(p *room.ProposeInput) { p.Target = "Nope" }), room.KindInvalidRegion},
		{"missing_target_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Target = "" }), room.KindInvalidRequest},
		{"unknown_section_is_invalid_region", a, in(func(p *room.ProposeInput) { p.Change.Section = "Nope" }), room.KindInvalidRegion},
		{"heading_inside_fenced_code_is_not_a_target", a, in(func(p *room.ProposeInput) { p.Target = "Not a heading" }), room.KindInvalidRegion},
		{"heading_inside_fenced_code_is_not_a_section", a, in(func(p *room.ProposeInput) { p.Change.Section = "Not a heading" }), room.KindInvalidRegion},
		{"missing_content_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Change.Content = nil }), room.KindInvalidRequest},
		{"content_not_utf8_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Change.Content = refOf("bad \xff byte") }), room.KindInvalidRequest},
		{"change_over_256KiB_is_limit_exceeded", a, in(func(p *room.ProposeInput) { p.Change.Content = refOf(big) }), room.KindLimitExceeded},
		{"summary_over_2000_chars_is_limit_exceeded", a, in(func(p *room.ProposeInput) { p.Summary = strings.Repeat("é", 2001) }), room.KindLimitExceeded},
		{"without_propose_is_permission_denied", reader, in(func(*room.ProposeInput) {}), room.KindPermissionDenied},
		{"a_section_target_without_change_section_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Change.Section = "" }), room.KindInvalidRequest},
		{"change_section_naming_another_section_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Change.Section = "Title" }), room.KindInvalidRequest},
		{"change_section_naming_the_document_under_a_section_target_is_invalid_request", a,
			in(func(p *room.ProposeInput) { p.Change.Section = "workspace" }), room.KindInvalidRequest},
		{"a_workspace_target_with_a_change_section_is_invalid_request", a, in(func(p *room.ProposeInput) { p.Target = "workspace" }), room.KindInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, mark := d.docDump(), d.lastEventID()
			_, err := d.propose(c.who, c.in)
			wantKind(t, err, c.kind)
			if d.docDump() != before || d.lastEventID() != mark {
				t.Fatal("a refused proposal changed state")
			}
		})
	}
	t.Run("unknown_region_names_the_region", func(t *testing.T) {
		_, err := d.propose(a, in(func(p *room.ProposeInput) { p.Target = "Nope" }))
		if errField(t, err, "region") != "Nope" {
			t.Fatalf("region field %v", errField(t, err, "region"))
		}
	})
	t.Run("an_ambiguous_scope_names_the_field_and_the_fix", func(t *testing.T) {
		_, err := d.propose(a, in(func(p *room.ProposeInput) { p.Change.Section = "" }))
		msg := room.AsError(err).Message
		if errField(t, err, "field") != "change.section" || !strings.Contains(msg, `change.section to "Title/Real"`) ||
			!strings.Contains(msg, `target to "workspace"`) {
			t.Fatalf("field %v, message %q", errField(t, err, "field"), msg)
		}
	})
	t.Run("a_change_just_under_the_limit_is_accepted", func(t *testing.T) {
		// {"content":"…"} adds 14 bytes of JSON around the content: a
		// whole-document change, which stores no section.
		if _, err := d.propose(a, in(func(p *room.ProposeInput) {
			p.Target, p.Change.Section, p.Change.Content = "workspace", "", refOf(big[:256<<10-14])
		})); err != nil {
			t.Fatal(err)
		}
	})
}

func TestReviewAndCommit_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	pending := d.mustPropose(a, "Goals", goalsEdit).ProposalID
	cases := []struct {
		name string
		run  func() error
		kind room.Kind
	}{
		{"review_without_approve_decision_is_invalid_request", func() error {
			_, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (room.ReviewResult, error) {
				return eng.Review(tx, d.op(), room.ReviewInput{ProposalID: pending})
			})
			return err
		}, room.KindInvalidRequest},
		{"review_without_id_is_invalid_request", func() error { _, err := d.review(d.op(), "", true); return err }, room.KindInvalidRequest},
		{"review_of_unknown_is_proposal_not_found", func() error { _, err := d.review(d.op(), "proposal_x", true); return err }, room.KindProposalNotFound},
		{"commit_of_unknown_is_proposal_not_found", func() error { _, err := d.commitProposal(d.op(), "proposal_x"); return err }, room.KindProposalNotFound},
		{"commit_of_pending_is_proposal_conflict", func() error { _, err := d.commitProposal(d.op(), pending); return err }, room.KindProposalConflict},
		{"commit_with_nothing_is_invalid_request", func() error { _, err := d.commit(a, room.CommitInput{}); return err }, room.KindInvalidRequest},
		{"commit_of_id_plus_content_is_invalid_request", func() error {
			_, err := d.commit(d.op(), room.CommitInput{ProposalID: pending, Content: refOf("x")})
			return err
		}, room.KindInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, mark := d.docDump(), d.lastEventID()
			wantKind(t, c.run(), c.kind)
			if d.docDump() != before || d.lastEventID() != mark {
				t.Fatal("a refused command changed state")
			}
		})
	}
	t.Run("proposal_conflict_names_id_and_status", func(t *testing.T) {
		_, err := d.commitProposal(d.op(), pending)
		if errField(t, err, "proposal_id") != pending || errField(t, err, "status") != "pending" {
			t.Fatalf("fields %v", room.AsError(err).Fields)
		}
	})
}

func TestProposals_ListNewestFirstFilteredAndBounded(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withLimits(func(l *room.Limits) { l.MaxListItems = 3 }))
	a := d.join("a", agentCaps...)
	var ids []string
	for i := range 4 {
		ids = append(ids, d.mustPropose(a, "Goals", fmt.Sprintf("## Goals\n\n%d\n", i)).ProposalID)
	}
	d.mustApprove(ids[1])
	list := func(status string) ([]room.ProposalInfo, error) {
		p, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
			return eng.Proposals(t.Context(), q, a, room.ProposalsInput{Status: status})
		})
		return p.Proposals, err
	}
	idsOf := func(ps []room.ProposalInfo) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.ProposalID)
		}
		return out
	}
	t.Run("newest_first_bounded_by_the_list_limit", func(t *testing.T) {
		got, err := list("")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{ids[3], ids[2], ids[1]}; !slices.Equal(idsOf(got), want) {
			t.Fatalf("got %v, want %v", idsOf(got), want)
		}
	})
	t.Run("status_filter_keeps_only_that_status", func(t *testing.T) {
		got, err := list("approved")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(idsOf(got), []string{ids[1]}) || got[0].ReviewedBy == nil || *got[0].ReviewedBy != d.eng.HostID {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("unknown_status_is_invalid_request", func(t *testing.T) {
		_, err := list("open")
		wantKind(t, err, room.KindInvalidRequest)
	})
	t.Run("listing_needs_read", func(t *testing.T) {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
			return eng.Proposals(t.Context(), q, room.Principal{ParticipantID: a.ParticipantID, Caps: room.Caps{room.CapPropose}}, room.ProposalsInput{})
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

func TestCommit_SupersedesEveryPendingProposalAndNoApprovedOne(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	p1 := d.mustPropose(a, "Goals", "## Goals\n\none\n").ProposalID
	p2 := d.mustPropose(b, "Risks", "## Risks\n\ntwo\n").ProposalID
	p3 := d.mustPropose(b, "", "whole\n").ProposalID
	waiting := d.mustPropose(a, "Risks", "## Risks\n\napproved, not committed\n").ProposalID
	winner := d.mustPropose(a, "Goals", goalsEdit).ProposalID
	d.mustApprove(waiting)
	d.mustApprove(winner)
	mark := d.lastEventID()
	res, err := d.commitProposal(b, winner)
	if err != nil {
		t.Fatal(err)
	}
	evs := d.eventsAfter(mark)
	t.Run("events_are_the_version_the_commit_and_one_supersede_each", func(t *testing.T) {
		want := []string{"change.committed", "proposal.committed", "proposal.superseded", "proposal.superseded", "proposal.superseded"}
		if !slices.Equal(types(evs), want) {
			t.Fatalf("events %v", types(evs))
		}
		for i, id := range []string{p1, p2, p3} {
			var pl struct {
				ProposalID string `json:"proposal_id"`
				ByVersion  int64  `json:"by_version"`
			}
			if err := json.Unmarshal([]byte(evs[2+i].Payload), &pl); err != nil {
				t.Fatal(err)
			}
			if pl.ProposalID != id || pl.ByVersion != res.Version {
				t.Fatalf("supersede event %d: %s", i, evs[2+i].Payload)
			}
		}
	})
	t.Run("pending_ones_are_superseded", func(t *testing.T) {
		for _, id := range []string{p1, p2, p3} {
			if s := d.proposalStatus(id); s != "superseded" {
				t.Fatalf("%s is %s", id, s)
			}
		}
	})
	t.Run("the_approved_one_is_untouched", func(t *testing.T) {
		if s := d.proposalStatus(waiting); s != "approved" {
			t.Fatalf("approved-but-uncommitted is %s", s)
		}
	})
	t.Run("the_committed_one_records_its_version", func(t *testing.T) {
		if d.proposalStatus(winner) != "committed" || d.scalar(`SELECT committed_version FROM proposals WHERE proposal_id = ?`, winner) != res.Version {
			t.Fatal("committed_version not recorded")
		}
		v := d.versionAt(res.Version)
		if v.Source != "proposal" || strOf(v.ProposalID) != winner || strOf(v.Participant) != b.ParticipantID {
			t.Fatalf("version row %+v", v)
		}
	})
}

// Two agents commit against the same base at the same moment, through the
// actor: exactly one wins; the other gets stale_version whose diff, applied
// to the winner's text, gives the loser's text, and its proposal is conflicted.
func TestCommit_TwoAgentsRacingOnOneBase(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	for round := range 8 {
		t.Run(fmt.Sprintf("round_%d_exactly_one_wins", round), func(t *testing.T) {
			base := d.version()
			baseText := d.fileText()
			pa := d.mustPropose(a, "Goals", fmt.Sprintf("## Goals\n\na wins round %d\n\n", round))
			pb := d.mustPropose(b, "Risks", fmt.Sprintf("## Risks\n\nb wins round %d\n", round))
			d.mustApprove(pa.ProposalID)
			d.mustApprove(pb.ProposalID)
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make([]error, 2)
			for i, who := range []struct {
				p  room.Principal
				id string
			}{{a, pa.ProposalID}, {b, pb.ProposalID}} {
				wg.Go(func() {
					<-start
					_, errs[i] = d.commitProposal(who.p, who.id)
				})
			}
			close(start)
			wg.Wait()
			if (errs[0] == nil) == (errs[1] == nil) {
				t.Fatalf("want exactly one winner, got %v and %v", errs[0], errs[1])
			}
			win, lose, loseErr := pa, pb, errs[1]
			if errs[0] != nil {
				win, lose, loseErr = pb, pa, errs[0]
			}
			wantKind(t, loseErr, room.KindStaleVersion)
			if d.proposalStatus(win.ProposalID) != "committed" || d.proposalStatus(lose.ProposalID) != "conflicted" {
				t.Fatalf("statuses %s / %s", d.proposalStatus(win.ProposalID), d.proposalStatus(lose.ProposalID))
			}
			cur := d.fileText()
			if d.version() != base+1 {
				t.Fatalf("version %d after one commit on %d", d.version(), base)
			}
			if errField(t, loseErr, "base_version") != base || errField(t, loseErr, "expected_version") != base ||
				errField(t, loseErr, "current_version") != base+1 {
				t.Fatalf("fields %v", room.AsError(loseErr).Fields)
			}
			diff := errField(t, loseErr, "diff").(string)
			if !strings.HasPrefix(diff, fmt.Sprintf("--- v%d\n+++ attempted@v%d\n", base+1, base)) {
				t.Fatalf("diff header: %q", diff)
			}
			// The loser's text is its change applied to the base it read.
			sec := "## Goals\n\n"
			if lose.ProposalID == pb.ProposalID {
				sec = "## Risks\n\n"
			}
			i := strings.Index(baseText, sec)
			j := len(baseText)
			if k := strings.Index(baseText[i+len(sec):], "\n## "); k >= 0 {
				j = i + len(sec) + k + 1
			}
			loser := baseText[:i] + lose.Change.Content + baseText[j:]
			got, err := applyUnifiedDiff(cur, diff)
			if err != nil {
				t.Fatalf("the diff does not apply to the winner's text: %v\n%s", err, diff)
			}
			if got != loser {
				t.Fatalf("winner's text + diff =\n%q\nwant the loser's text\n%q", got, loser)
			}
			changes := errField(t, loseErr, "changes").([]room.VersionChange)
			if len(changes) != 1 || changes[0].Version != base+1 || strOf(changes[0].ParticipantID) == "<nil>" {
				t.Fatalf("changes %+v", changes)
			}
		})
	}
}

// TestPropose_NamesItsScopeOneWay (issue 24): a proposal replaces either
// one section, named by both target and change.section, or the whole
// document, named by target "workspace" alone; its scope says which on the
// answer, on the proposal read back and in the listing.
func TestPropose_NamesItsScopeOneWay(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	cases := []struct {
		name            string
		target, section string
		wantScope       string
		wantSection     string
	}{
		{"a section named twice by title", "Goals", "Goals", room.ScopeSection, "Idea/Goals"},
		{"a section named by title and by path", "Goals", "Idea/Goals", room.ScopeSection, "Idea/Goals"},
		{"a section named by section:", "section:Goals", "Goals", room.ScopeSection, "Idea/Goals"},
		{"the whole document", "workspace", "", room.ScopeDocument, ""},
		{"the whole document by another name", "*", "", room.ScopeDocument, ""},
	}
	for _, c := range cases {
		t.Run(c.name+" is scope "+c.wantScope, func(t *testing.T) {
			pr, err := d.propose(a, room.ProposeInput{Target: c.target, BaseVersion: 1, Summary: c.name,
				Change: room.ChangeInput{Content: refOf(goalsEdit), Section: c.section}})
			if err != nil {
				t.Fatal(err)
			}
			if pr.Scope != c.wantScope || pr.Change.Section != c.wantSection {
				t.Errorf("answer: scope %q section %q, want %q and %q", pr.Scope, pr.Change.Section, c.wantScope, c.wantSection)
			}
			got, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Proposal, error) {
				return eng.GetProposal(t.Context(), q, a, room.ProposalInput{ProposalID: pr.ProposalID})
			})
			if err != nil || got.Scope != c.wantScope {
				t.Errorf("workspace_proposal: scope %q (%v), want %q", got.Scope, err, c.wantScope)
			}
			list, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.ProposalPage, error) {
				return eng.Proposals(t.Context(), q, a, room.ProposalsInput{Limit: 1})
			})
			if err != nil || len(list.Proposals) != 1 || list.Proposals[0].ProposalID != pr.ProposalID || list.Proposals[0].Scope != c.wantScope {
				t.Errorf("workspace_proposals: %+v (%v), want scope %q", list.Proposals, err, c.wantScope)
			}
		})
	}
}

package room_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/room"
)

func (d docRoom) waiting(p room.Principal) (room.Waiting, error) {
	return read(d.env, func(eng *room.Engine, q room.Querier) (room.Waiting, error) {
		return eng.Waiting(context.Background(), q, p, room.Empty{})
	})
}

func (d docRoom) mustWaiting(p room.Principal) room.Waiting {
	d.tb.Helper()
	w, err := d.waiting(p)
	if err != nil {
		d.tb.Fatal(err)
	}
	return w
}

// counts is a Waiting's numbers as one comparable value.
type counts struct{ total, results, proposals, questions int }

func countsOf(w room.Waiting) counts { return counts{w.Count, w.Results, w.Proposals, w.Questions} }

// TestWaitingFollowsTheWorkflow walks one handoff and two proposals through
// their lives and checks, after each step, what waits on the host, on the
// owner of the handoff (who may answer but not approve) and on the worker.
func TestWaitingFollowsTheWorkflow(t *testing.T) {
	d := newDocRoom(t)
	host := d.op()
	alice := d.join("alice", agent()...)                    // owns the handoff; no approve
	bob := d.join("bob", agent(room.CapApprove)...)         // the worker; holds approve
	carol := d.join("carol", room.CapRead, room.CapPropose) // proposes only

	check := func(step string, p room.Principal, want counts) room.Waiting {
		t.Helper()
		w := d.mustWaiting(p)
		if got := countsOf(w); got != want {
			t.Fatalf("%s: waiting = %+v, want %+v (items %+v)", step, got, want, w.Items)
		}
		if len(w.Items) != w.Count {
			t.Fatalf("%s: %d items for a count of %d", step, len(w.Items), w.Count)
		}
		return w
	}

	check("empty room, host", host, counts{})
	h, err := d.create(alice, room.CreateHandoffInput{Summary: "About Venue", Assignee: bob.ParticipantID, Target: "Goals"})
	if err != nil {
		t.Fatal(err)
	}
	id := h.Handoff.HandoffID
	check("open handoff", host, counts{})
	if _, err := d.accept(bob, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.requestInput(bob, id, room.InputRequestSpec{Key: "a", Message: "Which city?"},
		room.InputRequestSpec{Key: "b", Message: "Which month?"}); err != nil {
		t.Fatal(err)
	}
	w := check("two questions, host", host, counts{1, 0, 0, 1})
	if it := w.Items[0]; it.Kind != room.WaitQuestion || it.ID != id || it.Questions != 2 || it.FromName != "bob" || it.Target != "Goals" {
		t.Fatalf("question item = %+v", it)
	}
	check("two questions, the owner (no approve) answers them", alice, counts{1, 0, 0, 1})
	check("two questions, the worker", bob, counts{})
	if err := d.answer(host, h.Handoff.TaskID, map[string]json.RawMessage{"a": raw(`{"action":"accept","content":{"answer":"Lyon"}}`)}); err != nil {
		t.Fatal(err)
	}
	w = check("one question left", host, counts{1, 0, 0, 1})
	if w.Items[0].Questions != 1 {
		t.Fatalf("open questions = %d, want 1", w.Items[0].Questions)
	}
	if err := d.answer(host, h.Handoff.TaskID, map[string]json.RawMessage{"b": raw(`{"action":"decline"}`)}); err != nil {
		t.Fatal(err)
	}
	check("answered", host, counts{})
	if _, err := d.complete(bob, id, room.ResultInput{Text: "done"}); err != nil {
		t.Fatal(err)
	}
	w = check("result delivered, host", host, counts{1, 1, 0, 0})
	if it := w.Items[0]; it.Kind != room.WaitResult || it.ID != id || it.FromID != bob.ParticipantID || it.Summary != "About Venue" {
		t.Fatalf("result item = %+v", it)
	}
	check("result delivered, the owner without approve", alice, counts{})
	check("result delivered, its own worker never approves it", bob, counts{})

	// A pending proposal waits on every approver; one based on an old
	// version says so.
	p1 := d.mustPropose(carol, "Goals", "## Goals\n\nmore\n")
	w = check("proposal pending", host, counts{2, 1, 1, 0})
	check("proposal pending, bob approves too", bob, counts{1, 0, 1, 0})
	check("proposal pending, carol cannot approve", carol, counts{})
	for _, it := range w.Items {
		if it.Kind == room.WaitProposal && (it.ID != p1.ProposalID || it.Stale || it.Scope != room.ScopeSection || it.FromName != "carol") {
			t.Fatalf("proposal item = %+v", it)
		}
	}
	d.mustApprove(p1.ProposalID)
	if _, err := d.commitProposal(host, p1.ProposalID); err != nil {
		t.Fatal(err)
	}
	stale, err := d.propose(carol, room.ProposeInput{Target: "workspace", BaseVersion: 1, Summary: "start over",
		Change: room.ChangeInput{Content: refOf("# New\n")}})
	if err != nil {
		t.Fatal(err)
	}
	w = check("a stale whole-document proposal", host, counts{2, 1, 1, 0})
	for _, it := range w.Items {
		if it.Kind == room.WaitProposal && (it.ID != stale.ProposalID || !it.Stale || it.Scope != room.ScopeDocument || it.BaseVersion != 1) {
			t.Fatalf("stale proposal item = %+v", it)
		}
	}
	if _, err := d.approve(host, id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := d.review(host, stale.ProposalID, false); err != nil {
		t.Fatal(err)
	}
	check("all decided", host, counts{})

	// An admin worker sees every handoff's result, but never its own.
	dave := d.join("dave", agent(room.CapApprove, room.CapAdmin)...)
	h2, err := d.create(alice, room.CreateHandoffInput{Summary: "second", Assignee: dave.ParticipantID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.accept(dave, h2.Handoff.HandoffID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.complete(dave, h2.Handoff.HandoffID, room.ResultInput{Text: "done"}); err != nil {
		t.Fatal(err)
	}
	check("an admin's own result", dave, counts{})
	check("an admin's own result, host", host, counts{1, 1, 0, 0})
}

// TestWaitingRefusesWithoutRead: a session without read learns nothing.
func TestWaitingRefusesWithoutRead(t *testing.T) {
	d := newDocRoom(t)
	blind := d.join("blind", room.CapObserve)
	_, err := d.waiting(blind)
	wantKind(t, err, room.KindPermissionDenied)
}

// TestWaitingListsAtMostFiftyOfAKind: the counts stay exact when the items
// are cut.
func TestWaitingListsAtMostFiftyOfAKind(t *testing.T) {
	d := newDocRoom(t, withLimits(func(l *room.Limits) {
		l.MaxPendingProposals, l.MaxPendingProposalsPerParticipant = 0, 0
	}))
	a := d.join("a", agent()...)
	for range 53 {
		d.mustPropose(a, "Goals", "## Goals\n\nx\n")
	}
	w := d.mustWaiting(d.op())
	if w.Proposals != 53 || w.Count != 53 || len(w.Items) != 50 || !w.Truncated {
		t.Fatalf("waiting = %+v with %d items", countsOf(w), len(w.Items))
	}
}

package room_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

const day = 24 * time.Hour

// prune runs the room's prune turns until nothing is due.
func (e *env) prune() room.PruneCounts {
	e.tb.Helper()
	c, err := e.r.Prune(context.Background())
	if err != nil {
		e.tb.Fatalf("prune: %v", err)
	}
	return c
}

// wantPruned checks err is kind k marked pruned (or, with pruned false,
// an ordinary not-found without the mark).
func wantPruned(t *testing.T, err error, k room.Kind, pruned bool) {
	t.Helper()
	wantKind(t, err, k)
	re := room.AsError(err)
	if got := re.Fields["pruned"] == true; got != pruned {
		t.Fatalf("%v: pruned mark %v, want %v (fields %v)", err, got, pruned, re.Fields)
	}
	if pruned && !strings.Contains(re.Message, "pruned") {
		t.Fatalf("message %q does not say pruned", re.Message)
	}
}

// lifecycle runs a handoff to approval (with an answered input request).
func lifecycle(t *testing.T, e *env, c cast) room.CreateHandoffResult {
	t.Helper()
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "work", Assignee: c.worker.ParticipantID})
	okH(t)(e.accept(c.worker, res.Handoff.HandoffID))
	okH(t)(e.requestInput(c.worker, res.Handoff.HandoffID, q("k1")))
	if err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"k1": answerOf("yes")}); err != nil {
		t.Fatal(err)
	}
	okH(t)(e.complete(c.worker, res.Handoff.HandoffID, room.ResultInput{Text: "done"}))
	okH(t)(e.approve(e.op(), res.Handoff.HandoffID, "ok"))
	return res
}

func TestPrune_TerminalHandoffsGoAfterTheirWindowWithTheirRowsAndLeaveTombstones(t *testing.T) {
	e := newEnv(t, withRetention(room.Retention{Handoffs: 2 * day}), withPruneEvery(1000*day))
	c := newCast(e)
	approved := lifecycle(t, e, c)
	cancelled := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "never taken"})
	if err := e.cancel(c.owner, cancelled.Task.TaskID); err != nil {
		t.Fatal(err)
	}
	// A result waiting for its decision is live however old it is.
	waiting := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "w", Assignee: c.worker.ParticipantID})
	okH(t)(e.accept(c.worker, waiting.Handoff.HandoffID))
	okH(t)(e.complete(c.worker, waiting.Handoff.HandoffID, room.ResultInput{Text: "r"}))
	// A chain: parent <- child (both settled), and followed <- live follower.
	parent := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "parent"})
	e.cancel(c.owner, parent.Task.TaskID)
	child := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "child", FollowsHandoffID: parent.Handoff.HandoffID})
	e.cancel(c.owner, child.Task.TaskID)
	followed := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "followed"})
	e.cancel(c.owner, followed.Task.TaskID)

	e.clock.Advance(2*day + time.Minute)
	follower := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "follower", Assignee: c.worker.ParticipantID,
		FollowsHandoffID: followed.Handoff.HandoffID})
	okH(t)(e.accept(c.worker, follower.Handoff.HandoffID))
	okH(t)(e.complete(c.worker, follower.Handoff.HandoffID, room.ResultInput{Text: "r"}))
	recent := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "recent"})
	e.cancel(c.owner, recent.Task.TaskID)

	got := e.prune()
	if got.Handoffs != 4 {
		t.Fatalf("pruned %d handoffs, want 4 (approved, cancelled, parent, child): %+v", got.Handoffs, got)
	}
	for _, gone := range []room.CreateHandoffResult{approved, cancelled, parent, child} {
		id := gone.Handoff.HandoffID
		_, err := e.getHandoff(c.owner, id)
		wantPruned(t, err, room.KindHandoffNotFound, true)
		for _, table := range []string{"handoffs WHERE handoff_id", "tasks WHERE correlation_id", "events WHERE handoff_id"} {
			if n := e.scalar(`SELECT count(*) FROM `+table+` = ?`, id); n != 0 {
				t.Errorf("%s: %d rows left of %s", table, n, id)
			}
		}
		if n := e.scalar(`SELECT count(*) FROM task_inputs WHERE task_id = ?`, gone.Task.TaskID); n != 0 {
			t.Errorf("%d input requests left of %s", n, id)
		}
	}
	for _, kept := range []room.CreateHandoffResult{waiting, followed, follower, recent} {
		if _, err := e.getHandoff(c.owner, kept.Handoff.HandoffID); err != nil {
			t.Errorf("%s (%s) was pruned: %v", kept.Handoff.HandoffID, kept.Handoff.Summary, err)
		}
	}
	var fk int64 = e.scalar(`SELECT count(*) FROM pragma_foreign_key_check`)
	if fk != 0 {
		t.Fatalf("%d foreign key violations after pruning", fk)
	}
	// An id that never existed is not "pruned".
	_, err := e.getHandoff(c.owner, "handoff_0123456789abcdef0123456789abcdef")
	wantPruned(t, err, room.KindHandoffNotFound, false)
	// A restart keeps the tombstones; after their own window they go, and
	// the id reads as not found.
	e.restart()
	_, err = e.getHandoff(c.owner, approved.Handoff.HandoffID)
	wantPruned(t, err, room.KindHandoffNotFound, true)
	e.clock.Advance(2*day + time.Minute)
	if got := e.prune(); got.Tombstones < 4 {
		t.Fatalf("dropped %d tombstones, want at least 4", got.Tombstones)
	}
	_, err = e.getHandoff(c.owner, approved.Handoff.HandoffID)
	wantPruned(t, err, room.KindHandoffNotFound, false)
	if tot := e.eng.PruneTotals(); tot.Handoffs != 1 || tot.Tombstones < 4 { // "recent", since the restart
		t.Fatalf("the engine's totals since the restart: %+v", tot)
	}
}

func TestPrune_RacingAFollowUpCommit(t *testing.T) {
	setup := func(t *testing.T) (*env, cast, room.CreateHandoffResult) {
		e := newEnv(t, withRetention(room.Retention{Handoffs: day}), withPruneEvery(1000*day))
		c := newCast(e)
		old := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "old"})
		if err := e.cancel(c.owner, old.Task.TaskID); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(day + time.Minute)
		return e, c, old
	}
	t.Run("follow-up committed first keeps the handoff", func(t *testing.T) {
		e, c, old := setup(t)
		mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "next", FollowsHandoffID: old.Handoff.HandoffID})
		if got := e.prune(); got.Handoffs != 0 {
			t.Fatalf("pruned %d handoffs, want 0", got.Handoffs)
		}
		if _, err := e.getHandoff(c.owner, old.Handoff.HandoffID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("prune committed first refuses the follow-up", func(t *testing.T) {
		e, c, old := setup(t)
		if got := e.prune(); got.Handoffs != 1 {
			t.Fatalf("pruned %d handoffs, want 1", got.Handoffs)
		}
		_, err := e.create(c.owner, room.CreateHandoffInput{Summary: "next", FollowsHandoffID: old.Handoff.HandoffID})
		wantKind(t, err, room.KindInvalidRequest)
		if n := e.scalar(`SELECT count(*) FROM handoffs`); n != 0 {
			t.Fatalf("%d handoffs, want 0", n)
		}
	})
	t.Run("both in flight at once leave the sidecar consistent", func(t *testing.T) {
		e, c, old := setup(t)
		errs := make(chan error, 1)
		go func() {
			_, err := e.create(c.owner, room.CreateHandoffInput{Summary: "next", FollowsHandoffID: old.Handoff.HandoffID})
			errs <- err
		}()
		pruned := e.prune().Handoffs
		err := <-errs
		switch {
		case pruned == 1 && err != nil: // prune first
		case pruned == 0 && err == nil: // follow-up first
		default:
			t.Fatalf("pruned %d and the follow-up answered %v", pruned, err)
		}
		if n := e.scalar(`SELECT count(*) FROM pragma_foreign_key_check`); n != 0 {
			t.Fatalf("%d foreign key violations", n)
		}
	})
}

func TestPrune_PruneTurnsAreBounded(t *testing.T) {
	e := newEnv(t, withRetention(room.Retention{Handoffs: day}), withPruneEvery(1000*day))
	c := newCast(e)
	for i := 0; i < 10; i++ {
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "s"})
		e.cancel(c.owner, res.Task.TaskID)
	}
	e.clock.Advance(day + time.Minute)
	got, err := do(e, func(eng *room.Engine, tx *room.Tx) (struct {
		c    room.PruneCounts
		more bool
	}, error) {
		c, more, err := eng.PruneStep(tx, 3)
		return struct {
			c    room.PruneCounts
			more bool
		}{c, more}, err
	})
	if err != nil || got.c.Handoffs != 3 || !got.more {
		t.Fatalf("one step of budget 3: %+v more=%v (%v), want 3 and more", got.c, got.more, err)
	}
	if all := e.prune(); all.Handoffs != 7 {
		t.Fatalf("the rest: %d, want 7", all.Handoffs)
	}
	if turns := e.r.Stats().PruneTurns.Load(); turns < 1 {
		t.Fatal("no prune turn counted")
	}
}

func TestPrune_VersionsAreThinnedToOneADayKeepingTheNewestAndTheReferenced(t *testing.T) {
	d := newDocRoom(t, withRetention(room.Retention{Versions: 2 * day}), withPruneEvery(1000*day))
	c := newCast(d.env)
	// Day 1: versions 2, 3, 4 (1 is the bootstrap, same day).
	for _, s := range []string{"a\n", "b\n", "c\n"} {
		d.rawCommit(s)
	}
	pending := d.mustPropose(c.owner, "", "proposed on 4\n") // based on version 4, the day's last anyway
	d.clock.Advance(time.Hour)
	d.rawCommit("d\n") // 5
	based := d.version()
	d.rawCommit("e\n") // 6: the last of day 1
	rejected := d.mustPropose(c.owner, "", "proposed on 6\n")
	if _, err := d.review(d.op(), rejected.ProposalID, false); err != nil {
		t.Fatal(err)
	}
	_ = pending
	d.clock.Advance(day)
	d.rawCommit("f\n") // 7, day 2
	d.rawCommit("g\n") // 8, day 2's last
	d.clock.Advance(3 * day)
	d.rawCommit("h\n") // 9, the newest
	d.rawCommit("i\n") // 10, the newest
	before := d.version()
	got := d.prune()
	var left []int64
	rows, _ := d.store.Reader.Query(`SELECT version FROM versions ORDER BY version`)
	for rows.Next() {
		var v int64
		rows.Scan(&v)
		left = append(left, v)
	}
	rows.Close()
	// 1,2,3 go (the day's earlier ones); 4 is a pending proposal's base;
	// 5 goes; 6 is day 1's last (and a proposal's base); 7 goes; 8 is
	// day 2's last; 9 and 10 are inside the window.
	want := []int64{4, 6, 8, 9, 10}
	if !slices.Equal(left, want) || got.Versions != 5 {
		t.Fatalf("left %v (pruned %d), want %v", left, got.Versions, want)
	}
	if d.version() != before {
		t.Fatal("the newest version moved")
	}
	// Every kept version still rebuilds, and no chunk is left unused.
	for _, v := range left {
		if _, err := room.VersionText(context.Background(), d.store.Reader, v); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	if n := d.scalar(`SELECT count(*) FROM version_chunks WHERE refs = 0`); n != 0 {
		t.Fatalf("%d chunks no version uses", n)
	}
	// A diff from a pruned base says pruned; from one never made, not.
	_, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.DiffResult, error) {
		return eng.Diff(context.Background(), q, c.owner, room.DiffInput{BaseVersion: based})
	})
	wantPruned(t, err, room.KindVersionNotFound, true)
	_, err = read(d.env, func(eng *room.Engine, q room.Querier) (room.DiffResult, error) {
		return eng.Diff(context.Background(), q, c.owner, room.DiffInput{BaseVersion: 99})
	})
	wantPruned(t, err, room.KindVersionNotFound, false)
}

func TestPrune_DecidedProposalsGoAndPendingOnesStay(t *testing.T) {
	d := newDocRoom(t, withRetention(room.Retention{Proposals: day}), withPruneEvery(1000*day))
	c := newCast(d.env)
	rejected := d.mustPropose(c.owner, "Goals", "no\n")
	if _, err := d.review(d.op(), rejected.ProposalID, false); err != nil {
		t.Fatal(err)
	}
	committed := d.mustPropose(c.owner, "Risks", "some\n")
	d.mustApprove(committed.ProposalID)
	if _, err := d.commitProposal(d.op(), committed.ProposalID); err != nil {
		t.Fatal(err)
	}
	pending := d.mustPropose(c.owner, "Goals", "maybe\n")
	d.clock.Advance(day + time.Minute)
	if got := d.prune(); got.Proposals != 2 {
		t.Fatalf("pruned %d proposals, want 2", got.Proposals)
	}
	for _, id := range []string{rejected.ProposalID, committed.ProposalID} {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Proposal, error) {
			return eng.GetProposal(context.Background(), q, c.owner, room.ProposalInput{ProposalID: id})
		})
		wantPruned(t, err, room.KindProposalNotFound, true)
	}
	if d.proposalStatus(pending.ProposalID) != room.ProposalPending {
		t.Fatal("the pending proposal was touched")
	}
}

func TestPrune_SessionsLeasesInvitationsAndLeftParticipants(t *testing.T) {
	d := newDocRoom(t, withRetention(room.Retention{Sessions: day, Invitations: day, Participants: day}), withPruneEvery(1000*day))
	c := newCast(d.env)
	lease := d.mustCheckout(c.owner, "Goals", nil)
	if err := d.release(c.owner, lease.LeaseID); err != nil {
		t.Fatal(err)
	}
	// "other" leaves having done nothing that names it; "worker" leaves
	// with a handoff assigned to it, which keeps its participant row.
	res := mustCreate(t, d.env, c.owner, room.CreateHandoffInput{Summary: "s", Assignee: c.worker.ParticipantID})
	okH(t)(d.accept(c.worker, res.Handoff.HandoffID))
	for _, p := range []room.Principal{c.other, c.worker} {
		if _, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (room.Ack, error) { return eng.Leave(tx, p, room.Empty{}) }); err != nil {
			t.Fatal(err)
		}
	}
	liveInvite, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (room.InviteGrant, error) {
		return eng.CreateInvite(tx, d.op(), room.InviteInput{ExpiresInMinutes: refOf(7 * 24 * 60)})
	})
	if err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(day + time.Hour)
	d.sweep()
	got := d.prune()
	if got.Leases != 1 || got.Sessions < 2 || got.Invitations < 6 || got.Participants != 1 {
		t.Fatalf("pruned %+v, want 1 lease, the 2 ended sessions, the 6 used invitations, 1 participant", got)
	}
	if n := d.scalar(`SELECT count(*) FROM participants WHERE participant_id = ?`, c.other.ParticipantID); n != 0 {
		t.Fatal("the participant nothing names is still there")
	}
	if n := d.scalar(`SELECT count(*) FROM participants WHERE participant_id = ?`, c.worker.ParticipantID); n != 1 {
		t.Fatal("a participant a handoff names was pruned")
	}
	if n := d.scalar(`SELECT count(*) FROM invites WHERE invite_id = ?`, liveInvite.InviteID); n != 1 {
		t.Fatal("a live invitation was pruned")
	}
	if n := d.scalar(`SELECT count(*) FROM sessions WHERE ended_at <= ?`, d.eng.Now().Add(-day).UnixMilli()); n != 0 {
		t.Fatalf("%d sessions ended before the window are left", n)
	}
	if n := d.scalar(`SELECT count(*) FROM pragma_foreign_key_check`); n != 0 {
		t.Fatalf("%d foreign key violations", n)
	}
}

func TestPrune_ArchiveReceivesEveryRecordBeforeItIsDeleted(t *testing.T) {
	dir := t.TempDir()
	a, err := room.OpenArchive(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withRetention(room.Retention{Handoffs: day, Sessions: day}), withPruneEvery(1000*day), func(e *env) { e.archive = a })
	c := newCast(e)
	res := lifecycle(t, e, c)
	e.clock.Advance(day + time.Minute)
	got := e.prune()
	f, err := os.Open(filepath.Join(dir, room.ArchiveFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kinds := map[string]int{}
	var handoff room.ArchiveRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var r room.ArchiveRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a line is not JSON: %v", err)
		}
		kinds[r.Kind]++
		if r.Kind == "handoff" {
			handoff = r
		}
		if strings.Contains(sc.Text(), "token_sha256") || strings.Contains(sc.Text(), "secret_sha256") {
			t.Fatal("the archive holds a secret's hash")
		}
	}
	if int64(kinds["handoff"]) != got.Handoffs || kinds["handoff"] != 1 || int64(kinds["invitation"]) != got.Invitations {
		t.Fatalf("archive kinds %v, pruned %+v", kinds, got)
	}
	if handoff.ID != res.Handoff.HandoffID || handoff.Record["summary"] != "work" || len(handoff.Related["inputs"]) != 1 {
		t.Fatalf("handoff record %+v", handoff)
	}

	// An archive that can no longer be written stops the pruning: nothing
	// is deleted without its line.
	more := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "s"})
	e.cancel(c.owner, more.Task.TaskID)
	e.clock.Advance(day + time.Minute)
	a.Close()
	if _, err := e.r.Prune(context.Background()); err == nil {
		t.Fatal("pruning with a closed archive succeeded")
	}
	if _, err := e.getHandoff(c.owner, more.Handoff.HandoffID); err != nil {
		t.Fatalf("the handoff was deleted without its archive line: %v", err)
	}
}

func TestRetentionWindows_BadInputIsRefusedWithAReason(t *testing.T) {
	cases := []struct {
		in, want string
		ok       time.Duration
	}{
		{"180d", "", 180 * day},
		{"36h", "", 36 * time.Hour},
		{"", "", 0},
		{"0", "0 would prune at once", 0},
		{"0d", "0 would prune at once", 0},
		{"-3d", "negative", 0},
		{"12h", "shorter than the task TTL", 0},
		{"23h59m", "shorter than the task TTL", 0},
		{"36500d", "longer than the longest", 0},
		{"99999999999999d", "longer than the longest", 0},
		{"forever", "not a window", 0},
		{"1.5d", "not a number of days", 0},
	}
	for _, tc := range cases {
		name := "refused " + tc.in
		if tc.want == "" {
			name = "accepted " + tc.in
		}
		t.Run(name, func(t *testing.T) {
			d, err := room.ParseRetentionWindow(tc.in)
			if tc.want == "" {
				if err != nil || d != tc.ok {
					t.Fatalf("got %v, %v; want %v", d, err, tc.ok)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want an error saying %q", d, err, tc.want)
			}
		})
	}
}

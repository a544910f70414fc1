package room_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// ---- the per-participant share of the active-task cap (issue 13 item 10) ----

// wantCapRefusal checks a create refused by one of the two caps: which one
// (scope), its limit and the count, and that the refusal wrote nothing.
func wantCapRefusal(t *testing.T, e *env, p room.Principal, scope string, limit, count int) {
	t.Helper()
	before, events := e.stateDump(), e.lastEventID()
	_, err := e.create(p, room.CreateHandoffInput{Summary: "one too many"})
	wantKind(t, err, room.KindLimitExceeded)
	f := room.AsError(err).Fields
	if f["scope"] != scope || f["limit"] != limit || f["count"] != count {
		t.Fatalf("refusal fields %v, want scope %s, limit %d, count %d", f, scope, limit, count)
	}
	if e.stateDump() != before || e.lastEventID() != events {
		t.Fatal("a refused create changed the room")
	}
}

func fill(t *testing.T, e *env, p room.Principal, n int) []room.CreateHandoffResult {
	t.Helper()
	out := make([]room.CreateHandoffResult, n)
	for i := range n {
		out[i] = mustCreate(t, e, p, room.CreateHandoffInput{Summary: fmt.Sprintf("%s job %d", p.ParticipantID, i)})
	}
	return out
}

func TestTaskShare_OneParticipantIsRefusedAtItsShareWhileOthersAndTheHostGoOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	share := e.limits.MaxTasksPerParticipant
	if share != 8 {
		t.Fatalf("default share %d, want 8", share)
	}
	fill(t, e, c.owner, share)
	wantCapRefusal(t, e, c.owner, "participant", share, share)
	if _, err := e.create(c.owner, room.CreateHandoffInput{Summary: "x"}); room.AsError(err).Fields["room_limit"] != 32 {
		t.Fatalf("refusal %v: room_limit should be 32", err)
	}
	// Another participant and the host are unaffected.
	fill(t, e, c.other, 1)
	fill(t, e, e.op(), share+1) // the host has no share
	// An admin who is not the host has a share like everyone.
	fill(t, e, c.admin, share)
	wantCapRefusal(t, e, c.admin, "participant", share, share)
}

// The share counts exactly what the room cap counts (working and
// input_required tasks), attributed to the handoff's owner: accepting or
// asking for input keeps the slot, finishing or cancelling frees it, and
// work a participant accepted from others is not on its share.
func TestTaskShare_CountsTheOwnersActiveTasksOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	share := e.limits.MaxTasksPerParticipant
	mine := fill(t, e, c.owner, share)
	// The worker takes on all of the owner's work, and is still free to ask
	// for its own: a task counts against who asked for it.
	for _, r := range mine {
		okH(t)(e.accept(c.worker, r.Handoff.HandoffID))
	}
	fill(t, e, c.worker, share)
	okH(t)(e.requestInput(c.worker, mine[0].Handoff.HandoffID, q("a")))
	wantCapRefusal(t, e, c.owner, "participant", share, share)

	okH(t)(e.complete(c.worker, mine[0].Handoff.HandoffID, room.ResultInput{Text: "done"}))
	mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "after completing one"})
	wantCapRefusal(t, e, c.owner, "participant", share, share)
	if err := e.cancel(c.owner, mine[1].Task.TaskID); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "after cancelling one"})
	wantCapRefusal(t, e, c.owner, "participant", share, share)
	// Expired tasks free their owner's share as they free the room's.
	e.clock.Advance(e.limits.TaskTTL)
	fill(t, e, c.owner, share)
}

// With several participants the room's cap still holds at 32, and then it
// is the room's cap (scope room) that refuses, also the host.
func TestTaskShare_TheRoomCapStillHoldsWithSeveralParticipants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	share := e.limits.MaxTasksPerParticipant
	fill(t, e, c.owner, share)
	fill(t, e, c.worker, share)
	fill(t, e, c.other, share)
	fill(t, e, e.op(), share)
	if got := e.scalar(`SELECT count(*) FROM tasks WHERE status IN ('working','input_required')`); got != 32 {
		t.Fatalf("%d active tasks, want 32", got)
	}
	fifth := e.join("fifth", agentCaps...)
	wantCapRefusal(t, e, fifth, "room", 32, 32)
	wantCapRefusal(t, e, e.op(), "room", 32, 32)
	// At its share and at a full room: the share is named, since cancelling
	// one of its own is what the caller can do about both.
	wantCapRefusal(t, e, c.owner, "participant", share, share)
}

func TestTaskShare_IsConfigurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxTasksPerParticipant = 2 }))
	c := newCast(e)
	fill(t, e, c.owner, 2)
	wantCapRefusal(t, e, c.owner, "participant", 2, 2)
	fill(t, e, c.worker, 2)
}

func TestTaskShare_ValidateTaskShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		share int
		ok    bool
	}{
		{"zero_refused", 0, false},
		{"negative_refused", -1, false},
		{"one_accepted", 1, true},
		{"the_default_accepted", 8, true},
		{"the_room_cap_accepted", 32, true},
		{"above_the_room_cap_refused", 33, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := room.Defaults()
			l.MaxTasksPerParticipant = tc.share
			err := l.ValidateTaskShare()
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, room.KindInvalidRequest)
			if !strings.Contains(err.Error(), "between 1 and") {
				t.Fatalf("message %q does not say the range", err)
			}
		})
	}
}

// ---- clearing a participant's handoffs ----

func (e *env) cancelAll(p room.Principal, participantID string) (room.CancelHandoffsResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.CancelHandoffsResult, error) {
		return eng.CancelParticipantHandoffs(tx, p, room.CancelHandoffsInput{ParticipantID: participantID})
	})
}

// clearRoom is a flooder's handoffs in every state, and one of someone else.
type clearRoom struct {
	e                              *env
	c                              cast
	open, accepted, asking, result room.CreateHandoffResult
	approved, cancelled, others    room.CreateHandoffResult
}

func newClearRoom(t *testing.T) *clearRoom {
	t.Helper()
	e := newEnv(t)
	c := newCast(e)
	r := &clearRoom{e: e, c: c}
	mk := func(s string) room.CreateHandoffResult {
		return mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: s})
	}
	r.open, r.accepted, r.asking, r.result, r.approved, r.cancelled = mk("open"), mk("accepted"), mk("asking"), mk("result"), mk("approved"), mk("cancelled")
	for _, h := range []room.CreateHandoffResult{r.accepted, r.asking, r.result, r.approved} {
		okH(t)(e.accept(c.worker, h.Handoff.HandoffID))
	}
	okH(t)(e.requestInput(c.worker, r.asking.Handoff.HandoffID, q("a"), q("b")))
	for _, h := range []room.CreateHandoffResult{r.result, r.approved} {
		okH(t)(e.complete(c.worker, h.Handoff.HandoffID, room.ResultInput{Text: "done"}))
	}
	okH(t)(e.approve(c.approver, r.approved.Handoff.HandoffID, ""))
	if err := e.cancel(c.owner, r.cancelled.Task.TaskID); err != nil {
		t.Fatal(err)
	}
	r.others = mustCreate(t, e, c.other, room.CreateHandoffInput{Summary: "someone else's"})
	return r
}

func (r *clearRoom) status(t *testing.T, h room.CreateHandoffResult) string {
	t.Helper()
	got := okH(t)(r.e.getHandoff(r.e.op(), h.Handoff.HandoffID))
	return got.Status + "/" + strOf(got.TaskStatus)
}

func TestCancelParticipantHandoffs_CancelsExactlyThatParticipantsLiveHandoffs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		actor func(c cast, e *env) room.Principal
	}{
		{"by_the_host", func(c cast, e *env) room.Principal { return e.op() }},
		{"by_an_admin_session", func(c cast, e *env) room.Principal { return c.admin }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newClearRoom(t)
			e, c := r.e, r.c
			actor := tc.actor(c, e)
			e.barrier()
			seen := map[string]int{}
			for _, h := range []room.CreateHandoffResult{r.open, r.accepted, r.asking, r.others} {
				seen[h.Task.TaskID] = len(e.pub.taskNotices(h.Task.TaskID))
			}
			events := e.lastEventID()

			res, err := e.cancelAll(actor, c.owner.ParticipantID)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{r.open.Handoff.HandoffID, r.accepted.Handoff.HandoffID, r.asking.Handoff.HandoffID}
			if res.Cancelled != 3 || !slices.Equal(res.HandoffIDs, want) || res.ParticipantID != c.owner.ParticipantID {
				t.Fatalf("result %+v, want the 3 live handoffs %v", res, want)
			}
			for name, tc := range map[string]struct {
				h    room.CreateHandoffResult
				want string
			}{
				"open":          {r.open, "cancelled/cancelled"},
				"accepted":      {r.accepted, "cancelled/cancelled"},
				"asking":        {r.asking, "cancelled/cancelled"},
				"result":        {r.result, "result_ready/completed"},
				"approved":      {r.approved, "approved/completed"},
				"cancelled":     {r.cancelled, "cancelled/cancelled"},
				"someone_elses": {r.others, "open/working"},
			} {
				if got := r.status(t, tc.h); got != tc.want {
					t.Errorf("%s: %s, want %s", name, got, tc.want)
				}
			}
			h := okH(t)(e.getHandoff(e.op(), r.accepted.Handoff.HandoffID))
			if strOf(h.CancelledBy) != actor.ParticipantID || strOf(h.CancelReason) != "requested" {
				t.Fatalf("cancelled by %s for %s, want %s for requested", strOf(h.CancelledBy), strOf(h.CancelReason), actor.ParticipantID)
			}
			if got := e.scalar(`SELECT count(*) FROM task_inputs WHERE task_id = ? AND close_reason = 'cancelled'`, r.asking.Task.TaskID); got != 2 {
				t.Fatalf("%d open questions closed as cancelled, want 2", got)
			}

			// The events a single cancel writes, per handoff, by the actor.
			evs := e.eventsAfter(events)
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Type+" "+ev.HandoffID.String+" "+ev.ActorID.String)
				var pl map[string]any
				if err := json.Unmarshal([]byte(ev.Payload), &pl); err != nil || pl["reason"] != "requested" {
					t.Fatalf("event payload %s", ev.Payload)
				}
			}
			var wantEv []string
			for _, id := range want {
				wantEv = append(wantEv, "task.cancelled "+id+" "+actor.ParticipantID, "handoff.cancelled "+id+" "+actor.ParticipantID)
			}
			if !slices.Equal(got, wantEv) {
				t.Fatalf("events\n%v\nwant\n%v", got, wantEv)
			}

			// notifications/tasks for each cancelled task, none for the other.
			e.barrier()
			for _, h := range []room.CreateHandoffResult{r.open, r.accepted, r.asking} {
				n := e.pub.taskNotices(h.Task.TaskID)
				if len(n) != seen[h.Task.TaskID]+1 || !strings.Contains(string(n[len(n)-1]), `"status":"cancelled"`) {
					t.Fatalf("task %s: notices %d→%d, last %s", h.Task.TaskID, seen[h.Task.TaskID], len(n), n[len(n)-1])
				}
			}
			if n := len(e.pub.taskNotices(r.others.Task.TaskID)); n != seen[r.others.Task.TaskID] {
				t.Fatal("the other participant's task was notified")
			}

			// The share is free again; a second clear finds nothing.
			fill(t, e, c.owner, e.limits.MaxTasksPerParticipant)
			again, err := e.cancelAll(actor, c.owner.ParticipantID)
			if err != nil || again.Cancelled != e.limits.MaxTasksPerParticipant {
				t.Fatalf("second clear: %+v %v", again, err)
			}
			again, err = e.cancelAll(actor, c.owner.ParticipantID)
			if err != nil || again.Cancelled != 0 || again.HandoffIDs == nil {
				t.Fatalf("clear with nothing live: %+v %v (want 0 and an empty list)", again, err)
			}
		})
	}
}

// One task cancelled by tasks/cancel and one by the clear leave the same
// rows and the same events, ids aside.
func TestCancelParticipantHandoffs_IsASingleCancelRepeated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	a := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "same"})
	b := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "same"})
	for _, h := range []room.CreateHandoffResult{a, b} {
		okH(t)(e.accept(c.worker, h.Handoff.HandoffID))
		okH(t)(e.requestInput(c.worker, h.Handoff.HandoffID, q("k")))
	}
	mark := e.lastEventID()
	if err := e.cancel(e.op(), a.Task.TaskID); err != nil {
		t.Fatal(err)
	}
	mid := e.lastEventID()
	if _, err := e.cancelAll(e.op(), c.owner.ParticipantID); err != nil {
		t.Fatal(err)
	}
	norm := func(s string, h room.CreateHandoffResult) string {
		return strings.NewReplacer(h.Handoff.HandoffID, "H", h.Task.TaskID, "T").Replace(s)
	}
	evA, evB := e.eventsAfter(mark)[:2], e.eventsAfter(mid)
	if len(evB) != 2 {
		t.Fatalf("the clear wrote %d events, want 2", len(evB))
	}
	for i := range 2 {
		if norm(evA[i].Type+evA[i].Payload, a) != norm(evB[i].Type+evB[i].Payload, b) {
			t.Fatalf("event %d differs:\n%s %s\n%s %s", i, evA[i].Type, evA[i].Payload, evB[i].Type, evB[i].Payload)
		}
	}
	row := func(h room.CreateHandoffResult) string {
		return norm(e.dump(`SELECT status, cancelled_by, cancel_reason FROM handoffs WHERE handoff_id = ?`, h.Handoff.HandoffID)+
			e.dump(`SELECT status, status_message FROM tasks WHERE task_id = ?`, h.Task.TaskID)+
			e.dump(`SELECT request_key, close_reason FROM task_inputs WHERE task_id = ?`, h.Task.TaskID), h)
	}
	if row(a) != row(b) {
		t.Fatalf("rows differ:\n%s\n%s", row(a), row(b))
	}
}

func TestCancelParticipantHandoffs_RefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	r := newClearRoom(t)
	e, c := r.e, r.c
	for _, tc := range []struct {
		name   string
		who    room.Principal
		target string
		kind   room.Kind
		field  string
	}{
		{"the_participant_itself_refused", c.owner, c.owner.ParticipantID, room.KindPermissionDenied, "required"},
		{"an_agent_refused", c.worker, c.owner.ParticipantID, room.KindPermissionDenied, "required"},
		{"an_approver_refused", c.approver, c.owner.ParticipantID, room.KindPermissionDenied, "required"},
		{"a_reader_refused", c.reader, c.owner.ParticipantID, room.KindPermissionDenied, "required"},
		{"unknown_participant_not_found", e.op(), "participant_0000000000000000", room.KindNotFound, "participant_id"},
		{"empty_participant_invalid", e.op(), "", room.KindInvalidRequest, "field"},
		{"oversized_participant_invalid", e.op(), strings.Repeat("p", 1<<20), room.KindInvalidRequest, "field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, events := e.stateDump(), e.lastEventID()
			_, err := e.cancelAll(tc.who, tc.target)
			wantKind(t, err, tc.kind)
			f := room.AsError(err).Fields
			if _, ok := f[tc.field]; !ok {
				t.Fatalf("error fields %v lack %s", f, tc.field)
			}
			if tc.kind == room.KindPermissionDenied && f["required"] != "admin" {
				t.Fatalf("required = %v, want admin", f["required"])
			}
			if len(err.Error()) > 400 {
				t.Fatalf("the error echoes the input (%d bytes)", len(err.Error()))
			}
			if e.stateDump() != before || e.lastEventID() != events {
				t.Fatal("a refused clear changed the room")
			}
		})
	}
}

// A participant who has left still holds its slots (D32); the host can
// clear them.
func TestCancelParticipantHandoffs_ClearsAParticipantWhoLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	fill(t, e, c.owner, 3)
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		_, err := eng.Leave(tx, c.owner, room.Empty{})
		return none{}, err
	}); err != nil {
		t.Fatal(err)
	}
	res, err := e.cancelAll(e.op(), c.owner.ParticipantID)
	if err != nil || res.Cancelled != 3 {
		t.Fatalf("clearing a participant who left: %+v %v", res, err)
	}
}

// Work past its TTL is failed as expired, as a single cancel would find
// it, and is not counted as cancelled.
func TestCancelParticipantHandoffs_ExpiredWorkIsExpiredNotCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	old := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "old"})
	e.clock.Advance(e.limits.TaskTTL - 1)
	young := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "young"})
	e.clock.Advance(1)
	res, err := e.cancelAll(e.op(), c.owner.ParticipantID)
	if err != nil || res.Cancelled != 1 || res.HandoffIDs[0] != young.Handoff.HandoffID {
		t.Fatalf("clear: %+v %v, want only the young one", res, err)
	}
	h := okH(t)(e.getHandoff(e.op(), old.Handoff.HandoffID))
	if strOf(h.CancelReason) != "task_expired" || strOf(h.TaskStatus) != room.TaskFailed {
		t.Fatalf("old handoff %s/%s, want expired", strOf(h.CancelReason), strOf(h.TaskStatus))
	}
}

// The owner page reads who holds the room's active tasks; only admins see it.
func TestActiveTaskShares_CountsPerOwnerForAdminsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	fill(t, e, c.owner, 3)
	fill(t, e, e.op(), 2)
	done := mustCreate(t, e, c.other, room.CreateHandoffInput{Summary: "done"})
	if err := e.cancel(c.other, done.Task.TaskID); err != nil {
		t.Fatal(err)
	}
	v, err := read(e, func(eng *room.Engine, q room.Querier) (room.RoomView, error) {
		return eng.Room(t.Context(), q, e.op(), room.Empty{})
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := v.TaskShares
	if ts == nil || ts.Share != 8 || ts.RoomLimit != 32 || ts.Active != 5 ||
		!maps.Equal(ts.ByParticipant, map[string]int{c.owner.ParticipantID: 3, e.eng.HostID: 2}) {
		t.Fatalf("task shares %+v", ts)
	}
	v, err = read(e, func(eng *room.Engine, q room.Querier) (room.RoomView, error) {
		return eng.Room(t.Context(), q, c.approver, room.Empty{})
	})
	if err != nil || v.TaskShares != nil {
		t.Fatalf("a non-admin sees task shares: %+v %v", v.TaskShares, err)
	}
}

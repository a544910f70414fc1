package room_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

func (e *env) nextDue(t *testing.T) time.Time {
	t.Helper()
	type due struct {
		at time.Time
		ok bool
	}
	d, err := read(e, func(eng *room.Engine, q room.Querier) (due, error) {
		at, ok, err := eng.NextDue(context.Background(), q)
		return due{at, ok}, err
	})
	if err != nil || !d.ok {
		t.Fatalf("NextDue: %v %v", d.ok, err)
	}
	return d.at
}

// handoffState is the handoff and task rows plus the handoff events: what
// the TTL rules may change.
func (e *env) handoffState() string {
	return e.stateDump() + e.dump(`SELECT * FROM events WHERE handoff_id IS NOT NULL ORDER BY event_id`)
}

// The brief's retention rules on a fake clock, at the millisecond edges:
// live work expires one TTL after creation (failed "task expired", its open or
// accepted handoff cancelled), terminal task rows go one TTL after their last
// update without an event, handoffs keep their results, and work inside its
// TTL is untouched. NextDue names each of those moments in turn.
func TestTTL_ExpiryAndPurgeAtTheirExactTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	t0 := e.clock.Now()
	at := func(d time.Duration) { e.clock.Advance(t0.Add(d).Sub(e.clock.Now())) }

	openRes := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "never taken"})
	at(time.Millisecond) // expiry runs oldest first; equal times would tie on random ids
	waitRes := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "waiting for input"})
	okH(t)(e.accept(c.worker, waitRes.Handoff.HandoffID))
	okH(t)(e.requestInput(c.worker, waitRes.Handoff.HandoffID, q("a")))
	at(time.Hour)
	youngRes := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "young"})
	at(2 * time.Hour)
	doneRes := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "done early"})
	okH(t)(e.accept(c.worker, doneRes.Handoff.HandoffID))
	okH(t)(e.complete(c.worker, doneRes.Handoff.HandoffID, room.ResultInput{Text: "the result survives"}))
	ttl := e.limits.TaskTTL

	if got := e.nextDue(t); !got.Equal(t0.Add(ttl)) {
		// sessions (8 h) and invitations (1 h) are due earlier; sweep them first
		at(ttl - time.Hour)
		e.sweep()
	}
	if got := e.nextDue(t); !got.Equal(t0.Add(ttl)) {
		t.Fatalf("NextDue = %v, want the first expiry %v", got, t0.Add(ttl))
	}

	t.Run("one_millisecond_before_the_ttl_nothing_changes", func(t *testing.T) {
		before := e.handoffState()
		at(ttl - time.Millisecond)
		e.sweep()
		if got := e.handoffState(); got != before {
			t.Fatalf("the sweep changed live work inside its TTL:\n%s\n%s", before, got)
		}
	})

	t.Run("at_the_ttl_live_tasks_fail_and_their_handoffs_are_cancelled", func(t *testing.T) {
		last := e.lastEventID()
		at(ttl)
		e.sweep()
		if task := mustTask(t, e, c.owner, waitRes.Task.TaskID); task.Status != room.TaskInputRequired {
			t.Fatalf("a task created 1 ms later expired early: %s", task.Status)
		}
		at(ttl + time.Millisecond)
		e.sweep()
		for _, res := range []room.CreateHandoffResult{openRes, waitRes} {
			task := mustTask(t, e, c.owner, res.Task.TaskID)
			if task.Status != room.TaskFailed || task.StatusMessage != "task expired" ||
				task.Failure != room.TaskFailureExpired || task.Error != nil || task.Result != nil || task.InputRequests != nil {
				t.Fatalf("expired task = %+v", task)
			}
			h := okH(t)(e.getHandoff(c.owner, res.Handoff.HandoffID))
			if h.Status != room.HandoffCancelled || strOf(h.CancelReason) != "task_expired" || h.CancelledBy != nil {
				t.Fatalf("handoff of an expired task = %+v", h)
			}
		}
		h := okH(t)(e.getHandoff(c.owner, waitRes.Handoff.HandoffID))
		if len(h.Inputs) != 1 || h.Inputs[0].Status != room.InputCancelled {
			t.Fatalf("open questions of an expired task: %+v", h.Inputs)
		}
		evs := e.eventsAfter(last)
		want := []string{"task.failed", "handoff.cancelled", "task.failed", "handoff.cancelled"}
		if got := types(evs); !slices.Equal(got, want) {
			t.Fatalf("expiry events %v, want %v", got, want)
		}
		if evs[0].HandoffID.String != openRes.Handoff.HandoffID || evs[2].HandoffID.String != waitRes.Handoff.HandoffID || evs[0].ActorID.Valid {
			t.Fatalf("expiry events name the wrong records or an actor: %+v", evs)
		}
		if task := mustTask(t, e, c.owner, youngRes.Task.TaskID); task.Status != room.TaskWorking {
			t.Fatalf("work inside its TTL was touched: %s", task.Status)
		}
		if task := mustTask(t, e, c.owner, doneRes.Task.TaskID); task.Status != room.TaskCompleted {
			t.Fatalf("a completed task inside its retention was touched: %s", task.Status)
		}
		if got := e.nextDue(t); !got.Equal(t0.Add(time.Hour + ttl)) {
			t.Fatalf("NextDue = %v, want the young task's expiry", got)
		}
	})

	t.Run("active_work_finished_inside_its_ttl_is_kept", func(t *testing.T) {
		at(ttl + 30*time.Minute)
		okH(t)(e.accept(c.worker, youngRes.Handoff.HandoffID))
		okH(t)(e.complete(c.worker, youngRes.Handoff.HandoffID, room.ResultInput{Text: "just in time"}))
		if got := e.nextDue(t); !got.Equal(t0.Add(2*time.Hour + ttl)) {
			t.Fatalf("NextDue = %v, want the early result's purge", got)
		}
	})

	t.Run("terminal_rows_are_purged_one_ttl_after_their_last_update_without_events", func(t *testing.T) {
		at(2*time.Hour + ttl - time.Millisecond)
		e.sweep()
		if _, err := e.getTask(c.owner, doneRes.Task.TaskID); err != nil {
			t.Fatalf("purged early: %v", err)
		}
		last := e.lastEventID()
		at(2*time.Hour + ttl)
		e.sweep()
		_, err := e.getTask(c.owner, doneRes.Task.TaskID)
		wantKind(t, err, room.KindTaskNotFound)
		if evs := e.eventsAfter(last); len(evs) != 0 {
			t.Fatalf("purging wrote events: %v", types(evs))
		}
		h := okH(t)(e.getHandoff(c.owner, doneRes.Handoff.HandoffID))
		if h.Status != room.HandoffResultReady || h.TaskStatus != nil || h.Result == nil || h.Result.Text != "the result survives" {
			t.Fatalf("handoff after its task was purged = %+v", h)
		}
		// The handoff is still decided normally; its events remain readable.
		okH(t)(e.approve(c.approver, doneRes.Handoff.HandoffID, ""))
		if got := handoffEventTypes(t, e, c.owner, doneRes.Handoff.HandoffID); got[len(got)-1] != "handoff.approved" {
			t.Fatalf("events %v", got)
		}
		if got := e.nextDue(t); !got.Equal(t0.Add(2 * ttl)) {
			t.Fatalf("NextDue = %v, want the failed rows' purge", got)
		}
	})

	t.Run("failed_rows_go_one_ttl_after_failing_and_their_inputs_with_them", func(t *testing.T) {
		at(2*ttl + time.Millisecond)
		e.sweep()
		for _, res := range []room.CreateHandoffResult{openRes, waitRes} {
			_, err := e.getTask(e.op(), res.Task.TaskID)
			wantKind(t, err, room.KindTaskNotFound)
		}
		if n := e.scalar(`SELECT count(*) FROM task_inputs WHERE task_id = ?`, waitRes.Task.TaskID); n != 0 {
			t.Fatalf("%d input rows outlived their task", n)
		}
		if h := okH(t)(e.getHandoff(c.owner, waitRes.Handoff.HandoffID)); h.Status != room.HandoffCancelled || len(h.Inputs) != 0 {
			t.Fatalf("%+v", h)
		}
		if got := e.nextDue(t); !got.Equal(t0.Add(ttl + 30*time.Minute + ttl)) {
			t.Fatalf("NextDue = %v, want the young task's purge", got)
		}
	})
}

// A command that arrives once a TTL has run out acts on the expired state,
// never on the stale one — whether the actor's sweeper got there first or the
// command expires the task itself (the actor's timer cannot be held off from
// here; handoff_internal_test.go drives the second path deterministically).
func TestTTL_CommandsAfterTheTTLActOnTheExpiredState(t *testing.T) {
	t.Parallel()
	t.Run("accept_of_an_expired_open_handoff_is_refused_as_cancelled", func(t *testing.T) {
		e := newEnv(t)
		c := newCast(e)
		// Addressed to the worker, so it stays visible to them once cancelled.
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x", Assignee: c.worker.ParticipantID})
		e.clock.Advance(e.limits.TaskTTL)
		_, err := e.accept(c.worker, res.Handoff.HandoffID)
		wantKind(t, err, room.KindHandoffConflict)
		if st := room.AsError(err).Fields["status"]; st != room.HandoffCancelled {
			t.Fatalf("status = %v, want cancelled", st)
		}
		e.sweep()
		if h := okH(t)(e.getHandoff(c.owner, res.Handoff.HandoffID)); h.Status != room.HandoffCancelled || strOf(h.AssigneeID) != "<nil>" {
			t.Fatalf("%+v", h)
		}
	})
	t.Run("cancel_of_an_expired_task_acknowledges_and_records_the_expiry", func(t *testing.T) {
		e := newEnv(t)
		c := newCast(e)
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
		e.clock.Advance(e.limits.TaskTTL)
		last := e.lastEventID()
		if err := e.cancel(c.owner, res.Task.TaskID); err != nil {
			t.Fatal(err)
		}
		if task := mustTask(t, e, c.owner, res.Task.TaskID); task.Status != room.TaskFailed {
			t.Fatalf("task %s, want failed (it expired before the cancel)", task.Status)
		}
		var got []string
		for _, ev := range e.eventsAfter(last) {
			if ev.HandoffID.String == res.Handoff.HandoffID {
				got = append(got, ev.Type)
			}
		}
		if !slices.Equal(got, []string{"task.failed", "handoff.cancelled"}) {
			t.Fatalf("events %v, want the expiry's and no cancellation", got)
		}
	})
	t.Run("answer_to_an_expired_task_changes_nothing_more", func(t *testing.T) {
		e := newEnv(t)
		c := newCast(e)
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
		okH(t)(e.accept(c.worker, res.Handoff.HandoffID))
		okH(t)(e.requestInput(c.worker, res.Handoff.HandoffID, q("a")))
		e.clock.Advance(e.limits.TaskTTL)
		if err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"a": answerOf("late")}); err != nil {
			t.Fatal(err)
		}
		h := okH(t)(e.getHandoff(c.owner, res.Handoff.HandoffID))
		if h.Inputs[0].Status != room.InputCancelled || h.Inputs[0].Response != nil {
			t.Fatalf("a late answer was recorded: %+v", h.Inputs[0])
		}
	})
}

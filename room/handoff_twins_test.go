package room_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// twinParties are the participants of the tool-twin tests: the owner of
// every handoff, its worker, an approver (sees every handoff, owns none), a
// stranger (sees none of them) and an admin.
type twinParties struct {
	owner, worker, approver, stranger, admin room.Principal
}

func newTwinParties(e *env) twinParties {
	return twinParties{
		owner:    e.join("owner", agentCaps...),
		worker:   e.join("worker", agentCaps...),
		approver: e.join("approver", room.CapRead, room.CapApprove),
		stranger: e.join("stranger", room.CapRead),
		admin:    e.join("admin", room.CapAdmin),
	}
}

// by is the participant a case names.
func (ps twinParties) by(name string) room.Principal {
	return map[string]room.Principal{"owner": ps.owner, "worker": ps.worker, "approver": ps.approver,
		"stranger": ps.stranger, "admin": ps.admin}[name]
}

// twinHandoffs makes two handoffs of ps.owner's, both addressed to
// ps.worker and driven to the same state together (so their rows compare):
// open, accepted, input (accepted, two questions q1 and q2 open),
// result_ready, approved, cancelled (by its owner) or expired (its TTL ran
// out, swept). One is for the tool twin, the other for the protocol method.
func twinHandoffs(t *testing.T, e *env, ps twinParties, state string) (tool, proto room.Handoff) {
	t.Helper()
	step := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("making a %s handoff: %v", state, err)
		}
	}
	var hs [2]room.Handoff
	for i := range hs {
		res, err := e.create(ps.owner, room.CreateHandoffInput{Summary: "twin " + state, Assignee: ps.worker.ParticipantID})
		step(err)
		hs[i] = res.Handoff
	}
	if state == "expired" {
		e.clock.Advance(e.limits.TaskTTL)
		e.sweep()
	}
	for _, h := range hs {
		var err error
		switch state {
		case "open", "expired":
			continue
		case "cancelled":
			step(e.cancel(ps.owner, h.TaskID))
			continue
		}
		_, err = e.accept(ps.worker, h.HandoffID)
		step(err)
		switch state {
		case "input":
			_, err = e.requestInput(ps.worker, h.HandoffID,
				room.InputRequestSpec{Key: "q1", Message: "which one?"}, room.InputRequestSpec{Key: "q2", Message: "how many?"})
			step(err)
		case "result_ready", "approved":
			_, err = e.complete(ps.worker, h.HandoffID, room.ResultInput{Text: "done"})
			step(err)
			if state == "approved" {
				_, err = e.approve(ps.approver, h.HandoffID, "")
				step(err)
			}
		}
	}
	return hs[0], hs[1]
}

func (e *env) cancelHandoff(p room.Principal, id string) (room.CancelHandoffResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.CancelHandoffResult, error) {
		return eng.CancelHandoff(tx, p, room.HandoffIDInput{HandoffID: id})
	})
}

func (e *env) answerHandoff(p room.Principal, id string, responses map[string]room.ElicitResult) (room.AnswerHandoffResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.AnswerHandoffResult, error) {
		return eng.AnswerHandoff(tx, p, room.AnswerHandoffInput{HandoffID: id, InputResponses: responses})
	})
}

// handoffRows is one handoff's rows (the handoff, its task, its input
// requests) with its own ids replaced, so two handoffs' rows compare.
func (e *env) handoffRows(h room.Handoff) string {
	e.tb.Helper()
	s := e.dump(`SELECT * FROM handoffs WHERE handoff_id = ?`, h.HandoffID) + "--\n" +
		e.dump(`SELECT * FROM tasks WHERE task_id = ?`, h.TaskID) + "--\n" +
		e.dump(`SELECT * FROM task_inputs WHERE task_id = ? ORDER BY request_key`, h.TaskID)
	return strings.NewReplacer(h.HandoffID, "HANDOFF", h.TaskID, "TASK", "twin ", "").Replace(s)
}

// eventsOf is the events written after id, with h's ids replaced.
func (e *env) eventsOf(after int64, h room.Handoff) []string {
	var out []string
	r := strings.NewReplacer(h.HandoffID, "HANDOFF", h.TaskID, "TASK")
	for _, ev := range e.eventsAfter(after) {
		out = append(out, ev.Type+" "+r.Replace(ev.Payload))
	}
	return out
}

// againstProtocol runs a tool twin on tool (twin, answering the handoff it
// reports) and the protocol method it twins on proto (protocol), both
// handoffs in the same state, and returns the twin's error. A twin that
// must be refused (with refusal) changes no row and writes no event. One that
// succeeds answers the handoff handoff_get then reads, changes nothing
// unless changes, and leaves tool's rows as the protocol method leaves
// proto's, having written the same events.
func againstProtocol(t *testing.T, e *env, p room.Principal, tool, proto room.Handoff, refusal room.Kind, changes bool,
	twin func() (room.Handoff, error), protocol func() error) error {
	t.Helper()
	before, mark := e.handoffRows(tool), e.lastEventID()
	unchanged := func(what string) {
		t.Helper()
		if got := e.handoffRows(tool); got != before {
			t.Errorf("%s changed the rows:\n%s\nwas\n%s", what, got, before)
		}
		if evs := e.eventsAfter(mark); len(evs) != 0 {
			t.Errorf("%s wrote events %v", what, types(evs))
		}
	}
	got, err := twin()
	if refusal != "" {
		wantKind(t, err, refusal)
		unchanged("a refused call")
		return err
	}
	if err != nil {
		t.Fatal(err)
	}
	read, err := e.getHandoff(p, tool.HandoffID)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, got) != mustJSON(t, read) {
		t.Errorf("the answer's handoff\n%s\nis not what handoff_get reads after the commit\n%s", mustJSON(t, got), mustJSON(t, read))
	}
	if !changes {
		unchanged("a call that changes nothing")
	}
	twinEvents := e.eventsOf(mark, tool)
	mark = e.lastEventID()
	if err := protocol(); err != nil {
		t.Fatalf("the protocol method: %v", err)
	}
	if g, w := e.handoffRows(tool), e.handoffRows(proto); g != w {
		t.Errorf("the twin left\n%s\nthe protocol method leaves\n%s", g, w)
	}
	if g, w := twinEvents, e.eventsOf(mark, proto); !slices.Equal(g, w) {
		t.Errorf("the twin wrote events\n%v\nthe protocol method writes\n%v", g, w)
	}
	return nil
}

// TestCancelHandoffIsTasksCancel: handoff_cancel's engine method writes
// exactly the rows and events tasks/cancel writes, refuses whom tasks/cancel
// refuses (someone who may not see the handoff as an unknown one), and on a
// terminal handoff acknowledges with cancelled false and changes nothing.
func TestCancelHandoffIsTasksCancel(t *testing.T) {
	cases := []struct {
		name          string
		state         string
		caller        string
		wantKind      room.Kind // "" for success
		wantCancelled bool
		wantStatus    string
	}{
		{"the owner cancels an open handoff", "open", "owner", "", true, room.HandoffCancelled},
		{"the owner cancels an accepted handoff", "accepted", "owner", "", true, room.HandoffCancelled},
		{"the owner cancels a handoff waiting for input", "input", "owner", "", true, room.HandoffCancelled},
		{"an admin cancels someone's handoff", "accepted", "admin", "", true, room.HandoffCancelled},
		{"a delivered result is not cancelled", "result_ready", "owner", "", false, room.HandoffResultReady},
		{"an approved handoff is not cancelled", "approved", "owner", "", false, room.HandoffApproved},
		{"a cancelled handoff stays as it was", "cancelled", "owner", "", false, room.HandoffCancelled},
		{"an expired handoff stays as it was", "expired", "owner", "", false, room.HandoffCancelled},
		{"the assignee is refused", "accepted", "worker", room.KindPermissionDenied, false, ""},
		{"an approver who sees it is refused", "accepted", "approver", room.KindPermissionDenied, false, ""},
		{"the assignee is refused on a terminal handoff too", "approved", "worker", room.KindPermissionDenied, false, ""},
		{"a stranger gets not found", "accepted", "stranger", room.KindHandoffNotFound, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ps := newTwinParties(e)
			tool, proto := twinHandoffs(t, e, ps, c.state)

			var res room.CancelHandoffResult
			err := againstProtocol(t, e, ps.by(c.caller), tool, proto, c.wantKind, c.wantCancelled,
				func() (room.Handoff, error) {
					var err error
					res, err = e.cancelHandoff(ps.by(c.caller), tool.HandoffID)
					return res.Handoff, err
				},
				func() error { return e.cancel(ps.by(c.caller), proto.TaskID) })
			if err == nil && (res.Cancelled != c.wantCancelled || res.Handoff.Status != c.wantStatus || res.Handoff.HandoffID != tool.HandoffID) {
				t.Errorf("answer cancelled=%v status=%s, want cancelled=%v status=%s", res.Cancelled, res.Handoff.Status, c.wantCancelled, c.wantStatus)
			}
		})
	}
}

// TestAnswerHandoffIsTasksUpdate: handoff_answer's engine method answers as
// tasks/update does (the same rows and events, the same validation, keys
// that are not open ignored), refuses whom tasks/update refuses, and says
// which keys it answered and which it ignored.
func TestAnswerHandoffIsTasksUpdate(t *testing.T) {
	accept := func(answer string) room.ElicitResult {
		return room.ElicitResult(`{"action":"accept","content":{"answer":"` + answer + `"}}`)
	}
	cases := []struct {
		name         string
		state        string
		caller       string
		responses    map[string]room.ElicitResult
		wantKind     room.Kind
		wantField    string
		wantAnswered []string
		wantIgnored  []string
		wantTask     string
	}{
		{name: "both questions answered: the task works again", state: "input", caller: "owner",
			responses:    map[string]room.ElicitResult{"q1": accept("a"), "q2": accept("b")},
			wantAnswered: []string{"q1", "q2"}, wantIgnored: []string{}, wantTask: room.TaskWorking},
		{name: "one answered: the task still waits", state: "input", caller: "owner",
			responses:    map[string]room.ElicitResult{"q2": accept("b")},
			wantAnswered: []string{"q2"}, wantIgnored: []string{}, wantTask: room.TaskInputRequired},
		{name: "an answer and an unasked key: the unasked one is ignored", state: "input", caller: "owner",
			responses:    map[string]room.ElicitResult{"q1": accept("a"), "zz": accept("x")},
			wantAnswered: []string{"q1"}, wantIgnored: []string{"zz"}, wantTask: room.TaskInputRequired},
		{name: "only unasked keys: nothing changes", state: "input", caller: "owner",
			responses:    map[string]room.ElicitResult{"nope": accept("x"), "also": room.ElicitResult(`"not even an object"`)},
			wantAnswered: []string{}, wantIgnored: []string{"also", "nope"}, wantTask: room.TaskInputRequired},
		{name: "nothing asked: every key is ignored", state: "accepted", caller: "owner",
			responses:    map[string]room.ElicitResult{"q1": accept("a")},
			wantAnswered: []string{}, wantIgnored: []string{"q1"}, wantTask: room.TaskWorking},
		{name: "a terminal handoff: every key is ignored", state: "approved", caller: "owner",
			responses:    map[string]room.ElicitResult{"q1": accept("a")},
			wantAnswered: []string{}, wantIgnored: []string{"q1"}, wantTask: room.TaskCompleted},
		{name: "an admin answers", state: "input", caller: "admin",
			responses:    map[string]room.ElicitResult{"q1": accept("a"), "q2": accept("b")},
			wantAnswered: []string{"q1", "q2"}, wantIgnored: []string{}, wantTask: room.TaskWorking},
		{name: "an answer that is not an object is invalid", state: "input", caller: "owner",
			responses: map[string]room.ElicitResult{"q1": room.ElicitResult(`["a"]`), "q2": accept("b")},
			wantKind:  room.KindInvalidRequest, wantField: "input_responses.q1"},
		{name: "an oversized answer is over the limit", state: "input", caller: "owner",
			responses: map[string]room.ElicitResult{"q1": accept(strings.Repeat("a", 300<<10))},
			wantKind:  room.KindLimitExceeded, wantField: "input_responses.q1"},
		{name: "no answers at all is invalid", state: "input", caller: "owner",
			responses: map[string]room.ElicitResult{}, wantKind: room.KindInvalidRequest, wantField: "input_responses"},
		{name: "the worker is refused", state: "input", caller: "worker",
			responses: map[string]room.ElicitResult{"q1": accept("a")}, wantKind: room.KindPermissionDenied},
		{name: "an approver who sees it is refused", state: "input", caller: "approver",
			responses: map[string]room.ElicitResult{"q1": accept("a")}, wantKind: room.KindPermissionDenied},
		{name: "a stranger gets not found", state: "input", caller: "stranger",
			responses: map[string]room.ElicitResult{"q1": accept("a")}, wantKind: room.KindHandoffNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ps := newTwinParties(e)
			tool, proto := twinHandoffs(t, e, ps, c.state)

			raw := map[string]json.RawMessage{}
			for k, v := range c.responses {
				raw[k] = json.RawMessage(v)
			}
			var res room.AnswerHandoffResult
			err := againstProtocol(t, e, ps.by(c.caller), tool, proto, c.wantKind, len(c.wantAnswered) > 0,
				func() (room.Handoff, error) {
					var err error
					res, err = e.answerHandoff(ps.by(c.caller), tool.HandoffID, c.responses)
					return res.Handoff, err
				},
				func() error { return e.answer(ps.by(c.caller), proto.TaskID, raw) })
			if err != nil {
				if f := room.AsError(err).Fields["field"]; c.wantField != "" && f != c.wantField {
					t.Errorf("field = %v, want %s", f, c.wantField)
				}
				return
			}
			if !slices.Equal(res.AnsweredKeys, c.wantAnswered) || !slices.Equal(res.IgnoredKeys, c.wantIgnored) {
				t.Errorf("answered %q ignored %q, want %q and %q", res.AnsweredKeys, res.IgnoredKeys, c.wantAnswered, c.wantIgnored)
			}
			if strOf(res.Handoff.TaskStatus) != c.wantTask {
				t.Errorf("task_status = %s, want %s", strOf(res.Handoff.TaskStatus), c.wantTask)
			}
		})
	}
}

// TestTwinsOfAPurgedTask: once a terminal task's row is purged, the handoff
// remains; cancelling it acknowledges and answering ignores every key, both
// without touching anything (tasks/* would not find the task at all).
func TestTwinsOfAPurgedTask(t *testing.T) {
	e := newEnv(t)
	ps := newTwinParties(e)
	h, _ := twinHandoffs(t, e, ps, "approved")
	e.clock.Advance(2 * e.limits.TaskTTL)
	e.sweep()
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE task_id = ?`, h.TaskID); n != 0 {
		t.Fatalf("the task row was not purged")
	}
	before, mark := e.handoffRows(h), e.lastEventID()
	t.Run("cancel acknowledges with cancelled false", func(t *testing.T) {
		res, err := e.cancelHandoff(ps.owner, h.HandoffID)
		if err != nil || res.Cancelled || res.Handoff.Status != room.HandoffApproved || res.Handoff.TaskStatus != nil {
			t.Fatalf("cancel = %+v, %v", res, err)
		}
	})
	t.Run("answer ignores every key", func(t *testing.T) {
		res, err := e.answerHandoff(ps.owner, h.HandoffID, map[string]room.ElicitResult{"q1": room.ElicitResult(`{"action":"cancel"}`)})
		if err != nil || len(res.AnsweredKeys) != 0 || !slices.Equal(res.IgnoredKeys, []string{"q1"}) {
			t.Fatalf("answer = %+v, %v", res, err)
		}
	})
	t.Run("nothing changed", func(t *testing.T) {
		if got := e.handoffRows(h); got != before {
			t.Errorf("rows changed:\n%s\nwas\n%s", got, before)
		}
		if evs := e.eventsAfter(mark); len(evs) != 0 {
			t.Errorf("events written: %v", types(evs))
		}
	})
}

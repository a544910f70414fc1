package room_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// cast is the set of participants most tests need.
type cast struct {
	owner, worker, other, reader, approver, admin room.Principal
}

func newCast(e *env) cast {
	return cast{
		owner:    e.join("owner", agentCaps...),
		worker:   e.join("worker", agentCaps...),
		other:    e.join("other", agentCaps...),
		reader:   e.join("reader", room.CapRead),
		approver: e.join("approver", room.CapRead, room.CapApprove),
		admin:    e.join("admin", room.CapAdmin),
	}
}

func mustCreate(t *testing.T, e *env, p room.Principal, in room.CreateHandoffInput) room.CreateHandoffResult {
	t.Helper()
	res, err := e.create(p, in)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return res
}

// okH fails the test on a handoff call's error: okH(t)(e.accept(p, id)).
func okH(t testing.TB) func(room.Handoff, error) room.Handoff {
	return func(h room.Handoff, err error) room.Handoff {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
}

func mustTask(t *testing.T, e *env, p room.Principal, id string) room.DetailedTask {
	t.Helper()
	task, err := e.getTask(p, id)
	if err != nil {
		t.Fatalf("GetTask: %v", err)
	}
	return task
}

func handoffEventTypes(t *testing.T, e *env, p room.Principal, id string) []string {
	t.Helper()
	res, err := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffEventsResult, error) {
		return eng.HandoffEvents(context.Background(), q, p, room.HandoffEventsInput{HandoffID: id, SinceEventID: nil, Limit: 0})
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range res.Events {
		out = append(out, ev.Type)
	}
	return out
}

var (
	handoffIDPattern = regexp.MustCompile(`^handoff_[0-9a-f]{32}$`)
	taskIDPattern    = regexp.MustCompile(`^task_[0-9a-f]{32}$`)
)

func TestLifecycle_CreateAcceptInputCompleteApprove_RecordsEveryStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	t0 := room.WireTime(e.clock.Now().UnixMilli())

	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{
		Summary: "draft the goals", Constraints: "two paragraphs", Target: "Goals",
		Artifacts: []room.Artifact{{URI: "commonroom://workspace/x/section/Goals", Title: "goals"}},
	})
	h := res.Handoff
	if !handoffIDPattern.MatchString(h.HandoffID) || !taskIDPattern.MatchString(h.TaskID) {
		t.Fatalf("ids %q %q are not prefix + 32 hex", h.HandoffID, h.TaskID)
	}
	if h.Status != room.HandoffOpen || strOf(h.TaskStatus) != room.TaskWorking || h.OwnerID != c.owner.ParticipantID {
		t.Fatalf("created handoff = %+v", h)
	}
	if h.Inputs == nil || len(h.Inputs) != 0 || !strings.Contains(mustJSON(t, h), `"inputs":[]`) {
		t.Fatalf("the owner should see an empty inputs list, got %v", h.Inputs)
	}
	for _, key := range []string{`"assignee_id":null`, `"task_status":"working"`, `"result":null`, `"artifacts":[{"uri":`, `"base_version":null`} {
		if !strings.Contains(mustJSON(t, h), key) {
			t.Fatalf("handoff JSON lacks %s: %s", key, mustJSON(t, h))
		}
	}
	task := res.Task
	if task == nil || task.TaskID != h.TaskID || task.Status != room.TaskWorking || task.TTLMs != 86_400_000 ||
		task.PollIntervalMs != 5000 || task.CreatedAt != t0 || task.LastUpdatedAt != t0 ||
		task.Meta[room.HandoffMetaKey] != h.HandoffID {
		t.Fatalf("created task = %+v", task)
	}
	if got := e.dump(`SELECT schema_version, operation, owner_id, assignee_id, correlation_id FROM tasks WHERE task_id = ?`, h.TaskID); got !=
		"schema_version=1|operation=handoff.execute|owner_id="+c.owner.ParticipantID+"|assignee_id=<nil>|correlation_id="+h.HandoffID+"|\n" {
		t.Fatalf("stored task: %s", got)
	}

	e.clock.Advance(time.Minute)
	h = okH(t)(e.accept(c.worker, h.HandoffID))
	if h.Status != room.HandoffAccepted || strOf(h.AssigneeID) != c.worker.ParticipantID || strOf(h.TaskStatus) != room.TaskWorking {
		t.Fatalf("accepted handoff = %+v", h)
	}
	if task := mustTask(t, e, c.worker, h.TaskID); task.Status != room.TaskWorking {
		t.Fatalf("after accept the task is %s, want working (no accepted task status)", task.Status)
	}

	e.clock.Advance(time.Minute)
	h = okH(t)(e.requestInput(c.worker, h.HandoffID, room.InputRequestSpec{Key: "tone", Message: "Formal or casual?"}))
	task = ptr(mustTask(t, e, c.owner, h.TaskID))
	wantReq := `{"method":"elicitation/create","params":{"mode":"form","message":"Formal or casual?","requestedSchema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}}`
	if task.Status != room.TaskInputRequired || string(task.InputRequests["tone"]) != wantReq {
		t.Fatalf("task after request: %s %s", task.Status, task.InputRequests["tone"])
	}

	e.clock.Advance(time.Minute)
	if err := e.answer(c.owner, h.TaskID, map[string]json.RawMessage{"tone": raw(`{"action":"accept","content":{"answer":"casual"}}`)}); err != nil {
		t.Fatal(err)
	}
	h = okH(t)(e.getHandoff(c.worker, h.HandoffID))
	if len(h.Inputs) != 1 || h.Inputs[0].Status != room.InputAnswered || string(h.Inputs[0].Response) != `{"action":"accept","content":{"answer":"casual"}}` {
		t.Fatalf("the assignee does not see the answer: %+v", h.Inputs)
	}

	e.clock.Advance(time.Minute)
	h = okH(t)(e.complete(c.worker, h.HandoffID, room.ResultInput{Text: "Goals: ship.", Artifacts: []room.Artifact{{URI: "proposal_1"}}}))
	if h.Status != room.HandoffResultReady || h.Result == nil || h.Result.Text != "Goals: ship." || len(h.Result.Artifacts) != 1 {
		t.Fatalf("completed handoff = %+v", h)
	}
	task = ptr(mustTask(t, e, c.owner, h.TaskID))
	wantResult := `{"content":[{"text":"Goals: ship.","type":"text"}],"isError":false,"resultType":"complete","structuredContent":{"artifacts":[{"uri":"proposal_1"}],"handoff_id":"` + h.HandoffID + `"}}`
	if task.Status != room.TaskCompleted || string(task.Result) != wantResult {
		t.Fatalf("completed task result:\n got %s\nwant %s", task.Result, wantResult)
	}
	completedAt := task.LastUpdatedAt

	e.clock.Advance(time.Minute)
	h = okH(t)(e.approve(e.op(), h.HandoffID, "thanks"))
	if h.Status != room.HandoffApproved || strOf(h.DecisionNote) != "thanks" || strOf(h.DecidedBy) != e.eng.HostID {
		t.Fatalf("approved handoff = %+v", h)
	}
	if task := mustTask(t, e, c.owner, h.TaskID); task.Status != room.TaskCompleted || task.LastUpdatedAt != completedAt {
		t.Fatalf("approval rewrote the task: %+v", task)
	}
	want := []string{"handoff.created", "task.created", "handoff.accepted", "handoff.input_requested", "task.input_required",
		"task.working", "handoff.input_received", "task.completed", "handoff.result_ready", "handoff.approved"}
	if got := handoffEventTypes(t, e, c.owner, h.HandoffID); !slices.Equal(got, want) {
		t.Fatalf("handoff events\n got %v\nwant %v", got, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestCreate_Validation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	left := e.join("leaver", agentCaps...)
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		_, err := eng.Leave(tx, left, room.Empty{})
		return none{}, err
	}); err != nil {
		t.Fatal(err)
	}
	v0 := int64(0)
	v9 := int64(9)
	v1 := int64(1)
	cases := []struct {
		name  string
		p     room.Principal
		in    room.CreateHandoffInput
		kind  room.Kind
		field string
	}{
		{"refused_without_propose", c.reader, room.CreateHandoffInput{Summary: "x"}, room.KindPermissionDenied, ""},
		{"refused_empty_summary", c.owner, room.CreateHandoffInput{Summary: "  \n"}, room.KindInvalidRequest, "summary"},
		{"refused_unknown_assignee", c.owner, room.CreateHandoffInput{Summary: "x", Assignee: "participant_nope"}, room.KindInvalidRequest, "assignee"},
		{"refused_assignee_who_left", c.owner, room.CreateHandoffInput{Summary: "x", Assignee: left.ParticipantID}, room.KindInvalidRequest, "assignee"},
		{"refused_assignee_is_owner", c.owner, room.CreateHandoffInput{Summary: "x", Assignee: c.owner.ParticipantID}, room.KindInvalidRequest, "assignee"},
		{"refused_assignee_without_checkout", c.owner, room.CreateHandoffInput{Summary: "x", Assignee: c.reader.ParticipantID}, room.KindInvalidRequest, "assignee"},
		{"refused_unknown_target", c.owner, room.CreateHandoffInput{Summary: "x", Target: "Nowhere"}, room.KindInvalidRegion, "target"},
		{"refused_base_version_zero", c.owner, room.CreateHandoffInput{Summary: "x", BaseVersion: &v0}, room.KindVersionNotFound, "base_version"},
		{"refused_future_base_version", c.owner, room.CreateHandoffInput{Summary: "x", BaseVersion: &v9}, room.KindVersionNotFound, "base_version"},
		{"refused_unknown_follows", c.owner, room.CreateHandoffInput{Summary: "x", FollowsHandoffID: "handoff_nope"}, room.KindInvalidRequest, "follows_handoff_id"},
		{"refused_empty_artifact_uri", c.owner, room.CreateHandoffInput{Summary: "x", Artifacts: []room.Artifact{{Title: "t"}}}, room.KindInvalidRequest, "artifacts[0].uri"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, events := e.stateDump(), e.lastEventID()
			_, err := e.create(tc.p, tc.in)
			wantKind(t, err, tc.kind)
			if tc.field != "" && room.AsError(err).Fields["field"] != tc.field {
				t.Errorf("field = %v, want %s", room.AsError(err).Fields["field"], tc.field)
			}
			if e.stateDump() != before || e.lastEventID() != events {
				t.Errorf("a refused create changed the room")
			}
		})
	}
	t.Run("accepts_whole_document_target_and_current_base_version", func(t *testing.T) {
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x", Target: "workspace", BaseVersion: &v1})
		if strOf(res.Handoff.Target) != "workspace" || res.Handoff.BaseVersion == nil || *res.Handoff.BaseVersion != 1 {
			t.Fatalf("%+v", res.Handoff)
		}
	})
	t.Run("follows_a_visible_handoff_but_not_an_invisible_one", func(t *testing.T) {
		mine := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "first", Assignee: c.worker.ParticipantID})
		res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "again", FollowsHandoffID: mine.Handoff.HandoffID})
		if strOf(res.Handoff.FollowsHandoffID) != mine.Handoff.HandoffID {
			t.Fatalf("follows = %s", strOf(res.Handoff.FollowsHandoffID))
		}
		_, errInvisible := e.create(c.other, room.CreateHandoffInput{Summary: "x", FollowsHandoffID: mine.Handoff.HandoffID})
		_, errUnknown := e.create(c.other, room.CreateHandoffInput{Summary: "x", FollowsHandoffID: "handoff_nope"})
		wantKind(t, errInvisible, room.KindInvalidRequest)
		if room.AsError(errInvisible).Message != room.AsError(errUnknown).Message {
			t.Fatalf("invisible and unknown follows differ: %v / %v", errInvisible, errUnknown)
		}
	})
}

// ---- idempotency (D9, D10) ----

func TestIdempotency_ReplayReturnsTheOriginalEvenWithDifferentArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	first := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "first", IdempotencyKey: "k-1"})
	events := e.lastEventID()
	again := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "first", IdempotencyKey: "k-1"})
	other := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "something else", IdempotencyKey: "k-1"})
	for _, r := range []room.CreateHandoffResult{again, other} {
		if !r.Replayed || !r.Handoff.Replayed || r.Handoff.HandoffID != first.Handoff.HandoffID || r.Task == nil || r.Task.TaskID != first.Task.TaskID {
			t.Fatalf("replay = %+v, want the original ids flagged replayed", r)
		}
		if r.Handoff.Summary != "first" {
			t.Fatalf("replay changed the handoff: %q", r.Handoff.Summary)
		}
	}
	if again.ArgumentsDiffer || !other.ArgumentsDiffer {
		t.Fatalf("ArgumentsDiffer: same args %v, different args %v", again.ArgumentsDiffer, other.ArgumentsDiffer)
	}
	if e.lastEventID() != events || e.scalar(`SELECT count(*) FROM handoffs`) != 1 {
		t.Fatal("a replay wrote rows or events")
	}
	// The key belongs to the participant: another participant's same key is new work.
	theirs := mustCreate(t, e, c.other, room.CreateHandoffInput{Summary: "first", IdempotencyKey: "k-1"})
	if theirs.Replayed || theirs.Handoff.HandoffID == first.Handoff.HandoffID {
		t.Fatal("an idempotency key leaked across participants")
	}
	long := strings.Repeat("k", 129)
	_, err := e.create(c.owner, room.CreateHandoffInput{Summary: "x", IdempotencyKey: long})
	wantKind(t, err, room.KindLimitExceeded)
	if _, err := e.create(c.owner, room.CreateHandoffInput{Summary: "x", IdempotencyKey: long[:128]}); err != nil {
		t.Fatalf("a 128-character key: %v", err)
	}
}

func TestIdempotency_ReplayAtTheCapStillReturnsTheOriginal(t *testing.T) {
	t.Parallel()
	// At the participant's share (an agent) and at the room's cap (the
	// host, who has no share): a retry of a create that went through is
	// answered with the original, never refused by either cap.
	for _, tc := range []struct {
		name  string
		who   func(e *env, c cast) room.Principal
		fill  func(e *env) int
		scope string
	}{
		{"replayed_at_the_participant_share", func(e *env, c cast) room.Principal { return c.owner },
			func(e *env) int { return e.limits.MaxTasksPerParticipant }, "participant"},
		{"replayed_at_the_room_cap", func(e *env, c cast) room.Principal { return e.op() },
			func(e *env) int { return e.limits.MaxActiveTasks }, "room"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := newCast(e)
			p := tc.who(e, c)
			first := mustCreate(t, e, p, room.CreateHandoffInput{Summary: "keyed", IdempotencyKey: "retry-me"})
			for range tc.fill(e) - 1 {
				mustCreate(t, e, p, room.CreateHandoffInput{Summary: "filler"})
			}
			_, err := e.create(p, room.CreateHandoffInput{Summary: "one too many"})
			wantKind(t, err, room.KindLimitExceeded)
			if got := room.AsError(err).Fields["scope"]; got != tc.scope {
				t.Fatalf("refusal scope %v, want %s", got, tc.scope)
			}
			if _, has := room.AsError(err).Fields["retry_after_seconds"]; has {
				t.Fatal("the cap must not promise a retry time")
			}
			again, err := e.create(p, room.CreateHandoffInput{Summary: "keyed", IdempotencyKey: "retry-me"})
			if err != nil {
				t.Fatalf("replay at the cap: %v", err)
			}
			if !again.Replayed || again.Handoff.HandoffID != first.Handoff.HandoffID || again.Task.TaskID != first.Task.TaskID {
				t.Fatalf("replay at the cap = %+v", again)
			}
		})
	}
}

func TestIdempotency_ReplayAfterPurgeReturnsTheHandoffWithTaskPurged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	first := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "keyed", IdempotencyKey: "late"})
	okH(t)(e.accept(c.worker, first.Handoff.HandoffID))
	okH(t)(e.complete(c.worker, first.Handoff.HandoffID, room.ResultInput{Text: "kept"}))
	e.clock.Advance(e.limits.TaskTTL)
	e.sweep()
	if n := e.scalar(`SELECT count(*) FROM tasks WHERE task_id = ?`, first.Task.TaskID); n != 0 {
		t.Fatalf("the task row was not purged")
	}
	again, err := e.create(c.owner, room.CreateHandoffInput{Summary: "keyed", IdempotencyKey: "late"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !again.TaskPurged || again.Task != nil || again.Handoff.HandoffID != first.Handoff.HandoffID ||
		again.Handoff.TaskID != first.Task.TaskID || again.Handoff.TaskStatus != nil || again.Handoff.Result.Text != "kept" {
		t.Fatalf("replay after purge = %+v / %+v", again, again.Handoff)
	}
}

func TestIdempotency_SecondCompletionKeepsTheFirstResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
	id := res.Handoff.HandoffID
	okH(t)(e.accept(c.worker, id))
	first := okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "first"}))
	before, events := e.stateDump(), e.lastEventID()
	e.clock.Advance(time.Minute)
	second := okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "second", IsError: true}))
	if !second.AlreadyCompleted || second.Result.Text != "first" || second.UpdatedAt != first.UpdatedAt {
		t.Fatalf("second completion = %+v", second)
	}
	if e.stateDump() != before || e.lastEventID() != events {
		t.Fatal("the second completion changed the room")
	}
	task := mustTask(t, e, c.owner, res.Task.TaskID)
	if !strings.Contains(string(task.Result), `"text":"first"`) {
		t.Fatalf("task result replaced: %s", task.Result)
	}
	// Anyone else gets the ordinary authorization error, not already_completed.
	_, err := e.complete(c.owner, id, room.ResultInput{Text: "mine"})
	wantKind(t, err, room.KindPermissionDenied)
}

// ---- input requests (D11) ----

func inputRoom(t *testing.T) (*env, cast, room.CreateHandoffResult) {
	e := newEnv(t)
	c := newCast(e)
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
	okH(t)(e.accept(c.worker, res.Handoff.HandoffID))
	return e, c, res
}

func q(key string) room.InputRequestSpec {
	return room.InputRequestSpec{Key: key, Message: "question " + key + "?"}
}

func answerOf(s string) json.RawMessage {
	return raw(`{"action":"accept","content":{"answer":"` + s + `"}}`)
}

func TestInputRequests_KeysAreUniqueForTheTaskLifetime(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	id, tid := res.Handoff.HandoffID, res.Task.TaskID
	okH(t)(e.requestInput(c.worker, id, q("a")))
	_, err := e.requestInput(c.worker, id, q("a"))
	wantKind(t, err, room.KindInvalidRequest) // outstanding
	if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("1")}); err != nil {
		t.Fatal(err)
	}
	before := e.stateDump()
	_, err = e.requestInput(c.worker, id, q("a"))
	wantKind(t, err, room.KindInvalidRequest) // answered keys are never reused
	_, err = e.requestInput(c.worker, id, q("b"), q("b"))
	wantKind(t, err, room.KindInvalidRequest) // twice in one call
	_, err = e.requestInput(c.worker, id, q("c"), q("a"))
	wantKind(t, err, room.KindInvalidRequest) // one bad key refuses the whole call
	if e.stateDump() != before {
		t.Fatal("a refused request changed the room")
	}
}

func TestInputRequests_UnknownAndAnsweredKeysAreIgnored(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	tid := res.Task.TaskID
	okH(t)(e.requestInput(c.worker, res.Handoff.HandoffID, q("a"), q("b")))
	if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("1")}); err != nil {
		t.Fatal(err)
	}
	before, events := e.stateDump(), e.lastEventID()
	if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("changed"), "zzz": answerOf("?")}); err != nil {
		t.Fatalf("ignored keys must still be acknowledged: %v", err)
	}
	if e.stateDump() != before || e.lastEventID() != events {
		t.Fatal("answering only answered/unknown keys changed the room")
	}
	h := okH(t)(e.getHandoff(c.worker, res.Handoff.HandoffID))
	if string(h.Inputs[0].Response) != string(answerOf("1")) {
		t.Fatalf("an answered key was overwritten: %s", h.Inputs[0].Response)
	}
}

func TestInputRequests_PartialAnswerKeepsInputRequiredAndTheLastReturnsWorking(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	tid := res.Task.TaskID
	okH(t)(e.requestInput(c.worker, res.Handoff.HandoffID, q("a"), q("b")))
	last := e.lastEventID()
	if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("1")}); err != nil {
		t.Fatal(err)
	}
	task := mustTask(t, e, c.owner, tid)
	if task.Status != room.TaskInputRequired || len(task.InputRequests) != 1 || task.InputRequests["b"] == nil {
		t.Fatalf("after a partial answer: %s %v", task.Status, task.InputRequests)
	}
	evs := e.eventsAfter(last)
	if !slices.Equal(types(evs), []string{"handoff.input_received"}) || !strings.Contains(evs[0].Payload, `"keys":["a"]`) {
		t.Fatalf("partial answer events: %v %v", types(evs), evs)
	}
	last = e.lastEventID()
	if err := e.answer(c.admin, tid, map[string]json.RawMessage{"b": answerOf("2")}); err != nil {
		t.Fatal(err)
	}
	task = mustTask(t, e, c.owner, tid)
	if task.Status != room.TaskWorking || task.InputRequests != nil {
		t.Fatalf("after the last answer: %s %v", task.Status, task.InputRequests)
	}
	if got := types(e.eventsAfter(last)); !slices.Equal(got, []string{"task.working", "handoff.input_received"}) {
		t.Fatalf("last answer events: %v", got)
	}
}

func TestInputRequests_TheAssigneeReadsAnswersAndOthersDoNot(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	id := res.Handoff.HandoffID
	schema := raw(`{"type":"object","properties":{"ok":{"type":"boolean"}}}`)
	okH(t)(e.requestInput(c.worker, id, room.InputRequestSpec{Key: "ok", Message: "Proceed?", RequestedSchema: schema}, q("open")))
	if err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"ok": raw(`{"action":"accept","content":{"ok":true}}`)}); err != nil {
		t.Fatal(err)
	}
	h := okH(t)(e.getHandoff(c.worker, id))
	byKey := map[string]room.HandoffInput{}
	for _, in := range h.Inputs {
		byKey[in.Key] = in
	}
	ok := byKey["ok"]
	if ok.Status != room.InputAnswered || string(ok.Response) != `{"action":"accept","content":{"ok":true}}` ||
		string(ok.RequestedSchema) != string(schema) || ok.Message != "Proceed?" || ok.AnsweredAt == nil {
		t.Fatalf("answered input as the assignee sees it: %+v", ok)
	}
	if open := byKey["open"]; open.Status != room.InputOpen || open.Response != nil || open.AnsweredAt != nil {
		t.Fatalf("open input: %+v", open)
	}
	// Approvers see the handoff (they judge the result) but not the conversation.
	if h := okH(t)(e.getHandoff(c.approver, id)); h.Inputs != nil {
		t.Fatalf("an approver sees inputs: %+v", h.Inputs)
	}
	b, _ := json.Marshal(okH(t)(e.getHandoff(c.approver, id)))
	if strings.Contains(string(b), `"inputs"`) {
		t.Fatalf("inputs key present for a non-party: %s", b)
	}
	// Completing supersedes what is still open.
	okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "done"}))
	h = okH(t)(e.getHandoff(c.owner, id))
	for _, in := range h.Inputs {
		if in.Key == "open" && in.Status != room.InputSuperseded {
			t.Fatalf("outstanding input after completion: %s", in.Status)
		}
	}
}

func TestInputRequests_SeventeenthOutstandingIsRefused(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	id := res.Handoff.HandoffID
	var reqs []room.InputRequestSpec
	for i := range 15 {
		reqs = append(reqs, q(string(rune('a'+i))))
	}
	okH(t)(e.requestInput(c.worker, id, reqs...))
	okH(t)(e.requestInput(c.worker, id, q("p"))) // the 16th
	before := e.stateDump()
	_, err := e.requestInput(c.worker, id, q("q"))
	wantKind(t, err, room.KindLimitExceeded)
	if e.stateDump() != before {
		t.Fatal("the refused 17th changed the room")
	}
	// Answering one frees a slot.
	if err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"a": answerOf("x")}); err != nil {
		t.Fatal(err)
	}
	okH(t)(e.requestInput(c.worker, id, q("q")))
}

func TestInputRequests_Validation(t *testing.T) {
	t.Parallel()
	e, c, res := inputRoom(t)
	id := res.Handoff.HandoffID
	cases := []struct {
		name string
		reqs []room.InputRequestSpec
		kind room.Kind
	}{
		{"refused_no_requests", nil, room.KindInvalidRequest},
		{"refused_empty_key", []room.InputRequestSpec{{Message: "m"}}, room.KindInvalidRequest},
		{"refused_65_character_key", []room.InputRequestSpec{{Key: strings.Repeat("k", 65), Message: "m"}}, room.KindLimitExceeded},
		{"refused_empty_message", []room.InputRequestSpec{{Key: "k"}}, room.KindInvalidRequest},
		{"refused_2001_character_message", []room.InputRequestSpec{{Key: "k", Message: strings.Repeat("é", 2001)}}, room.KindLimitExceeded},
		{"refused_non_object_schema", []room.InputRequestSpec{{Key: "k", Message: "m", RequestedSchema: raw(`{"type":"string"}`)}}, room.KindInvalidRequest},
		{"refused_malformed_schema", []room.InputRequestSpec{{Key: "k", Message: "m", RequestedSchema: raw(`{"type":`)}}, room.KindInvalidRequest},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.stateDump()
			_, err := e.requestInput(c.worker, id, tc.reqs...)
			wantKind(t, err, tc.kind)
			if e.stateDump() != before {
				t.Fatal("changed the room")
			}
		})
	}
	t.Run("accepts_64_character_key_and_2000_character_message", func(t *testing.T) {
		okH(t)(e.requestInput(c.worker, id, room.InputRequestSpec{Key: strings.Repeat("k", 64), Message: strings.Repeat("é", 2000)}))
	})
	t.Run("refused_malformed_answer_without_change", func(t *testing.T) {
		before := e.stateDump()
		err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{strings.Repeat("k", 64): raw(`{nope`)})
		wantKind(t, err, room.KindInvalidRequest)
		if e.stateDump() != before {
			t.Fatal("changed the room")
		}
	})
}

// ---- authorization and visibility (D1, D2) ----

// errorBytes is everything a front door could show of an error.
func errorBytes(t *testing.T, err error) string {
	t.Helper()
	de := room.AsError(err)
	if de == nil {
		t.Fatal("no error")
	}
	return err.Error() + "|" + mustJSON(t, map[string]any{"kind": de.Kind, "message": de.Message, "fields": de.Fields})
}

func TestAuthorization_UnknownAndForeignTaskIdsGiveIdenticalErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
	tid := res.Task.TaskID
	never := "task_" + strings.Repeat("0", 32)
	calls := map[string]func(p room.Principal, id string) error{
		"get": func(p room.Principal, id string) error { _, err := e.getTask(p, id); return err },
		"update": func(p room.Principal, id string) error {
			return e.answer(p, id, map[string]json.RawMessage{"k": answerOf("x")})
		},
		"cancel": func(p room.Principal, id string) error { return e.cancel(p, id) },
	}
	foreign := map[string]string{}
	for name, call := range calls {
		// other holds checkout, reader only read, approver approve: none is a party.
		for _, p := range []room.Principal{c.other, c.reader, c.approver, c.worker} {
			err := call(p, tid)
			wantKind(t, err, room.KindTaskNotFound)
			foreign[name] = errorBytes(t, err)
			unknown := strings.ReplaceAll(errorBytes(t, call(p, never)), never, tid)
			if foreign[name] != unknown {
				t.Fatalf("%s: foreign and unknown differ:\n%s\n%s", name, foreign[name], unknown)
			}
		}
	}
	// Once the task is gone, the same id is unknown to everyone — byte for byte
	// the answer strangers got while it existed.
	if err := e.cancel(c.owner, tid); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(e.limits.TaskTTL)
	e.sweep()
	for name, call := range calls {
		for _, p := range []room.Principal{c.other, c.owner} {
			if got := errorBytes(t, call(p, tid)); got != foreign[name] {
				t.Fatalf("%s after purge:\n%s\nwant\n%s", name, got, foreign[name])
			}
		}
	}
}

func TestAuthorization_HandoffVisibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	readerCheckout := e.join("reader-checkout", room.CapRead, room.CapCheckout)
	openCall := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "anyone?"}).Handoff.HandoffID
	addressed := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "you", Assignee: c.worker.ParticipantID}).Handoff.HandoffID
	taken := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "taken"}).Handoff.HandoffID
	okH(t)(e.accept(c.worker, taken))

	sees := func(p room.Principal, id string) bool {
		_, err := e.getHandoff(p, id)
		if err != nil && room.ErrorKind(err) != room.KindHandoffNotFound {
			t.Fatalf("unexpected %v", err)
		}
		return err == nil
	}
	cases := []struct {
		name string
		p    room.Principal
		id   string
		want bool
	}{
		{"open_call_visible_to_checkout_holder", c.other, openCall, true},
		{"open_call_visible_to_read_checkout", readerCheckout, openCall, true},
		{"open_call_hidden_from_reader_without_checkout", c.reader, openCall, false},
		{"addressed_visible_to_requested_assignee", c.worker, addressed, true},
		{"addressed_hidden_from_other_checkout_holder", c.other, addressed, false},
		{"accepted_hidden_from_other_checkout_holder", c.other, taken, false},
		{"accepted_visible_to_assignee", c.worker, taken, true},
		{"accepted_visible_to_owner", c.owner, taken, true},
		{"accepted_visible_to_approver", c.approver, taken, true},
		{"accepted_visible_to_admin", c.admin, taken, true},
		{"accepted_visible_to_operator", e.op(), taken, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sees(tc.p, tc.id); got != tc.want {
				t.Fatalf("visible = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("invisible_and_unknown_handoffs_read_the_same", func(t *testing.T) {
		never := "handoff_" + strings.Repeat("0", 32)
		_, errInvisible := e.getHandoff(c.other, taken)
		_, errUnknown := e.getHandoff(c.other, never)
		if a, b := errorBytes(t, errInvisible), strings.ReplaceAll(errorBytes(t, errUnknown), never, taken); a != b {
			t.Fatalf("\n%s\n%s", a, b)
		}
		_, errEvents := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffEventsResult, error) {
			return eng.HandoffEvents(context.Background(), q, c.other, room.HandoffEventsInput{HandoffID: taken, SinceEventID: nil, Limit: 0})
		})
		if errorBytes(t, errEvents) != errorBytes(t, errInvisible) {
			t.Fatalf("handoff_events leaks what handoff_get hides: %v", errEvents)
		}
	})
	t.Run("list_shows_exactly_the_visible_handoffs", func(t *testing.T) {
		ids := func(p room.Principal, status string) []string {
			list, err := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffPage, error) {
				return eng.ListHandoffs(context.Background(), q, p, room.ListHandoffsInput{Status: status})
			})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, h := range list.Handoffs {
				out = append(out, h.HandoffID)
			}
			slices.Sort(out)
			return out
		}
		sorted := func(s ...string) []string { slices.Sort(s); return s }
		if got := ids(c.other, ""); !slices.Equal(got, sorted(openCall)) {
			t.Fatalf("other sees %v", got)
		}
		if got := ids(c.worker, ""); !slices.Equal(got, sorted(openCall, addressed, taken)) {
			t.Fatalf("worker sees %v", got)
		}
		if got := ids(c.reader, ""); len(got) != 0 {
			t.Fatalf("reader sees %v", got)
		}
		if got := ids(e.op(), room.HandoffAccepted); !slices.Equal(got, sorted(taken)) {
			t.Fatalf("operator, accepted: %v", got)
		}
		if got := len(ids(c.approver, "")); got < 3 {
			t.Fatalf("approver sees %d", got)
		}
		_, err := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffPage, error) {
			return eng.ListHandoffs(context.Background(), q, e.op(), room.ListHandoffsInput{Status: "nonsense"})
		})
		wantKind(t, err, room.KindInvalidRequest)
	})
}

func TestAuthorization_HandoffReadsNeedReadButTasksGetIsAPartyRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	noRead := e.join("no-read", room.CapPropose, room.CapCheckout)
	res := mustCreate(t, e, noRead, room.CreateHandoffInput{Summary: "mine"})
	_, err := e.getHandoff(noRead, res.Handoff.HandoffID)
	wantKind(t, err, room.KindPermissionDenied)
	if _, err := e.getTask(noRead, res.Task.TaskID); err != nil {
		t.Fatal(err)
	}
}

func TestAuthorization_OwnerWithApproveMayDecideButTheAssigneeMayNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	owner := e.join("owner-approver", agent(room.CapApprove)...)
	worker := e.join("worker-approver", agent(room.CapApprove)...)
	id := mustCreate(t, e, owner, room.CreateHandoffInput{Summary: "x"}).Handoff.HandoffID
	okH(t)(e.accept(worker, id))
	okH(t)(e.complete(worker, id, room.ResultInput{Text: "r"}))
	_, err := e.approve(worker, id, "")
	wantKind(t, err, room.KindPermissionDenied)
	if h := okH(t)(e.reject(owner, id, "redo")); h.Status != room.HandoffRejected {
		t.Fatalf("status %s", h.Status)
	}
}

func TestAuthorization_PrincipalForUsesTheParticipantsOwnRights(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
	pf := func(id string) (room.Principal, error) {
		return read(e, func(eng *room.Engine, q room.Querier) (room.Principal, error) {
			return eng.PrincipalFor(context.Background(), q, id)
		})
	}
	p, err := pf(c.owner.ParticipantID)
	if err != nil || p.Trusted || p.ParticipantID != c.owner.ParticipantID || !slices.Equal(p.Caps, c.owner.Caps) {
		t.Fatalf("PrincipalFor(owner) = %+v, %v", p, err)
	}
	if _, err := e.getTask(p, res.Task.TaskID); err != nil {
		t.Fatalf("the owner as PrincipalFor: %v", err)
	}
	o, _ := pf(c.other.ParticipantID)
	_, err = e.getTask(o, res.Task.TaskID)
	wantKind(t, err, room.KindTaskNotFound)
	_, err = pf("participant_unknown")
	wantKind(t, err, room.KindInvalidRequest)
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		_, err := eng.Leave(tx, c.other, room.Empty{})
		return none{}, err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = pf(c.other.ParticipantID)
	wantKind(t, err, room.KindInvalidRequest)
}

// No event payload may carry a summary, constraints, a result, a question,
// an answer, a note or an artifact: ids, statuses, actors and reasons only.
func TestEvents_PayloadsNeverCarryTextBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	markers := []string{"SUMMARY-7f1", "CONSTRAINT-7f2", "ARTURI-7f3", "ARTTITLE-7f4", "QUESTION-7f5", "SCHEMA-7f6",
		"ANSWER-7f7", "RESULT-7f8", "RESART-7f9", "STATUSMSG-7fa", "NOTE-7fb"}
	in := room.CreateHandoffInput{Summary: markers[0], Constraints: markers[1],
		Artifacts: []room.Artifact{{URI: "https://example.com/" + markers[2], Title: markers[3]}}}
	lifecycle := func(end string) {
		res := mustCreate(t, e, c.owner, in)
		id := res.Handoff.HandoffID
		okH(t)(e.accept(c.worker, id))
		okH(t)(e.requestInput(c.worker, id, room.InputRequestSpec{Key: "k", Message: markers[4],
			RequestedSchema: raw(`{"type":"object","properties":{"a":{"type":"string","description":"` + markers[5] + `"}}}`)}))
		if err := e.answer(c.owner, res.Task.TaskID, map[string]json.RawMessage{"k": answerOf(markers[6])}); err != nil {
			t.Fatal(err)
		}
		switch end {
		case "cancel":
			if err := e.cancel(c.owner, res.Task.TaskID); err != nil {
				t.Fatal(err)
			}
			return
		case "expire":
			return
		}
		if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.Handoff, error) {
			return eng.CompleteHandoff(tx, c.worker, room.CompleteInput{HandoffID: id, Result: room.ResultInput{Text: markers[7], Artifacts: []room.Artifact{{URI: markers[8]}}}, StatusMessage: markers[9]})
		}); err != nil {
			t.Fatal(err)
		}
		if end == "reject" {
			okH(t)(e.reject(c.approver, id, markers[10]))
		} else {
			okH(t)(e.approve(c.approver, id, markers[10]))
		}
	}
	lifecycle("approve")
	lifecycle("reject")
	lifecycle("cancel")
	lifecycle("expire")
	e.clock.Advance(e.limits.TaskTTL)
	e.sweep()
	n := e.scalar(`SELECT count(*) FROM events WHERE handoff_id IS NOT NULL`)
	if n < 30 {
		t.Fatalf("only %d handoff events; the scan would prove little", n)
	}
	all := e.dump(`SELECT * FROM events ORDER BY event_id`)
	for _, m := range markers {
		if strings.Contains(all, m) {
			t.Errorf("marker %s appears in the events table", m)
		}
	}
}

func TestHandoffEvents_OldestFirstWithSinceAndLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
	id := res.Handoff.HandoffID
	mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "noise"})
	okH(t)(e.accept(c.worker, id))
	okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "r"}))
	events := func(since *int64, limit int) room.HandoffEventsResult {
		r, err := read(e, func(eng *room.Engine, q room.Querier) (room.HandoffEventsResult, error) {
			return eng.HandoffEvents(context.Background(), q, c.approver, room.HandoffEventsInput{HandoffID: id, SinceEventID: since, Limit: limit})
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	all := events(nil, 0)
	var got []string
	for _, ev := range all.Events {
		got = append(got, ev.Type)
	}
	if want := []string{"handoff.created", "task.created", "handoff.accepted", "task.completed", "handoff.result_ready"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if all.HandoffID != id || all.OldestEventID != 1 {
		t.Fatalf("result %+v", all)
	}
	newest := events(nil, 2)
	if len(newest.Events) != 2 || newest.Events[0].ID != all.Events[3].ID || newest.Events[1].ID != all.Events[4].ID {
		t.Fatalf("limit 2 should give the newest two, oldest first: %+v", newest.Events)
	}
	after := events(&all.Events[1].ID, 2)
	if len(after.Events) != 2 || after.Events[0].ID != all.Events[2].ID {
		t.Fatalf("since: %+v", after.Events)
	}
	// A limit the statement rounds up (3 is read as 4: sqllimit.go) still
	// gives exactly the newest three, or the first three after since.
	if got, want := eventIDs(events(nil, 3).Events), eventIDs(all.Events[2:]); !slices.Equal(got, want) {
		t.Fatalf("limit 3: events %v, want the newest three %v", got, want)
	}
	if got, want := eventIDs(events(&all.Events[0].ID, 3).Events), eventIDs(all.Events[1:4]); !slices.Equal(got, want) {
		t.Fatalf("since the first, limit 3: events %v, want %v", got, want)
	}
}

// ---- published notifications ----

// Every task change publishes one notifications/tasks frame whose body is
// exactly what tasks/get returns at that moment; handoff-only changes
// (approve) publish none for the task.
func TestNotifications_PublishedTaskSnapshotsEqualGetTask(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	var tid, id string
	steps := []struct {
		name    string
		run     func()
		notices int
	}{
		{"create", func() {
			res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"})
			tid, id = res.Task.TaskID, res.Handoff.HandoffID
		}, 1},
		{"accept", func() { okH(t)(e.accept(c.worker, id)) }, 1},
		{"request_input", func() { okH(t)(e.requestInput(c.worker, id, q("a"), q("b"))) }, 1},
		{"partial_answer", func() {
			if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("1")}); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"ignored_answer", func() {
			if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("again")}); err != nil {
				t.Fatal(err)
			}
		}, 0},
		{"last_answer", func() {
			if err := e.answer(c.owner, tid, map[string]json.RawMessage{"b": answerOf("2")}); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"complete", func() { okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "r"})) }, 1},
		{"approve", func() { okH(t)(e.approve(c.approver, id, "")) }, 0},
	}
	check := func(t *testing.T, step string, taskID string, seen *int, want int) {
		e.barrier()
		notices := e.pub.taskNotices(taskID)
		if got := len(notices) - *seen; got != want {
			t.Fatalf("%s: %d notices, want %d", step, got, want)
		}
		*seen = len(notices)
		if len(notices) == 0 {
			return
		}
		task, err := e.getTask(e.op(), taskID)
		if err != nil {
			t.Fatal(err)
		}
		if now := mustJSON(t, task); string(notices[len(notices)-1]) != now {
			t.Fatalf("%s: published\n%s\ntasks/get\n%s", step, notices[len(notices)-1], now)
		}
	}
	seen := 0
	for _, s := range steps {
		e.clock.Advance(time.Second)
		s.run()
		check(t, s.name, tid, &seen, s.notices)
	}
	// Cancellation and expiry publish too.
	cancelled := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "c"}).Task.TaskID
	expiring := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "x"}).Task.TaskID
	seenC, seenX := 1, 1
	if err := e.cancel(c.owner, cancelled); err != nil {
		t.Fatal(err)
	}
	check(t, "cancel", cancelled, &seenC, 1)
	e.clock.Advance(e.limits.TaskTTL)
	e.sweep()
	check(t, "expire", expiring, &seenX, 1)
	if task := mustTask(t, e, c.owner, expiring); task.Status != room.TaskFailed {
		t.Fatalf("expired task is %s", task.Status)
	}
}

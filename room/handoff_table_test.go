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

// The transition table: every reachable (handoff, task) state × every action
// × every role, with the exact outcome. One row per (state, action); the
// outcome column lists the six roles in this order:
//
//	owner, assignee, other agent (checkout), approver (read+approve, third party),
//	admin, assignee holding approve
//
// Outcomes: "ok" = the row's transition (new statuses + exactly these events);
// "nop" = success that changes nothing (no row, no event); "already" = the
// assignee's repeated completion (D10): success, unchanged, flagged;
// "perm" / "hnf" / "tnf" / "conflict" = permission_denied / handoff_not_found
// / task_not_found / handoff_conflict, with no row and no event changed.

type tState string

const (
	sOpen              tState = "open-call"          // open/working, addressed to nobody
	sOpenAddressed     tState = "open-addressed"     // open/working, requested assignee = the assignee role
	sAccepted          tState = "accepted"           // accepted/working
	sInputRequired     tState = "input-required"     // accepted/input_required, key q1 outstanding
	sResultReady       tState = "result-ready"       // result_ready/completed
	sApproved          tState = "approved"           // approved/completed
	sRejected          tState = "rejected"           // rejected/completed
	sCancelledOpen     tState = "cancelled-open"     // cancelled/cancelled, cancelled before anyone accepted
	sCancelledAccepted tState = "cancelled-accepted" // cancelled/cancelled, cancelled after accept
	sExpiredOpen       tState = "expired-open"       // cancelled/failed by the TTL while open
	sExpiredInput      tState = "expired-input"      // cancelled/failed by the TTL while input_required
	sResultPurged      tState = "result-purged"      // result_ready, task row purged after its TTL
)

var allStates = []tState{sOpen, sOpenAddressed, sAccepted, sInputRequired, sResultReady, sApproved, sRejected,
	sCancelledOpen, sCancelledAccepted, sExpiredOpen, sExpiredInput, sResultPurged}

type tAction string

const (
	aAccept   tAction = "accept"
	aRequest  tAction = "request_input"
	aAnswer   tAction = "answer"
	aComplete tAction = "complete"
	aApprove  tAction = "approve"
	aReject   tAction = "reject"
	aCancel   tAction = "cancel"
)

type tRole string

const (
	rOwner            tRole = "owner"
	rAssignee         tRole = "assignee"
	rOther            tRole = "other"
	rApprover         tRole = "approver"
	rAdmin            tRole = "admin"
	rAssigneeApprover tRole = "assignee+approve"
)

var roles = []tRole{rOwner, rAssignee, rOther, rApprover, rAdmin, rAssigneeApprover}

type transition struct {
	state   tState
	action  tAction
	out     string // six outcomes, by role
	handoff string // after "ok"
	task    string // after "ok" ("" = no task row)
	events  string // after "ok", space separated, in order
}

var transitions = []transition{
	// open call: any checkout holder but the owner may accept
	{sOpen, aAccept, "perm ok ok perm ok ok", "accepted", "working", "handoff.accepted"},
	{sOpen, aRequest, "perm perm perm perm perm perm", "", "", ""},
	{sOpen, aAnswer, "nop tnf tnf tnf nop tnf", "", "", ""},
	{sOpen, aComplete, "perm perm perm perm perm perm", "", "", ""},
	{sOpen, aApprove, "perm perm perm conflict conflict conflict", "", "", ""},
	{sOpen, aReject, "perm perm perm conflict conflict conflict", "", "", ""},
	{sOpen, aCancel, "ok tnf tnf tnf ok tnf", "cancelled", "cancelled", "task.cancelled handoff.cancelled"},

	// addressed: only the requested assignee may accept; outsiders cannot see it
	{sOpenAddressed, aAccept, "perm ok hnf perm conflict ok", "accepted", "working", "handoff.accepted"},
	{sOpenAddressed, aRequest, "perm perm hnf perm perm perm", "", "", ""},
	{sOpenAddressed, aAnswer, "nop tnf tnf tnf nop tnf", "", "", ""},
	{sOpenAddressed, aComplete, "perm perm hnf perm perm perm", "", "", ""},
	{sOpenAddressed, aApprove, "perm perm perm conflict conflict conflict", "", "", ""},
	{sOpenAddressed, aReject, "perm perm perm conflict conflict conflict", "", "", ""},
	{sOpenAddressed, aCancel, "ok tnf tnf tnf ok tnf", "cancelled", "cancelled", "task.cancelled handoff.cancelled"},

	{sAccepted, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sAccepted, aRequest, "perm ok hnf perm perm ok", "accepted", "input_required", "handoff.input_requested task.input_required"},
	{sAccepted, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sAccepted, aComplete, "perm ok hnf perm perm ok", "result_ready", "completed", "task.completed handoff.result_ready"},
	{sAccepted, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sAccepted, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sAccepted, aCancel, "ok perm tnf tnf ok perm", "cancelled", "cancelled", "task.cancelled handoff.cancelled"},

	{sInputRequired, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sInputRequired, aRequest, "perm ok hnf perm perm ok", "accepted", "input_required", "handoff.input_requested"},
	{sInputRequired, aAnswer, "ok perm tnf tnf ok perm", "accepted", "working", "task.working handoff.input_received"},
	{sInputRequired, aComplete, "perm ok hnf perm perm ok", "result_ready", "completed", "task.completed handoff.result_ready"},
	{sInputRequired, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sInputRequired, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sInputRequired, aCancel, "ok perm tnf tnf ok perm", "cancelled", "cancelled", "task.cancelled handoff.cancelled"},

	// decisions never touch the task
	{sResultReady, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sResultReady, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sResultReady, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sResultReady, aComplete, "perm already hnf perm perm already", "", "", ""},
	{sResultReady, aApprove, "perm perm perm ok ok perm", "approved", "completed", "handoff.approved"},
	{sResultReady, aReject, "perm perm perm ok ok perm", "rejected", "completed", "handoff.rejected"},
	{sResultReady, aCancel, "nop perm tnf tnf nop perm", "", "", ""},

	{sApproved, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sApproved, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sApproved, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sApproved, aComplete, "perm already hnf perm perm already", "", "", ""},
	{sApproved, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sApproved, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sApproved, aCancel, "nop perm tnf tnf nop perm", "", "", ""},

	{sRejected, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sRejected, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sRejected, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sRejected, aComplete, "perm already hnf perm perm already", "", "", ""},
	{sRejected, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sRejected, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sRejected, aCancel, "nop perm tnf tnf nop perm", "", "", ""},

	// cancelled before acceptance: nobody is assignee, the open call is over
	{sCancelledOpen, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sCancelledOpen, aRequest, "perm hnf hnf perm perm perm", "", "", ""},
	{sCancelledOpen, aAnswer, "nop tnf tnf tnf nop tnf", "", "", ""},
	{sCancelledOpen, aComplete, "perm hnf hnf perm perm perm", "", "", ""},
	{sCancelledOpen, aApprove, "perm perm perm conflict conflict conflict", "", "", ""},
	{sCancelledOpen, aReject, "perm perm perm conflict conflict conflict", "", "", ""},
	{sCancelledOpen, aCancel, "nop tnf tnf tnf nop tnf", "", "", ""},

	{sCancelledAccepted, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sCancelledAccepted, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sCancelledAccepted, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sCancelledAccepted, aComplete, "perm conflict hnf perm perm conflict", "", "", ""},
	{sCancelledAccepted, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sCancelledAccepted, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sCancelledAccepted, aCancel, "nop perm tnf tnf nop perm", "", "", ""},

	{sExpiredOpen, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sExpiredOpen, aRequest, "perm hnf hnf perm perm perm", "", "", ""},
	{sExpiredOpen, aAnswer, "nop tnf tnf tnf nop tnf", "", "", ""},
	{sExpiredOpen, aComplete, "perm hnf hnf perm perm perm", "", "", ""},
	{sExpiredOpen, aApprove, "perm perm perm conflict conflict conflict", "", "", ""},
	{sExpiredOpen, aReject, "perm perm perm conflict conflict conflict", "", "", ""},
	{sExpiredOpen, aCancel, "nop tnf tnf tnf nop tnf", "", "", ""},

	{sExpiredInput, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sExpiredInput, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sExpiredInput, aAnswer, "nop perm tnf tnf nop perm", "", "", ""},
	{sExpiredInput, aComplete, "perm conflict hnf perm perm conflict", "", "", ""},
	{sExpiredInput, aApprove, "perm perm perm conflict conflict perm", "", "", ""},
	{sExpiredInput, aReject, "perm perm perm conflict conflict perm", "", "", ""},
	{sExpiredInput, aCancel, "nop perm tnf tnf nop perm", "", "", ""},

	// the task row is gone: task methods cannot find it, the handoff lives on
	{sResultPurged, aAccept, "perm conflict conflict perm conflict conflict", "", "", ""},
	{sResultPurged, aRequest, "perm conflict hnf perm perm conflict", "", "", ""},
	{sResultPurged, aAnswer, "tnf tnf tnf tnf tnf tnf", "", "", ""},
	{sResultPurged, aComplete, "perm already hnf perm perm already", "", "", ""},
	{sResultPurged, aApprove, "perm perm perm ok ok perm", "approved", "", "handoff.approved"},
	{sResultPurged, aReject, "perm perm perm ok ok perm", "rejected", "", "handoff.rejected"},
	{sResultPurged, aCancel, "tnf tnf tnf tnf tnf tnf", "", "", ""},
}

var errOutcomes = map[string]room.Kind{
	"perm": room.KindPermissionDenied, "hnf": room.KindHandoffNotFound,
	"tnf": room.KindTaskNotFound, "conflict": room.KindHandoffConflict,
}

// Every state must have every action, exactly once: a missing row would be
// a hole in the table rather than a passing test.
func TestTransitionTable_IsComplete(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, tr := range transitions {
		seen[string(tr.state)+"/"+string(tr.action)]++
		outs := strings.Fields(tr.out)
		if len(outs) != len(roles) {
			t.Errorf("%s/%s: %d outcomes, want %d", tr.state, tr.action, len(outs), len(roles))
		}
		for _, o := range outs {
			if _, isErr := errOutcomes[o]; !isErr && o != "ok" && o != "nop" && o != "already" {
				t.Errorf("%s/%s: unknown outcome %q", tr.state, tr.action, o)
			}
			if o == "ok" && tr.handoff == "" {
				t.Errorf("%s/%s: ok without a target state", tr.state, tr.action)
			}
		}
	}
	for _, s := range allStates {
		for _, a := range []tAction{aAccept, aRequest, aAnswer, aComplete, aApprove, aReject, aCancel} {
			if n := seen[string(s)+"/"+string(a)]; n != 1 {
				t.Errorf("%s/%s appears %d times in the table, want 1", s, a, n)
			}
		}
	}
}

// tableRoom is one room holding every participant the table needs.
type tableRoom struct {
	*env
	who map[tRole]room.Principal
}

func (tr *tableRoom) assigneeFor(role tRole) room.Principal {
	if role == rAssigneeApprover {
		return tr.who[rAssigneeApprover]
	}
	return tr.who[rAssignee]
}

type prepared struct {
	handoffID, taskID string
}

// prepare drives a fresh handoff to state s (except the part that needs the
// clock: see settle), with assignee as its worker. It runs concurrently with
// other preparations, so it reports errors instead of failing the test.
func (tr *tableRoom) prepare(s tState, assignee room.Principal) (prepared, error) {
	owner := tr.who[rOwner]
	in := room.CreateHandoffInput{Summary: "draft the goals section", Constraints: "keep it short"}
	if s == sOpenAddressed {
		in.Assignee = assignee.ParticipantID
	}
	res, err := tr.create(owner, in)
	if err != nil {
		return prepared{}, fmt.Errorf("preparing %s: create: %w", s, err)
	}
	p := prepared{res.Handoff.HandoffID, res.Handoff.TaskID}
	var steps []func() error
	accept := func() error { _, err := tr.accept(assignee, p.handoffID); return err }
	cancel := func() error { return tr.cancel(owner, p.taskID) }
	complete := func() error {
		_, err := tr.complete(assignee, p.handoffID, room.ResultInput{Text: "the goals, drafted"})
		return err
	}
	switch s {
	case sOpen, sOpenAddressed, sExpiredOpen:
	case sCancelledOpen:
		steps = append(steps, cancel)
	case sAccepted:
		steps = append(steps, accept)
	case sInputRequired, sExpiredInput:
		steps = append(steps, accept, func() error {
			_, err := tr.requestInput(assignee, p.handoffID, room.InputRequestSpec{Key: "q1", Message: "which tone?"})
			return err
		})
	case sCancelledAccepted:
		steps = append(steps, accept, cancel)
	case sResultReady, sResultPurged:
		steps = append(steps, accept, complete)
	case sApproved:
		steps = append(steps, accept, complete, func() error { _, err := tr.approve(tr.op(), p.handoffID, ""); return err })
	case sRejected:
		steps = append(steps, accept, complete, func() error { _, err := tr.reject(tr.op(), p.handoffID, ""); return err })
	default:
		return p, fmt.Errorf("no preparation for %s", s)
	}
	for i, step := range steps {
		if err := step(); err != nil {
			return p, fmt.Errorf("preparing %s: step %d: %w", s, i+1, err)
		}
	}
	return p, nil
}

func (tr *tableRoom) clockDriven(s tState) bool {
	return s == sExpiredOpen || s == sExpiredInput || s == sResultPurged
}

// settle applies the clock-driven part of a state once every case's handoff
// is prepared: one TTL later the sweeper expires live tasks and purges
// terminal rows.
func (tr *tableRoom) settle(s tState) {
	if tr.clockDriven(s) {
		tr.clock.Advance(tr.limits.TaskTTL)
		tr.sweep()
	}
}

type actResult struct {
	handoff *room.Handoff
	err     error
}

func (tr *tableRoom) act(a tAction, p room.Principal, c prepared) actResult {
	var h room.Handoff
	var err error
	switch a {
	case aAccept:
		h, err = tr.accept(p, c.handoffID)
	case aRequest:
		h, err = tr.requestInput(p, c.handoffID, room.InputRequestSpec{Key: "q2", Message: "which audience?"})
	case aAnswer:
		err = tr.answer(p, c.taskID, map[string]json.RawMessage{"q1": raw(`{"action":"accept","content":{"answer":"warm"}}`)})
		return actResult{err: err}
	case aComplete:
		h, err = tr.complete(p, c.handoffID, room.ResultInput{Text: "a second result"})
	case aApprove:
		h, err = tr.approve(p, c.handoffID, "fine")
	case aReject:
		h, err = tr.reject(p, c.handoffID, "no")
	case aCancel:
		err = tr.cancel(p, c.taskID)
		return actResult{err: err}
	}
	if err != nil {
		return actResult{err: err}
	}
	return actResult{handoff: &h}
}

func (tr *tableRoom) statuses(c prepared) (handoff, task string) {
	handoff = tr.dumpValue(`SELECT status FROM handoffs WHERE handoff_id = ?`, c.handoffID)
	task = tr.dumpValue(`SELECT status FROM tasks WHERE task_id = ?`, c.taskID)
	return
}

func (tr *tableRoom) dumpValue(query string, args ...any) string {
	rows, err := tr.store.Reader.Query(query, args...)
	if err != nil {
		tr.tb.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		return ""
	}
	var s string
	if err := rows.Scan(&s); err != nil {
		tr.tb.Fatal(err)
	}
	return s
}

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	byState := map[tState][]transition{}
	for _, tr := range transitions {
		byState[tr.state] = append(byState[tr.state], tr)
	}
	for _, s := range allStates {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, withLimits(func(l *room.Limits) { l.MaxActiveTasks, l.MaxTasksPerParticipant = 10000, 10000 }))
			tr := &tableRoom{env: e, who: map[tRole]room.Principal{
				rOwner:            e.join("owner", agentCaps...),
				rAssignee:         e.join("worker", agentCaps...),
				rOther:            e.join("other", agentCaps...),
				rApprover:         e.join("approver", room.CapRead, room.CapApprove),
				rAdmin:            e.join("admin", room.CapAdmin),
				rAssigneeApprover: e.join("worker-approver", agent(room.CapApprove)...),
			}}
			// Every case gets its own handoff, prepared up front and
			// concurrently (the actor group-commits the chains, which keeps
			// this fast); clock-driven states are then reached by one sweep.
			cases := map[string]prepared{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, row := range byState[s] {
				for _, role := range roles {
					wg.Add(1)
					go func() {
						defer wg.Done()
						c, err := tr.prepare(s, tr.assigneeFor(role))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						cases[string(row.action)+"/"+string(role)] = c
						mu.Unlock()
					}()
				}
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			tr.settle(s)
			for _, row := range byState[s] {
				outs := strings.Fields(row.out)
				for i, role := range roles {
					c := cases[string(row.action)+"/"+string(role)]
					want := outs[i]
					name := fmt.Sprintf("%s/by_%s/%s", row.action, role, outcomeName(want))
					t.Run(name, func(t *testing.T) { tr.check(t, row, role, want, c) })
				}
			}
		})
	}
}

func outcomeName(o string) string {
	if k, ok := errOutcomes[o]; ok {
		return "refused_" + string(k)
	}
	return map[string]string{"ok": "succeeds", "nop": "acknowledged_unchanged", "already": "already_completed"}[o]
}

func (tr *tableRoom) check(t *testing.T, row transition, role tRole, want string, c prepared) {
	hBefore, tBefore := tr.statuses(c)
	stateBefore := tr.stateDump()
	lastEvent := tr.lastEventID()
	eventCount := tr.scalar(`SELECT count(*) FROM events`)

	res := tr.act(row.action, tr.who[role], c)

	newEvents := tr.eventsAfter(lastEvent)
	stateAfter := tr.stateDump()
	unchanged := func() {
		t.Helper()
		if stateAfter != stateBefore {
			t.Errorf("rows changed:\nbefore:\n%s\nafter:\n%s", stateBefore, stateAfter)
		}
		if len(newEvents) != 0 || tr.scalar(`SELECT count(*) FROM events`) != eventCount {
			t.Errorf("events written: %v", types(newEvents))
		}
	}
	if kind, isErr := errOutcomes[want]; isErr {
		if res.err == nil || room.ErrorKind(res.err) != kind {
			t.Fatalf("got %v, want %s", res.err, kind)
		}
		unchanged()
		return
	}
	if res.err != nil {
		t.Fatalf("got error %v, want %s", res.err, want)
	}
	switch want {
	case "nop", "already":
		unchanged()
		if got := res.handoff; got != nil && got.AlreadyCompleted != (want == "already") {
			t.Errorf("already_completed = %v, want %v", got.AlreadyCompleted, want == "already")
		}
		if want == "already" && res.handoff.Result.Text != "the goals, drafted" {
			t.Errorf("the first result was replaced: %q", res.handoff.Result.Text)
		}
		return
	}
	hAfter, tAfter := tr.statuses(c)
	if hAfter != row.handoff || tAfter != row.task {
		t.Errorf("(%s, %s) -> (%s, %s), want (%s, %s)", hBefore, tBefore, hAfter, tAfter, row.handoff, row.task)
	}
	if got, wantEv := types(newEvents), strings.Fields(row.events); !slices.Equal(got, wantEv) {
		t.Errorf("events %v, want %v", got, wantEv)
	}
	for _, ev := range newEvents {
		if ev.HandoffID.String != c.handoffID || ev.TaskID.String != c.taskID {
			t.Errorf("event %s names handoff %q task %q, want %s %s", ev.Type, ev.HandoffID.String, ev.TaskID.String, c.handoffID, c.taskID)
		}
		if ev.ActorID.String != tr.who[role].ParticipantID {
			t.Errorf("event %s actor %q, want %q", ev.Type, ev.ActorID.String, tr.who[role].ParticipantID)
		}
	}
	if mine, others := split(stateAfter, c); others != func() string { _, o := split(stateBefore, c); return o }() {
		t.Errorf("rows of other handoffs changed")
	} else if mine == func() string { m, _ := split(stateBefore, c); return m }() {
		t.Errorf("a successful %s changed no row of its handoff", row.action)
	}
	if res.handoff != nil && res.handoff.Status != row.handoff {
		t.Errorf("returned handoff status %s, want %s", res.handoff.Status, row.handoff)
	}
	switch row.action {
	case aApprove, aReject: // a decision never rewrites the task
		if before, after := taskRows(stateBefore, c), taskRows(stateAfter, c); before != after {
			t.Errorf("the task changed on %s:\nbefore %s\nafter  %s", row.action, before, after)
		}
		if res.handoff.DecidedBy == nil || *res.handoff.DecidedBy != tr.who[role].ParticipantID {
			t.Errorf("decided_by = %s, want %s", strOf(res.handoff.DecidedBy), tr.who[role].ParticipantID)
		}
	case aAccept:
		if strOf(res.handoff.AssigneeID) != tr.who[role].ParticipantID {
			t.Errorf("assignee = %s, want the acceptor", strOf(res.handoff.AssigneeID))
		}
		if got := tr.dumpValue(`SELECT assignee_id FROM tasks WHERE task_id = ?`, c.taskID); got != tr.who[role].ParticipantID {
			t.Errorf("task assignee = %q, want the acceptor", got)
		}
	}
}

// split separates the dump lines of the case's own handoff, task and inputs
// from everyone else's (every such line names the handoff or the task id).
func split(dump string, c prepared) (mine, others string) {
	var m, o strings.Builder
	for _, line := range strings.SplitAfter(dump, "\n") {
		if strings.Contains(line, c.handoffID) || strings.Contains(line, c.taskID) {
			m.WriteString(line)
		} else {
			o.WriteString(line)
		}
	}
	return m.String(), o.String()
}

// taskRows is the case's task row and input rows in a dump.
func taskRows(dump string, c prepared) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(dump, "\n") {
		if strings.HasPrefix(line, "task_id="+c.taskID+"|") {
			b.WriteString(line)
		}
	}
	return b.String()
}

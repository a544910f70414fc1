package room_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// The sidecar is the authority: closing the room and opening it again on the
// same files between every step of a lifecycle changes no answer, and every
// next step works with the participants and ids from before the restart.
func TestRestart_BetweenEveryLifecycleStepAnswersAreUnchanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := newCast(e)
	var id, tid string
	steps := []struct {
		name string
		run  func()
	}{
		{"create", func() {
			res := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "survive restarts", Constraints: "c",
				Target: "Goals", IdempotencyKey: "restart-key", Artifacts: []room.Artifact{{URI: "u", Title: "t"}}})
			id, tid = res.Handoff.HandoffID, res.Task.TaskID
		}},
		{"accept", func() { okH(t)(e.accept(c.worker, id)) }},
		{"request_input", func() { okH(t)(e.requestInput(c.worker, id, q("a"), q("b"))) }},
		{"answer", func() {
			if err := e.answer(c.owner, tid, map[string]json.RawMessage{"a": answerOf("1"), "b": answerOf("2")}); err != nil {
				t.Fatal(err)
			}
		}},
		{"complete", func() {
			okH(t)(e.complete(c.worker, id, room.ResultInput{Text: "done", Artifacts: []room.Artifact{{URI: "v"}}}))
		}},
		{"approve", func() { okH(t)(e.approve(c.approver, id, "good")) }},
	}
	// snapshot is every answer a client could read about the handoff.
	snapshot := func() map[string]string {
		out := map[string]string{}
		for name, p := range map[string]room.Principal{"owner": c.owner, "worker": c.worker, "approver": c.approver, "operator": e.op()} {
			h, err := e.getHandoff(p, id)
			if err != nil {
				t.Fatalf("GetHandoff as %s: %v", name, err)
			}
			out["handoff/"+name] = mustJSON(t, h)
		}
		task, err := e.getTask(c.owner, tid)
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		out["task"] = mustJSON(t, task)
		out["events"] = mustJSON(t, handoffEventTypes(t, e, c.owner, id))
		out["rows"] = e.stateDump()
		return out
	}
	for _, s := range steps {
		t.Run("after_"+s.name, func(t *testing.T) {
			e.clock.Advance(time.Second)
			s.run()
			before := snapshot()
			oldEngine, workspace := e.eng, e.eng.WorkspaceID
			e.restart()
			if e.eng == oldEngine || e.eng.WorkspaceID != workspace {
				t.Fatal("the room was not reopened on the same sidecar")
			}
			after := snapshot()
			for k, v := range before {
				if after[k] != v {
					t.Fatalf("%s changed across a restart:\nbefore %s\nafter  %s", k, v, after[k])
				}
			}
		})
	}
	// Idempotency survives a restart too.
	again := mustCreate(t, e, c.owner, room.CreateHandoffInput{Summary: "survive restarts", IdempotencyKey: "restart-key"})
	if !again.Replayed || again.Handoff.HandoffID != id || again.Task == nil || again.Task.TaskID != tid {
		t.Fatalf("replay after restarts = %+v", again)
	}
}

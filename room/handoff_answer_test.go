package room_test

import (
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/room"
)

// The writer answers each lifecycle command with the handoff (and, for a
// create, the task) as the command left it, and publishes the task's
// snapshot. Those answers must be exactly what a read right after the
// commit returns, for every shape of handoff: whatever the writer builds
// from what it just wrote instead of reading it back must not drift.
func TestLifecycleAnswersMatchAReadAfterTheCommit(t *testing.T) {
	base := int64(1)
	cases := []struct {
		name   string
		in     room.CreateHandoffInput
		ask    bool // the assignee asks a question, answered, before completing
		result room.ResultInput
		reject bool
		note   string
	}{
		{name: "a bare handoff approved", in: room.CreateHandoffInput{Summary: "plain"}, result: room.ResultInput{Text: "done"}},
		{name: "every optional field, rejected with a note", in: room.CreateHandoffInput{
			Summary: "full", Constraints: "be brief", Target: "Goals", BaseVersion: &base, IdempotencyKey: "k-1",
			Artifacts: []room.Artifact{{URI: "commonroom://doc", Title: "the doc", MediaType: "text/markdown", Digest: "sha256:00"}},
		}, result: room.ResultInput{Text: "here", IsError: true, Artifacts: []room.Artifact{{URI: "https://example.org/x"}}},
			reject: true, note: "not quite"},
		{name: "addressed to the worker, with a question answered", in: room.CreateHandoffInput{Summary: "asked", Assignee: "worker"},
			ask: true, result: room.ResultInput{Text: "answered"}, note: "fine"},
		{name: "an artifact-only result", in: room.CreateHandoffInput{Summary: "files"},
			result: room.ResultInput{Artifacts: []room.Artifact{{URI: "commonroom://doc#Goals"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			owner := e.join("owner", agentCaps...)
			worker := e.join("worker", agentCaps...)
			approver := e.join("approver", room.CapRead, room.CapApprove)
			if c.in.Assignee == "worker" {
				c.in.Assignee = worker.ParticipantID
			}
			same := func(step string, p room.Principal, got room.Handoff, id string) {
				t.Helper()
				want, err := e.getHandoff(p, id)
				if err != nil {
					t.Fatalf("%s: reading back: %v", step, err)
				}
				want.Replayed, want.AlreadyCompleted = got.Replayed, got.AlreadyCompleted
				if g, w := jsonOf(t, got), jsonOf(t, want); g != w {
					t.Errorf("%s answered\n%s\nbut a read after the commit gives\n%s", step, g, w)
				}
			}
			published := func(step, taskID string) {
				t.Helper()
				notices := e.pub.taskNotices(taskID)
				if len(notices) == 0 {
					t.Fatalf("%s: no task notice published", step)
				}
				want, err := e.getTask(owner, taskID)
				if err != nil {
					t.Fatalf("%s: reading the task: %v", step, err)
				}
				if g, w := string(notices[len(notices)-1]), jsonOf(t, want); g != w {
					t.Errorf("%s published the task as\n%s\nbut tasks/get gives\n%s", step, g, w)
				}
			}

			res, err := e.create(owner, c.in)
			if err != nil {
				t.Fatal(err)
			}
			id, taskID := res.Handoff.HandoffID, res.Handoff.TaskID
			same("create", owner, res.Handoff, id)
			wantTask, err := e.getTask(owner, taskID)
			if err != nil {
				t.Fatal(err)
			}
			if res.Task == nil || jsonOf(t, *res.Task) != jsonOf(t, wantTask) {
				t.Errorf("create answered the task %+v, tasks/get gives %+v", res.Task, wantTask)
			}
			published("create", taskID)

			h, err := e.accept(worker, id)
			if err != nil {
				t.Fatal(err)
			}
			same("accept", worker, h, id)
			published("accept", taskID)
			if c.ask {
				if _, err := e.requestInput(worker, id, room.InputRequestSpec{Key: "q1", Message: "which?"}); err != nil {
					t.Fatal(err)
				}
				if err := e.answer(owner, taskID, map[string]json.RawMessage{"q1": json.RawMessage(`{"answer":"this"}`)}); err != nil {
					t.Fatal(err)
				}
			}
			if h, err = e.complete(worker, id, c.result); err != nil {
				t.Fatal(err)
			}
			same("complete", worker, h, id)
			published("complete", taskID)
			if c.reject {
				h, err = e.reject(approver, id, c.note)
			} else {
				h, err = e.approve(approver, id, c.note)
			}
			if err != nil {
				t.Fatal(err)
			}
			same("decide", approver, h, id)
		})
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handoffRoom serves a room with an owner agent and a worker agent and one
// handoff created over HTTP; it returns what the commands need.
type handoffRoom struct {
	srv               *server
	dir, file         string
	owner, worker     joinGrant
	handoffID, taskID string
}

func newHandoffRoom(t *testing.T) *handoffRoom {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "notes.md")
	if err := os.WriteFile(file, []byte("# Notes\n\n## Plan\n\nstep one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServe(t, dir, "serve", file, "--json")
	owner := join(t, dir, srv.Banner.Invite, "owner-agent")
	var inv inviteGrant
	decodeJSON(t, mustCE(t, dir, nil, "invite", "--workspace", file, "--json"), &inv)
	worker := join(t, dir, inv.URI, "worker-agent")
	code, body := httpDo(t, "POST", srv.Banner.IngressURL+"/workspace/handoff", owner.SessionToken,
		map[string]any{"summary": "write the plan", "constraints": "two paragraphs"})
	if code != http.StatusOK {
		t.Fatalf("create handoff: %d %s", code, body)
	}
	var created struct {
		Handoff struct {
			HandoffID string `json:"handoff_id"`
		} `json:"handoff"`
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("create handoff: %s", body)
	}
	return &handoffRoom{srv: srv, dir: dir, file: file, owner: owner, worker: worker,
		handoffID: created.Handoff.HandoffID, taskID: created.Task.TaskID}
}

func TestHandoffCommands_ReadTheRoomAsTheOperator(t *testing.T) {
	h := newHandoffRoom(t)

	r := mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file, "--json")
	var list []map[string]any
	decodeJSON(t, r, &list)
	if len(list) != 1 || list[0]["handoff_id"] != h.handoffID || list[0]["status"] != "open" {
		t.Fatalf("ce handoffs --json = %s", r.stdout)
	}
	if r := mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file); !strings.Contains(r.stdout, h.handoffID) || !strings.Contains(r.stdout, "write the plan") {
		t.Fatalf("ce handoffs text = %s", r.stdout)
	}
	if r := mustCE(t, h.dir, nil, "handoffs", "--workspace", h.file, "--status", "approved", "--json"); strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("status filter: %s", r.stdout)
	}
	if r := ce(t, h.dir, nil, "handoffs", "--workspace", h.file, "--status", "bogus"); r.code != exitUsage {
		t.Fatalf("bad status: exit %d, want %d: %s", r.code, exitUsage, r.output())
	}

	var one map[string]any
	decodeJSON(t, mustCE(t, h.dir, nil, "handoff", h.handoffID, "--workspace", h.file, "--json"), &one)
	if one["handoff_id"] != h.handoffID || one["task_id"] != h.taskID || one["constraints"] != "two paragraphs" {
		t.Fatalf("ce handoff --json = %v", one)
	}
	if r := ce(t, h.dir, nil, "handoff", "handoff_00000000000000000000000000000000", "--workspace", h.file); r.code != exitNotFound || !strings.Contains(r.stderr, "handoff_not_found") {
		t.Fatalf("unknown handoff: exit %d %s", r.code, r.output())
	}

	var evs struct {
		HandoffID string `json:"handoff_id"`
		Events    []struct {
			Type string `json:"event_type"`
		} `json:"events"`
	}
	decodeJSON(t, mustCE(t, h.dir, nil, "handoff-events", h.handoffID, "--workspace", h.file, "--json"), &evs)
	if len(evs.Events) != 2 || evs.Events[0].Type != "handoff.created" || evs.Events[1].Type != "task.created" {
		t.Fatalf("ce handoff-events = %+v", evs)
	}
}

func TestTaskCommand_NeedsAPartyParticipant(t *testing.T) {
	h := newHandoffRoom(t)
	if r := ce(t, h.dir, nil, "task", h.taskID, "--workspace", h.file); r.code != exitUsage || !strings.Contains(r.stderr, "--participant") {
		t.Fatalf("without --participant: exit %d %s", r.code, r.output())
	}
	var task map[string]any
	decodeJSON(t, mustCE(t, h.dir, nil, "task", h.taskID, "--participant", h.owner.ParticipantID, "--workspace", h.file, "--json"), &task)
	if task["taskId"] != h.taskID || task["status"] != "working" || task["pollIntervalMs"] != float64(5000) {
		t.Fatalf("ce task --json = %v", task)
	}
	// The same object GET /workspace/task returns.
	code, body := httpDo(t, "GET", h.srv.Banner.IngressURL+"/workspace/task?task_id="+h.taskID, h.owner.SessionToken, nil)
	var viaHTTP map[string]any
	if code != http.StatusOK || json.Unmarshal(body, &viaHTTP) != nil {
		t.Fatalf("GET /workspace/task: %d %s", code, body)
	}
	a, _ := json.Marshal(task)
	b, _ := json.Marshal(viaHTTP)
	if string(a) != string(b) {
		t.Fatalf("ce task and GET /workspace/task differ:\n%s\n%s", a, b)
	}
	// A participant who is not a party: the same answer as an unknown task.
	foreign := ce(t, h.dir, nil, "task", h.taskID, "--participant", h.worker.ParticipantID, "--workspace", h.file)
	unknown := ce(t, h.dir, nil, "task", "task_00000000000000000000000000000000", "--participant", h.worker.ParticipantID, "--workspace", h.file)
	if foreign.code != exitNotFound || unknown.code != exitNotFound {
		t.Fatalf("foreign/unknown task: exit %d / %d", foreign.code, unknown.code)
	}
	if strings.ReplaceAll(foreign.stderr, h.taskID, "X") != strings.ReplaceAll(unknown.stderr, "task_00000000000000000000000000000000", "X") {
		t.Fatalf("a foreign task is distinguishable from an unknown one:\n%s\n%s", foreign.stderr, unknown.stderr)
	}
	if r := ce(t, h.dir, nil, "task", h.taskID, "--participant", "participant_nobody", "--workspace", h.file); r.code != exitUsage {
		t.Fatalf("unknown participant: exit %d %s", r.code, r.output())
	}
}

func taskStatus(t *testing.T, h *handoffRoom) (handoff, task string) {
	t.Helper()
	var one struct {
		Status     string `json:"status"`
		TaskStatus string `json:"task_status"`
	}
	decodeJSON(t, mustCE(t, h.dir, nil, "handoff", h.handoffID, "--workspace", h.file, "--json"), &one)
	return one.Status, one.TaskStatus
}

func TestTaskCancel_ThroughTheRunningRoom(t *testing.T) {
	h := newHandoffRoom(t)
	if r := ce(t, h.dir, nil, "task-cancel", h.taskID, "--workspace", h.file); r.code != exitUsage {
		t.Fatalf("without --participant: exit %d %s", r.code, r.output())
	}
	// The worker is no party to the task: refused, nothing changes.
	if r := ce(t, h.dir, nil, "task-cancel", h.taskID, "--participant", h.worker.ParticipantID, "--workspace", h.file); r.code != exitNotFound {
		t.Fatalf("cancel by a non-party: exit %d %s", r.code, r.output())
	}
	if hs, ts := taskStatus(t, h); hs != "open" || ts != "working" {
		t.Fatalf("after a refused cancel: %s/%s", hs, ts)
	}
	mustCE(t, h.dir, nil, "task-cancel", h.taskID, "--participant", h.owner.ParticipantID, "--workspace", h.file, "--json")
	if hs, ts := taskStatus(t, h); hs != "cancelled" || ts != "cancelled" {
		t.Fatalf("after cancel: %s/%s, want cancelled/cancelled", hs, ts)
	}
	// A terminal task: acknowledged, unchanged.
	mustCE(t, h.dir, nil, "task-cancel", h.taskID, "--participant", h.owner.ParticipantID, "--workspace", h.file)
	if hs, ts := taskStatus(t, h); hs != "cancelled" || ts != "cancelled" {
		t.Fatalf("after a second cancel: %s/%s", hs, ts)
	}
}

func TestTaskCancel_InProcessWhenNoRoomIsServing(t *testing.T) {
	h := newHandoffRoom(t)
	if code := h.srv.stop(os.Interrupt); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	// In-process too the command acts as the participant, not the host:
	// a non-party is refused and an unknown participant is bad input,
	// and neither changes anything.
	if r := ce(t, h.dir, nil, "task-cancel", h.taskID, "--participant", h.worker.ParticipantID, "--workspace", h.file); r.code != exitNotFound {
		t.Fatalf("in-process cancel by a non-party: exit %d %s", r.code, r.output())
	}
	if r := ce(t, h.dir, nil, "task-cancel", h.taskID, "--participant", "participant_nobody", "--workspace", h.file); r.code != exitUsage {
		t.Fatalf("in-process cancel by an unknown participant: exit %d %s", r.code, r.output())
	}
	if hs, ts := taskStatus(t, h); hs != "open" || ts != "working" {
		t.Fatalf("after refused in-process cancels: %s/%s", hs, ts)
	}
	mustCE(t, h.dir, nil, "task-cancel", h.taskID, "--participant", h.owner.ParticipantID, "--workspace", h.file)
	if hs, ts := taskStatus(t, h); hs != "cancelled" || ts != "cancelled" {
		t.Fatalf("after an in-process cancel: %s/%s", hs, ts)
	}
	// The lock was released: the room serves again.
	srv := startServe(t, h.dir, "serve", h.file, "--json")
	srv.stop(os.Interrupt)
}

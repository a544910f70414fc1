package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// TestExpiredTaskErrorOnTheWire: the room stores only why the task failed,
// so every door that sends the task must render the error the same way, at
// the same place in the object as before (after the result, before _meta).
func TestExpiredTaskErrorOnTheWire(t *testing.T) {
	h := newHarness(t, "")
	owner := h.join("owner", "read", "propose")
	taskID, _ := owner.mcp.createTask(t, map[string]any{"summary": "never finished"})
	h.Clock.Advance(24*time.Hour + time.Millisecond)
	h.sweep()
	admin := h.join("admin", "admin")
	const want = `"pollIntervalMs":5000,"error":{"code":-32603,"message":"task expired"},"_meta":{`

	r := h.doT(t, "GET", h.ingressURL("/workspace/task?task_id="+taskID), admin.SessionToken, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) {
		t.Errorf("GET /workspace/task = %d %s\nwant it to contain %s", r.Status, r.Body, want)
	}
	got := admin.ext.taskCall(t, "tasks/get", taskID, nil)
	if got.Status != http.StatusOK || !strings.Contains(string(got.Raw), want) {
		t.Errorf("tasks/get = %d %s\nwant it to contain %s", got.Status, got.Raw, want)
	}
}

// A replayed POST /workspace/handoff whose task has since expired answers
// with the task in the form GET /workspace/task shows, error object
// included: the task form is applied to every operation's result, not per
// handler.
func TestReplayOfAnExpiredTaskShowsItsError(t *testing.T) {
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.TaskTTL = time.Hour }})
	owner := h.join("owner", "read", "propose")
	args := map[string]any{"summary": "never finished", "idempotency_key": "k-1"}
	taskID, _ := owner.mcp.createTask(t, args)
	h.Clock.Advance(time.Hour + time.Millisecond)
	h.sweep()
	const want = `"error":{"code":-32603,"message":"task expired"}`

	// On MCP a replay answers with the task handle (CreateTaskResult), which
	// has always carried the status and message, not the error object.
	got := owner.ext.call(t, "tools/call", map[string]any{"name": "handoff_create", "arguments": args})
	if got.Status != http.StatusOK || !strings.Contains(string(got.Raw), `"status":"failed","statusMessage":"task expired","taskId":"`+taskID+`"`) {
		t.Errorf("MCP replay = %d %s\nwant the task %s failed", got.Status, got.Raw, taskID)
	}
	r := h.doT(t, "POST", h.ingressURL("/workspace/handoff"), owner.SessionToken, args)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) || !strings.Contains(string(r.Body), `"replayed":true`) {
		t.Errorf("POST /workspace/handoff replay = %d %s\nwant it replayed with %s", r.Status, r.Body, want)
	}
}

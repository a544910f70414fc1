package mcp_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
	"github.com/commonroom/ce/room"
)

// TestExpiredTaskErrorOnTheWire: the room stores only why the task failed,
// so every door that sends the task must render the error the same way, at
// the same place in the object as before (after the result, before _meta).
func TestExpiredTaskErrorOnTheWire(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner", "read", "propose")
	taskID, _ := owner.MCP.CreateTask(t, map[string]any{"summary": "never finished"})
	h.Clock.Advance(24*time.Hour + time.Millisecond)
	h.Sweep()
	admin := h.Join("admin", "admin")
	const want = `"pollIntervalMs":5000,"error":{"code":-32603,"message":"task expired"},"_meta":{`

	r := h.Do(t, "GET", h.IngressURL("/workspace/task?task_id="+taskID), admin.SessionToken, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) {
		t.Errorf("GET /workspace/task = %d %s\nwant it to contain %s", r.Status, r.Body, want)
	}
	got := admin.Ext.TaskCall(t, "tasks/get", taskID, nil)
	if got.Status != http.StatusOK || !strings.Contains(string(got.Raw), want) {
		t.Errorf("tasks/get = %d %s\nwant it to contain %s", got.Status, got.Raw, want)
	}
}

// A replayed POST /workspace/handoff whose task has since expired answers
// with the task in the form GET /workspace/task shows, error object
// included: the task form is applied to every operation's result, not per
// handler.
func TestReplayOfAnExpiredTaskShowsItsError(t *testing.T) {
	h := apitest.New(t, roomtest.Options{Limits: func(l *room.Limits) { l.TaskTTL = time.Hour }}, nil)
	owner := h.Join("owner", "read", "propose")
	args := map[string]any{"summary": "never finished", "idempotency_key": "k-1"}
	taskID, _ := owner.MCP.CreateTask(t, args)
	h.Clock.Advance(time.Hour + time.Millisecond)
	h.Sweep()
	const want = `"error":{"code":-32603,"message":"task expired"}`

	// On MCP a replay answers with the task handle (CreateTaskResult), which
	// has always carried the status and message, not the error object.
	got := owner.Ext.Call(t, "tools/call", map[string]any{"name": "handoff_create", "arguments": args})
	if got.Status != http.StatusOK || !strings.Contains(string(got.Raw), `"status":"failed","statusMessage":"task expired","taskId":"`+taskID+`"`) {
		t.Errorf("MCP replay = %d %s\nwant the task %s failed", got.Status, got.Raw, taskID)
	}
	r := h.Do(t, "POST", h.IngressURL("/workspace/handoff"), owner.SessionToken, args)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) || !strings.Contains(string(r.Body), `"replayed":true`) {
		t.Errorf("POST /workspace/handoff replay = %d %s\nwant it replayed with %s", r.Status, r.Body, want)
	}
}

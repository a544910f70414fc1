package mcp_test

import (
	"testing"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// TestTasksGet_APollAfterAChangeSeesTheChange: tasks/get answers repeated
// polls of an unchanged task from bytes memoized on the cached version; once
// the task changes (accepted, asked a question, cancelled) the next poll
// shows the change, never the bytes memoized on the version before.
func TestTasksGet_APollAfterAChangeSeesTheChange(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	owner := h.Join("owner-agent", "read", "propose")
	worker := h.Join("worker-agent", "read", "checkout")
	taskID, hid := owner.MCP.CreateTask(t, map[string]any{"summary": "poll me"})
	poll := func(t *testing.T, want string, wantKey bool) {
		t.Helper()
		for range 3 { // the first poll fills the memo, the next ones send it
			got := owner.Ext.TaskGet(t, taskID)
			if got["status"] != want {
				t.Fatalf("status %v, want %s: %v", got["status"], want, got)
			}
			if _, has := got["inputRequests"]; has != wantKey {
				t.Fatalf("inputRequests present %v, want %v: %v", has, wantKey, got)
			}
		}
	}
	t.Run("working before anything happens", func(t *testing.T) { poll(t, "working", false) })
	worker.MCP.ToolOK(t, "handoff_accept", map[string]any{"handoff_id": hid})
	worker.MCP.ToolOK(t, "handoff_request_input", map[string]any{"handoff_id": hid, "requests": []any{
		map[string]any{"key": "tone", "message": "Formal or casual?"}}})
	t.Run("input_required after the question", func(t *testing.T) { poll(t, "input_required", true) })
	roomtest.WantAck(t, owner.Ext.TaskCall(t, "tasks/cancel", taskID, nil))
	t.Run("cancelled after tasks/cancel", func(t *testing.T) { poll(t, "cancelled", false) })
}

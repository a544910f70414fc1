package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestExpiredTaskErrorOnTheWire: the room stores only why the task failed,
// so every door that sends the task must render the error the same way, at
// the same place in the object as before (after the result, before _meta).
func TestExpiredTaskErrorOnTheWire(t *testing.T) {
	h := newHarness(t, "")
	owner := mtJoin(h, "owner", "read", "propose")
	taskID, _ := owner.mcp.createTask(t, map[string]any{"summary": "never finished"})
	h.Clock.Advance(24*time.Hour + time.Millisecond)
	h.sweep()
	admin := mtJoin(h, "admin", "admin")
	const want = `"pollIntervalMs":5000,"error":{"code":-32603,"message":"task expired"},"_meta":{`

	r := h.doT(t, "GET", h.ingressURL("/workspace/task?task_id="+taskID), admin.grant.SessionToken, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), want) {
		t.Errorf("GET /workspace/task = %d %s\nwant it to contain %s", r.Status, r.Body, want)
	}
	got := admin.ext.taskCall(t, "tasks/get", taskID, nil)
	if got.Status != http.StatusOK || !strings.Contains(string(got.Raw), want) {
		t.Errorf("tasks/get = %d %s\nwant it to contain %s", got.Status, got.Raw, want)
	}
}

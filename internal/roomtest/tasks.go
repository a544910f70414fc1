package roomtest

import (
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// The Tasks extension as a test drives it: a handoff created as a task,
// tasks/* calls, the empty acknowledgement. Here, not in each door's tests,
// because the MCP door's tests and the cross-door tests (a task read over
// both doors) both need them.

// TaskCall sends a tasks/* method with taskId (Mcp-Name = taskId) and extra
// params.
func (c *MCP) TaskCall(t testing.TB, method, taskID string, extra map[string]any) MCPResponse {
	t.Helper()
	params := map[string]any{"taskId": taskID}
	for k, v := range extra {
		params[k] = v
	}
	return c.Call(t, method, params)
}

// TaskGet is tasks/get that must succeed; it returns the result.
func (c *MCP) TaskGet(t testing.TB, taskID string) map[string]any {
	t.Helper()
	res := WantResult(t, c.TaskCall(t, "tasks/get", taskID, nil))
	if res["resultType"] != "complete" {
		t.Errorf("tasks/get resultType = %v, want complete", res["resultType"])
	}
	if res["taskId"] != taskID {
		t.Errorf("tasks/get taskId = %v, want %s", res["taskId"], taskID)
	}
	return res
}

// CreateTask is handoff_create with the extension declared: it returns the
// task id and the handoff id from the CreateTaskResult.
func (c *MCP) CreateTask(t testing.TB, args map[string]any) (taskID, handoffID string) {
	t.Helper()
	res := c.WithTasks(true).Tool(t, "handoff_create", args)
	if res["resultType"] != "task" {
		t.Fatalf("handoff_create with the extension: resultType %v, want task: %v", res["resultType"], res)
	}
	taskID, _ = res["taskId"].(string)
	meta, _ := res["_meta"].(map[string]any)
	handoffID, _ = meta[mcptest.HandoffMeta].(string)
	if taskID == "" || handoffID == "" {
		t.Fatalf("CreateTaskResult lacks taskId or _meta[%q]: %v", mcptest.HandoffMeta, res)
	}
	return taskID, handoffID
}

// WantAck checks an empty acknowledgement (tasks/update, tasks/cancel):
// resultType complete and none of the task's fields.
func WantAck(t testing.TB, r MCPResponse) {
	t.Helper()
	res := WantResult(t, r)
	if res["resultType"] != "complete" {
		t.Errorf("ack resultType = %v", res["resultType"])
	}
	for _, k := range []string{"taskId", "status", "result", "error", "inputRequests"} {
		if _, has := res[k]; has {
			t.Errorf("ack carries %q: %v", k, res)
		}
	}
}

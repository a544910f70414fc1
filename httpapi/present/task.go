package present

import (
	"encoding/json"

	"github.com/commonroom/ce/room"
)

// Task is a task as every door sends it (D14: one representation, the
// MCP Tasks form, also for GET /workspace/task and ce task --json): the
// room's record with its failure rendered as the error object the Tasks
// extension puts on a failed task. The room stores why a task failed; the
// JSON-RPC code is MCP's word for it (D34: -32603, "task expired").
func Task(t room.DetailedTask) room.DetailedTask {
	if t.Status == room.TaskFailed && t.Error == nil {
		t.Error = taskError(t)
	}
	return t
}

// PresentResult puts an operation's answer in the form every door sends:
// a task, or the task inside a handoff_create answer (a replay may find it
// failed), in Task's form. Both doors call it on every operation's
// result, so no row can forget it.
func PresentResult(v any) any {
	switch r := v.(type) {
	case room.DetailedTask:
		return Task(r)
	case room.CreateHandoffResult:
		if r.Task != nil {
			t := Task(*r.Task)
			r.Task = &t
		}
		return r
	}
	return v
}

// expiredTaskError is D34's error object, encoded once.
var expiredTaskError = json.RawMessage(`{"code":-32603,"message":"task expired"}`)

// taskError renders a failed task's error object. A failure the room may
// add later gets the same internal-error code with its status message.
func taskError(t room.DetailedTask) json.RawMessage {
	if t.Failure == room.TaskFailureExpired {
		return expiredTaskError
	}
	msg := t.StatusMessage
	if msg == "" {
		msg = t.Failure
	}
	b, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{taskErrorCode, msg})
	return b
}

// taskErrorCode is JSON-RPC's internal error (-32603), the code D34 gives
// every failed task's error object.
const taskErrorCode = -32603

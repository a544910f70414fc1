package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
)

// Task statuses are exactly the MCP Tasks statuses; there is no "accepted".
const (
	TaskWorking       = "working"
	TaskInputRequired = "input_required"
	TaskCompleted     = "completed"
	TaskFailed        = "failed"
	TaskCancelled     = "cancelled"
)

// DetailedTask is the one representation of a task: what tasks/get returns
// (without resultType), what notifications/tasks carries, and what
// GET /workspace/task answers (D14).
type DetailedTask struct {
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	// Error is the protocol's error object of a failed task. The room never
	// fills it: it records why the task failed (Failure), and the front
	// door renders that in its protocol's words before sending the task.
	Error json.RawMessage `json:"error,omitempty"`
	Meta  map[string]any  `json:"_meta"`

	OwnerID    string `json:"-"`
	AssigneeID string `json:"-"`
	// Failure says why a failed task failed (TaskFailureExpired); "" for a
	// task that has not failed.
	Failure string `json:"-"`
}

// TaskFailureExpired is the Failure of a task its TTL ran out on before it
// finished (D34); it is also the reason its event and its handoff's
// cancellation carry.
const TaskFailureExpired = "task_expired"

// failureOf reads why a failed task failed from its error_json column,
// which holds {"reason": …}. Sidecars written before the reason was stored
// hold the JSON-RPC error object instead ({"code":-32603,"message":"task
// expired"}) and no reason; only the TTL failed tasks then, so a failed row
// without a reason expired.
func failureOf(stored string) string {
	var f struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal([]byte(stored), &f) != nil || f.Reason == "" {
		return TaskFailureExpired
	}
	return f.Reason
}

// HandoffMetaKey is the _meta key that lets a client holding only a task
// handle find its handoff.
const HandoffMetaKey = "commonroom/handoff_id"

// taskByID reads a task with its outstanding input requests. It does not
// check visibility; callers do (unknown and invisible look the same). It is
// one statement, so it is consistent on its own: tasks/get runs it outside
// any transaction (the actor's task cache reads it on the pool).
func (e *Engine) taskByID(ctx context.Context, q Querier, id string) (DetailedTask, error) {
	var t DetailedTask
	var handoffID string
	var msg, assignee, result, errJSON, inputs sql.NullString
	var created, updated int64
	err := q.QueryRowContext(ctx, taskByIDQuery, id).
		Scan(&t.TaskID, &t.Status, &msg, &created, &updated, &t.TTLMs, &t.PollIntervalMs, &result, &errJSON,
			&t.OwnerID, &assignee, &handoffID, &inputs)
	if errors.Is(err, sql.ErrNoRows) {
		return t, Errorf(KindTaskNotFound, "unknown task").With("task_id", id)
	}
	if err != nil {
		return t, Internal(err)
	}
	t.StatusMessage, t.AssigneeID = msg.String, assignee.String
	t.CreatedAt, t.LastUpdatedAt = WireTime(created), WireTime(updated)
	if result.Valid {
		t.Result = json.RawMessage(result.String)
	}
	if errJSON.Valid {
		t.Failure = failureOf(errJSON.String)
	}
	t.Meta = map[string]any{HandoffMetaKey: handoffID}
	if t.Status == TaskInputRequired {
		t.InputRequests = map[string]json.RawMessage{}
		if inputs.Valid {
			if err := json.Unmarshal([]byte(inputs.String), &t.InputRequests); err != nil {
				return t, Internal(err)
			}
		}
	}
	return t, nil
}

// taskByIDQuery reads a task row and, while it is input_required, its
// outstanding input requests as one JSON object keyed by request key.
const taskByIDQuery = `SELECT task_id, status, status_message, created_at, last_updated_at, ttl_ms,
		poll_interval_ms, result_json, error_json, owner_id, assignee_id, correlation_id,
		CASE WHEN status = 'input_required' THEN (SELECT json_group_object(request_key, json(request_json))
			FROM task_inputs WHERE task_inputs.task_id = tasks.task_id AND closed_at IS NULL) END
	FROM tasks WHERE task_id = ?`

// sweepTasks is completed by the handoff lifecycle; see handoff_sweep.go.

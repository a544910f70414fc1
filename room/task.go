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

// GetTask is tasks/get, GET /workspace/task and ce task: the detailed task,
// the same object notifications/tasks carries. Only the owner, the assignee
// and admins may read it; everyone else gets exactly the answer an unknown id
// gets, because a task id is not a bearer token.
func (e *Engine) GetTask(ctx context.Context, q Querier, p Principal, in TaskIDInput) (DetailedTask, error) {
	taskID := in.TaskID
	t, err := e.TaskRecord(ctx, q, taskID)
	if err == nil {
		err = TaskVisibleTo(p, t)
	}
	if err != nil {
		return DetailedTask{}, err
	}
	return t, nil
}

// TaskRecord reads a task as tasks/get shows it, without asking who reads:
// for the actor's task cache, which applies TaskVisibleTo per reader. It is
// one statement, so it needs no read transaction.
func (e *Engine) TaskRecord(ctx context.Context, q Querier, taskID string) (DetailedTask, error) {
	t, err := e.taskByID(ctx, q, taskID)
	if ErrorKind(err) == KindTaskNotFound {
		return DetailedTask{}, taskNotFound(taskID)
	}
	return t, err
}

// TaskVisibleTo is tasks/get's visibility rule for a task read by
// TaskRecord: an invisible task is reported exactly like an unknown one.
func TaskVisibleTo(p Principal, t DetailedTask) error {
	if !taskVisible(p, t.OwnerID, t.AssigneeID) {
		return taskNotFound(t.TaskID)
	}
	return nil
}

// CancelTask is tasks/cancel, POST /workspace/task/cancel and ce task-cancel:
// the owner, or an admin, stops the work. A terminal task acknowledges and
// stays as it was; a live one is cancelled, its open questions closed, and its
// open or accepted handoff cancelled, all before the acknowledgement.
// Cancelling records a decision; it cannot undo what the assignee already did.
func (e *Engine) CancelTask(tx *Tx, p Principal, in TaskIDInput) (Empty, error) {
	_, err := e.cancelTask(tx, p, in.TaskID)
	return Empty{}, err
}

// cancelTask is tasks/cancel's rule, shared with its tool twin
// CancelHandoff: it reports whether it cancelled the task (false: the task
// was already terminal and nothing changed).
func (e *Engine) cancelTask(tx *Tx, p Principal, taskID string) (bool, error) {
	t, err := e.taskForWrite(tx, p, taskID)
	if err != nil {
		return false, err
	}
	if !p.IsAdmin() && p.ParticipantID != t.owner {
		return false, Errorf(KindPermissionDenied, "only the task's owner can cancel it").With("task_id", t.id)
	}
	if t.status != TaskWorking && t.status != TaskInputRequired {
		return false, nil
	}
	return cancelLiveTask(tx, p.ParticipantID, t.id, t.handoffID)
}

// cancelLiveTask is the one way a request cancels work, shared by CancelTask
// and CancelParticipantHandoffs so both write the same rows, events and
// notifications: the task becomes cancelled, its open questions close, its
// open or accepted handoff is cancelled by actor. It reports false when the
// task had already reached a terminal state (nothing changed).
func cancelLiveTask(tx *Tx, actor, taskID, handoffID string) (bool, error) {
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE tasks SET status = 'cancelled', status_message = 'cancelled on request', last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, now, taskID)
	if err != nil {
		return false, Internal(err)
	}
	if n != 1 {
		return false, nil // it reached a terminal state first: the ack is still true
	}
	if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'cancelled' WHERE task_id = ? AND closed_at IS NULL`,
		now, taskID); err != nil {
		return false, Internal(err)
	}
	if err := tx.handoffEvent("task.cancelled", actor, handoffID, taskID, map[string]any{
		"status": TaskCancelled, "reason": "requested",
	}); err != nil {
		return false, err
	}
	n, err = tx.execN(`UPDATE handoffs SET status = 'cancelled', cancelled_at = ?, cancelled_by = ?, cancel_reason = 'requested', updated_at = ?
		WHERE handoff_id = ? AND status IN ('open','accepted')`, now, nullStr(actor), now, handoffID)
	if err != nil {
		return false, Internal(err)
	}
	if n == 1 {
		if err := tx.handoffEvent("handoff.cancelled", actor, handoffID, taskID, map[string]any{
			"status": HandoffCancelled, "reason": "requested",
		}); err != nil {
			return false, err
		}
	}
	tx.taskChanged(taskID)
	return true, nil
}

// taskRow is the part of a task the write rules look at.
type taskRow struct {
	id, owner, handoffID, status string
	assignee                     sql.NullString
}

func loadTask(tx *Tx, id string) (*taskRow, error) {
	var t taskRow
	err := tx.q.QueryRowContext(tx.ctx, `SELECT task_id, owner_id, assignee_id, correlation_id, status FROM tasks WHERE task_id = ?`, id).
		Scan(&t.id, &t.owner, &t.assignee, &t.handoffID, &t.status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, taskNotFound(id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	return &t, nil
}

// taskForWrite loads a task for tasks/update or tasks/cancel: expiry first
// (as for handoffs), then the party rule, with unknown and invisible alike.
func (e *Engine) taskForWrite(tx *Tx, p Principal, id string) (*taskRow, error) {
	if err := e.expireTaskIfDue(tx, id); err != nil {
		return nil, err
	}
	t, err := loadTask(tx, id)
	if err != nil {
		return nil, err
	}
	if !taskVisible(p, t.owner, t.assignee.String) {
		return nil, taskNotFound(id)
	}
	return t, nil
}

// taskVisible is D2's one predicate for tasks: owner, assignee, or admin.
func taskVisible(p Principal, owner, assignee string) bool {
	if p.IsAdmin() {
		return true
	}
	return p.ParticipantID != "" && (p.ParticipantID == owner || p.ParticipantID == assignee)
}

// taskNotFound is the one answer for unknown and invisible tasks. It must not
// depend on anything but the id asked for, so it cannot be used to probe.
func taskNotFound(id string) *Error {
	return Errorf(KindTaskNotFound, "unknown task").With("task_id", id)
}

// sweepTasks is completed by the handoff lifecycle; see handoff_sweep.go.

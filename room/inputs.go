package room

import "encoding/json"

// The inputs and small results of the engine operations the front doors
// call. Every operation takes (tx, principal, XInput) for a write or
// (ctx, querier, principal, XInput) for a read, so the doors decode one
// tagged struct and call the method without a shadow type of their own. The
// json tags are the wire names on every door; the jsonschema tags are the
// hand-written descriptions an MCP tool's input schema carries; the schema
// tags say what the schema requires and bounds (see httpapi/ops).

// Empty is the input of an operation that takes no arguments, and the
// result of one that answers only that it succeeded ({} on the wire).
type Empty struct{}

// Ack is the answer {"status":"ok"} of an operation with nothing else to say.
type Ack struct {
	Status string `json:"status"`
}

// ack turns an error-only operation into its Ack answer.
func ack(err error) (Ack, error) {
	if err != nil {
		return Ack{}, err
	}
	return Ack{Status: "ok"}, nil
}

// ProposalInput names one proposal (workspace_proposal, GET /workspace/proposal).
type ProposalInput struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal to read" schema:"required"`
}

// HandoffIDInput names one handoff: handoff_get, handoff_accept and
// handoff_cancel.
type HandoffIDInput struct {
	HandoffID string `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
}

// HandoffEventsInput selects a handoff's events (handoff_events).
type HandoffEventsInput struct {
	HandoffID    string `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
	SinceEventID *int64 `json:"since_event_id,omitempty" jsonschema:"only events after this id" schema:"minimum=0"`
	Limit        int    `json:"limit,omitempty" jsonschema:"at most this many (default 50, at most 200)" schema:"minimum=0"`
}

// RequestInputInput is the assignee's questions to the owner (handoff_request_input).
type RequestInputInput struct {
	HandoffID string             `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
	Requests  []InputRequestSpec `json:"requests" jsonschema:"questions, each with a key unique for the task's life" schema:"required"`
}

// CompleteInput is the assignee's delivery (handoff_complete).
type CompleteInput struct {
	HandoffID     string      `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
	Result        ResultInput `json:"result" schema:"required"`
	StatusMessage string      `json:"status_message,omitempty" jsonschema:"a short status for the task"`
}

// DecideInput is the owner's decision on a delivered result
// (handoff_approve, handoff_reject).
type DecideInput struct {
	HandoffID string `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
	Note      string `json:"note,omitempty" jsonschema:"why (optional)"`
}

// TaskIDInput names one task (GET /workspace/task, POST /workspace/task/cancel).
type TaskIDInput struct {
	TaskID string `json:"task_id"`
}

// UpdateTaskInput answers a task's input requests (POST /workspace/task/update).
type UpdateTaskInput struct {
	TaskID         string                     `json:"task_id"`
	InputResponses map[string]json.RawMessage `json:"input_responses"`
}

// CancelHandoffsInput names the participant whose handoffs an admin cancels.
type CancelHandoffsInput struct {
	ParticipantID string `json:"participant_id"`
}

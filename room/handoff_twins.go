package room

import (
	"encoding/json"
	"slices"
)

// The tool twins of tasks/cancel and tasks/update (issue 24, revising D4).
// Most MCP hosts show their model tools only, and few speak the Tasks
// extension, so a requester that can only call tools could neither cancel
// its handoff nor answer its worker's questions. handoff_cancel and
// handoff_answer name the handoff (the handle a tools-only agent holds),
// resolve its task, and then run exactly what tasks/cancel and tasks/update
// run (cancelTask, updateTask): the same rows, events and notifications,
// the same rights (the owner or an admin). What they add is an answer a
// model can read: the handoff as it now stands, and whether anything
// changed.

// CancelHandoffResult is handoff_cancel's answer. Cancelled says whether
// this call cancelled the handoff's task (and with it an open or accepted
// handoff); false means it was already terminal (result_ready, decided,
// cancelled, expired) and nothing changed, as tasks/cancel acknowledges a
// terminal task.
type CancelHandoffResult struct {
	Handoff   Handoff `json:"handoff"`
	Cancelled bool    `json:"cancelled"`
}

// ElicitResult is one answer to an input request, as handoff_answer takes
// it: the MCP ElicitResult object a tasks/update inputResponses value is
// ({"action": "accept", "content": {...}}). It is kept as the bytes the
// client sent, because updateTask validates and stores an answer exactly
// as tasks/update's; its tool schema is ElicitResultFields.
type ElicitResult json.RawMessage

// MarshalJSON writes the answer's bytes as they are.
func (r ElicitResult) MarshalJSON() ([]byte, error) { return json.RawMessage(r).MarshalJSON() }

// UnmarshalJSON keeps the answer's bytes as they are; updateTask judges
// them.
func (r *ElicitResult) UnmarshalJSON(b []byte) error { return (*json.RawMessage)(r).UnmarshalJSON(b) }

// ElicitResultFields documents an ElicitResult for the tool's input schema
// (httpapi/ops renders ElicitResult with it). The engine never decodes into
// it: like tasks/update, it requires only that an answer be a JSON object,
// so the enum on action is a hint to the model, not the check.
type ElicitResultFields struct {
	Action  string         `json:"action" jsonschema:"accept when you answer (put the answer in content); decline or cancel to refuse the question" schema:"required,enum=accept|decline|cancel"`
	Content map[string]any `json:"content,omitempty" jsonschema:"the answer: the fields the question's requested_schema names (by default one string field \"answer\"), e.g. {\"answer\": \"three\"}"`
}

// ElicitActions are the actions an MCP ElicitResult may carry
// (ElicitResultFields.Action's enum).
func ElicitActions() []string { return []string{"accept", "decline", "cancel"} }

// AnswerHandoffInput is the requester's answers to the worker's open
// questions (handoff_answer, POST /workspace/handoff/answer).
type AnswerHandoffInput struct {
	HandoffID      string                  `json:"handoff_id" jsonschema:"the handoff's id (handoff_…)" schema:"required"`
	InputResponses map[string]ElicitResult `json:"input_responses" jsonschema:"one answer per question you answer, keyed by the question's key (handoff_get lists the open ones under inputs, status open): {\"KEY\": {\"action\": \"accept\", \"content\": {\"answer\": \"…\"}}}. Keys that are not open questions are ignored and listed in ignored_keys" schema:"required"`
}

// AnswerHandoffResult is handoff_answer's answer: the handoff as it now
// stands, and which of the keys sent answered an open question
// (AnsweredKeys) and which were ignored because no open question has that
// key (IgnoredKeys: never asked, already answered, or the task is no
// longer waiting for input), both sorted, so a model sees when its answer
// did not land.
type AnswerHandoffResult struct {
	Handoff      Handoff  `json:"handoff"`
	AnsweredKeys []string `json:"answered_keys"`
	IgnoredKeys  []string `json:"ignored_keys"`
}

// CancelHandoff is handoff_cancel and POST /workspace/handoff/cancel: the
// owner of a handoff, or an admin, cancels it, exactly as tasks/cancel
// cancels its task (cancelTask). A live task is cancelled with its open
// questions, and its open or accepted handoff with it; a handoff whose task
// is terminal (result_ready, approved, rejected, cancelled, or expired) is
// answered as it stands with cancelled false: a delivered result is decided
// by approve or reject, never cancelled.
func (e *Engine) CancelHandoff(tx *Tx, p Principal, in HandoffIDInput) (CancelHandoffResult, error) {
	h, err := e.handoffForOwner(tx, p, in.HandoffID, "cancel it")
	if err != nil {
		return CancelHandoffResult{}, err
	}
	var cancelled bool
	if h.taskStatus.Valid { // a purged task row was terminal: nothing to cancel
		if cancelled, err = e.cancelTask(tx, p, h.taskID); err != nil {
			return CancelHandoffResult{}, err
		}
	}
	v, err := e.handoffInTx(tx, p, h.id)
	if err != nil {
		return CancelHandoffResult{}, err
	}
	return CancelHandoffResult{Handoff: v, Cancelled: cancelled}, nil
}

// AnswerHandoff is handoff_answer and POST /workspace/handoff/answer: the
// owner of a handoff, or an admin, answers the worker's open questions,
// exactly as tasks/update answers them (updateTask: the same validation,
// rows and events). Answers to keys that are not open questions are
// ignored, as the Tasks spec has tasks/update do, and listed as ignored; a
// partial answer keeps the task input_required, the last one returns it to
// working. An empty input_responses is refused: it answers nothing.
func (e *Engine) AnswerHandoff(tx *Tx, p Principal, in AnswerHandoffInput) (AnswerHandoffResult, error) {
	h, err := e.handoffForOwner(tx, p, in.HandoffID, "answer its input requests")
	if err != nil {
		return AnswerHandoffResult{}, err
	}
	if len(in.InputResponses) == 0 {
		return AnswerHandoffResult{}, invalid("input_responses",
			`input_responses must answer at least one question: {"KEY": {"action": "accept", "content": {"answer": "…"}}}`)
	}
	responses := make(map[string]json.RawMessage, len(in.InputResponses))
	for k, v := range in.InputResponses {
		responses[k] = json.RawMessage(v)
	}
	answered := []string{}
	if h.taskStatus.Valid { // a purged task row was terminal: nothing is open
		got, err := e.updateTask(tx, p, h.taskID, responses, "input_responses")
		if err != nil {
			return AnswerHandoffResult{}, err
		}
		answered = append(answered, got...)
	}
	ignored := []string{}
	for k := range responses {
		if !slices.Contains(answered, k) {
			ignored = append(ignored, k)
		}
	}
	slices.Sort(ignored)
	v, err := e.handoffInTx(tx, p, h.id)
	if err != nil {
		return AnswerHandoffResult{}, err
	}
	return AnswerHandoffResult{Handoff: v, AnsweredKeys: answered, IgnoredKeys: ignored}, nil
}

// handoffForOwner resolves a handoff for an action that is its owner's or
// an admin's (the task's rights, D1): one the caller may not see answers
// exactly like an unknown one (D2), and a visible one the caller does not
// own is refused with permission_denied, as the task method refuses it.
func (e *Engine) handoffForOwner(tx *Tx, p Principal, id, action string) (*handoffRow, error) {
	h, err := e.handoffForWrite(tx, p, id)
	if err != nil {
		return nil, err
	}
	if !p.IsAdmin() && p.ParticipantID != h.owner {
		return nil, Errorf(KindPermissionDenied, "only the handoff's owner (or an admin) can %s", action).With("handoff_id", h.id)
	}
	return h, nil
}

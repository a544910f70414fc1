package room

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// maxInputKeyChars bounds an input request key (D11).
const maxInputKeyChars = 64

// maxSchemaBytes bounds one requested_schema. The specs give no number; a
// form schema is a handful of primitive properties, and without a bound one
// request could store a megabyte per key.
const maxSchemaBytes = 16 << 10

// defaultInputSchema is the form asked for when a request names no schema:
// one free-text answer.
const defaultInputSchema = `{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`

// RequestInput lets the assignee ask the owner questions while working
// (D11). Each request becomes an MCP elicitation/create form request on the
// task, which turns input_required; the owner answers with tasks/update.
// Keys are unique for the task's whole lifetime, as the Tasks spec requires.
func (e *Engine) RequestInput(tx *Tx, p Principal, in RequestInputInput) (Handoff, error) {
	handoffID, reqs := in.HandoffID, in.Requests
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if !h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "only the assignee can request input").With("handoff_id", h.id)
	}
	if h.status != HandoffAccepted || !h.taskLive() {
		return Handoff{}, h.conflict("the handoff is %s; input can be requested only while it is accepted", h.status)
	}
	if len(reqs) == 0 {
		return Handoff{}, invalid("requests", "requests must name at least one question")
	}
	var outstanding int
	if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM task_inputs WHERE task_id = ? AND closed_at IS NULL`, h.taskID).
		Scan(&outstanding); err != nil {
		return Handoff{}, Internal(err)
	}
	if outstanding+len(reqs) > e.Limits.MaxOpenInputs {
		return Handoff{}, Errorf(KindLimitExceeded, "a task may have at most %d outstanding input requests (%d are open)",
			e.Limits.MaxOpenInputs, outstanding).With("field", "requests").With("limit", e.Limits.MaxOpenInputs)
	}
	type stored struct{ key, request string }
	list := make([]stored, 0, len(reqs))
	seen := map[string]bool{}
	for i, r := range reqs {
		f := fmt.Sprintf("requests[%d]", i)
		if r.Key == "" || !utf8.ValidString(r.Key) {
			return Handoff{}, invalid(f+".key", "%s.key is required", f)
		}
		if runes(r.Key) > maxInputKeyChars {
			return Handoff{}, tooLong(f+".key", maxInputKeyChars)
		}
		if seen[r.Key] {
			return Handoff{}, invalid(f+".key", "key %q appears twice", r.Key).With("key", r.Key)
		}
		seen[r.Key] = true
		var used int
		if err := tx.q.QueryRowContext(tx.ctx, `SELECT count(*) FROM task_inputs WHERE task_id = ? AND request_key = ?`, h.taskID, r.Key).
			Scan(&used); err != nil {
			return Handoff{}, Internal(err)
		}
		if used > 0 {
			return Handoff{}, invalid(f+".key", "key %q was already used on this task; keys are never reused", r.Key).With("key", r.Key)
		}
		if strings.TrimSpace(r.Message) == "" {
			return Handoff{}, invalid(f+".message", "%s.message is required", f)
		}
		if err := checkText(f+".message", r.Message, e.Limits.MaxInputMessage); err != nil {
			return Handoff{}, err
		}
		schema, err := normaliseSchema(f+".requested_schema", r.RequestedSchema)
		if err != nil {
			return Handoff{}, err
		}
		req, err := encodeJSON(elicitation{Method: "elicitation/create", Params: elicitationParams{
			Mode: "form", Message: r.Message, RequestedSchema: schema}})
		if err != nil {
			return Handoff{}, Internal(err)
		}
		list = append(list, stored{r.Key, string(req)})
	}
	size := 0
	for _, s := range list {
		size += len(s.key) + len(s.request)
	}
	if err := e.chargeStorage(tx, p.ParticipantID, size); err != nil {
		return Handoff{}, err
	}
	now := tx.nowMS()
	for _, s := range list {
		if _, err := tx.exec(`INSERT INTO task_inputs(task_id, request_key, request_json, requested_by, requested_at)
			VALUES (?, ?, ?, ?, ?)`, h.taskID, s.key, s.request, p.ParticipantID, now); err != nil {
			return Handoff{}, Internal(err)
		}
	}
	n, err := tx.execN(`UPDATE tasks SET status = 'input_required', last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	if _, err := tx.exec(`UPDATE handoffs SET updated_at = ? WHERE handoff_id = ?`, now, h.id); err != nil {
		return Handoff{}, Internal(err)
	}
	keys := make([]string, len(list))
	for i, s := range list {
		keys[i] = s.key
	}
	if err := tx.handoffEvent("handoff.input_requested", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffAccepted, "keys": keys, "outstanding": outstanding + len(list),
	}); err != nil {
		return Handoff{}, err
	}
	if h.taskStatus.String != TaskInputRequired {
		if err := tx.handoffEvent("task.input_required", p.ParticipantID, h.id, h.taskID, map[string]any{"status": TaskInputRequired}); err != nil {
			return Handoff{}, err
		}
	}
	tx.taskChanged(h.taskID)
	return e.handoffInTx(tx, p, h.id)
}

// elicitation is how an input request is stored and shown in a task's
// inputRequests: an MCP elicitation/create request in form mode.
type elicitation struct {
	Method string            `json:"method"`
	Params elicitationParams `json:"params"`
}

type elicitationParams struct {
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema"`
}

// normaliseSchema checks a requested form schema (an object schema with
// properties, as MCP elicitation forms are) and compacts it.
func normaliseSchema(field string, raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(defaultInputSchema), nil
	}
	if len(raw) > maxSchemaBytes {
		return nil, Errorf(KindLimitExceeded, "%s is larger than %d bytes", field, maxSchemaBytes).
			With("field", field).With("limit", maxSchemaBytes)
	}
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" || s.Properties == nil {
		return nil, invalid(field, "%s must be a JSON object schema with \"type\":\"object\" and \"properties\"", field)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, invalid(field, "%s is not valid JSON", field)
	}
	return b.Bytes(), nil
}

// UpdateTask is tasks/update (and POST /workspace/task/update): the owner, or
// an admin, answers outstanding input requests. Responses to keys that are not
// outstanding are ignored, as the Tasks spec requires; a partial answer keeps
// the task input_required and the last one returns it to working. A terminal
// task acknowledges and changes nothing.
func (e *Engine) UpdateTask(tx *Tx, p Principal, in UpdateTaskInput) (Empty, error) {
	_, err := e.updateTask(tx, p, in.TaskID, in.InputResponses, "inputResponses")
	return Empty{}, err
}

// updateTask is tasks/update's rule, shared with its tool twin
// AnswerHandoff: it returns the keys it answered, sorted (none when the
// task was not waiting for input or no key named an open question). field
// is what the caller calls the responses, for the errors.
func (e *Engine) updateTask(tx *Tx, p Principal, taskID string, responses map[string]json.RawMessage, field string) ([]string, error) {
	t, err := e.taskForWrite(tx, p, taskID)
	if err != nil {
		return nil, err
	}
	if !p.IsAdmin() && p.ParticipantID != t.owner {
		return nil, Errorf(KindPermissionDenied, "only the task's owner can answer its input requests").With("task_id", t.id)
	}
	if t.status != TaskInputRequired {
		return nil, nil // nothing is outstanding: working has none, terminal tasks never change
	}
	rows, err := tx.q.QueryContext(tx.ctx, `SELECT request_key FROM task_inputs WHERE task_id = ? AND closed_at IS NULL`, t.id)
	if err != nil {
		return nil, Internal(err)
	}
	open := map[string]bool{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, Internal(err)
		}
		open[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	var answered []string
	for k := range responses {
		if open[k] {
			answered = append(answered, k)
		}
	}
	if len(answered) == 0 {
		return nil, nil
	}
	sort.Strings(answered)
	compact := make(map[string]string, len(answered))
	for _, k := range answered { // validate every answer before writing any
		resp := bytes.TrimSpace(responses[k])
		f := field + "." + k
		if len(resp) == 0 || resp[0] != '{' || !json.Valid(resp) {
			// An answer to an elicitation/create request is an ElicitResult: an object.
			return nil, invalid(f, "the response for %q must be a JSON object (an ElicitResult)", k).With("key", k)
		}
		if len(resp) > e.Limits.MaxResultBytes {
			return nil, Errorf(KindLimitExceeded, "the response for %q is larger than %d bytes", k, e.Limits.MaxResultBytes).
				With("field", f).With("limit", e.Limits.MaxResultBytes)
		}
		var b bytes.Buffer
		_ = json.Compact(&b, resp)
		compact[k] = b.String()
	}
	stored := 0
	for _, v := range compact {
		stored += len(v)
	}
	if err := e.chargeStorage(tx, p.ParticipantID, stored); err != nil {
		return nil, err
	}
	now := tx.nowMS()
	for _, k := range answered {
		n, err := tx.execN(`UPDATE task_inputs SET response_json = ?, responded_by = ?, closed_at = ?, close_reason = 'answered'
			WHERE task_id = ? AND request_key = ? AND closed_at IS NULL`, compact[k], nullStr(p.ParticipantID), now, t.id, k)
		if err != nil {
			return nil, Internal(err)
		}
		if n != 1 {
			return nil, Errorf(KindHandoffConflict, "input %q was closed concurrently", k).With("task_id", t.id)
		}
	}
	remaining := len(open) - len(answered)
	status := TaskInputRequired
	if remaining == 0 {
		status = TaskWorking
	}
	n, err := tx.execN(`UPDATE tasks SET status = ?, last_updated_at = ? WHERE task_id = ? AND status = 'input_required'`, status, now, t.id)
	if err != nil {
		return nil, Internal(err)
	}
	if n != 1 {
		return nil, Errorf(KindHandoffConflict, "the task changed concurrently").With("task_id", t.id)
	}
	if _, err := tx.exec(`UPDATE handoffs SET updated_at = ? WHERE handoff_id = ?`, now, t.handoffID); err != nil {
		return nil, Internal(err)
	}
	if status == TaskWorking {
		if err := tx.handoffEvent("task.working", p.ParticipantID, t.handoffID, t.id, map[string]any{"status": TaskWorking}); err != nil {
			return nil, err
		}
	}
	if err := tx.handoffEvent("handoff.input_received", p.ParticipantID, t.handoffID, t.id, map[string]any{
		"status": HandoffAccepted, "keys": answered, "outstanding": remaining,
	}); err != nil {
		return nil, err
	}
	tx.taskChanged(t.id)
	return answered, nil
}

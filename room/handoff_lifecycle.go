package room

import (
	"database/sql"
	"unicode/utf8"
)

// AcceptHandoff takes on the work (D3). The first accept wins; the owner can
// never accept, and a handoff addressed to someone can be accepted only by
// them. The task stays working (there is no "accepted" task status) and
// records the assignee, which makes the task visible to them.
func (e *Engine) AcceptHandoff(tx *Tx, p Principal, in HandoffIDInput) (Handoff, error) {
	handoffID := in.HandoffID
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if ErrorKind(err) == KindHandoffNotFound {
		// An open call (addressed to nobody) was visible to every checkout
		// holder; one who lost the race to accept it, or finds it closed,
		// learns why (D3: handoff_conflict) rather than that it never existed.
		if row, lerr := loadHandoff(tx.ctx, tx.q, handoffID); lerr == nil && !row.requested.Valid {
			return Handoff{}, row.conflict("the handoff is %s; only an open handoff can be accepted", row.status)
		}
	}
	if err != nil {
		return Handoff{}, err
	}
	if refusal := h.acceptRefusal(p); refusal != nil {
		return Handoff{}, refusal
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE handoffs SET status = 'accepted', assignee_id = ?, accepted_at = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'open'`, p.ParticipantID, now, now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff was accepted by someone else")
	}
	n, err = tx.execN(`UPDATE tasks SET assignee_id = ?, last_updated_at = ? WHERE task_id = ? AND status = 'working'`,
		p.ParticipantID, now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer working")
	}
	// One event: the task's status does not change, the handoff's does, and
	// the event names both records (task.* events mark task status changes).
	if err := tx.handoffEvent("handoff.accepted", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffAccepted, "assignee_id": p.ParticipantID, "task_status": TaskWorking,
	}); err != nil {
		return Handoff{}, err
	}
	tx.taskChanged(h.taskID)
	// The rows as the UPDATEs left them: rendered without reading them back.
	h.status, h.assignee = HandoffAccepted, sql.NullString{String: p.ParticipantID, Valid: true}
	h.acceptedAt, h.updated = sql.NullInt64{Int64: now, Valid: true}, now
	h.task.assignee = h.assignee
	tx.keepHandoff(h, 2) // the handoff and its task
	tx.snapshot(h.liveTaskSnapshot(h.assignee, now))
	return h.view(tx.ctx, tx.q, p)
}

// CompleteHandoff delivers the result. The task completes with an MCP
// CallToolResult; the handoff becomes result_ready and keeps its own copy of
// the result, which outlives the task row. Outstanding questions are closed
// as superseded. A second completion by the assignee changes nothing and
// says so (already_completed, D10): the first result stands.
func (e *Engine) CompleteHandoff(tx *Tx, p Principal, in CompleteInput) (Handoff, error) {
	handoffID, result, statusMessage := in.HandoffID, in.Result, in.StatusMessage
	if err := p.Require(CapCheckout); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if !h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "only the assignee can complete a handoff").With("handoff_id", h.id)
	}
	switch h.status {
	case HandoffResultReady, HandoffApproved, HandoffRejected:
		out, err := e.handoffInTx(tx, p, h.id)
		out.AlreadyCompleted = true
		return out, err
	case HandoffAccepted:
	default:
		return Handoff{}, h.conflict("the handoff is %s; only an accepted handoff can be completed", h.status)
	}
	if !h.taskLive() {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	result.Artifacts = nonNilArtifacts(result.Artifacts)
	if !utf8.ValidString(result.Text) {
		return Handoff{}, invalid("result.text", "result.text is not valid UTF-8")
	}
	if result.Text == "" && len(result.Artifacts) == 0 {
		return Handoff{}, invalid("result.text", "a result needs text or at least one artifact")
	}
	if err := e.validateArtifacts("result.artifacts", result.Artifacts); err != nil {
		return Handoff{}, err
	}
	if err := checkText("status_message", statusMessage, e.Limits.MaxInputMessage); err != nil {
		return Handoff{}, err
	}
	copyJSON, err := encodeJSON(result)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if len(copyJSON) > e.Limits.MaxResultBytes {
		return Handoff{}, Errorf(KindLimitExceeded, "the result is %d bytes; the limit is %d", len(copyJSON), e.Limits.MaxResultBytes).
			With("field", "result").With("limit", e.Limits.MaxResultBytes)
	}
	if err := e.chargeStorage(tx, p.ParticipantID, len(copyJSON)); err != nil {
		return Handoff{}, err
	}
	toolResult, err := encodeJSON(newCompleteToolResult(h.id, result))
	if err != nil {
		return Handoff{}, Internal(err)
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE tasks SET status = 'completed', result_json = ?, status_message = ?, last_updated_at = ?
		WHERE task_id = ? AND status IN ('working','input_required')`, string(toolResult), nullStr(statusMessage), now, h.taskID)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff's task is no longer live")
	}
	if !h.noInputs {
		if _, err := tx.exec(`UPDATE task_inputs SET closed_at = ?, close_reason = 'superseded' WHERE task_id = ? AND closed_at IS NULL`,
			now, h.taskID); err != nil {
			return Handoff{}, Internal(err)
		}
	}
	n, err = tx.execN(`UPDATE handoffs SET status = 'result_ready', result_json = ?, result_at = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'accepted'`, string(copyJSON), now, now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff changed concurrently")
	}
	if err := tx.handoffEvent("task.completed", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": TaskCompleted, "is_error": result.IsError,
	}); err != nil {
		return Handoff{}, err
	}
	if err := tx.handoffEvent("handoff.result_ready", p.ParticipantID, h.id, h.taskID, map[string]any{
		"status": HandoffResultReady, "is_error": result.IsError,
	}); err != nil {
		return Handoff{}, err
	}
	tx.taskChanged(h.taskID)
	// The rows as the UPDATEs left them: rendered without reading them back.
	t := h.liveTaskSnapshot(h.task.assignee, now)
	t.Status, t.StatusMessage, t.Result = TaskCompleted, statusMessage, toolResult
	tx.snapshot(t)
	h.status, h.taskStatus = HandoffResultReady, sql.NullString{String: TaskCompleted, Valid: true}
	h.result = sql.NullString{String: string(copyJSON), Valid: true}
	h.resultAt, h.updated = sql.NullInt64{Int64: now, Valid: true}, now
	h.task.message = nullString(statusMessage)
	if h.noInputs {
		tx.keepHandoff(h, 2) // the task and the handoff; with questions, task_inputs too, uncounted
		tx.endsLive(h.taskID)
	}
	return h.view(tx.ctx, tx.q, p)
}

// ApproveHandoff accepts the delivered result. It is a decision on the
// handoff only: the task stays completed and is never rewritten. The assignee
// may not judge their own work even when they hold approve (D12).
func (e *Engine) ApproveHandoff(tx *Tx, p Principal, in DecideInput) (Handoff, error) {
	return e.decide(tx, p, in.HandoffID, in.Note, HandoffApproved)
}

// RejectHandoff refuses the delivered result. Rejected is final; re-work is
// a new handoff that names this one in follows_handoff_id (D6).
func (e *Engine) RejectHandoff(tx *Tx, p Principal, in DecideInput) (Handoff, error) {
	return e.decide(tx, p, in.HandoffID, in.Note, HandoffRejected)
}

func (e *Engine) decide(tx *Tx, p Principal, handoffID, note, status string) (Handoff, error) {
	if err := p.Require(CapApprove); err != nil {
		return Handoff{}, err
	}
	h, err := e.handoffForWrite(tx, p, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if h.isAssignee(p) {
		return Handoff{}, Errorf(KindPermissionDenied, "the assignee cannot decide on their own result").With("handoff_id", h.id)
	}
	if h.status != HandoffResultReady {
		return Handoff{}, h.conflict("the handoff is %s; only a result_ready handoff can be decided", h.status)
	}
	if err := checkText("note", note, e.Limits.MaxSummaryChars); err != nil {
		return Handoff{}, err
	}
	now := tx.nowMS()
	n, err := tx.execN(`UPDATE handoffs SET status = ?, decided_at = ?, decided_by = ?, decision_note = ?, updated_at = ?
		WHERE handoff_id = ? AND status = 'result_ready'`, status, now, nullStr(p.ParticipantID), nullStr(note), now, h.id)
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if n != 1 {
		return Handoff{}, h.conflict("the handoff was decided concurrently")
	}
	if err := tx.handoffEvent("handoff."+status, p.ParticipantID, h.id, h.taskID, map[string]any{"status": status}); err != nil {
		return Handoff{}, err
	}
	// The row as the UPDATE left it: rendered without reading it back.
	h.status, h.updated = status, now
	h.decidedAt = sql.NullInt64{Int64: now, Valid: true}
	h.decidedBy = sql.NullString{String: p.ParticipantID, Valid: p.ParticipantID != ""}
	h.note = sql.NullString{String: note, Valid: note != ""}
	tx.keepHandoff(h, 1) // the handoff (settled: the copy is dropped)
	return h.view(tx.ctx, tx.q, p)
}

package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
)

// handoffRow is a handoff as stored, with its task's status (NULL once the
// task row is purged) and the task times the expiry rule needs.
type handoffRow struct {
	id, status, owner   string
	requested, assignee sql.NullString
	summary             string
	constraints, target sql.NullString
	baseVersion         sql.NullInt64
	follows, artifacts  sql.NullString
	taskID              string
	result              sql.NullString
	created, updated    int64
	acceptedAt          sql.NullInt64
	resultAt            sql.NullInt64
	decidedAt           sql.NullInt64
	decidedBy, note     sql.NullString
	cancelledAt         sql.NullInt64
	cancelledBy, reason sql.NullString
	taskStatus          sql.NullString
	taskDueAt           sql.NullInt64  // created_at + ttl_ms of the task
	taskPoll            sql.NullInt64  // the task's poll_interval_ms
	inputs              sql.NullString // inputsColumn, when the select read it (handoffWithInputsSelect)
	// noInputs says the task is known to have no input request at all
	// (the writer's loader asks; readers leave it false and read them), so
	// rendering and completing skip a statement that would find nothing.
	noInputs bool
	// task is the task row's columns a step needs to show the task as it
	// leaves it without reading it back; only the writer's loader fills it.
	task taskCols
}

// taskCols are the task columns the writer's handoff read carries (NULL
// once the task row is purged).
type taskCols struct {
	created, ttl   sql.NullInt64
	message, owner sql.NullString
	assignee       sql.NullString
}

const handoffSelect = `SELECT ` + handoffColumns + handoffFrom

const handoffColumns = `h.handoff_id, h.status, h.owner_id, h.requested_assignee_id, h.assignee_id, h.summary,
	h.constraints_text, h.target, h.base_version, h.follows_handoff_id, h.artifacts_json, h.task_id, h.result_json,
	h.created_at, h.updated_at, h.accepted_at, h.result_at, h.decided_at, h.decided_by, h.decision_note,
	h.cancelled_at, h.cancelled_by, h.cancel_reason, t.status, t.created_at + t.ttl_ms, t.poll_interval_ms`

const handoffFrom = `
	FROM handoffs h LEFT JOIN tasks t ON t.task_id = h.task_id`

// handoffForWriteQuery is the writer's read of a handoff: the row, and
// whether its task has any input request (one probe of task_inputs'
// primary key), so a lifecycle step without questions does not run the
// statements that would read or close none.
const handoffForWriteQuery = `SELECT ` + handoffColumns + `,
	EXISTS (SELECT 1 FROM task_inputs i WHERE i.task_id = h.task_id),
	t.created_at, t.ttl_ms, t.status_message, t.owner_id, t.assignee_id` + handoffFrom + ` WHERE h.handoff_id = ?`

type scanner interface{ Scan(dest ...any) error }

func scanHandoff(s scanner) (*handoffRow, error) {
	var h handoffRow
	err := s.Scan(&h.id, &h.status, &h.owner, &h.requested, &h.assignee, &h.summary,
		&h.constraints, &h.target, &h.baseVersion, &h.follows, &h.artifacts, &h.taskID, &h.result,
		&h.created, &h.updated, &h.acceptedAt, &h.resultAt, &h.decidedAt, &h.decidedBy, &h.note,
		&h.cancelledAt, &h.cancelledBy, &h.reason, &h.taskStatus, &h.taskDueAt, &h.taskPoll)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// loadHandoffForWrite is loadHandoff inside a command, which also learns
// whether the task has input requests (noInputs): the writer's copy when it
// holds one that may be used (handoff_wcache.go), else the row.
func loadHandoffForWrite(tx *Tx, id string) (*handoffRow, error) {
	if h, ok := tx.cachedHandoff(id); ok {
		if verifyWriterCache {
			if err := verifyCachedHandoff(tx, id, h); err != nil {
				return nil, err
			}
		}
		return h, nil
	}
	return readHandoffForWrite(tx, id)
}

// readHandoffForWrite reads the row loadHandoffForWrite stands for.
func readHandoffForWrite(tx *Tx, id string) (*handoffRow, error) {
	var h handoffRow
	var hasInputs bool
	err := tx.q.QueryRowContext(tx.ctx, handoffForWriteQuery, id).Scan(&h.id, &h.status, &h.owner, &h.requested, &h.assignee, &h.summary,
		&h.constraints, &h.target, &h.baseVersion, &h.follows, &h.artifacts, &h.taskID, &h.result,
		&h.created, &h.updated, &h.acceptedAt, &h.resultAt, &h.decidedAt, &h.decidedBy, &h.note,
		&h.cancelledAt, &h.cancelledBy, &h.reason, &h.taskStatus, &h.taskDueAt, &h.taskPoll, &hasInputs,
		&h.task.created, &h.task.ttl, &h.task.message, &h.task.owner, &h.task.assignee)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, handoffNotFound(id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	h.noInputs = !hasInputs
	return &h, nil
}

func loadHandoff(ctx context.Context, q Querier, id string) (*handoffRow, error) {
	h, err := scanHandoff(q.QueryRowContext(ctx, handoffSelect+` WHERE h.handoff_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, handoffNotFound(id)
	}
	if err != nil {
		return nil, Internal(err)
	}
	return h, nil
}

// isParty: the owner, the assignee, or the participant the handoff is addressed to.
func (h *handoffRow) isParty(p Principal) bool {
	id := p.ParticipantID
	return id != "" && (id == h.owner || id == h.assignee.String || id == h.requested.String)
}

func (h *handoffRow) isAssignee(p Principal) bool {
	return p.ParticipantID != "" && h.assignee.Valid && h.assignee.String == p.ParticipantID
}

// visibleTo is D2's predicate for handoffs: parties, approvers (they must
// read results to decide) and admins; plus, while a handoff is an open call
// for work addressed to nobody, anyone holding checkout, because D3 lets any
// of them accept it and one cannot accept what one cannot see.
func (h *handoffRow) visibleTo(p Principal) bool {
	switch {
	case p.IsAdmin(), h.isParty(p), p.Caps.Has(CapApprove):
		return true
	case h.status == HandoffOpen && !h.requested.Valid && p.Caps.Has(CapCheckout):
		return true
	}
	return false
}

// acceptRefusal is D3's accept rule for p, who holds checkout: nil when p
// may accept h now, else why not. AcceptHandoff refuses with it and the
// inbox's open_to_accept reads it (canAccept), so the two cannot drift.
func (h *handoffRow) acceptRefusal(p Principal) *Error {
	if p.ParticipantID == "" || p.ParticipantID == h.owner {
		return Errorf(KindPermissionDenied, "the owner of a handoff cannot accept it").With("handoff_id", h.id)
	}
	if h.status != HandoffOpen {
		return h.conflict("the handoff is %s; only an open handoff can be accepted", h.status)
	}
	if h.requested.Valid && h.requested.String != p.ParticipantID {
		return h.conflict("the handoff is addressed to another participant")
	}
	return nil
}

// canAccept is D3 as a reading: an open handoff p could accept now, being
// addressed to p, or addressed to nobody while p is not its owner; either
// way accepting takes checkout. This is the inbox's open_to_accept.
func (h *handoffRow) canAccept(p Principal) bool {
	return p.Caps.Has(CapCheckout) && h.acceptRefusal(p) == nil
}

// seesInputs: the questions and answers are between owner and assignee
// (and admins); approvers and open-call readers do not see them.
func (h *handoffRow) seesInputs(p Principal) bool {
	if p.IsAdmin() {
		return true
	}
	id := p.ParticipantID
	return id != "" && (id == h.owner || id == h.assignee.String)
}

func (h *handoffRow) taskLive() bool {
	return h.taskStatus.String == TaskWorking || h.taskStatus.String == TaskInputRequired
}

// taskDue reports a live task whose TTL has run out (D34: expiry is measured
// from creation, and never before ttlMs).
func (h *handoffRow) taskDue(now int64) bool {
	return h.taskLive() && h.taskDueAt.Valid && h.taskDueAt.Int64 <= now
}

func (h *handoffRow) conflict(format string, args ...any) *Error {
	return Errorf(KindHandoffConflict, format, args...).With("handoff_id", h.id).With("status", h.status)
}

func strPtr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func timePtr(v sql.NullInt64) *string {
	if !v.Valid {
		return nil
	}
	s := WireTime(v.Int64)
	return &s
}

// view renders the handoff for p. Callers have checked visibility.
func (h *handoffRow) view(ctx context.Context, q Querier, p Principal) (Handoff, error) {
	out, err := h.render()
	if err != nil || !h.seesInputs(p) {
		return out, err
	}
	switch {
	case h.noInputs:
		out.Inputs = []HandoffInput{}
	case h.inputs.Valid: // read with the row (handoffWithInputsSelect): no statement more
		out.Inputs, err = decodeInputs(h.inputs.String)
	default:
		out.Inputs, err = readInputs(ctx, q, h.taskID)
	}
	if err != nil {
		return Handoff{}, err
	}
	return out, nil
}

// render is the handoff without its input requests (view adds them for
// those who may see them).
func (h *handoffRow) render() (Handoff, error) {
	out := Handoff{
		HandoffID: h.id, Status: h.status, OwnerID: h.owner,
		AssigneeID: strPtr(h.assignee), RequestedAssigneeID: strPtr(h.requested),
		Summary: h.summary, Constraints: strPtr(h.constraints), Target: strPtr(h.target),
		FollowsHandoffID: strPtr(h.follows), Artifacts: []Artifact{},
		TaskID: h.taskID, TaskStatus: strPtr(h.taskStatus),
		CreatedAt: WireTime(h.created), UpdatedAt: WireTime(h.updated),
		AcceptedAt: timePtr(h.acceptedAt), ResultAt: timePtr(h.resultAt),
		DecidedAt: timePtr(h.decidedAt), DecidedBy: strPtr(h.decidedBy), DecisionNote: strPtr(h.note),
		CancelledAt: timePtr(h.cancelledAt), CancelledBy: strPtr(h.cancelledBy), CancelReason: strPtr(h.reason),
	}
	if h.baseVersion.Valid {
		v := h.baseVersion.Int64
		out.BaseVersion = &v
	}
	if h.taskLive() && h.taskPoll.Valid {
		v := h.taskPoll.Int64
		out.PollIntervalMs = &v
	}
	if h.artifacts.Valid {
		if err := json.Unmarshal([]byte(h.artifacts.String), &out.Artifacts); err != nil {
			return Handoff{}, Internal(err)
		}
	}
	if h.result.Valid {
		var r ResultInput
		if err := json.Unmarshal([]byte(h.result.String), &r); err != nil {
			return Handoff{}, Internal(err)
		}
		r.Artifacts = nonNilArtifacts(r.Artifacts)
		out.Result = &r
	}
	return out, nil
}

// readInputs lists a task's input requests, oldest first. After the task row
// is purged they are gone with it (the handoff keeps only the result).
func readInputs(ctx context.Context, q Querier, taskID string) ([]HandoffInput, error) {
	rows, err := q.QueryContext(ctx, `SELECT request_key, request_json, response_json, close_reason, requested_at, closed_at
		FROM task_inputs WHERE task_id = ? ORDER BY requested_at, request_key`, taskID)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := []HandoffInput{}
	for rows.Next() {
		var in HandoffInput
		var req string
		var resp, reason sql.NullString
		var requested int64
		var closed sql.NullInt64
		if err := rows.Scan(&in.Key, &req, &resp, &reason, &requested, &closed); err != nil {
			return nil, Internal(err)
		}
		if err := in.fill(req, resp, reason, requested, closed); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, rows.Err()
}

// fill completes an input request (its Key set) from its stored columns.
func (in *HandoffInput) fill(req string, resp, reason sql.NullString, requested int64, closed sql.NullInt64) error {
	var r struct {
		Params struct {
			Message         string          `json:"message"`
			RequestedSchema json.RawMessage `json:"requestedSchema"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(req), &r); err != nil {
		return Internal(err)
	}
	in.Message, in.RequestedSchema = r.Params.Message, r.Params.RequestedSchema
	in.RequestedAt = WireTime(requested)
	in.Status = InputOpen
	if reason.Valid {
		in.Status = reason.String
	}
	if resp.Valid {
		in.Response = json.RawMessage(resp.String)
		in.AnsweredAt = timePtr(closed)
	}
	return nil
}

// handoffForWrite loads a handoff inside the command, applying a TTL expiry
// that fell due before the sweeper ran (D39), and hides it from
// principals who may not see it. If the command then fails, the expiry rolls
// back with it and the sweeper applies it moments later; the caller has
// already been answered from the expired state.
func (e *Engine) handoffForWrite(tx *Tx, p Principal, id string) (*handoffRow, error) {
	h, err := loadHandoffForWrite(tx, id)
	if err != nil {
		return nil, err
	}
	if h.taskDue(tx.nowMS()) {
		if err := e.expireTask(tx, h.taskID, h.id); err != nil {
			return nil, err
		}
		if h, err = loadHandoffForWrite(tx, id); err != nil {
			return nil, err
		}
	}
	if !h.visibleTo(p) {
		return nil, handoffNotFound(id)
	}
	return h, nil
}

// handoffInTx is the handoff as p sees it, read inside the command.
func (e *Engine) handoffInTx(tx *Tx, p Principal, id string) (Handoff, error) {
	h, err := loadHandoff(tx.ctx, tx.q, id)
	if err != nil {
		return Handoff{}, err
	}
	return h.view(tx.ctx, tx.q, p)
}

// liveTaskSnapshot is the task of a handoff loaded by the writer as a step
// leaves it, still live (working, no open question): what taskByID would
// read after the step's UPDATE, which set assignee and lastUpdated.
func (h *handoffRow) liveTaskSnapshot(assignee sql.NullString, updated int64) DetailedTask {
	return DetailedTask{TaskID: h.taskID, Status: TaskWorking, StatusMessage: h.task.message.String,
		CreatedAt: WireTime(h.task.created.Int64), LastUpdatedAt: WireTime(updated),
		TTLMs: h.task.ttl.Int64, PollIntervalMs: h.taskPoll.Int64,
		Meta: map[string]any{HandoffMetaKey: h.id}, OwnerID: h.task.owner.String, AssigneeID: assignee.String}
}

// handoffNotFound is the one answer for unknown and invisible handoffs.
func handoffNotFound(id string) *Error {
	return Errorf(KindHandoffNotFound, "unknown handoff").With("handoff_id", id)
}

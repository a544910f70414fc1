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
	taskDueAt           sql.NullInt64 // created_at + ttl_ms of the task
}

const handoffSelect = `SELECT h.handoff_id, h.status, h.owner_id, h.requested_assignee_id, h.assignee_id, h.summary,
	h.constraints_text, h.target, h.base_version, h.follows_handoff_id, h.artifacts_json, h.task_id, h.result_json,
	h.created_at, h.updated_at, h.accepted_at, h.result_at, h.decided_at, h.decided_by, h.decision_note,
	h.cancelled_at, h.cancelled_by, h.cancel_reason, t.status, t.created_at + t.ttl_ms
	FROM handoffs h LEFT JOIN tasks t ON t.task_id = h.task_id`

type scanner interface{ Scan(dest ...any) error }

func scanHandoff(s scanner) (*handoffRow, error) {
	var h handoffRow
	err := s.Scan(&h.id, &h.status, &h.owner, &h.requested, &h.assignee, &h.summary,
		&h.constraints, &h.target, &h.baseVersion, &h.follows, &h.artifacts, &h.taskID, &h.result,
		&h.created, &h.updated, &h.acceptedAt, &h.resultAt, &h.decidedAt, &h.decidedBy, &h.note,
		&h.cancelledAt, &h.cancelledBy, &h.reason, &h.taskStatus, &h.taskDueAt)
	if err != nil {
		return nil, err
	}
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
	if h.seesInputs(p) {
		in, err := readInputs(ctx, q, h.taskID)
		if err != nil {
			return Handoff{}, err
		}
		out.Inputs = in
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
		var r struct {
			Params struct {
				Message         string          `json:"message"`
				RequestedSchema json.RawMessage `json:"requestedSchema"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(req), &r); err != nil {
			return nil, Internal(err)
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
		out = append(out, in)
	}
	return out, rows.Err()
}

// GetHandoff is handoff_get, GET /workspace/handoff and ce handoff. It needs
// read and visibility (D2); unknown and invisible handoffs give the same
// handoff_not_found. Parties also see the input requests and their answers.
func (e *Engine) GetHandoff(ctx context.Context, q Querier, p Principal, in HandoffIDInput) (Handoff, error) {
	handoffID := in.HandoffID
	if err := p.Require(CapRead); err != nil {
		return Handoff{}, err
	}
	h, err := loadHandoff(ctx, q, handoffID)
	if err != nil {
		return Handoff{}, err
	}
	if !h.visibleTo(p) {
		return Handoff{}, handoffNotFound(handoffID)
	}
	return h.view(ctx, q, p)
}

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

// HandoffEventsResult is the answer of handoff_events. OldestEventID is the
// oldest event still in the ring (0 when it is empty): a client whose
// since_event_id is below it lost events to trimming and should re-read the
// handoff, which is the authority.
type HandoffEventsResult struct {
	HandoffID     string  `json:"handoff_id"`
	Events        []Event `json:"events"`
	OldestEventID int64   `json:"oldest_event_id"`
}

// HandoffEvents is handoff_events and ce handoff-events: the events of one
// handoff and its task still in the ring, always oldest first. With
// sinceEventID it returns the first limit events after that id (the recovery
// read after a gap); without it, the newest limit events.
func (e *Engine) HandoffEvents(ctx context.Context, q Querier, p Principal, in HandoffEventsInput) (HandoffEventsResult, error) {
	handoffID, sinceEventID, limit := in.HandoffID, in.SinceEventID, in.Limit
	if err := p.Require(CapRead); err != nil {
		return HandoffEventsResult{}, err
	}
	h, err := loadHandoff(ctx, q, handoffID)
	if err != nil {
		return HandoffEventsResult{}, err
	}
	if !h.visibleTo(p) {
		return HandoffEventsResult{}, handoffNotFound(handoffID)
	}
	limit = e.boundLimit(limit, 50)
	var rows *sql.Rows
	if sinceEventID != nil {
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM events
			WHERE handoff_id = ? AND event_id > ? ORDER BY event_id ASC LIMIT ?`, handoffID, *sinceEventID, limit)
	} else {
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM (
			SELECT * FROM events WHERE handoff_id = ? ORDER BY event_id DESC LIMIT ?) ORDER BY event_id ASC`, handoffID, limit)
	}
	if err != nil {
		return HandoffEventsResult{}, Internal(err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return HandoffEventsResult{}, err
	}
	out := HandoffEventsResult{HandoffID: handoffID, Events: evs}
	var oldest sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MIN(event_id) FROM events`).Scan(&oldest); err != nil {
		return HandoffEventsResult{}, Internal(err)
	}
	out.OldestEventID = oldest.Int64
	return out, nil
}

// ListHandoffs is ce handoffs (the local operator) and the handoffs part of
// GET /workspace/room (D29): the handoffs p may see, newest first, at most
// MaxListItems. status filters when it is not empty.
func (e *Engine) ListHandoffs(ctx context.Context, q Querier, p Principal, in ListHandoffsInput) ([]Handoff, error) {
	status := in.Status
	if err := p.Require(CapRead); err != nil {
		return nil, err
	}
	if status != "" && !validHandoffStatus(status) {
		return nil, invalid("status", "status must be one of open, accepted, result_ready, approved, rejected, cancelled")
	}
	b2i := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	// The same predicate as visibleTo, in SQL, so the limit counts visible rows.
	rows, err := q.QueryContext(ctx, handoffSelect+` WHERE (? = '' OR h.status = ?) AND (
		? = 1 OR ? = 1
		OR (? <> '' AND ? IN (h.owner_id, coalesce(h.assignee_id, ''), coalesce(h.requested_assignee_id, '')))
		OR (? = 1 AND h.status = 'open' AND h.requested_assignee_id IS NULL))
		ORDER BY h.created_at DESC, h.handoff_id DESC LIMIT ?`,
		status, status, b2i(p.IsAdmin()), b2i(p.Caps.Has(CapApprove)),
		p.ParticipantID, p.ParticipantID, b2i(p.Caps.Has(CapCheckout)), e.Limits.MaxListItems)
	if err != nil {
		return nil, Internal(err)
	}
	var list []*handoffRow
	for rows.Next() {
		h, err := scanHandoff(rows)
		if err != nil {
			rows.Close()
			return nil, Internal(err)
		}
		list = append(list, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	out := make([]Handoff, 0, len(list))
	for _, h := range list {
		v, err := h.view(ctx, q, p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// PrincipalFor is how ce task --participant P acts: as P, with P's own
// capabilities and party rules, never as the trusted operator, because a
// task id alone is not authorization (the brief). An unknown participant, or
// one who has left, is refused.
func (e *Engine) PrincipalFor(ctx context.Context, q Querier, participantID string) (Principal, error) {
	var capsText string
	var left sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT capabilities, left_at FROM participants WHERE participant_id = ?`, participantID).
		Scan(&capsText, &left)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && left.Valid) {
		return Principal{}, invalid("participant", "%q is not a present participant of this room", participantID).
			With("participant_id", participantID)
	}
	if err != nil {
		return Principal{}, Internal(err)
	}
	caps, err := capsFromJSON(capsText)
	if err != nil {
		return Principal{}, err
	}
	return Principal{ParticipantID: participantID, Caps: caps}, nil
}

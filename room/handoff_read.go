package room

import (
	"context"
	"database/sql"
)

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

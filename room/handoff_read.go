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

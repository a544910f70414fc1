package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
)

// GetHandoff is handoff_get, GET /workspace/handoff and ce handoff. It needs
// read and visibility (D2); unknown and invisible handoffs give the same
// handoff_not_found. Parties also see the input requests and their answers.
//
// It is one statement (the input requests come folded into the handoff's
// row), so it needs no read transaction: the doors run it straight on the
// read pool (ops.CachedRead), and it sees one snapshot all the same.
func (e *Engine) GetHandoff(ctx context.Context, q Querier, p Principal, in HandoffIDInput) (Handoff, error) {
	handoffID := in.HandoffID
	if err := p.Require(CapRead); err != nil {
		return Handoff{}, err
	}
	h, err := scanHandoffWithInputs(q.QueryRowContext(ctx, handoffWithInputsSelect+` WHERE h.handoff_id = ?`, handoffID))
	if errors.Is(err, sql.ErrNoRows) {
		if at, ok := PrunedAt(ctx, q, "handoff", handoffID); ok {
			return Handoff{}, prunedError(handoffNotFound(handoffID), "handoff", handoffID, at)
		}
		return Handoff{}, handoffNotFound(handoffID)
	}
	if err != nil {
		return Handoff{}, Internal(err)
	}
	if !h.visibleTo(p) {
		return Handoff{}, handoffNotFound(handoffID)
	}
	return h.view(ctx, q, p)
}

// HandoffReadKey names everything GetHandoff's answer depends on besides
// the sidecar: the handoff, and who asks (participant, trust and
// capabilities: visibility and the inputs follow from them). A door that
// keeps answers until the next commit (ops.CachedRead) keys them by it.
func HandoffReadKey(p Principal, in HandoffIDInput) string {
	var b strings.Builder
	b.Grow(len(p.ParticipantID) + len(in.HandoffID) + 48)
	b.WriteString(p.ParticipantID)
	if p.Trusted {
		b.WriteString("\x00trusted")
	}
	for _, c := range p.Caps {
		b.WriteByte(0)
		b.WriteString(string(c))
	}
	b.WriteString("\x00\x00")
	b.WriteString(in.HandoffID)
	return b.String()
}

// inputsColumn is a task's input requests as one JSON array of
// [request_key, request_json, response_json, close_reason, requested_at,
// closed_at] arrays, in readInputs' order; the JSON columns come as strings,
// so their text comes back byte for byte.
const inputsColumn = `(SELECT json_group_array(json_array(i.request_key, i.request_json, i.response_json, i.close_reason,
		i.requested_at, i.closed_at) ORDER BY i.requested_at, i.request_key) FROM task_inputs i WHERE i.task_id = h.task_id)`

// handoffWithInputsSelect is handoffSelect with inputsColumn last.
var handoffWithInputsSelect = func() string {
	const from = "\n\tFROM handoffs h"
	if !strings.Contains(handoffSelect, from) {
		panic("room: handoffSelect no longer reads FROM handoffs h")
	}
	return strings.Replace(handoffSelect, from, ",\n\t"+inputsColumn+from, 1)
}()

// withInputs scans inputsColumn after the columns scanHandoff reads.
type withInputs struct {
	s      scanner
	inputs *sql.NullString
}

func (w withInputs) Scan(dest ...any) error { return w.s.Scan(append(dest, w.inputs)...) }

// scanHandoffWithInputs scans a row of handoffWithInputsSelect: the handoff
// with its input requests, which view then renders without a statement more.
func scanHandoffWithInputs(s scanner) (*handoffRow, error) {
	var inputs sql.NullString
	h, err := scanHandoff(withInputs{s, &inputs})
	if err != nil {
		return nil, err
	}
	h.inputs = inputs
	return h, nil
}

// decodeInputs reads inputsColumn: what readInputs reads with a query of
// its own.
func decodeInputs(text string) ([]HandoffInput, error) {
	var rows [][6]json.RawMessage
	if text != "" {
		if err := json.Unmarshal([]byte(text), &rows); err != nil {
			return nil, Internal(err)
		}
	}
	out := make([]HandoffInput, 0, len(rows))
	for _, r := range rows {
		var in HandoffInput
		var req string
		var resp, reason sql.NullString
		var requested int64
		var closed sql.NullInt64
		if err := errors.Join(json.Unmarshal(r[0], &in.Key), json.Unmarshal(r[1], &req), unmarshalNull(r[2], &resp.String, &resp.Valid),
			unmarshalNull(r[3], &reason.String, &reason.Valid), json.Unmarshal(r[4], &requested),
			unmarshalNull(r[5], &closed.Int64, &closed.Valid)); err != nil {
			return nil, Internal(err)
		}
		if err := in.fill(req, resp, reason, requested, closed); err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// unmarshalNull reads a JSON value that may be null into v, setting valid
// when it is not null.
func unmarshalNull(raw json.RawMessage, v any, valid *bool) error {
	if string(raw) == "null" {
		return nil
	}
	*valid = true
	return json.Unmarshal(raw, v)
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

// A handoff's events are found through events_by_handoff_tail, the index on
// the last 8 hex digits of the handoff id (migration 8), then checked
// against the whole id; substr(handoff_id, -8) must be written exactly as
// the index has it for SQLite to use it. The limit is part of the text
// (sqllimit.go).

// handoffEventsSinceQuery reads the first limit events of handoff ?1 after
// event ?2.
func handoffEventsSinceQuery(limit int) string {
	return `SELECT event_id, event_type, payload_json, created_at FROM events
			WHERE substr(handoff_id, -8) = substr(?1, -8) AND handoff_id = ?1 AND event_id > ?2
			ORDER BY event_id ASC` + limitSQL(limit)
}

// handoffEventsNewestQuery reads the newest limit events of handoff ?1,
// oldest first.
func handoffEventsNewestQuery(limit int) string {
	return `SELECT event_id, event_type, payload_json, created_at FROM (
			SELECT * FROM events WHERE substr(handoff_id, -8) = substr(?1, -8) AND handoff_id = ?1
			ORDER BY event_id DESC` + limitSQL(limit) + `) ORDER BY event_id ASC`
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
		rows, err = q.QueryContext(ctx, handoffEventsSinceQuery(pageLimit(limit)), handoffID, *sinceEventID)
	} else {
		rows, err = q.QueryContext(ctx, handoffEventsNewestQuery(pageLimit(limit)), handoffID)
	}
	if err != nil {
		return HandoffEventsResult{}, Internal(err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return HandoffEventsResult{}, err
	}
	// The statement read up to pageLimit(limit): keep the first limit after
	// since_event_id, or the newest limit.
	if sinceEventID != nil {
		evs = firstN(evs, limit)
	} else {
		evs = lastN(evs, limit)
	}
	out := HandoffEventsResult{HandoffID: handoffID, Events: evs}
	var oldest sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MIN(event_id) FROM events`).Scan(&oldest); err != nil {
		return HandoffEventsResult{}, Internal(err)
	}
	out.OldestEventID = oldest.Int64
	return out, nil
}

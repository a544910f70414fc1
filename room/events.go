package room

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
)

// Event is one row of the ring: it says a record changed. It is not a
// delivery receipt, and its payload never holds secrets or text bodies.
type Event struct {
	ID        int64           `json:"event_id"`
	Type      string          `json:"event_type"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt string          `json:"created_at"`

	ActorID   string `json:"-"`
	HandoffID string `json:"-"`
	TaskID    string `json:"-"`
	Version   int64  `json:"-"`

	createdMS int64 // created_at as stored, until WriteEvents stores it
}

// refs are the indexed columns of an event row.
type refs struct {
	actor   string
	handoff string
	task    string
	version int64
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// emit records one event of the command. Every state change calls it
// before returning, so the change and its event commit together: the
// command's events are written with its batch (WriteEvents), before COMMIT,
// and only if the command succeeded.
func (tx *Tx) emit(typ string, r refs, payload map[string]any) error {
	if payload == nil {
		payload = map[string]any{}
	}
	payload["workspace_id"] = tx.e.WorkspaceID
	b, err := encodePayload(payload)
	if err != nil {
		return Internal(err)
	}
	now := tx.nowMS()
	tx.events = append(tx.events, Event{
		Type: typ, Payload: b, CreatedAt: WireTime(now),
		ActorID: r.actor, HandoffID: r.handoff, TaskID: r.task, Version: r.version,
		createdMS: now,
	})
	return nil
}

// maxEventRows is the most event rows one INSERT writes.
const maxEventRows = 16

// insertEventsQueries[n-1] inserts n event rows in one statement, each
// prepared once on the writer's connection.
var insertEventsQueries = func() (qs [maxEventRows]string) {
	const row = `(?, ?, ?, ?, ?, ?, ?)`
	for n := range qs {
		qs[n] = `INSERT INTO events(event_type, actor_id, version, handoff_id, task_id, payload_json, created_at) VALUES ` +
			strings.Repeat(row+`, `, n) + row
	}
	return qs
}()

// WriteEvents writes the events of a batch's successful commands, in
// command order, and gives each its id; the actor calls it once per batch,
// after the last command and before COMMIT, so they commit with the
// commands. One INSERT carries up to maxEventRows rows instead of a
// statement per event (issue 17: the event inserts were a fifth of the
// writer's statements). The rows of one INSERT get consecutive ids
// (AUTOINCREMENT takes the next id for each row, and the writer is the only
// one inserting), the last of which LastInsertId reports.
func WriteEvents(ctx context.Context, q Querier, outcomes []Outcome) error {
	var evs []*Event
	for i := range outcomes {
		for j := range outcomes[i].Events {
			evs = append(evs, &outcomes[i].Events[j])
		}
	}
	args := make([]any, 0, 7*min(len(evs), maxEventRows))
	for len(evs) > 0 {
		n := min(len(evs), maxEventRows)
		args = args[:0]
		for _, ev := range evs[:n] {
			args = append(args, ev.Type, nullStr(ev.ActorID), nullInt(ev.Version), nullStr(ev.HandoffID), nullStr(ev.TaskID),
				string(ev.Payload), ev.createdMS)
		}
		res, err := q.ExecContext(ctx, insertEventsQueries[n-1], args...)
		if err != nil {
			return Internal(err)
		}
		last, err := res.LastInsertId()
		if err != nil {
			return Internal(err)
		}
		for i, ev := range evs[:n] {
			ev.ID = last - int64(n-1-i)
		}
		evs = evs[n:]
	}
	return nil
}

// TrimRing keeps the newest keep events. Ids are never reused (AUTOINCREMENT),
// so "newest keep" is "id > max-keep". The actor runs it once per batch.
func TrimRing(ctx context.Context, q Querier, keep int) error {
	_, err := q.ExecContext(ctx,
		`DELETE FROM events WHERE event_id <= (SELECT MAX(event_id) FROM events) - ?`, keep)
	return err
}

func scanEvents(rows *sql.Rows) ([]Event, error) {
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var ev Event
		var payload string
		var created int64
		if err := rows.Scan(&ev.ID, &ev.Type, &payload, &created); err != nil {
			return nil, Internal(err)
		}
		ev.Payload = json.RawMessage(payload)
		ev.CreatedAt = WireTime(created)
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// HistoryInput selects events: newest first by default, or ascending from
// SinceEventID when it is set (D28).
type HistoryInput struct {
	Limit        int    `json:"limit,omitempty" jsonschema:"how many events (default 50, at most 200)" schema:"minimum=0"`
	SinceEventID *int64 `json:"since_event_id,omitempty" jsonschema:"return events after this id, oldest first (recovery after a gap)" schema:"minimum=0"`
}

// History is the answer to a history read. OldestEventID lets a client tell
// whether the gap it is recovering from fell off the ring.
type History struct {
	WorkspaceID   string  `json:"workspace_id"`
	Events        []Event `json:"events"`
	OldestEventID int64   `json:"oldest_event_id"`
	NewestEventID int64   `json:"newest_event_id"`
}

func (e *Engine) boundLimit(limit, def int) int {
	if limit <= 0 {
		limit = def
	}
	return min(limit, e.Limits.MaxListItems)
}

// History reads the ring.
func (e *Engine) History(ctx context.Context, q Querier, p Principal, in HistoryInput) (History, error) {
	if err := p.Require(CapRead); err != nil {
		return History{}, err
	}
	limit := e.boundLimit(in.Limit, 50)
	var rows *sql.Rows
	var err error
	if in.SinceEventID != nil {
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM events
			WHERE event_id > ? ORDER BY event_id ASC`+limitSQL(pageLimit(limit)), *in.SinceEventID)
	} else {
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM events
			ORDER BY event_id DESC`+limitSQL(pageLimit(limit)))
	}
	if err != nil {
		return History{}, Internal(err)
	}
	evs, err := scanEvents(rows)
	if err != nil {
		return History{}, err
	}
	h := History{WorkspaceID: e.WorkspaceID, Events: firstN(evs, limit)}
	var oldest, newest sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MIN(event_id), MAX(event_id) FROM events`).Scan(&oldest, &newest); err != nil {
		return History{}, Internal(err)
	}
	h.OldestEventID, h.NewestEventID = oldest.Int64, newest.Int64
	return h, nil
}

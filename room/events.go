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
	// audience is the handoff an event about a handoff or its task names,
	// as the command that wrote the event left it (its status and
	// parties), so VisibleTo can apply handoff_get's rule to a live event
	// without reading anything and without putting the parties on the
	// wire; nil on events read back from the ring (History filters those
	// in SQL) and on any other event.
	audience *handoffRow
}

// VisibleTo says whether p may be shown a committed event (issue 25). An
// event about a handoff or its task names the handoff's id, owner, assignee
// and each transition, so it goes only to whoever may see that handoff:
// handoff_get's rule (visibleTo, D2), as the command that wrote the event
// left the handoff. Every other event goes to anyone who may observe.
func (ev Event) VisibleTo(p Principal) bool {
	if ev.HandoffID == "" {
		return true
	}
	if ev.audience == nil {
		return SeesEveryHandoff(p)
	}
	return ev.audience.visibleTo(p)
}

// SeesEveryHandoff says whether p may see every handoff whatever its
// parties (admins and the host; approve holders, who must read results to
// decide: D2), so that a reader of events needs no filter for p.
func SeesEveryHandoff(p Principal) bool { return p.IsAdmin() || p.Caps.Has(CapApprove) }

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

// visibleHistoryQuery reads the ring for a caller who does not see every
// handoff (?1, its participant id): events about no handoff, and events
// whose handoff, found by its primary key, has the caller as a party (owner,
// assignee, requested assignee) or, for a caller holding checkout, is an
// open call addressed to nobody: handoffRow.visibleTo in SQL. With since,
// the events after ?2, oldest first; else the newest first. A handoff row
// that is missing hides its events. The checkout term is in the text, not a
// parameter, and so is the LIMIT (sqllimit.go): each variant is prepared
// once.
func visibleHistoryQuery(since, checkout bool, limit int) string {
	var b strings.Builder
	b.WriteString(`SELECT e.event_id, e.event_type, e.payload_json, e.created_at FROM events e
			LEFT JOIN handoffs h ON h.handoff_id = e.handoff_id
			WHERE (e.handoff_id IS NULL OR h.owner_id = ?1 OR h.assignee_id = ?1 OR h.requested_assignee_id = ?1`)
	if checkout {
		b.WriteString(` OR (h.status = 'open' AND h.requested_assignee_id IS NULL)`)
	}
	b.WriteString(`)`)
	if since {
		b.WriteString(` AND e.event_id > ?2 ORDER BY e.event_id ASC`)
	} else {
		b.WriteString(` ORDER BY e.event_id DESC`)
	}
	b.WriteString(limitSQL(limit))
	return b.String()
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
// SinceEventID when it is set (D28). Limit counts the events the caller may
// see: a page holds fewer only when no more are left.
type HistoryInput struct {
	Limit        int    `json:"limit,omitempty" jsonschema:"how many events (default 50, at most 200)" schema:"minimum=0"`
	SinceEventID *int64 `json:"since_event_id,omitempty" jsonschema:"return events after this id, oldest first (recovery after a gap)" schema:"minimum=0"`
}

// History is the answer to a history read. OldestEventID lets a client tell
// whether the gap it is recovering from fell off the ring, so it and
// NewestEventID are the ring's own bounds, the same for every caller: an
// event the caller may not see is left out of Events, never out of the
// ring's bounds, and its id is a gap between the ids shown.
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

// History reads the ring as p may see it: events about a handoff or its
// task only when p may see that handoff (Event.VisibleTo's rule, applied to
// the handoff as it stands now), every other event to anyone who may read.
// The rule is applied in SQL, before the LIMIT, so a page holds limit
// events unless there are no more; each event about a handoff costs one
// search of the handoffs primary key.
func (e *Engine) History(ctx context.Context, q Querier, p Principal, in HistoryInput) (History, error) {
	if err := p.Require(CapRead); err != nil {
		return History{}, err
	}
	limit := e.boundLimit(in.Limit, 50)
	var rows *sql.Rows
	var err error
	switch {
	case SeesEveryHandoff(p) && in.SinceEventID != nil:
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM events
			WHERE event_id > ? ORDER BY event_id ASC`+limitSQL(pageLimit(limit)), *in.SinceEventID)
	case SeesEveryHandoff(p):
		rows, err = q.QueryContext(ctx, `SELECT event_id, event_type, payload_json, created_at FROM events
			ORDER BY event_id DESC`+limitSQL(pageLimit(limit)))
	case in.SinceEventID != nil:
		rows, err = q.QueryContext(ctx, visibleHistoryQuery(true, p.Caps.Has(CapCheckout), pageLimit(limit)),
			p.ParticipantID, *in.SinceEventID)
	default:
		rows, err = q.QueryContext(ctx, visibleHistoryQuery(false, p.Caps.Has(CapCheckout), pageLimit(limit)),
			p.ParticipantID)
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

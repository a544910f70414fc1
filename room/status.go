package room

import (
	"context"
)

// Status is the room at a glance (workspace_status, GET /workspace/status).
type Status struct {
	WorkspaceID      string   `json:"workspace_id"`
	Lifecycle        string   `json:"lifecycle"`
	Version          int64    `json:"version"`
	Substrate        string   `json:"substrate"`
	Path             *string  `json:"path"` // only for admin: the host's filesystem is not the joiners' business
	Name             string   `json:"name"`
	ContentHash      string   `json:"content_hash"`
	Participants     int      `json:"participants"`
	ActiveLeases     int      `json:"active_leases"`
	PendingProposals int      `json:"pending_proposals"`
	HeadingTree      []Region `json:"heading_tree"`
}

// Status reads the room's summary counts and outline.
func (e *Engine) Status(ctx context.Context, q Querier, p Principal, _ Empty) (Status, error) {
	if err := p.Require(CapRead); err != nil {
		return Status{}, err
	}
	d, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return Status{}, err
	}
	s := Status{WorkspaceID: e.WorkspaceID, Lifecycle: "ACTIVE", Version: d.Version, Substrate: "markdown",
		Name: e.Name, ContentHash: d.Hash, HeadingTree: nonNil(d.Regions)}
	if p.IsAdmin() {
		path := e.DocPath
		s.Path = &path
	}
	err = q.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM participants WHERE left_at IS NULL),
		(SELECT count(*) FROM leases WHERE released_at IS NULL AND expires_at > ?),
		(SELECT count(*) FROM proposals WHERE status = 'pending')`, ms(e.Now())).
		Scan(&s.Participants, &s.ActiveLeases, &s.PendingProposals)
	if err != nil {
		return Status{}, Internal(err)
	}
	return s, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Counts are the room's live numbers for operators and load tests: most of
// all active_tasks, which must never exceed the cap. Each is answered from a
// partial index over rows whose number is bounded (live tasks, live
// sessions, the event ring), so sampling it often costs the same at a
// thousand handoffs as at a million; the unbounded totals are in Totals.
func (e *Engine) Counts(ctx context.Context, q Querier) (map[string]int, error) {
	var active, inputRequired, sessions, events int
	err := q.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM tasks WHERE status IN ('working','input_required')),
		(SELECT count(*) FROM tasks WHERE status IN ('working','input_required') AND status = 'input_required'),
		(SELECT count(*) FROM sessions WHERE ended_at IS NULL AND expires_at > ?),
		(SELECT count(*) FROM events)`, ms(e.Now())).Scan(&active, &inputRequired, &sessions, &events)
	if err != nil {
		return nil, Internal(err)
	}
	return map[string]int{"active_tasks": active, "input_required_tasks": inputRequired,
		"live_sessions": sessions, "events_in_ring": events}, nil
}

// Totals counts every task row and handoff in the sidecar. The cost grows
// with the sidecar, so callers sample it rarely.
func (e *Engine) Totals(ctx context.Context, q Querier) (map[string]int, error) {
	var tasks, handoffs int
	err := q.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM handoffs)`).
		Scan(&tasks, &handoffs)
	if err != nil {
		return nil, Internal(err)
	}
	return map[string]int{"task_rows": tasks, "handoffs": handoffs}, nil
}

// Listener describes how joiners reach the room, without the endpoint:
// addresses and ports never leave the host (ARCHITECTURE.md D40).
type Listener struct {
	Type      string `json:"type"`
	Mode      string `json:"mode"`
	Encrypted bool   `json:"encrypted"`
	// Describe is the exposed hint's one line, as the banner, ce status
	// and the owner page show it: "NAME (private, encrypted) host:port"
	// for an admin (the host, the operator, the owner page), without the
	// endpoint for everyone else, who never learn an address here.
	Describe string `json:"describe"`
}

// DiagnosticParticipant is a participant as diagnostics show it.
type DiagnosticParticipant struct {
	ParticipantID string  `json:"participant_id"`
	Name          string  `json:"name"`
	Kind          string  `json:"kind"`
	Transport     *string `json:"transport"`
}

// Diagnostics is the redacted connection picture.
type Diagnostics struct {
	Listener     Listener                `json:"listener"`
	Participants []DiagnosticParticipant `json:"participants"`
}

// Diagnostics reports the listener (type, mode, encryption; the endpoint
// only to an admin) and who is in the room with which transport.
func (e *Engine) Diagnostics(ctx context.Context, q Querier, p Principal, _ Empty) (Diagnostics, error) {
	if err := p.Require(CapRead); err != nil {
		return Diagnostics{}, err
	}
	h := e.currentHints()[0]
	out := Diagnostics{Listener: Listener{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted}, Participants: []DiagnosticParticipant{}}
	if p.IsAdmin() {
		out.Listener.Describe = h.Describe()
	} else {
		out.Listener.Describe = Hint{Type: h.Type, Mode: h.Mode, Encrypted: h.Encrypted}.Describe()
	}
	ps, err := e.participants(ctx, q, p)
	if err != nil {
		return Diagnostics{}, err
	}
	for _, pt := range ps {
		out.Participants = append(out.Participants, DiagnosticParticipant{
			ParticipantID: pt.ParticipantID, Name: pt.Name, Kind: pt.Kind, Transport: pt.Transport,
		})
	}
	return out, nil
}

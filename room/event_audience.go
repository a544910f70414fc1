package room

import (
	"database/sql"
	"errors"
)

// Who may be shown an event about a handoff (issue 25). Such an event names
// the handoff's id, its owner and assignee, and each transition, so a live
// stream must not show it to a session that handoff_get answers
// handoff_not_found. The hub encodes an event once for every observer, and
// the observe door asks Event.VisibleTo per observer; for that, each event
// about a handoff carries the handoff as the command leaves it (its status
// and parties: Event.audience), set here before the command's outcome is
// handed on. Nothing of it goes on the wire.

// eventAudienceQuery reads what visibleTo looks at, by the handoffs
// primary key.
const eventAudienceQuery = `SELECT status, owner_id, requested_assignee_id, assignee_id FROM handoffs WHERE handoff_id = ?`

// setEventAudiences gives every event of the command that names a handoff
// that handoff as the command leaves it: the lifecycle step's own copy when
// the writer may trust it (a create, accept, complete or decision on its
// plain path, which reads nothing), else one read per handoff.
func (tx *Tx) setEventAudiences() error {
	var seen []*handoffRow // a command names one handoff, or a few
	for i := range tx.events {
		ev := &tx.events[i]
		if ev.HandoffID == "" {
			continue
		}
		var a *handoffRow
		for _, h := range seen {
			if h.id == ev.HandoffID {
				a = h
				break
			}
		}
		if a == nil {
			var err error
			if a, err = tx.eventAudience(ev.HandoffID); err != nil {
				return err
			}
			seen = append(seen, a)
		}
		ev.audience = a
	}
	return nil
}

// eventAudience is handoff id as the command leaves it. The step's kept copy
// (handoff_wcache.go) is used only when the command wrote exactly the step's
// own rows, the rule the writer's copy itself follows; with
// verifyWriterCache (this package's tests) it is checked against the row.
// A handoff with no row gives an audience that sees nothing: its events are
// then shown to those who see every handoff only.
func (tx *Tx) eventAudience(id string) (*handoffRow, error) {
	k := tx.kept
	useKept := k != nil && k.id == id && tx.e.wc.enabled && tx.e.wc.changes-tx.changes0 == tx.keptOwn
	if useKept && !verifyWriterCache {
		return k, nil
	}
	h := handoffRow{id: id}
	err := tx.q.QueryRowContext(tx.ctx, eventAudienceQuery, id).Scan(&h.status, &h.owner, &h.requested, &h.assignee)
	if errors.Is(err, sql.ErrNoRows) {
		return &handoffRow{id: id}, nil
	}
	if err != nil {
		return nil, Internal(err)
	}
	if useKept && (k.status != h.status || k.owner != h.owner || k.requested != h.requested || k.assignee != h.assignee) {
		return nil, Errorf(KindInternal, "the writer's copy of handoff %s differs from the sidecar for its events' audience:\ncopy %s %s %v %v\nrow  %s %s %v %v",
			id, k.status, k.owner, k.requested, k.assignee, h.status, h.owner, h.requested, h.assignee)
	}
	return &h, nil
}

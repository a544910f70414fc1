package room

import (
	"context"
	"encoding/json"
	"slices"
)

// maxNameLookup bounds one ParticipantNames call: a listing page names at
// most three parties per item (owner, assignee, decider) of at most
// MaxListItems items.
const maxNameLookup = 1000

// ParticipantNames maps each of ids to its participant's name, left
// participants included: a handoff or a proposal outlives its parties'
// sessions, and the host's terminal output names people ("planner →
// writer") where the wire keeps ids. Unknown ids are left out; duplicates
// and empty strings are ignored. One statement text whatever the count (the
// ids travel as one JSON array).
func (e *Engine) ParticipantNames(ctx context.Context, q Querier, p Principal, ids []string) (map[string]string, error) {
	if err := p.Require(CapRead); err != nil {
		return nil, err
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == "" })
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) > maxNameLookup {
		return nil, Errorf(KindLimitExceeded, "at most %d participants are named at once", maxNameLookup).With("limit", maxNameLookup)
	}
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	arg, err := json.Marshal(ids)
	if err != nil {
		return nil, Internal(err)
	}
	rows, err := q.QueryContext(ctx, `SELECT participant_id, name FROM participants
		WHERE participant_id IN (SELECT value FROM json_each(?))`, string(arg))
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, Internal(err)
		}
		out[id] = name
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

package cli

import (
	"context"
	"strings"
	"unicode"

	"github.com/commonroom/ce/room"
)

// partyNames is what the host's text output calls participants: their
// names ("planner → writer"), as the owner page does, where --json keeps the
// ids. A name two participants share is followed by the id, so the line
// still says who; an id it cannot name (a sidecar read that failed) is
// shown as it is.
type partyNames map[string]string

// of is the display form of one participant id.
func (n partyNames) of(id string) string {
	name, ok := n[id]
	if !ok {
		return id
	}
	for other, o := range n {
		if o == name && other != id {
			return name + " (" + id + ")"
		}
	}
	return name
}

// withID is a participant's name followed by its id, for the one-item
// views where the id is what the next command takes ("writer
// (participant_…)"); the bare id when it has no name.
func (n partyNames) withID(id string) string {
	if name, ok := n[id]; ok {
		return name + " (" + id + ")"
	}
	return id
}

// ofPtr is of for an optional party; none when there is none.
func (n partyNames) ofPtr(id *string, none string) string {
	if id == nil || *id == "" {
		return none
	}
	return n.of(*id)
}

// namesFrom reads the names of ids on q as the local operator; a failed
// read leaves the ids as they are (the output is still right, only less
// friendly). Names are made safe for a terminal: a participant chooses its
// own name.
func namesFrom(ctx context.Context, eng *room.Engine, q room.Querier, ids ...string) partyNames {
	m, err := eng.ParticipantNames(ctx, q, room.Operator(eng.HostID), ids)
	if err != nil {
		return partyNames{}
	}
	out := make(partyNames, len(m))
	for id, name := range m {
		out[id] = oneLine(termSafe(name), 80)
	}
	return out
}

// readNames opens the sidecar of workspace read-only for namesFrom: the
// deciding commands name the parties after they acted, whether the room
// serves or not (a WAL reader never blocks the writer).
func readNames(ctx context.Context, workspace string, ids ...string) partyNames {
	var n partyNames
	if err := withReader(ctx, workspace, func(eng *room.Engine, q room.Querier) error {
		n = namesFrom(ctx, eng, q, ids...)
		return nil
	}); err != nil || n == nil {
		return partyNames{}
	}
	return n
}

// handoffParties are the ids a handoff's text output names.
func handoffParties(hs ...room.Handoff) []string {
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.OwnerID)
		for _, p := range []*string{h.AssigneeID, h.RequestedAssigneeID, h.DecidedBy, h.CancelledBy} {
			if p != nil {
				ids = append(ids, *p)
			}
		}
	}
	return ids
}

// arrow is a handoff's parties as the page shows them: "planner → writer"
// (the assignee, or the one it is addressed to until they accept), or
// "planner → (anyone)" for an open handoff nobody has taken.
func (n partyNames) arrow(h room.Handoff) string {
	to := "(anyone)"
	switch {
	case h.AssigneeID != nil:
		to = n.of(*h.AssigneeID)
	case h.RequestedAssigneeID != nil:
		to = n.of(*h.RequestedAssigneeID)
	}
	return n.of(h.OwnerID) + " → " + to
}

// termSafe replaces what a terminal would act on rather than show —
// control characters (an escape sequence could rewrite the screen) and
// invisible formatting (bidi overrides reorder what follows) — with "?".
// Text that participants wrote goes through it before the host reads it.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return '?'
		}
		return r
	}, s)
}

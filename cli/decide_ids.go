package cli

import (
	"strings"

	"github.com/commonroom/ce/room"
)

// itemKind is what a deciding command was given: the room's ids say their
// kind in their prefix (proposal_…, handoff_…), so no lookup is needed to
// tell them apart.
type itemKind string

const (
	itemProposal itemKind = "proposal"
	itemHandoff  itemKind = "handoff"
)

// otherIDKinds are the room's other handles, named in the refusal when one
// is given where a proposal or handoff id belongs.
var otherIDKinds = []struct{ prefix, what string }{
	{"task_", "a task id (the work of a handoff: decide on the handoff itself, see `ce handoffs`)"},
	{"participant_", "a participant id"},
	{"lease_", "a lease id"},
	{"invite_", "an invitation id"},
	{"sref_", "a session handle"},
	{"workspace_", "the room's id"},
}

// kindOf tells which of want id is, refusing clearly anything else: another
// of the room's kinds is invalid_request (exit 2) naming what it is and what
// the command takes; an id of no kind the room makes is not_found (exit 4),
// as an unknown id of the right kind is.
func kindOf(cmd, id string, want ...itemKind) (itemKind, error) {
	takes := make([]string, len(want))
	for i, k := range want {
		takes[i] = "a " + string(k) + " id (" + string(k) + "_…)"
	}
	takesText := strings.Join(takes, " or ")
	for _, k := range []itemKind{itemProposal, itemHandoff} {
		if strings.HasPrefix(id, string(k)+"_") {
			for _, w := range want {
				if w == k {
					return k, nil
				}
			}
			return "", room.Errorf(room.KindInvalidRequest, "%s is a %s id; ce %s takes %s%s", id, k, cmd, takesText, wrongKindHint(cmd, k))
		}
	}
	for _, o := range otherIDKinds {
		if strings.HasPrefix(id, o.prefix) {
			return "", room.Errorf(room.KindInvalidRequest, "%s is %s; ce %s takes %s", id, o.what, cmd, takesText)
		}
	}
	return "", room.Errorf(room.KindNotFound, "no %s has the id %q; ce %s takes %s", strings.Join(kindWords(want), " or "), id, cmd, takesText)
}

func kindWords(ks []itemKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// wrongKindHint says what to do with the kind that was given instead.
func wrongKindHint(cmd string, got itemKind) string {
	switch {
	case got == itemHandoff && cmd == "commit":
		return ": a handoff's result is not committed, it is approved (ce approve)"
	case got == itemProposal && cmd == "answer":
		return ": a proposal asks no questions; review it with ce approve or ce reject"
	}
	return ""
}

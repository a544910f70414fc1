package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/room"
)

// cancelHandoffsBody is POST /workspace/participant/cancel_handoffs.
type cancelHandoffsBody struct {
	ParticipantID string `json:"participant_id"`
}

// postCancelParticipantHandoffs lets an admin (the host, the local operator,
// an admin session) cancel every live handoff one participant created, in one
// command, when that participant holds the room's active tasks (issue 13
// item 10). It is the twin of ce cancel-handoffs and the owner page's button.
// It has no MCP tool on purpose: the tool catalog stays the seed's (D4) and is
// shown to every agent, while this is the host's moderation action; an admin
// agent can already cancel each task with tasks/cancel, or call this route
// with its session.
func (s *Server) postCancelParticipantHandoffs(w http.ResponseWriter, r *http.Request) {
	var in cancelHandoffsBody
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "participant.cancel_handoffs", func(tx *room.Tx, p room.Principal) (room.CancelHandoffsResult, error) {
		return s.eng.CancelParticipantHandoffs(tx, p, room.CancelHandoffsInput(in))
	})
}

package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/room"
)

// postEndSession is POST /workspace/session/end {session_ref | participant_id}:
// the host (operator token or owner page) or an admin session ends one
// session, or every session of a participant (issue 13, item 11).
func (s *Server) postEndSession(w http.ResponseWriter, r *http.Request) {
	var in room.EndSessionInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	write(s, w, r, "session.end", func(tx *room.Tx, p room.Principal) (room.EndSessionResult, error) {
		return s.eng.EndSession(tx, p, in)
	})
}

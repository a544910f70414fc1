package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/room"
)

// requireOperatorBearer admits only the operator token itself, presented as
// the bearer on the owner listener, acting as nobody else. /debug/* and
// POST /owner/key use it: the owner-page cookie is for the page, which never
// needs a heap profile or a new page key, and X-Commonroom-Act-As narrows
// the operator to one participant's rights, which never include these
// (SECURITY.md, issue 13 item 14). It answers the refusal itself and
// reports whether the handler may go on.
func (s *Server) requireOperatorBearer(w http.ResponseWriter, r *http.Request, what string) bool {
	if s.isOperator(bearer(r)) && r.Header.Get(ActAsHeader) == "" && principalOf(r).Trusted {
		return true
	}
	s.sendError(w, r, room.Errorf(room.KindPermissionDenied,
		"%s are for the local operator: send the operator token of FILE.commonroom.owner as the bearer", what))
	return false
}

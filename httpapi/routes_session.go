package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// joinRequest is the body of POST /session/join.
type joinRequest struct {
	Invite      string `json:"invite"`
	InviteToken string `json:"invite_token"`
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	// Transport is what the client says it came through. It is read and
	// ignored: the room records the transport it saw (transportOf).
	Transport string `json:"transport"`
}

func (s *Server) join(w http.ResponseWriter, r *http.Request) {
	var in joinRequest
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	raw := in.Invite
	if raw == "" {
		raw = in.InviteToken
	}
	if raw == "" {
		s.sendError(w, r, room.Errorf(room.KindInvalidRequest, "invite is required").With("field", "invite"))
		return
	}
	secret, err := room.SecretFrom(raw, s.limits.MaxInvitePayload)
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	grant, err := actor.Do(r.Context(), s.room, "join", func(tx *room.Tx) (room.SessionGrant, error) {
		return s.eng.Join(tx, room.JoinInput{Secret: secret, Name: in.Name, Kind: in.Kind, Transport: s.transportOf(r)})
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	sendJSON(w, http.StatusOK, grant)
}

package httpapi

import (
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// joinRequest is the body of POST /session/join, in either form: the
// proven join's second step (invite_id, server_nonce, client_proof), or
// the one-step join that sends the invitation itself (invite, or its
// alias invite_token). The one-step form puts the secret on the wire and is
// kept only for the clients that already use it; `ce` never sends it.
type joinRequest struct {
	Invite      string `json:"invite"`
	InviteToken string `json:"invite_token"`
	InviteID    string `json:"invite_id"`
	ServerNonce string `json:"server_nonce"`
	ClientProof string `json:"client_proof"`
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	// Transport is what the client says it came through. It is read and
	// ignored: the room records the transport it saw (transportOf).
	Transport string `json:"transport"`
	// Page asks, on the proven join, for a one-time key to the joiner's
	// page (issue 28), sealed into the answer beside the token: `ce join`
	// prints it as the Page: link without sending the new token anywhere.
	Page bool `json:"page"`
}

// joinChallenge is POST /session/join/challenge, the proven join's first
// step: the room proves it holds the invitation's key before the joiner
// sends anything that could redeem it. It only reads, so it goes to the
// read pool, never the writer.
func (s *Server) joinChallenge(w http.ResponseWriter, r *http.Request) {
	var in room.JoinChallengeInput
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	ch, err := actor.Read(r.Context(), s.room, func(q room.Querier) (room.JoinChallenge, error) {
		return s.eng.JoinChallenge(r.Context(), q, in)
	})
	if err != nil {
		s.sendError(w, r, err)
		return
	}
	sendJSON(w, http.StatusOK, ch)
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
	proven := in.ServerNonce != "" || in.ClientProof != ""
	if proven && raw != "" {
		s.sendError(w, r, room.Errorf(room.KindInvalidRequest,
			"send either the proven join (invite_id, server_nonce, client_proof) or an invite, not both").With("field", "invite"))
		return
	}
	if proven {
		var pageKey string
		if in.Page {
			pageKey = randomToken()
		}
		grant, err := actor.Do(r.Context(), s.room, "join", func(tx *room.Tx) (room.ProvenGrant, error) {
			return s.eng.JoinProven(tx, room.ProvenJoinInput{InviteID: in.InviteID, ServerNonce: in.ServerNonce,
				ClientProof: in.ClientProof, Name: in.Name, Kind: in.Kind, Transport: s.transportOf(r), PageKey: pageKey})
		})
		if err != nil {
			s.sendError(w, r, err)
			return
		}
		if pageKey != "" {
			s.sessionPages.adopt(pageKey, [32]byte(grant.TokenHash), grant.SessionRef)
		}
		noteParticipant(r, grant.ParticipantID)
		sendJSON(w, http.StatusOK, grant)
		return
	}
	if raw == "" {
		s.sendError(w, r, room.Errorf(room.KindInvalidRequest,
			"invite is required, or the proven join's invite_id, server_nonce and client_proof (after POST /session/join/challenge)").With("field", "invite"))
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
	noteParticipant(r, grant.ParticipantID)
	sendJSON(w, http.StatusOK, grant)
}

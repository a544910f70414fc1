package cli

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// The joiner's side of the proven join (room/joinproof.go has the wire
// form): whatever a hint leads to must prove it is the invited room before
// it is sent anything that could redeem the invitation, and the secret is
// never sent at all. `ce join`, `ce mcp` (through joinRemote) and `ce call
// --invite` use it; none of them ever sends the one-step join.

// joinKey is what the proven join needs from an invitation: k (derived
// from the secret, which stays here), the room and the invitation's
// handle.
type joinKey struct {
	k           []byte
	workspaceID string
	inviteID    string
}

// keyOf derives the proven join's key from an invitation. An invitation
// without its handle (made by a ce older than the proven join) cannot be
// used: the room could not find it without the secret, and the secret is
// never sent.
func keyOf(inv room.Invitation) (joinKey, error) {
	if inv.InviteID == "" {
		return joinKey{}, room.Errorf(room.KindInvalidRequest,
			"this invitation names no invite_id: it was made by an older ce, and this ce never sends an invitation's secret over the wire "+
				"(the room proves itself with the invitation's id); ask the host for a new invitation (ce invite)")
	}
	return joinKey{k: room.JoinKey(inv.Secret), workspaceID: inv.WorkspaceID, inviteID: inv.InviteID}, nil
}

// notTheRoom is the reason a hint is skipped when what answered there did
// not prove it is the room: transport_unavailable, so the walk tries the
// next hint, and nothing that redeems the invitation was sent.
func notTheRoom(why string) error {
	return room.Errorf(room.KindTransportUnavailable,
		"what answered is not the invited room (%s); nothing that redeems the invitation was sent to it", why)
}

// challengeRoom is the proven join's first step: it sends only the
// invitation's handle and a fresh nonce, and accepts the answer only when
// its proof verifies under k for this room, invitation and both nonces
// (compared in constant time). It returns the join's transcript.
func challengeRoom(ctx context.Context, hc *http.Client, base string, key joinKey) (room.JoinTranscript, error) {
	t := room.JoinTranscript{WorkspaceID: key.workspaceID, InviteID: key.inviteID, ClientNonce: room.NewJoinNonce()}
	var ch room.JoinChallenge
	err := callRoom(ctx, hc, "POST", base+"/session/join/challenge", "",
		map[string]string{"invite_id": key.inviteID, "client_nonce": t.ClientNonce}, &ch)
	switch {
	case err == nil:
	case room.ErrorKind(err) == room.KindNotFound:
		return t, notTheRoom("it offers no proven join: not a room, or a room older than this ce")
	case room.ErrorKind(err) == room.KindInternal:
		return t, notTheRoom("its answer is not a room's")
	default:
		return t, err
	}
	t.ServerNonce = ch.ServerNonce
	if ch.ServerNonce == "" || !room.ProofEqual(ch.RoomProof, room.RoomProof(key.k, t)) {
		return t, notTheRoom("its proof of holding the invitation does not verify")
	}
	return t, nil
}

// provenJoin is the whole proven join at base over hc: the challenge, then
// the client's proof with the name and kind it covers, then the session
// token opened from its seal. transportType is sent for the record only
// (the room ignores it). With page, the room is asked for a one-time key to
// the joiner's page (issue 28), which comes back sealed like the token; a
// room too old to make one answers without it, and pageKey is "".
func provenJoin(ctx context.Context, hc *http.Client, base string, key joinKey, name, kind, transportType string, page bool) (g room.SessionGrant, pageKey string, err error) {
	t, err := challengeRoom(ctx, hc, base, key)
	if err != nil {
		return room.SessionGrant{}, "", err
	}
	var pg room.ProvenGrant
	if err := callRoom(ctx, hc, "POST", base+"/session/join", "", map[string]any{
		"invite_id": key.inviteID, "server_nonce": t.ServerNonce, "client_proof": room.ClientProof(key.k, t, name, kind),
		"name": name, "kind": kind, "transport": transportType, "page": page,
	}, &pg); err != nil {
		return room.SessionGrant{}, "", err
	}
	token, err := room.OpenSessionToken(key.k, t, pg.SessionRef, pg.ParticipantID, pg.SealedSessionToken)
	if err != nil {
		return room.SessionGrant{}, "", room.Errorf(room.KindInternal,
			"the room's answer holds no session sealed to this join (was it altered on the way?); the invitation may have been spent")
	}
	if page && pg.SealedPageKey != "" {
		// A key that does not open is dropped: the session is good, only
		// the page link is not printed.
		pageKey, _ = room.OpenPageKey(key.k, t, pg.SessionRef, pg.ParticipantID, pg.SealedPageKey)
	}
	g = pg.SessionGrant
	g.SessionToken = token
	return g, pageKey, nil
}

// loopbackElsewhere is why a loopback hint must not be dialled from this
// machine, or "" when it may be: its machine tag names another machine
// (or network namespace), so whatever listens on that port here is not
// the room. A hint without a tag (an older invitation, or a room that
// cannot tell its machine apart) is tried: the proven join keeps the
// invitation from whatever answers.
func loopbackElsewhere(h room.Hint, workspaceID string) string {
	if h.Type != transport.LoopbackName {
		return ""
	}
	theirs := h.Params[room.HintParamMachine]
	if theirs == "" {
		return ""
	}
	switch mine := room.MachineTag(workspaceID); {
	case mine == "":
		return "the room is on a machine with a machine tag and this one has none to compare (no /etc/machine-id): not dialled, its loopback may not be this one's"
	case mine != theirs:
		return "the room is on another machine (the hint's machine tag is not this machine's): its loopback port here is not the room, not dialled"
	}
	return ""
}

// dialClient is the HTTP client of one hint walked by the proven join:
// every connection is dial, the whole exchange bounded by timeout, and a
// redirect is an answer, never followed (the join goes to what the hint
// leads to or nowhere). dialFailure returns the last dial's error, so a
// failure can be told as the transport's own reason.
func dialClient(dial func(context.Context, string, string) (net.Conn, error), timeout time.Duration) (hc *http.Client, dialFailure func() error) {
	var dialErr atomic.Pointer[error]
	hc = &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					dialErr.Store(&err)
				}
				return c, err
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return hc, func() error {
		if de := dialErr.Load(); de != nil {
			return *de
		}
		return nil
	}
}

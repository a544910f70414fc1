package httpapi

// The proven join over HTTP (issue 25, item 2), driven by a hand-made
// client on the real ingress: POST /session/join/challenge, then POST
// /session/join with the client's proof; and the one-step join, which
// sends the secret, still working for the clients that already use it.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/commonroom/ce/room"
)

// provenClient is a joiner that speaks the proven join by hand.
type provenClient struct {
	h   *roomHarness
	inv room.Invitation
	k   []byte
}

func newProvenClient(t *testing.T, h *roomHarness, uri string) *provenClient {
	t.Helper()
	inv, err := room.DecodeInvitation(uri, room.Defaults().MaxInvitePayload)
	if err != nil || inv.InviteID == "" {
		t.Fatalf("the invitation does not name its id: %v %+v", err, inv)
	}
	return &provenClient{h: h, inv: inv, k: room.JoinKey(inv.Secret)}
}

// challenge runs the first step and checks the room's proof.
func (c *provenClient) challenge(t *testing.T) room.JoinTranscript {
	t.Helper()
	tr := room.JoinTranscript{WorkspaceID: c.inv.WorkspaceID, InviteID: c.inv.InviteID, ClientNonce: room.NewJoinNonce()}
	r := c.h.do("POST", c.h.IngressURL("/session/join/challenge"), "", map[string]any{"invite_id": tr.InviteID, "client_nonce": tr.ClientNonce})
	wantOK(t, r)
	var ch room.JoinChallenge
	r.Into(t, &ch)
	tr.ServerNonce = ch.ServerNonce
	if !room.ProofEqual(ch.RoomProof, room.RoomProof(c.k, tr)) {
		t.Fatalf("the room's proof does not verify: %s", r.Body)
	}
	return tr
}

// second is the second step's body for tr, as an honest joiner sends it.
func (c *provenClient) second(tr room.JoinTranscript, name string) map[string]any {
	return map[string]any{"invite_id": tr.InviteID, "server_nonce": tr.ServerNonce,
		"client_proof": room.ClientProof(c.k, tr, name, "agent"), "name": name, "kind": "agent"}
}

// join runs both steps and opens the sealed token.
func (c *provenClient) join(t *testing.T, name string) sessionGrant {
	t.Helper()
	tr := c.challenge(t)
	r := c.h.joinRaw(c.second(tr, name))
	wantOK(t, r)
	if _, has := r.JSON(t)["session_token"]; has {
		t.Fatalf("the proven join's answer carries the token in clear: %s", r.Body)
	}
	var g struct {
		sessionGrant
		Sealed string `json:"sealed_session_token"`
	}
	r.Into(t, &g)
	tok, err := room.OpenSessionToken(c.k, tr, g.SessionRef, g.ParticipantID, g.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	g.SessionToken = tok
	return g.sessionGrant
}

func (h *roomHarness) usedCount(inviteID string) int {
	return h.Count(`SELECT used_count FROM invites WHERE invite_id = ?`, inviteID)
}

// TestProvenJoinOverHTTP: what the ingress admits and refuses in the proven
// join, and that nothing refused spends the invitation.
func TestProvenJoinOverHTTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient)
	}{
		{"an_honest_joiner_gets_a_working_session_the_wire_never_showed", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			s := c.join(t, "alice")
			wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
			if h.usedCount(g.InviteID) != 1 || s.Name != "alice" || s.Transport != "loopback" {
				t.Errorf("grant %+v, used %d", s, h.usedCount(g.InviteID))
			}
		}},
		{"a_proof_that_does_not_verify_is_refused_and_the_invitation_still_joins", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			tr := c.challenge(t)
			body := c.second(tr, "mallory")
			body["client_proof"] = room.ClientProof(room.JoinKey("guess"), tr, "mallory", "agent")
			wantError(t, h.joinRaw(body), http.StatusUnauthorized, "unauthorized")
			if h.usedCount(g.InviteID) != 0 {
				t.Fatal("a refused proof spent a use")
			}
			c.join(t, "alice")
		}},
		{"a_replayed_second_step_is_refused", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			tr := c.challenge(t)
			body := c.second(tr, "alice")
			wantOK(t, h.joinRaw(body))
			wantError(t, h.joinRaw(body), http.StatusUnauthorized, "unauthorized")
			if h.usedCount(g.InviteID) != 1 {
				t.Fatalf("the replay spent a use: %d", h.usedCount(g.InviteID))
			}
		}},
		{"an_expired_challenge_is_refused", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			tr := c.challenge(t)
			h.Clock.Advance(room.JoinChallengeTTL)
			wantError(t, h.joinRaw(c.second(tr, "alice")), http.StatusUnauthorized, "unauthorized")
			c.join(t, "alice")
		}},
		{"both_forms_at_once_are_refused", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			body := c.second(c.challenge(t), "alice")
			body["invite"] = g.URI
			wantError(t, h.joinRaw(body), http.StatusBadRequest, "invalid_request")
			if h.usedCount(g.InviteID) != 0 {
				t.Fatal("a refused join spent a use")
			}
		}},
		{"the_one_step_join_still_admits_a_client_that_sends_the_invitation", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			r := h.joinRaw(map[string]any{"invite": g.URI, "name": "old-client"})
			wantOK(t, r)
			var s sessionGrant
			r.Into(t, &s)
			wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
		}},
		{"an_unknown_invitation_or_a_bad_nonce_gets_no_challenge", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			url := h.IngressURL("/session/join/challenge")
			wantError(t, h.do("POST", url, "", map[string]any{"invite_id": "invite_0000000000000000", "client_nonce": room.NewJoinNonce()}),
				http.StatusUnauthorized, "unauthorized")
			m := wantError(t, h.do("POST", url, "", map[string]any{"invite_id": g.InviteID, "client_nonce": "short"}),
				http.StatusBadRequest, "invalid_request")
			if m["field"] != "client_nonce" {
				t.Errorf("field %v", m["field"])
			}
			if h.Eng.OutstandingJoinChallenges() != 0 {
				t.Fatal("a refused challenge holds a slot")
			}
		}},
		{"a_flood_of_challenges_is_bounded_and_the_holder_still_joins", func(t *testing.T, h *roomHarness, g inviteGrant, c *provenClient) {
			for range 5 * room.MaxJoinChallengesPerInvite {
				wantOK(t, h.do("POST", h.IngressURL("/session/join/challenge"), "",
					map[string]any{"invite_id": g.InviteID, "client_nonce": room.NewJoinNonce()}))
			}
			if n := h.Eng.OutstandingJoinChallenges(); n != room.MaxJoinChallengesPerInvite {
				t.Fatalf("the room holds %d challenges, want its per-invitation cap %d", n, room.MaxJoinChallengesPerInvite)
			}
			var m struct {
				Room map[string]int `json:"room"`
			}
			h.do("GET", h.OwnerURL("/debug/metrics"), h.OpToken, nil).Into(t, &m)
			if got := m.Room["join_challenges_outstanding"]; got != room.MaxJoinChallengesPerInvite {
				t.Fatalf("/debug/metrics room.join_challenges_outstanding = %d, want %d", got, room.MaxJoinChallengesPerInvite)
			}
			c.join(t, "alice")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			g := h.Invite(map[string]any{"max_uses": 2})
			tc.run(t, h, g, newProvenClient(t, h, g.URI))
		})
	}
}

// TestProvenJoin_NeitherStepCarriesTheSecret: everything a joiner sends in
// the proven join holds neither the secret nor k in any common encoding,
// and the room's answers hold no clear session token.
func TestProvenJoin_NeitherStepCarriesTheSecret(t *testing.T) {
	h := newHarness(t, "")
	g := h.Invite(nil)
	c := newProvenClient(t, h, g.URI)
	tr := room.JoinTranscript{WorkspaceID: c.inv.WorkspaceID, InviteID: c.inv.InviteID, ClientNonce: room.NewJoinNonce()}
	first := map[string]any{"invite_id": tr.InviteID, "client_nonce": tr.ClientNonce}
	r1 := h.do("POST", h.IngressURL("/session/join/challenge"), "", first)
	wantOK(t, r1)
	var ch room.JoinChallenge
	r1.Into(t, &ch)
	tr.ServerNonce = ch.ServerNonce
	second := c.second(tr, "alice")
	r2 := h.joinRaw(second)
	wantOK(t, r2)
	sent := fieldsText(first) + fieldsText(second)
	for name, secret := range secretForms(c.inv.Secret) {
		if bytes.Contains([]byte(sent), []byte(secret)) {
			t.Errorf("the joiner sent the %s", name)
		}
	}
	var s struct {
		SessionRef    string `json:"session_ref"`
		ParticipantID string `json:"participant_id"`
		Sealed        string `json:"sealed_session_token"`
	}
	r2.Into(t, &s)
	tok, err := room.OpenSessionToken(c.k, tr, s.SessionRef, s.ParticipantID, s.Sealed)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(r1.Body, []byte(tok)) || bytes.Contains(r2.Body, []byte(tok)) {
		t.Error("an answer carries the session token in clear")
	}
}

// secretForms are the invitation secret and k = SHA-256(secret) as they
// could appear on a wire: in clear, hex, and base64 (both alphabets,
// padded or not).
func secretForms(secret string) map[string]string {
	k := room.JoinKey(secret)
	return map[string]string{
		"secret": secret, "k in hex": hex.EncodeToString(k),
		"k in base64url": base64.RawURLEncoding.EncodeToString(k), "k in base64": base64.StdEncoding.EncodeToString(k),
		"k in raw bytes": string(k),
	}
}

// fieldsText is every string value of a request body, one per line.
func fieldsText(v map[string]any) string {
	var b bytes.Buffer
	for k, x := range v {
		b.WriteString(k + "=")
		if s, ok := x.(string); ok {
			b.WriteString(s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

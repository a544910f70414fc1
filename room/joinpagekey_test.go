package room_test

// The joiner's page key (issue 28) travels sealed in the proven join's
// answer, as the token does: only the joiner opens it, it cannot be taken
// for the token (or the token for it), and the room hands the front door
// the token's hash to bind the key to, never the token.

import (
	"bytes"
	"testing"

	"github.com/commonroom/ce/room"
)

func TestJoinProvenPageKey(t *testing.T) {
	two := 2
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env, s provenStep)
	}{
		{"a_page_key_asked_for_is_sealed_and_opens_for_the_joiner_only", func(t *testing.T, e *env, s provenStep) {
			in := s.input("alice")
			in.PageKey = "page-key-for-alice"
			g, err := e.joinProven(in)
			if err != nil {
				t.Fatal(err)
			}
			if g.SealedPageKey == "" || bytes.Contains([]byte(g.SealedPageKey), []byte(in.PageKey)) {
				t.Fatalf("sealed page key %q", g.SealedPageKey)
			}
			key, err := room.OpenPageKey(s.k, s.tr, g.SessionRef, g.ParticipantID, g.SealedPageKey)
			if err != nil || key != in.PageKey {
				t.Fatalf("opened %q, %v", key, err)
			}
			tok, err := room.OpenSessionToken(s.k, s.tr, g.SessionRef, g.ParticipantID, g.SealedSessionToken)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(g.TokenHash, room.HashSecret(tok)) {
				t.Errorf("TokenHash is not the token's hash")
			}
			if _, err := room.OpenSessionToken(s.k, s.tr, g.SessionRef, g.ParticipantID, g.SealedPageKey); err == nil {
				t.Errorf("the sealed page key opens as a token")
			}
			if _, err := room.OpenPageKey(s.k, s.tr, g.SessionRef, g.ParticipantID, g.SealedSessionToken); err == nil {
				t.Errorf("the sealed token opens as a page key")
			}
			other := s.tr
			other.ClientNonce = room.NewJoinNonce()
			if _, err := room.OpenPageKey(s.k, other, g.SessionRef, g.ParticipantID, g.SealedPageKey); err == nil {
				t.Errorf("the page key opens for another join's transcript")
			}
		}},
		{"no_page_key_asked_for_none_sealed", func(t *testing.T, e *env, s provenStep) {
			g, err := e.joinProven(s.input("bob"))
			if err != nil {
				t.Fatal(err)
			}
			if g.SealedPageKey != "" {
				t.Errorf("sealed page key %q without one asked for", g.SealedPageKey)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			inv, err := e.invite(e.op(), room.InviteInput{MaxUses: &two})
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, e, e.challengeChecked(t, inv))
		})
	}
}

package room_test

// The proven join (issue 25, item 2): the room proves it holds the
// invitation's key before the joiner sends anything that redeems it, the
// secret never travels, the token travels sealed, every server nonce is
// single-use, short-lived and bounded in number, and a failed attempt
// spends no use of the invitation.

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestJoinProofs_BindEveryField: each proof and the seal change with every
// field of the transcript and with the key, so nothing from one join, one
// step, one invitation or one room fits another.
func TestJoinProofs_BindEveryField(t *testing.T) {
	k := room.JoinKey("the-secret")
	base := room.JoinTranscript{WorkspaceID: "workspace_a", InviteID: "invite_a", ClientNonce: room.NewJoinNonce(), ServerNonce: room.NewJoinNonce()}
	roomProof := room.RoomProof(k, base)
	clientProof := room.ClientProof(k, base, "agent-1", "agent")
	sealed := room.SealSessionToken(k, base, "sref_1", "participant_1", "ses_token")
	if tok, err := room.OpenSessionToken(k, base, "sref_1", "participant_1", sealed); err != nil || tok != "ses_token" {
		t.Fatalf("the seal does not open for its own join: %q, %v", tok, err)
	}
	if bytes.Contains([]byte(sealed), []byte("ses_token")) {
		t.Fatal("the sealed token shows the token")
	}
	if room.ProofEqual(roomProof, clientProof) {
		t.Fatal("the room's and the client's proofs are the same MAC")
	}
	for _, tc := range []struct {
		name string
		k    []byte
		t    room.JoinTranscript
	}{
		{"another_key_proves_nothing", room.JoinKey("another-secret"), base},
		{"another_room_proves_nothing", k, with(base, func(t *room.JoinTranscript) { t.WorkspaceID = "workspace_b" })},
		{"another_invitation_proves_nothing", k, with(base, func(t *room.JoinTranscript) { t.InviteID = "invite_b" })},
		{"another_client_nonce_proves_nothing", k, with(base, func(t *room.JoinTranscript) { t.ClientNonce = room.NewJoinNonce() })},
		{"another_server_nonce_proves_nothing", k, with(base, func(t *room.JoinTranscript) { t.ServerNonce = room.NewJoinNonce() })},
		{"fields_moved_across_a_boundary_prove_nothing", k, with(base, func(t *room.JoinTranscript) {
			t.WorkspaceID, t.InviteID = base.WorkspaceID+base.InviteID[:1], base.InviteID[1:]
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if room.ProofEqual(roomProof, room.RoomProof(tc.k, tc.t)) {
				t.Error("the room proof verified")
			}
			if room.ProofEqual(clientProof, room.ClientProof(tc.k, tc.t, "agent-1", "agent")) {
				t.Error("the client proof verified")
			}
			if _, err := room.OpenSessionToken(tc.k, tc.t, "sref_1", "participant_1", sealed); err == nil {
				t.Error("the sealed token opened")
			}
		})
	}
	for _, tc := range []struct{ name, ref, pid, sealed, who, kind string }{
		{"the_seal_is_bound_to_its_session_ref", "sref_2", "participant_1", sealed, "agent-1", "agent"},
		{"the_seal_is_bound_to_its_participant", "sref_1", "participant_2", sealed, "agent-1", "agent"},
		{"a_tampered_seal_does_not_open", "sref_1", "participant_1", flipLast(sealed), "agent-1", "agent"},
		{"a_truncated_seal_does_not_open", "sref_1", "participant_1", sealed[:10], "agent-1", "agent"},
		{"the_client_proof_covers_the_name", "sref_1", "participant_1", "", "agent-2", "agent"},
		{"the_client_proof_covers_the_kind", "sref_1", "participant_1", "", "agent-1", "human"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.sealed != "" {
				if _, err := room.OpenSessionToken(k, base, tc.ref, tc.pid, tc.sealed); err == nil {
					t.Error("the sealed token opened")
				}
				return
			}
			if room.ProofEqual(clientProof, room.ClientProof(k, base, tc.who, tc.kind)) {
				t.Error("the client proof verified for another name or kind")
			}
		})
	}
	if room.ProofEqual("not base64!", "not base64!") {
		t.Error("a malformed proof compared equal")
	}
}

func with(t room.JoinTranscript, f func(*room.JoinTranscript)) room.JoinTranscript {
	f(&t)
	return t
}

// flipLast changes the last byte of what a base64url string encodes (its
// last character alone may hold only padding bits).
func flipLast(s string) string {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	b[len(b)-1] ^= 1
	return base64.RawURLEncoding.EncodeToString(b)
}

// challenge asks the room for a challenge on the read pool, as the route does.
func (e *env) challenge(inviteID, clientNonce string) (room.JoinChallenge, error) {
	return read(e, func(eng *room.Engine, q room.Querier) (room.JoinChallenge, error) {
		return eng.JoinChallenge(context.Background(), q, room.JoinChallengeInput{InviteID: inviteID, ClientNonce: clientNonce})
	})
}

// joinProven sends the second step.
func (e *env) joinProven(in room.ProvenJoinInput) (room.ProvenGrant, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.ProvenGrant, error) { return eng.JoinProven(tx, in) })
}

// provenStep is a challenge the test checked, ready for the second step.
type provenStep struct {
	k  []byte
	tr room.JoinTranscript
}

// challengeChecked runs the first step and checks the room's proof as a
// joiner does.
func (e *env) challengeChecked(t *testing.T, inv room.InviteGrant) provenStep {
	t.Helper()
	cn := room.NewJoinNonce()
	ch, err := e.challenge(inv.InviteID, cn)
	if err != nil {
		t.Fatal(err)
	}
	k := room.JoinKey(inv.Token)
	tr := room.JoinTranscript{WorkspaceID: e.eng.WorkspaceID, InviteID: inv.InviteID, ClientNonce: cn, ServerNonce: ch.ServerNonce}
	if ch.WorkspaceID != e.eng.WorkspaceID || ch.InviteID != inv.InviteID || !room.ProofEqual(ch.RoomProof, room.RoomProof(k, tr)) {
		t.Fatalf("the room's challenge does not prove it: %+v", ch)
	}
	return provenStep{k: k, tr: tr}
}

// input is the second step as an honest joiner sends it.
func (s provenStep) input(name string) room.ProvenJoinInput {
	return room.ProvenJoinInput{InviteID: s.tr.InviteID, ServerNonce: s.tr.ServerNonce,
		ClientProof: room.ClientProof(s.k, s.tr, name, "agent"), Name: name, Kind: "agent", Transport: "test"}
}

func (e *env) usedCount(inviteID string) int64 {
	return e.scalar(`SELECT used_count FROM invites WHERE invite_id = ?`, inviteID)
}

// TestJoinProven: the whole protocol against the engine on a real sidecar:
// what is admitted, what is refused, and that a refusal spends no use.
func TestJoinProven(t *testing.T) {
	two := 2
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, e *env, inv room.InviteGrant)
	}{
		{"an_honest_join_is_admitted_with_its_token_sealed", func(t *testing.T, e *env, inv room.InviteGrant) {
			s := e.challengeChecked(t, inv)
			g, err := e.joinProven(s.input("alice"))
			if err != nil {
				t.Fatal(err)
			}
			if g.SessionToken != "" {
				t.Fatal("the proven grant carries the token in clear")
			}
			tok, err := room.OpenSessionToken(s.k, s.tr, g.SessionRef, g.ParticipantID, g.SealedSessionToken)
			if err != nil {
				t.Fatal(err)
			}
			if p, err := e.authenticate(tok); err != nil || p.ParticipantID != g.ParticipantID {
				t.Fatalf("the opened token does not authenticate: %v", err)
			}
			if g.Name != "alice" || g.WorkspaceID != e.eng.WorkspaceID || e.usedCount(inv.InviteID) != 1 {
				t.Errorf("grant %+v, used %d", g, e.usedCount(inv.InviteID))
			}
		}},
		{"a_proof_that_does_not_verify_is_refused_and_spends_nothing", func(t *testing.T, e *env, inv room.InviteGrant) {
			s := e.challengeChecked(t, inv)
			bad := s.input("mallory")
			bad.ClientProof = room.ClientProof(room.JoinKey("a guess"), s.tr, "mallory", "agent")
			_, err := e.joinProven(bad)
			wantKind(t, err, room.KindUnauthorized)
			if e.usedCount(inv.InviteID) != 0 || len(e.participantIDs()) != 1 {
				t.Fatal("a refused proof spent a use or admitted someone")
			}
			// The nonce went with the attempt: even the right proof on it fails.
			_, err = e.joinProven(s.input("mallory"))
			wantKind(t, err, room.KindUnauthorized)
			if _, err := e.joinProven(e.challengeChecked(t, inv).input("alice")); err != nil {
				t.Fatalf("the invitation no longer joins its holder: %v", err)
			}
		}},
		{"a_replayed_server_nonce_is_refused", func(t *testing.T, e *env, inv room.InviteGrant) {
			s := e.challengeChecked(t, inv)
			if _, err := e.joinProven(s.input("alice")); err != nil {
				t.Fatal(err)
			}
			_, err := e.joinProven(s.input("alice"))
			wantKind(t, err, room.KindUnauthorized)
			if e.usedCount(inv.InviteID) != 1 {
				t.Fatalf("the replay spent a use: %d", e.usedCount(inv.InviteID))
			}
		}},
		{"an_expired_challenge_is_refused_by_the_rooms_clock", func(t *testing.T, e *env, inv room.InviteGrant) {
			s := e.challengeChecked(t, inv)
			e.clock.Advance(room.JoinChallengeTTL)
			_, err := e.joinProven(s.input("alice"))
			wantKind(t, err, room.KindUnauthorized)
			if e.usedCount(inv.InviteID) != 0 {
				t.Fatal("an expired challenge spent a use")
			}
		}},
		{"a_challenge_for_another_invitation_is_refused", func(t *testing.T, e *env, inv room.InviteGrant) {
			other, err := e.invite(e.op(), room.InviteInput{})
			if err != nil {
				t.Fatal(err)
			}
			s := e.challengeChecked(t, other)
			in := s.input("alice")
			in.InviteID = inv.InviteID
			_, err = e.joinProven(in)
			wantKind(t, err, room.KindUnauthorized)
			if e.usedCount(inv.InviteID)+e.usedCount(other.InviteID) != 0 {
				t.Fatal("a mismatched challenge spent a use")
			}
		}},
		{"a_name_changed_on_the_way_is_refused", func(t *testing.T, e *env, inv room.InviteGrant) {
			in := e.challengeChecked(t, inv).input("alice")
			in.Name = "mallory"
			_, err := e.joinProven(in)
			wantKind(t, err, room.KindUnauthorized)
		}},
		{"a_spent_invitation_still_proves_the_room_and_refuses_the_join", func(t *testing.T, e *env, inv room.InviteGrant) {
			if _, err := e.joinProven(e.challengeChecked(t, inv).input("alice")); err != nil {
				t.Fatal(err)
			}
			if _, err := e.revoke(e.op(), room.RevokeInput{InviteID: inv.InviteID}); err != nil {
				t.Fatal(err)
			}
			_, err := e.joinProven(e.challengeChecked(t, inv).input("bob"))
			wantKind(t, err, room.KindInvitationRevoked)
		}},
		{"an_unknown_invitation_gets_no_challenge", func(t *testing.T, e *env, inv room.InviteGrant) {
			_, err := e.challenge("invite_0000000000000000", room.NewJoinNonce())
			wantKind(t, err, room.KindUnauthorized)
			_, err = e.challenge(inv.Token, room.NewJoinNonce())
			wantKind(t, err, room.KindUnauthorized)
		}},
		{"a_malformed_client_nonce_is_refused_before_any_lookup", func(t *testing.T, e *env, inv room.InviteGrant) {
			for _, cn := range []string{"", "short", room.NewJoinNonce() + "AA", "not base64url!"} {
				_, err := e.challenge(inv.InviteID, cn)
				wantKind(t, err, room.KindInvalidRequest)
			}
			if e.eng.OutstandingJoinChallenges() != 0 {
				t.Fatal("a refused challenge holds a slot")
			}
		}},
		{"a_second_step_without_its_fields_is_refused", func(t *testing.T, e *env, inv room.InviteGrant) {
			_, err := e.joinProven(room.ProvenJoinInput{InviteID: inv.InviteID})
			wantKind(t, err, room.KindInvalidRequest)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			inv, err := e.invite(e.op(), room.InviteInput{MaxUses: &two})
			if err != nil {
				t.Fatal(err)
			}
			tc.run(t, e, inv)
		})
	}
}

// TestJoinChallenges_AFloodIsBounded: no number of challenges grows the
// room's memory past its caps, per invitation and overall; the newest
// challenge always survives a flood, so its joiner still gets in.
func TestJoinChallenges_AFloodIsBounded(t *testing.T) {
	for _, tc := range []struct {
		name     string
		invites  int
		perEach  int
		wantHeld int
	}{
		{"one_invitation_flooded_holds_its_cap", 1, 20 * room.MaxJoinChallengesPerInvite, room.MaxJoinChallengesPerInvite},
		{"many_invitations_flooded_hold_the_rooms_cap", room.MaxJoinChallenges/room.MaxJoinChallengesPerInvite + 8,
			2 * room.MaxJoinChallengesPerInvite, room.MaxJoinChallenges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			invs := make([]room.InviteGrant, tc.invites)
			for i := range invs {
				var err error
				if invs[i], err = e.invite(e.op(), room.InviteInput{}); err != nil {
					t.Fatal(err)
				}
			}
			for round := 0; round < tc.perEach; round++ {
				for _, inv := range invs {
					if _, err := e.challenge(inv.InviteID, room.NewJoinNonce()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := e.eng.OutstandingJoinChallenges(); got != tc.wantHeld {
				t.Fatalf("the room holds %d challenges after the flood, want %d", got, tc.wantHeld)
			}
			victim := invs[len(invs)-1]
			if _, err := e.joinProven(e.challengeChecked(t, victim).input("alice")); err != nil {
				t.Fatalf("the newest challenge did not survive the flood: %v", err)
			}
		})
	}
	t.Run("expired_challenges_make_room_before_live_ones_go", func(t *testing.T) {
		e := newEnv(t)
		inv, err := e.invite(e.op(), room.InviteInput{})
		if err != nil {
			t.Fatal(err)
		}
		old := e.challengeChecked(t, inv)
		for i := 1; i < room.MaxJoinChallengesPerInvite; i++ {
			if _, err := e.challenge(inv.InviteID, room.NewJoinNonce()); err != nil {
				t.Fatal(err)
			}
		}
		e.clock.Advance(room.JoinChallengeTTL)
		fresh := e.challengeChecked(t, inv)
		if got := e.eng.OutstandingJoinChallenges(); got != 1 {
			t.Fatalf("%d challenges held, want only the fresh one", got)
		}
		_, err = e.joinProven(old.input("late"))
		wantKind(t, err, room.KindUnauthorized)
		if _, err := e.joinProven(fresh.input("alice")); err != nil {
			t.Fatal(err)
		}
		if got := e.eng.OutstandingJoinChallenges(); got != 0 {
			t.Fatalf("a spent challenge is still held: %d", got)
		}
	})
}

// TestCreateInvite_NamesItselfAndItsMachine: a new invitation carries its
// handle (the proven join names it by that) and, on each loopback hint,
// this machine's tag for this room; other hints and the room's own hint
// list are left as they were.
func TestCreateInvite_NamesItselfAndItsMachine(t *testing.T) {
	e := newEnv(t)
	relay := room.Hint{Type: "exec:relay", Address: "relay.example", Port: 443, Mode: "private", Params: map[string]string{"x": "y"}}
	loop := room.Hint{Type: "loopback", Address: "127.0.0.1", Port: 4242, Mode: "local"}
	e.eng.SetHints([]room.Hint{relay, loop})
	g, err := e.invite(e.op(), room.InviteInput{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := room.DecodeInvitation(g.URI, room.Defaults().MaxInvitePayload)
	if err != nil {
		t.Fatal(err)
	}
	tag := room.MachineTag(e.eng.WorkspaceID)
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"the_invitation_names_its_handle", inv.InviteID, g.InviteID},
		{"the_loopback_hint_carries_the_machine_tag", inv.Transports[1].Params[room.HintParamMachine], tag},
		{"another_transports_hint_is_unchanged", fmt.Sprint(inv.Transports[0]), fmt.Sprint(relay)},
		{"the_rooms_own_hints_are_unchanged", fmt.Sprint(e.eng.Hints()), fmt.Sprint([]room.Hint{relay, loop})},
		{"the_tag_differs_between_rooms", tag != "" && tag == room.MachineTag(e.eng.WorkspaceID+"x"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

package room_test

// Re-admission (issue 16, item 4): an invitation bound to an existing
// participant gives it a new session as itself, so its tasks, idempotency
// keys and handoffs are its own again; and every way such an invitation
// must be refused.

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// principalOf is the principal a grant's session authenticates as.
func principalOf(tb testing.TB, g room.SessionGrant) room.Principal {
	tb.Helper()
	caps, err := room.ParseCaps(g.Capabilities)
	if err != nil {
		tb.Fatal(err)
	}
	return room.Principal{ParticipantID: g.ParticipantID, SessionRef: g.SessionRef, Caps: caps}
}

func TestReadmit_TheAgentComesBackAsItself(t *testing.T) {
	e := newEnv(t)
	old := e.joinGrant("agent")
	first, err := e.create(principalOf(t, old), room.CreateHandoffInput{Summary: "write the tests", IdempotencyKey: "k-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The session runs out (idle for its whole window) and the sweeper ends it.
	e.clock.Advance(room.Defaults().SessionDefault)
	e.sweep()
	if _, err := e.authenticate(old.SessionToken); room.ErrorKind(err) != room.KindSessionExpired {
		t.Fatalf("the old session: %v, want session_expired", err)
	}
	participants := e.scalar(`SELECT count(*) FROM participants`)

	inv, err := e.invite(e.op(), room.InviteInput{ParticipantID: old.ParticipantID})
	if err != nil {
		t.Fatal(err)
	}
	if inv.ParticipantID != old.ParticipantID || !slices.Equal(inv.Capabilities, old.Capabilities) {
		t.Fatalf("invitation = %+v, want bound to %s with its capabilities %v", inv, old.ParticipantID, old.Capabilities)
	}
	mark := e.lastEventID()
	back, err := e.joinVia(inv.Token, "someone else")
	if err != nil {
		t.Fatal(err)
	}
	if back.ParticipantID != old.ParticipantID || back.Name != "agent" || back.SessionRef == old.SessionRef {
		t.Fatalf("grant = %+v, want a new session for %s (agent)", back, old.ParticipantID)
	}
	if got := e.scalar(`SELECT count(*) FROM participants`); got != participants {
		t.Errorf("participants %d -> %d: re-admission made a new one", participants, got)
	}
	p, err := e.authenticate(back.SessionToken)
	if err != nil || p.ParticipantID != old.ParticipantID {
		t.Fatalf("the new session authenticates as %q: %v", p.ParticipantID, err)
	}
	if _, err := e.getTask(p, first.Task.TaskID); err != nil {
		t.Errorf("its own task, through tasks/get: %v", err)
	}
	again, err := e.create(p, room.CreateHandoffInput{Summary: "write the tests", IdempotencyKey: "k-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || again.Handoff.HandoffID != first.Handoff.HandoffID {
		t.Errorf("the retry with its key: replayed=%v handoff %s, want the original %s", again.Replayed, again.Handoff.HandoffID, first.Handoff.HandoffID)
	}
	if n := e.scalar(`SELECT count(*) FROM handoffs`); n != 1 {
		t.Errorf("%d handoffs, want 1 (no duplicate)", n)
	}
	evs := e.eventsAfter(mark)
	if got := types(evs); !slices.Equal(got, []string{"participant.joined", "session.created"}) {
		t.Fatalf("events = %v", got)
	}
	if pl := payloadOf(t, evs[0]); pl["readmitted"] != true || pl["participant_id"] != old.ParticipantID || pl["invite_id"] != inv.InviteID {
		t.Errorf("participant.joined = %v, want it to note the re-admission", pl)
	}
	for _, ev := range e.eventsAfter(0) {
		if strings.Contains(ev.Payload, inv.Token) || strings.Contains(ev.Payload, back.SessionToken) {
			t.Errorf("an event holds a secret: %s", ev.Payload)
		}
	}
}

func TestReadmit_CapabilitiesAreCapped(t *testing.T) {
	e := newEnv(t)
	old := e.joinGrant("agent", "read", "propose", "checkout")
	t.Run("a_narrower_grant_is_kept", func(t *testing.T) {
		inv, err := e.invite(e.op(), room.InviteInput{ParticipantID: old.ParticipantID, Capabilities: []string{"read"}})
		if err != nil {
			t.Fatal(err)
		}
		g, err := e.joinVia(inv.Token, "x")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Capabilities, []string{"read"}) {
			t.Errorf("capabilities = %v, want [read]", g.Capabilities)
		}
	})
	for _, caps := range [][]string{{"read", "approve"}, {"*"}, {"admin"}} {
		t.Run("asking_for_"+strings.Join(caps, "_")+"_is_refused", func(t *testing.T) {
			before := e.identityDump()
			_, err := e.invite(e.op(), room.InviteInput{ParticipantID: old.ParticipantID, Capabilities: caps})
			wantKind(t, err, room.KindInvalidRequest)
			if e.identityDump() != before {
				t.Error("a refused invitation changed state")
			}
		})
	}
}

func TestReadmit_Refused(t *testing.T) {
	type setup struct {
		e   *env
		old room.SessionGrant
	}
	mint := func(s setup, in room.InviteInput) room.InviteGrant {
		s.e.tb.Helper()
		in.ParticipantID = s.old.ParticipantID
		inv, err := s.e.invite(s.e.op(), in)
		if err != nil {
			s.e.tb.Fatal(err)
		}
		return inv
	}
	cases := []struct {
		name string
		// redeem mints (and breaks) an invitation, then redeems it.
		redeem func(s setup) error
		want   room.Kind
	}{
		{"used_twice", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			if _, err := s.e.joinVia(inv.Token, "x"); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRedeemed},
		{"expired", func(s setup) error {
			one := 1
			inv := mint(s, room.InviteInput{ExpiresInMinutes: &one})
			s.e.clock.Advance(time.Minute)
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationExpired},
		{"revoked", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			if _, err := s.e.revoke(s.e.op(), room.RevokeInput{InviteID: inv.InviteID}); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRevoked},
		{"participant_left", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			if _, err := do(s.e, func(eng *room.Engine, tx *room.Tx) (room.Ack, error) {
				return eng.Leave(tx, principalOf(s.e.tb, s.old), room.Empty{})
			}); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRevoked},
		{"participant_ended_by_the_host", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			if _, err := s.e.endSession(s.e.op(), room.EndSessionInput{ParticipantID: s.old.ParticipantID}); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRevoked},
		{"a_session_ended_by_the_host_after_minting", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			if _, err := s.e.endSession(s.e.op(), room.EndSessionInput{SessionRef: s.old.SessionRef}); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRevoked},
		{"its_invitation_revoked_with_end_sessions", func(s setup) error {
			inv := mint(s, room.InviteInput{})
			oi := s.e.scalarString(`SELECT invite_id FROM participants WHERE participant_id = ?`, s.old.ParticipantID)
			if _, err := s.e.revoke(s.e.op(), room.RevokeInput{InviteID: oi, EndSessions: true}); err != nil {
				return err
			}
			_, err := s.e.joinVia(inv.Token, "x")
			return err
		}, room.KindInvitationRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := setup{e: e, old: e.joinGrant("agent")}
			err := tc.redeem(s)
			wantKind(t, err, tc.want)
			if n := e.scalar(`SELECT count(*) FROM participants WHERE is_host = 0`); n != 1 {
				t.Errorf("%d participants, want the one", n)
			}
		})
	}

	t.Run("a_new_invitation_after_a_session_was_ended_works", func(t *testing.T) {
		e := newEnv(t)
		old := e.joinGrant("agent")
		if _, err := e.endSession(e.op(), room.EndSessionInput{SessionRef: old.SessionRef}); err != nil {
			t.Fatal(err)
		}
		inv, err := e.invite(e.op(), room.InviteInput{ParticipantID: old.ParticipantID})
		if err != nil {
			t.Fatal(err)
		}
		if g, err := e.joinVia(inv.Token, "x"); err != nil || g.ParticipantID != old.ParticipantID {
			t.Fatalf("re-admitted after the cut: %+v, %v", g, err)
		}
	})
}

func TestReadmit_BadRequestsAtCreation(t *testing.T) {
	e := newEnv(t)
	old := e.joinGrant("agent")
	gone := e.joinGrant("gone")
	if _, err := e.endSession(e.op(), room.EndSessionInput{ParticipantID: gone.ParticipantID}); err != nil {
		t.Fatal(err)
	}
	inviter := principalOf(t, e.joinGrant("inviter", "read", "observe", "propose", "checkout", "commit", "invite"))
	cases := []struct {
		name string
		by   room.Principal
		pid  string
		want room.Kind
	}{
		{"participant_unknown", e.op(), "participant_nobody", room.KindNotFound},
		{"participant_left", e.op(), gone.ParticipantID, room.KindInvalidRequest},
		{"the_host", e.op(), e.eng.HostID, room.KindInvalidRequest},
		{"asked_by_a_non_admin", inviter, old.ParticipantID, room.KindPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.identityDump()
			_, err := e.invite(tc.by, room.InviteInput{ParticipantID: tc.pid})
			wantKind(t, err, tc.want)
			if e.identityDump() != before {
				t.Error("a refused invitation changed state")
			}
		})
	}
}

// scalarString is the one text a query returns.
func (e *env) scalarString(query string, args ...any) string {
	e.tb.Helper()
	var v string
	if err := e.store.Reader.QueryRow(query, args...).Scan(&v); err != nil {
		e.tb.Fatal(err)
	}
	return v
}

// An old sidecar (schema 3, before this issue) gains the columns: its live
// session slides by the length it was issued for, and its participant can
// be re-admitted.
func TestReadmit_MigratesAnOldSidecar(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(testDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	side := room.SidecarPath(doc)
	if err := room.MigrateTo(ctx, side, 3); err != nil {
		t.Fatal(err)
	}
	clock := newFakeClock()
	now := clock.Now().UnixMilli()
	const token = "ses_old-session-token"
	db, err := sql.Open("sqlite", side)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO participants(participant_id, kind, name, capabilities, invite_id, joined_at, last_seen_at)
			VALUES ('participant_old', 'agent', 'old agent', '["read","observe","propose","checkout","commit"]', NULL, ?1, ?1)`,
		`INSERT INTO sessions(session_ref, token_sha256, participant_id, capabilities, transport, issued_at, expires_at, last_seen_at)
			VALUES ('sref_old', ?2, 'participant_old', '["read","observe","propose","checkout","commit"]', 'test', ?1, ?1 + 7200000, ?1)`,
	} {
		if _, err := db.Exec(q, now, room.HashSecret(token)); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	e := &env{tb: t, doc: doc, clock: clock, limits: room.Defaults(), pub: &recorder{}}
	e.open()
	t.Cleanup(e.close)
	if v := e.scalar(`PRAGMA user_version`); v != int64(room.SchemaVersion()) {
		t.Fatalf("user_version = %d, want %d", v, room.SchemaVersion())
	}
	if idle := e.scalar(`SELECT idle_ms FROM sessions WHERE session_ref = 'sref_old'`); idle != 7200000 {
		t.Errorf("idle_ms of the old session = %d, want the 2h it was issued for", idle)
	}
	e.clock.Advance(110 * time.Minute)
	if _, err := e.authenticate(token); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour) // 2h50m: past its fixed end, inside the slide
	e.sweep()
	if _, err := e.authenticate(token); err != nil {
		t.Fatalf("the old session did not slide: %v", err)
	}
	inv, err := e.invite(e.op(), room.InviteInput{ParticipantID: "participant_old"})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := e.joinVia(inv.Token, "x"); err != nil || g.ParticipantID != "participant_old" {
		t.Fatalf("re-admitting the old participant: %+v, %v", g, err)
	}
}

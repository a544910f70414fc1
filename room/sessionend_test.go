package room_test

// Ending sessions as the host (issue 13, item 11): by participant, by
// session, through a revoked invitation; the per-invitation cap on live
// sessions; and that ended stays ended across a restart.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// joinVia redeems an invitation and returns the grant.
func (e *env) joinVia(secret, name string) (room.SessionGrant, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.SessionGrant, error) {
		return eng.Join(tx, room.JoinInput{Secret: secret, Name: name, Kind: "agent", Transport: "test"})
	})
}

// invite creates an invitation as p.
func (e *env) invite(p room.Principal, in room.InviteInput) (room.InviteGrant, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.InviteGrant, error) { return eng.CreateInvite(tx, p, in) })
}

// joinGrant joins a new participant through its own invitation and returns
// the full grant (token included, unlike env.join).
func (e *env) joinGrant(name string, caps ...string) room.SessionGrant {
	e.tb.Helper()
	in := room.InviteInput{}
	if len(caps) > 0 {
		in.Capabilities = caps
	}
	inv, err := e.invite(e.op(), in)
	if err != nil {
		e.tb.Fatal(err)
	}
	g, err := e.joinVia(inv.Token, name)
	if err != nil {
		e.tb.Fatalf("join %s: %v", name, err)
	}
	return g
}

func (e *env) endSession(p room.Principal, in room.EndSessionInput) (room.EndSessionResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.EndSessionResult, error) { return eng.EndSession(tx, p, in) })
}

func (e *env) revoke(p room.Principal, in room.RevokeInput) (room.RevokeResult, error) {
	return do(e, func(eng *room.Engine, tx *room.Tx) (room.RevokeResult, error) { return eng.RevokeInvite(tx, p, in) })
}

// authenticate presents token the way every front door does.
func (e *env) authenticate(token string) (room.Principal, error) {
	return read(e, func(eng *room.Engine, q room.Querier) (room.Principal, error) {
		return eng.Authenticate(context.Background(), q, token)
	})
}

func (e *env) participantIDs() []string {
	e.tb.Helper()
	ps, err := read(e, func(eng *room.Engine, q room.Querier) ([]room.Participant, error) {
		r, err := eng.Participants(context.Background(), q, room.Operator(eng.HostID), room.Empty{})
		return r.Participants, err
	})
	if err != nil {
		e.tb.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ParticipantID)
	}
	return ids
}

// endedInBatches lists every session ref the room told the hub to end.
func (e *env) endedInBatches() []string {
	e.pub.mu.Lock()
	defer e.pub.mu.Unlock()
	var out []string
	for _, b := range e.pub.batches {
		out = append(out, b.EndSessions...)
	}
	return out
}

// identityDump is every row an ending or a revoke may touch.
func (e *env) identityDump() string {
	return e.dump(`SELECT * FROM participants ORDER BY participant_id`) + "--\n" +
		e.dump(`SELECT * FROM sessions ORDER BY session_ref`) + "--\n" +
		e.dump(`SELECT * FROM invites ORDER BY invite_id`) + "--\n" +
		e.dump(`SELECT * FROM leases ORDER BY lease_id`)
}

func payloadOf(tb testing.TB, ev eventRow) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev.Payload), &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestEndSession_ByParticipantCutsItOffForGood(t *testing.T) {
	e := newEnv(t)
	victim := e.joinGrant("victim")
	bystander := e.joinGrant("bystander")
	vp := room.Principal{ParticipantID: victim.ParticipantID, SessionRef: victim.SessionRef, Caps: room.DefaultAgentCaps()}
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.Lease, error) {
		return eng.Checkout(tx, vp, room.CheckoutInput{Target: "Goals"})
	}); err != nil {
		t.Fatal(err)
	}
	// Cached: the front doors answer from memory, which must forget it.
	if _, err := e.authenticate(victim.SessionToken); err != nil {
		t.Fatal(err)
	}
	mark := e.lastEventID()

	res, err := e.endSession(e.op(), room.EndSessionInput{ParticipantID: victim.ParticipantID})
	if err != nil {
		t.Fatal(err)
	}
	if !res.ParticipantLeft || res.ParticipantID != victim.ParticipantID || !slices.Equal(res.EndedSessions, []string{victim.SessionRef}) {
		t.Fatalf("result = %+v", res)
	}
	evs := e.eventsAfter(mark)
	if got := types(evs); !slices.Equal(got, []string{"session.ended", "lease.released", "participant.left"}) {
		t.Fatalf("events = %v", got)
	}
	if p := payloadOf(t, evs[0]); p["reason"] != room.EndByHost || p["session_ref"] != victim.SessionRef {
		t.Errorf("session.ended = %v", p)
	}
	if p := payloadOf(t, evs[2]); p["reason"] != room.EndByHost || p["by"] != e.eng.HostID {
		t.Errorf("participant.left = %v", p)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Payload, victim.SessionToken) {
			t.Errorf("an event holds the session token: %s", ev.Payload)
		}
	}
	e.barrier()
	if !slices.Contains(e.endedInBatches(), victim.SessionRef) {
		t.Errorf("the hub was not told to end %s: %v", victim.SessionRef, e.endedInBatches())
	}
	if _, err := e.authenticate(victim.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
		t.Errorf("the ended session authenticates: %v", err)
	}
	if _, err := e.authenticate(bystander.SessionToken); err != nil {
		t.Errorf("the bystander's session was touched: %v", err)
	}
	if ids := e.participantIDs(); slices.Contains(ids, victim.ParticipantID) || !slices.Contains(ids, bystander.ParticipantID) {
		t.Errorf("participants = %v", ids)
	}
	if n := e.scalar(`SELECT count(*) FROM leases WHERE participant_id = ? AND released_at IS NULL`, victim.ParticipantID); n != 0 {
		t.Errorf("%d leases still held", n)
	}

	t.Run("ending_again_changes_nothing", func(t *testing.T) {
		before, mark := e.identityDump(), e.lastEventID()
		res, err := e.endSession(e.op(), room.EndSessionInput{ParticipantID: victim.ParticipantID})
		if err != nil || len(res.EndedSessions) != 0 || res.ParticipantLeft {
			t.Fatalf("second end: %+v, %v", res, err)
		}
		if e.identityDump() != before || e.lastEventID() != mark {
			t.Error("a second end changed state")
		}
	})
	t.Run("ended_stays_ended_across_a_restart", func(t *testing.T) {
		e.restart()
		if _, err := e.authenticate(victim.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
			t.Errorf("after a restart the ended session authenticates: %v", err)
		}
		if _, err := e.authenticate(bystander.SessionToken); err != nil {
			t.Errorf("after a restart the bystander's session fails: %v", err)
		}
		if got := e.scalar(`SELECT count(*) FROM sessions WHERE session_ref = ? AND end_reason = 'ended_by_host'`, victim.SessionRef); got != 1 {
			t.Errorf("end_reason not recorded")
		}
	})
}

func TestEndSession_OneSessionLeavesTheParticipant(t *testing.T) {
	e := newEnv(t)
	admin := e.joinGrant("moderator", "admin")
	ap := room.Principal{ParticipantID: admin.ParticipantID, SessionRef: admin.SessionRef, Caps: room.Caps{room.CapAdmin}}
	victim := e.joinGrant("victim")
	mark := e.lastEventID()
	res, err := e.endSession(ap, room.EndSessionInput{SessionRef: victim.SessionRef})
	if err != nil {
		t.Fatal(err)
	}
	if res.ParticipantLeft || !slices.Equal(res.EndedSessions, []string{victim.SessionRef}) {
		t.Fatalf("result = %+v", res)
	}
	evs := e.eventsAfter(mark)
	if got := types(evs); !slices.Equal(got, []string{"session.ended"}) {
		t.Fatalf("events = %v", got)
	}
	if p := payloadOf(t, evs[0]); p["reason"] != room.EndByAdmin {
		t.Errorf("an admin's ending says %v", p["reason"])
	}
	if _, err := e.authenticate(victim.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
		t.Errorf("the ended session authenticates: %v", err)
	}
	if !slices.Contains(e.participantIDs(), victim.ParticipantID) {
		t.Error("ending one session removed the participant")
	}
}

func TestEndSession_RefusalsChangeNothing(t *testing.T) {
	e := newEnv(t)
	victim := e.joinGrant("victim")
	agentG := e.joinGrant("agent")
	inviterG := e.joinGrant("inviter", "read", "invite")
	agentP := room.Principal{ParticipantID: agentG.ParticipantID, SessionRef: agentG.SessionRef, Caps: room.DefaultAgentCaps()}
	inviterP := room.Principal{ParticipantID: inviterG.ParticipantID, SessionRef: inviterG.SessionRef, Caps: room.Caps{room.CapRead, room.CapInvite}}
	for _, tc := range []struct {
		name  string
		who   room.Principal
		in    room.EndSessionInput
		kind  room.Kind
		field string
	}{
		{"non_admin_is_permission_denied", agentP, room.EndSessionInput{ParticipantID: victim.ParticipantID}, room.KindPermissionDenied, ""},
		{"invite_holder_is_permission_denied", inviterP, room.EndSessionInput{SessionRef: victim.SessionRef}, room.KindPermissionDenied, ""},
		{"unknown_participant_is_not_found", e.op(), room.EndSessionInput{ParticipantID: "participant_0000000000000000"}, room.KindNotFound, "participant_id"},
		{"unknown_session_is_not_found", e.op(), room.EndSessionInput{SessionRef: "sref_0000000000000000"}, room.KindNotFound, "session_ref"},
		{"the_host_is_invalid_request", e.op(), room.EndSessionInput{ParticipantID: e.eng.HostID}, room.KindInvalidRequest, "participant_id"},
		{"both_names_is_invalid_request", e.op(), room.EndSessionInput{ParticipantID: victim.ParticipantID, SessionRef: victim.SessionRef}, room.KindInvalidRequest, "session_ref"},
		{"no_name_is_invalid_request", e.op(), room.EndSessionInput{}, room.KindInvalidRequest, "session_ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, mark := e.identityDump(), e.lastEventID()
			_, err := e.endSession(tc.who, tc.in)
			wantKind(t, err, tc.kind)
			if tc.kind == room.KindPermissionDenied {
				if got := room.AsError(err).Fields["required"]; got != "admin" {
					t.Errorf("required = %v, want admin", got)
				}
			}
			if tc.field != "" {
				if got := room.AsError(err).Fields["field"]; got != tc.field {
					t.Errorf("field = %v, want %s", got, tc.field)
				}
			}
			if e.identityDump() != before || e.lastEventID() != mark {
				t.Fatal("a refused end changed state")
			}
		})
	}
	if _, err := e.authenticate(victim.SessionToken); err != nil {
		t.Errorf("the victim's session was ended by a refused call: %v", err)
	}
	t.Run("a_long_unknown_id_is_not_echoed_whole", func(t *testing.T) {
		long := strings.Repeat("x", 100_000)
		_, err := e.endSession(e.op(), room.EndSessionInput{SessionRef: long})
		wantKind(t, err, room.KindNotFound)
		if len(err.Error()) > 300 {
			t.Errorf("the error echoes %d bytes", len(err.Error()))
		}
	})
}

func TestRevokeInvite_EndSessions(t *testing.T) {
	e := newEnv(t)
	three := 3
	inv, err := e.invite(e.op(), room.InviteInput{MaxUses: &three})
	if err != nil {
		t.Fatal(err)
	}
	var gs []room.SessionGrant
	for _, name := range []string{"a", "b"} {
		g, err := e.joinVia(inv.Token, name)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	other := e.joinGrant("other")

	// Without end_sessions (the old behaviour, still the default) the
	// sessions it admitted keep working, also across a restart.
	if _, err := e.revoke(e.op(), room.RevokeInput{InviteID: inv.InviteID}); err != nil {
		t.Fatal(err)
	}
	e.restart()
	for _, g := range gs {
		if _, err := e.authenticate(g.SessionToken); err != nil {
			t.Fatalf("revoking without end_sessions ended %s: %v", g.Name, err)
		}
	}
	if _, err := e.joinVia(inv.Token, "late"); room.ErrorKind(err) != room.KindInvitationRevoked {
		t.Fatalf("join after revoke: %v", err)
	}

	// Asked again with end_sessions, the revoke ends them (the invitation
	// was already revoked: no second invite.revoked).
	mark := e.lastEventID()
	res, err := e.revoke(e.op(), room.RevokeInput{InviteID: inv.InviteID, EndSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{gs[0].SessionRef, gs[1].SessionRef}
	if !slices.Equal(res.EndedSessions, want) {
		t.Fatalf("ended %v, want %v", res.EndedSessions, want)
	}
	got := types(e.eventsAfter(mark))
	if !slices.Equal(got, []string{"session.ended", "participant.left", "session.ended", "participant.left"}) {
		t.Errorf("events = %v", got)
	}
	for _, ev := range e.eventsAfter(mark) {
		if p := payloadOf(t, ev); p["reason"] != room.EndInviteRevoked {
			t.Errorf("%s reason = %v", ev.Type, p["reason"])
		}
	}
	for _, g := range gs {
		if _, err := e.authenticate(g.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
			t.Errorf("%s still authenticates: %v", g.Name, err)
		}
	}
	if _, err := e.authenticate(other.SessionToken); err != nil {
		t.Errorf("another invitation's session was ended: %v", err)
	}
	e.restart()
	for _, g := range gs {
		if _, err := e.authenticate(g.SessionToken); room.ErrorKind(err) != room.KindUnauthorized {
			t.Errorf("after a restart %s authenticates again: %v", g.Name, err)
		}
	}

	t.Run("revoke_and_end_in_one_call", func(t *testing.T) {
		inv, err := e.invite(e.op(), room.InviteInput{})
		if err != nil {
			t.Fatal(err)
		}
		g, err := e.joinVia(inv.Token, "c")
		if err != nil {
			t.Fatal(err)
		}
		mark := e.lastEventID()
		res, err := e.revoke(e.op(), room.RevokeInput{Token: inv.Token, EndSessions: true})
		if err != nil || !slices.Equal(res.EndedSessions, []string{g.SessionRef}) {
			t.Fatalf("revoke: %+v %v", res, err)
		}
		if got := types(e.eventsAfter(mark)); !slices.Equal(got, []string{"invite.revoked", "session.ended", "participant.left"}) {
			t.Errorf("events = %v", got)
		}
	})
}

func TestJoin_PerInvitationSessionCap(t *testing.T) {
	e := newEnv(t)
	unlimited := 0
	many, err := e.invite(e.op(), room.InviteInput{MaxUses: &unlimited})
	if err != nil {
		t.Fatal(err)
	}
	if many.MaxLiveSessions != 8 {
		t.Errorf("the grant says max_live_sessions %d, want the default 8", many.MaxLiveSessions)
	}
	var gs []room.SessionGrant
	for i := range 8 {
		g, err := e.joinVia(many.Token, "bot")
		if err != nil {
			t.Fatalf("join %d: %v", i+1, err)
		}
		gs = append(gs, g)
	}
	before, mark := e.identityDump(), e.lastEventID()
	_, err = e.joinVia(many.Token, "ninth")
	wantKind(t, err, room.KindLimitExceeded)
	if got := room.AsError(err).Fields["limit"]; got != 8 {
		t.Errorf("limit = %v, want 8", got)
	}
	if e.identityDump() != before || e.lastEventID() != mark {
		t.Fatal("a join refused at the invitation's cap changed state (spent a use?)")
	}
	// The room is far from its 32: another invitation still admits.
	if _, err := e.joinVia(e.mustInvite(room.InviteInput{}).Token, "newcomer"); err != nil {
		t.Fatalf("a second invitation cannot join: %v", err)
	}
	// The host ends one: the many-use invitation admits one more.
	if _, err := e.endSession(e.op(), room.EndSessionInput{ParticipantID: gs[0].ParticipantID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.joinVia(many.Token, "ninth"); err != nil {
		t.Fatalf("after an ending the invitation is still refused: %v", err)
	}

	t.Run("an_invitation_of_its_own_cap", func(t *testing.T) {
		two := 2
		inv := e.mustInvite(room.InviteInput{MaxUses: &unlimited, MaxLiveSessions: &two})
		if inv.MaxLiveSessions != 2 {
			t.Errorf("grant max_live_sessions = %d", inv.MaxLiveSessions)
		}
		for range 2 {
			if _, err := e.joinVia(inv.Token, "x"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.joinVia(inv.Token, "x")
		wantKind(t, err, room.KindLimitExceeded)
	})
	t.Run("listing_shows_live_sessions_against_the_cap", func(t *testing.T) {
		list, err := read(e, func(eng *room.Engine, q room.Querier) ([]room.InviteInfo, error) {
			return eng.ListInvites(context.Background(), q, room.Operator(eng.HostID), room.Empty{})
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range list {
			if in.InviteID == many.InviteID && (in.LiveSessions != 8 || in.MaxLiveSessions != 8 || in.CreatedBy == nil || *in.CreatedBy != e.eng.HostID) {
				t.Errorf("listing = %+v", in)
			}
		}
	})
}

func (e *env) mustInvite(in room.InviteInput) room.InviteGrant {
	e.tb.Helper()
	g, err := e.invite(e.op(), in)
	if err != nil {
		e.tb.Fatal(err)
	}
	return g
}

func TestCreateInvite_SessionCapBounds(t *testing.T) {
	e := newEnv(t)
	inviterG := e.joinGrant("inviter", "read", "invite")
	inviter := room.Principal{ParticipantID: inviterG.ParticipantID, SessionRef: inviterG.SessionRef, Caps: room.Caps{room.CapRead, room.CapInvite}}
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name string
		who  room.Principal
		cap  *int
		want int // 0: refused
	}{
		{"zero_is_refused", e.op(), n(0), 0},
		{"negative_is_refused", e.op(), n(-1), 0},
		{"an_inviter_may_lower_it", inviter, n(3), 3},
		{"an_inviter_may_not_raise_it", inviter, n(9), 0},
		{"the_host_may_raise_it_to_the_rooms_cap", e.op(), n(32), 32},
		{"not_above_the_rooms_cap", e.op(), n(33), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.identityDump()
			g, err := e.invite(tc.who, room.InviteInput{Capabilities: []string{"read"}, MaxLiveSessions: tc.cap})
			if tc.want == 0 {
				wantKind(t, err, room.KindInvalidRequest)
				if f := room.AsError(err).Fields["field"]; f != "max_live_sessions" {
					t.Errorf("field = %v", f)
				}
				if e.identityDump() != before {
					t.Error("a refused invite changed state")
				}
				return
			}
			if err != nil || g.MaxLiveSessions != tc.want {
				t.Fatalf("grant %+v, %v; want max_live_sessions %d", g, err, tc.want)
			}
		})
	}
}

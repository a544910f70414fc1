package room_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// The test document's regions: Idea, Idea/Goals, Idea/Risks.

func TestCheckout_SelectorsOfOneRegionAreOneLease(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	l := d.mustCheckout(a, "Goals", nil)
	t.Run("stored_target_is_the_path_and_the_request_is_kept", func(t *testing.T) {
		if l.Target != "Idea/Goals" || l.RequestedTarget != "Goals" || l.ParticipantID != a.ParticipantID {
			t.Fatalf("lease %+v", l)
		}
		if want := d.clock.Now().Add(15 * time.Minute).UnixMilli(); parseWire(t, l.ExpiresAt).UnixMilli() != want {
			t.Fatalf("expires %s, want the 15 minute default", l.ExpiresAt)
		}
	})
	for _, sel := range []string{"Goals", "section:Goals", "Idea/Goals", "section:Idea/Goals"} {
		t.Run("another_participant_gets_lease_conflict_for_"+sel, func(t *testing.T) {
			before, mark := d.docDump(), d.lastEventID()
			_, err := d.checkout(b, sel, nil)
			wantKind(t, err, room.KindLeaseConflict)
			if errField(t, err, "lease_id") != l.LeaseID || errField(t, err, "region") != "Idea/Goals" {
				t.Fatalf("fields %v", room.AsError(err).Fields)
			}
			if d.docDump() != before || d.lastEventID() != mark {
				t.Fatal("a refused checkout changed state")
			}
		})
	}
	t.Run("the_holder_checking_out_another_spelling_renews_the_same_lease", func(t *testing.T) {
		d.clock.Advance(5 * time.Minute)
		mark := d.lastEventID()
		again, err := d.checkout(a, "section:Goals", refOf(30))
		if err != nil {
			t.Fatal(err)
		}
		if again.LeaseID != l.LeaseID || again.AcquiredAt != l.AcquiredAt {
			t.Fatalf("renewal made a new lease: %+v", again)
		}
		if want := d.clock.Now().Add(30 * time.Minute); !parseWire(t, again.ExpiresAt).Equal(want) {
			t.Fatalf("expires %s, want %s", again.ExpiresAt, want)
		}
		evs := d.eventsAfter(mark)
		if !slices.Equal(types(evs), []string{"lease.acquired"}) {
			t.Fatalf("events %v", types(evs))
		}
		var pl map[string]any
		json.Unmarshal([]byte(evs[0].Payload), &pl)
		if pl["renewed"] != true || pl["lease_id"] != l.LeaseID {
			t.Fatalf("payload %v", pl)
		}
		if n := len(d.liveLeases(a)); n != 1 {
			t.Fatalf("%d live leases", n)
		}
	})
}

func TestCheckout_OverlapsConflict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		held, ask string
		conflict  bool
	}{
		{"parent_of_a_held_section_conflicts", "Goals", "Idea", true},
		{"child_of_a_held_section_conflicts", "Idea", "Risks", true},
		{"workspace_over_a_held_section_conflicts", "Goals", "workspace", true},
		{"star_over_a_held_section_conflicts", "Goals", "*", true},
		{"any_section_under_a_held_workspace_conflicts", "workspace", "Risks", true},
		{"a_sibling_section_is_free", "Goals", "Risks", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
			held := d.mustCheckout(a, c.held, nil)
			_, err := d.checkout(b, c.ask, nil)
			if !c.conflict {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			wantKind(t, err, room.KindLeaseConflict)
			if errField(t, err, "lease_id") != held.LeaseID {
				t.Fatalf("conflict names %v", errField(t, err, "lease_id"))
			}
		})
	}
	t.Run("the_holder_may_also_take_an_overlapping_region", func(t *testing.T) {
		t.Parallel()
		d := newDocRoom(t)
		a := d.join("a", agentCaps...)
		g := d.mustCheckout(a, "Goals", nil)
		w := d.mustCheckout(a, "workspace", nil)
		if g.LeaseID == w.LeaseID || w.Target != "workspace" {
			t.Fatalf("leases %+v %+v", g, w)
		}
	})
}

func TestRenew_CappedFromAcquisition(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	l := d.mustCheckout(a, "Goals", refOf(100))
	acquired := parseWire(t, l.AcquiredAt)
	t.Run("renewal_moves_expiry_to_now_plus_minutes", func(t *testing.T) {
		d.clock.Advance(10 * time.Minute)
		r, err := d.renew(a, l.LeaseID, refOf(30))
		if err != nil {
			t.Fatal(err)
		}
		if want := d.clock.Now().Add(30 * time.Minute); !parseWire(t, r.ExpiresAt).Equal(want) {
			t.Fatalf("expires %s, want %s", r.ExpiresAt, want)
		}
	})
	t.Run("renewal_past_the_cap_stops_at_acquisition_plus_120", func(t *testing.T) {
		d.clock.Advance(20 * time.Minute)
		r, err := d.renew(a, l.LeaseID, refOf(120))
		if err != nil {
			t.Fatal(err)
		}
		if want := acquired.Add(120 * time.Minute); !parseWire(t, r.ExpiresAt).Equal(want) {
			t.Fatalf("expires %s, want the cap %s", r.ExpiresAt, want)
		}
	})
	t.Run("renewal_at_the_cap_is_limit_exceeded", func(t *testing.T) {
		before, mark := d.docDump(), d.lastEventID()
		_, err := d.renew(a, l.LeaseID, refOf(5))
		wantKind(t, err, room.KindLimitExceeded)
		if d.docDump() != before || d.lastEventID() != mark {
			t.Fatal("a refused renewal changed state")
		}
	})
	t.Run("renewal_by_another_participant_is_permission_denied", func(t *testing.T) {
		_, err := d.renew(b, l.LeaseID, nil)
		wantKind(t, err, room.KindPermissionDenied)
	})
	t.Run("renewal_of_an_unknown_lease_is_lease_conflict", func(t *testing.T) {
		_, err := d.renew(a, "lease_0000000000000000", nil)
		wantKind(t, err, room.KindLeaseConflict)
	})
	t.Run("renewal_of_a_released_lease_is_lease_conflict", func(t *testing.T) {
		if err := d.release(a, l.LeaseID); err != nil {
			t.Fatal(err)
		}
		_, err := d.renew(a, l.LeaseID, nil)
		wantKind(t, err, room.KindLeaseConflict)
	})
	t.Run("renewal_of_an_expired_unswept_lease_is_lease_conflict", func(t *testing.T) {
		l2 := d.mustCheckout(a, "Risks", refOf(1))
		d.clock.Advance(2 * time.Minute)
		_, err := d.renew(a, l2.LeaseID, nil)
		wantKind(t, err, room.KindLeaseConflict)
	})
}

func TestRelease(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	admin := d.join("admin", room.CapAdmin)
	mine := d.mustCheckout(a, "Goals", nil)
	t.Run("the_holder_releases_with_lease_released", func(t *testing.T) {
		mark := d.lastEventID()
		if err := d.release(a, mine.LeaseID); err != nil {
			t.Fatal(err)
		}
		if got := types(d.eventsAfter(mark)); !slices.Equal(got, []string{"lease.released"}) {
			t.Fatalf("events %v", got)
		}
		if len(d.liveLeases(a)) != 0 {
			t.Fatal("the lease is still live")
		}
	})
	t.Run("releasing_again_is_a_silent_no_op", func(t *testing.T) {
		before, mark := d.docDump(), d.lastEventID()
		if err := d.release(a, mine.LeaseID); err != nil {
			t.Fatal(err)
		}
		if d.docDump() != before || d.lastEventID() != mark {
			t.Fatal("a second release changed state")
		}
	})
	t.Run("unknown_lease_is_lease_conflict", func(t *testing.T) {
		err := d.release(a, "lease_0000000000000000")
		wantKind(t, err, room.KindLeaseConflict)
		if errField(t, err, "lease_id") != "lease_0000000000000000" {
			t.Fatal("no lease_id")
		}
	})
	t.Run("missing_lease_id_is_invalid_request", func(t *testing.T) {
		wantKind(t, d.release(a, ""), room.KindInvalidRequest)
	})
	theirs := d.mustCheckout(b, "Risks", nil)
	t.Run("another_participant_gets_permission_denied", func(t *testing.T) {
		before, mark := d.docDump(), d.lastEventID()
		wantKind(t, d.release(a, theirs.LeaseID), room.KindPermissionDenied)
		if d.docDump() != before || d.lastEventID() != mark {
			t.Fatal("a refused release changed state")
		}
	})
	t.Run("an_admin_releases_anyones_lease_recorded_as_admin", func(t *testing.T) {
		if err := d.release(admin, theirs.LeaseID); err != nil {
			t.Fatal(err)
		}
		var reason string
		d.store.Reader.QueryRow(`SELECT release_reason FROM leases WHERE lease_id = ?`, theirs.LeaseID).Scan(&reason)
		if reason != "admin" {
			t.Fatalf("release_reason %q", reason)
		}
	})
	t.Run("the_local_operator_releases_anyones_lease", func(t *testing.T) {
		l := d.mustCheckout(b, "Risks", nil)
		if err := d.release(d.op(), l.LeaseID); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLeases_ExpiryBySweeperAndLazily(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a, b := d.join("a", agentCaps...), d.join("b", agentCaps...)
	l := d.mustCheckout(a, "Goals", nil)
	// The mark comes before the lease falls due: once it is due, any batch
	// the writer runs re-arms its sweeper for now, so the room may sweep on
	// its own before the explicit sweep below; either way it is recorded
	// exactly once.
	mark := d.lastEventID()
	d.clock.Advance(15*time.Minute + time.Millisecond)
	t.Run("an_expired_lease_is_not_listed_before_the_sweep", func(t *testing.T) {
		if ls := d.liveLeases(a); len(ls) != 0 {
			t.Fatalf("listed %+v", ls)
		}
	})
	t.Run("the_sweeper_records_lease_expired", func(t *testing.T) {
		d.sweep()
		evs := d.eventsAfter(mark)
		if got := types(evs); !slices.Equal(got, []string{"lease.expired"}) {
			t.Fatalf("events %v", got)
		}
		var pl map[string]any
		json.Unmarshal([]byte(evs[0].Payload), &pl)
		if pl["lease_id"] != l.LeaseID || pl["target"] != "Idea/Goals" || pl["participant_id"] != a.ParticipantID {
			t.Fatalf("payload %v", pl)
		}
		var reason string
		d.store.Reader.QueryRow(`SELECT release_reason FROM leases WHERE lease_id = ?`, l.LeaseID).Scan(&reason)
		if reason != "expired" {
			t.Fatalf("release_reason %q", reason)
		}
	})
	t.Run("an_expired_unswept_lease_never_conflicts", func(t *testing.T) {
		la := d.mustCheckout(a, "Risks", refOf(1))
		d.clock.Advance(time.Minute)
		lb, err := d.checkout(b, "Risks", nil)
		if err != nil {
			t.Fatal(err)
		}
		if lb.LeaseID == la.LeaseID || lb.ParticipantID != b.ParticipantID {
			t.Fatalf("lease %+v", lb)
		}
		var reason string
		d.store.Reader.QueryRow(`SELECT release_reason FROM leases WHERE lease_id = ?`, la.LeaseID).Scan(&reason)
		if reason != "expired" {
			t.Fatalf("the overdue lease was not ended: %q", reason)
		}
	})
}

func TestLeases_AreAdvisory(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	holder, writer := d.join("holder", agentCaps...), d.join("writer", agentCaps...)
	d.mustCheckout(holder, "workspace", refOf(120))
	pr := d.mustPropose(writer, "Goals", goalsEdit)
	t.Run("propose_succeeded_while_another_holds_the_lease", func(t *testing.T) {
		if pr.Status != "pending" {
			t.Fatalf("status %s", pr.Status)
		}
	})
	t.Run("commit_succeeds_while_another_holds_the_lease", func(t *testing.T) {
		d.mustApprove(pr.ProposalID)
		if _, err := d.commitProposal(writer, pr.ProposalID); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCheckout_BadInputChangesNothing(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	reader := d.join("reader", room.CapRead)
	cases := []struct {
		name    string
		who     room.Principal
		target  string
		minutes *int
		kind    room.Kind
	}{
		{"unknown_region_is_invalid_region", a, "Nope", nil, room.KindInvalidRegion},
		{"missing_target_is_invalid_request", a, "", nil, room.KindInvalidRequest},
		{"zero_minutes_is_invalid_request", a, "Goals", refOf(0), room.KindInvalidRequest},
		{"negative_minutes_is_invalid_request", a, "Goals", refOf(-1), room.KindInvalidRequest},
		{"121_minutes_is_invalid_request", a, "Goals", refOf(121), room.KindInvalidRequest},
		{"huge_minutes_is_invalid_request", a, "Goals", refOf(math.MaxInt), room.KindInvalidRequest},
		{"without_checkout_is_permission_denied", reader, "Goals", nil, room.KindPermissionDenied},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, mark := d.docDump(), d.lastEventID()
			_, err := d.checkout(c.who, c.target, c.minutes)
			wantKind(t, err, c.kind)
			if d.docDump() != before || d.lastEventID() != mark {
				t.Fatal("a refused checkout changed state")
			}
		})
	}
	t.Run("unknown_region_names_the_region", func(t *testing.T) {
		_, err := d.checkout(a, "Nope", nil)
		if errField(t, err, "region") != "Nope" {
			t.Fatal("no region field")
		}
	})
	t.Run("bad_minutes_names_the_field", func(t *testing.T) {
		_, err := d.checkout(a, "Goals", refOf(0))
		if errField(t, err, "field") != "minutes" {
			t.Fatal("no field")
		}
	})
	t.Run("120_minutes_is_accepted", func(t *testing.T) {
		if _, err := d.checkout(a, "Goals", refOf(120)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLeases_ListingShape(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	d.mustCheckout(a, "Risks", nil)
	var got []map[string]any
	if err := json.Unmarshal([]byte(mustJSON(t, d.liveLeases(a))), &got); err != nil {
		t.Fatal(err)
	}
	t.Run("each_lease_has_exactly_the_wire_fields", func(t *testing.T) {
		if len(got) != 1 {
			t.Fatalf("leases %v", got)
		}
		var keys []string
		for k := range got[0] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := []string{"acquired_at", "expires_at", "lease_id", "participant_id", "requested_target", "target"}
		if !slices.Equal(keys, want) {
			t.Fatalf("keys %v", keys)
		}
	})
	t.Run("listing_needs_read", func(t *testing.T) {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) ([]room.Lease, error) {
			r, err := eng.Leases(t.Context(), q, room.Principal{ParticipantID: a.ParticipantID, Caps: room.Caps{room.CapCheckout}}, room.Empty{})
			return r.Leases, err
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

func parseWire(tb testing.TB, s string) time.Time {
	tb.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

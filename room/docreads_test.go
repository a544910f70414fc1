package room_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	d.rawCommit(strings.Replace(testDoc, "ship it", "ship it soon", 1))
	diff := func(p room.Principal, base int64) (room.DiffResult, error) {
		return read(d.env, func(eng *room.Engine, q room.Querier) (room.DiffResult, error) {
			return eng.Diff(t.Context(), q, p, room.DiffInput{BaseVersion: base})
		})
	}
	t.Run("diff_from_a_base_is_unified_and_labelled", func(t *testing.T) {
		res, err := diff(a, 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.BaseVersion != 1 || res.CurrentVersion != 2 || res.WorkspaceID != d.eng.WorkspaceID {
			t.Fatalf("result %+v", res)
		}
		if !strings.HasPrefix(res.Diff, "--- v1\n+++ v2\n@@ ") || !strings.Contains(res.Diff, "\n-ship it\n+ship it soon\n") {
			t.Fatalf("diff %q", res.Diff)
		}
		if got, err := applyUnifiedDiff(testDoc, res.Diff); err != nil || got != d.fileText() {
			t.Fatalf("v1 + diff = %q (%v)", got, err)
		}
	})
	t.Run("diff_from_the_current_version_is_empty", func(t *testing.T) {
		res, err := diff(a, 2)
		if err != nil || res.Diff != "" {
			t.Fatalf("%+v %v", res, err)
		}
	})
	for _, base := range []int64{0, -1, 3, 99} {
		t.Run(fmt.Sprintf("unknown_base_%d_is_version_not_found", base), func(t *testing.T) {
			_, err := diff(a, base)
			wantKind(t, err, room.KindVersionNotFound)
		})
	}
	t.Run("diff_needs_read", func(t *testing.T) {
		_, err := diff(room.Principal{ParticipantID: a.ParticipantID, Caps: room.Caps{room.CapPropose}}, 1)
		wantKind(t, err, room.KindPermissionDenied)
	})
	t.Run("a_diff_over_the_body_limit_is_cut_on_a_line_and_flagged", func(t *testing.T) {
		d := newDocRoom(t, withLimits(func(l *room.Limits) { l.MaxBodyBytes = 200 }))
		d.rawCommit(strings.Repeat("a new line of text\n", 50))
		res, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.DiffResult, error) {
			return eng.Diff(t.Context(), q, d.op(), room.DiffInput{BaseVersion: 1})
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.DiffTruncated || len(res.Diff) > 200 || !strings.HasSuffix(res.Diff, "\n") {
			t.Fatalf("truncated %v, %d bytes", res.DiffTruncated, len(res.Diff))
		}
	})
}

func TestChangesSince(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withLimits(func(l *room.Limits) { l.MaxListItems = 25 }))
	a := d.join("a", agentCaps...)
	for i := range 30 {
		d.rawCommit(fmt.Sprintf("# v%d\n", i+2))
	}
	changes := func(version int64, limit int) (room.Changes, error) {
		return read(d.env, func(eng *room.Engine, q room.Querier) (room.Changes, error) {
			return eng.ChangesSince(t.Context(), q, a, room.ChangesInput{Version: version, Limit: limit})
		})
	}
	versions := func(c room.Changes) []int64 {
		var out []int64
		for _, ch := range c.Changes {
			out = append(out, ch.Version)
		}
		return out
	}
	t.Run("ascending_from_the_version_default_20", func(t *testing.T) {
		c, err := changes(5, 0)
		if err != nil {
			t.Fatal(err)
		}
		if c.FromVersion != 5 || c.ToVersion != 31 || len(c.Changes) != 20 || c.Changes[0].Version != 6 || c.Changes[19].Version != 25 {
			t.Fatalf("from %d to %d: %v", c.FromVersion, c.ToVersion, versions(c))
		}
		if c.Changes[0].Summary != "raw" || strOf(c.Changes[0].ParticipantID) != d.eng.HostID {
			t.Fatalf("change %+v", c.Changes[0])
		}
	})
	t.Run("limit_is_honoured", func(t *testing.T) {
		c, _ := changes(28, 2)
		if !slices.Equal(versions(c), []int64{29, 30}) {
			t.Fatalf("versions %v", versions(c))
		}
	})
	t.Run("limit_is_bounded_by_the_list_limit", func(t *testing.T) {
		c, _ := changes(0, 1000)
		if len(c.Changes) != 25 || c.Changes[0].Version != 1 || c.Changes[0].ParticipantID != nil {
			t.Fatalf("versions %v", versions(c))
		}
	})
	t.Run("from_the_current_version_is_empty", func(t *testing.T) {
		c, err := changes(31, 0)
		if err != nil || c.Changes == nil || len(c.Changes) != 0 {
			t.Fatalf("%+v %v", c, err)
		}
	})
	t.Run("a_version_past_the_current_is_version_not_found", func(t *testing.T) {
		_, err := changes(32, 0)
		wantKind(t, err, room.KindVersionNotFound)
	})
	t.Run("a_negative_version_is_invalid_request", func(t *testing.T) {
		_, err := changes(-1, 0)
		wantKind(t, err, room.KindInvalidRequest)
	})
}

func TestDiagnostics_NeverShowTheEndpoint(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	d.eng.SetHints([]room.Hint{{Type: "tailnet", Address: "100.64.9.77", Port: 43117, Encrypted: true, Mode: "private"}})
	diag, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Diagnostics, error) {
		return eng.Diagnostics(t.Context(), q, a, room.Empty{})
	})
	if err != nil {
		t.Fatal(err)
	}
	text := mustJSON(t, diag)
	t.Run("the_listener_is_type_mode_and_encryption", func(t *testing.T) {
		if diag.Listener != (room.Listener{Type: "tailnet", Mode: "private", Encrypted: true, Describe: "tailnet (private, encrypted)"}) {
			t.Fatalf("listener %+v", diag.Listener)
		}
	})
	t.Run("an_admin_reads_the_exposed_endpoint", func(t *testing.T) {
		d.eng.SetHints([]room.Hint{{Type: "tailnet", Address: "room.example.net", IPs: []string{"100.64.9.77"}, Port: 43117, Encrypted: true, Mode: "private"},
			{Type: "loopback", Address: "127.0.0.1", Port: 5, Mode: "local"}})
		defer d.eng.SetHints([]room.Hint{{Type: "tailnet", Address: "100.64.9.77", Port: 43117, Encrypted: true, Mode: "private"}})
		for _, c := range []struct {
			who  room.Principal
			want string
		}{
			{room.Operator(d.eng.HostID), "tailnet (private, encrypted) room.example.net:43117"},
			{a, "tailnet (private, encrypted)"},
		} {
			got, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Diagnostics, error) {
				return eng.Diagnostics(t.Context(), q, c.who, room.Empty{})
			})
			if err != nil {
				t.Fatal(err)
			}
			if got.Listener.Describe != c.want || got.Listener.Type != "tailnet" {
				t.Errorf("%s: listener %+v, want %q", c.who.ParticipantID, got.Listener, c.want)
			}
		}
	})
	t.Run("no_address_or_port_in_the_answer", func(t *testing.T) {
		for _, s := range []string{"100.64.9.77", "43117", `"address"`, `"port"`} {
			if strings.Contains(text, s) {
				t.Fatalf("%q in %s", s, text)
			}
		}
	})
	t.Run("participants_with_their_transport", func(t *testing.T) {
		i := slices.IndexFunc(diag.Participants, func(p room.DiagnosticParticipant) bool { return p.ParticipantID == a.ParticipantID })
		if i < 0 || diag.Participants[i].Name != "a" || diag.Participants[i].Kind != "agent" || strOf(diag.Participants[i].Transport) != "test" {
			t.Fatalf("participants %+v", diag.Participants)
		}
	})
	t.Run("diagnostics_need_read", func(t *testing.T) {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.Diagnostics, error) {
			return eng.Diagnostics(t.Context(), q, room.Principal{ParticipantID: a.ParticipantID}, room.Empty{})
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

func TestRoomView(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	viewer := d.join("viewer", room.CapRead)
	d.mustCheckout(a, "Goals", nil)
	open := d.mustPropose(a, "Risks", "## Risks\n\nsome\n")
	if _, err := d.create(a, room.CreateHandoffInput{Summary: "review the risks"}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		d.rawCommit(fmt.Sprintf("%s\nline %d\n", testDoc, i)) // many events, and the open proposal superseded
	}
	open2 := d.mustPropose(a, "Risks", "## Risks\n\nmore\n")
	view := func(p room.Principal) (room.RoomView, map[string]json.RawMessage) {
		t.Helper()
		v, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.RoomView, error) {
			return eng.Room(t.Context(), q, p, room.Empty{})
		})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(mustJSON(t, v)), &m); err != nil {
			t.Fatal(err)
		}
		return v, m
	}
	v, m := view(viewer)
	t.Run("every_section_is_present", func(t *testing.T) {
		for _, k := range []string{"status", "participants", "leases", "proposals", "events", "summary", "diagnostics", "handoffs"} {
			if _, ok := m[k]; !ok {
				t.Errorf("missing %s", k)
			}
		}
		if v.Status.Version != 26 || len(v.Leases) != 1 || len(v.Participants) != 3 || v.Summary.Version != 26 {
			t.Fatalf("status %+v leases %d participants %d", v.Status, len(v.Leases), len(v.Participants))
		}
	})
	t.Run("events_are_the_newest_20_newest_first", func(t *testing.T) {
		if len(v.Events) != 20 || v.Events[0].ID != d.lastEventID() || v.Events[0].ID <= v.Events[19].ID {
			t.Fatalf("%d events, first %d", len(v.Events), v.Events[0].ID)
		}
	})
	t.Run("proposals_open_ones_and_recent_closed_ones_newest_first", func(t *testing.T) {
		if len(v.Proposals) != 2 || v.Proposals[0].ProposalID != open2.ProposalID || v.Proposals[1].ProposalID != open.ProposalID ||
			v.Proposals[1].Status != "superseded" {
			t.Fatalf("proposals %+v", v.Proposals)
		}
	})
	t.Run("handoffs_are_those_the_caller_may_see", func(t *testing.T) {
		if len(v.Handoffs) != 0 || string(m["handoffs"]) != "[]" {
			t.Fatalf("a read-only outsider sees %s", m["handoffs"])
		}
		_, adm := view(d.op())
		var hs []room.Handoff
		json.Unmarshal(adm["handoffs"], &hs)
		if len(hs) != 1 || hs[0].Summary != "review the risks" {
			t.Fatalf("operator sees handoffs %s", adm["handoffs"])
		}
	})
	t.Run("invites_are_left_out_without_invite", func(t *testing.T) {
		if _, ok := m["invites"]; ok {
			t.Fatal("a read-only viewer sees invites")
		}
	})
	t.Run("invites_are_shown_with_invite", func(t *testing.T) {
		_, adm := view(d.op())
		var inv []room.InviteInfo
		if err := json.Unmarshal(adm["invites"], &inv); err != nil || len(inv) != 2 {
			t.Fatalf("invites %s (%v)", adm["invites"], err)
		}
	})
	t.Run("the_view_needs_read", func(t *testing.T) {
		_, err := read(d.env, func(eng *room.Engine, q room.Querier) (room.RoomView, error) {
			return eng.Room(t.Context(), q, room.Principal{ParticipantID: a.ParticipantID, Caps: room.Caps{room.CapPropose}}, room.Empty{})
		})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

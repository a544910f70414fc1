package room_test

// Invitations (issue 13, items 12, 13 and the 429-for-a-value-error case):
// only an absent grant takes the default; a non-admin sees and revokes only
// the invitations it created; out-of-range values are invalid_request.

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/commonroom/ce/room"
)

func TestCreateInvite_OnlyAnAbsentGrantTakesTheDefault(t *testing.T) {
	e := newEnv(t)
	str := func(s string) *string { return &s }
	agentSet := []string{"read", "observe", "propose", "checkout", "commit"}
	for _, tc := range []struct {
		name  string
		in    room.InviteInput
		want  []string // nil: refused
		field string
	}{
		{"absent_fields_take_the_default_set", room.InviteInput{}, agentSet, ""},
		{"an_empty_list_is_refused", room.InviteInput{Capabilities: []string{}}, nil, "capabilities"},
		{"a_list_of_blanks_is_refused", room.InviteInput{Capabilities: []string{"", " "}}, nil, "capabilities"},
		{"empty_permissions_is_refused", room.InviteInput{Permissions: str("")}, nil, "permissions"},
		{"blank_permissions_is_refused", room.InviteInput{Permissions: str(" , ")}, nil, "permissions"},
		{"an_empty_list_wins_over_permissions_and_is_refused", room.InviteInput{Capabilities: []string{}, Permissions: str("read")}, nil, "capabilities"},
		{"an_unknown_permission_names_the_field", room.InviteInput{Permissions: str("fly")}, nil, "permissions"},
		{"a_list_is_taken_as_given", room.InviteInput{Capabilities: []string{"read"}}, []string{"read"}, ""},
		{"a_legacy_word_is_taken", room.InviteInput{Permissions: str("read")}, []string{"read", "observe"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, mark := e.identityDump(), e.lastEventID()
			g, err := e.invite(e.op(), tc.in)
			if tc.want != nil {
				if err != nil || !slices.Equal(g.Capabilities, tc.want) {
					t.Fatalf("grant %v, %v; want %v", g.Capabilities, err, tc.want)
				}
				return
			}
			wantKind(t, err, room.KindInvalidRequest)
			if f := room.AsError(err).Fields["field"]; f != tc.field {
				t.Errorf("field = %v, want %s", f, tc.field)
			}
			if e.identityDump() != before || e.lastEventID() != mark {
				t.Fatal("a refused invitation changed state")
			}
		})
	}
}

// TestInviteInput_JSONKeepsPresence: every front door decodes the request
// through encoding/json; null and [] must not collapse into "absent".
func TestInviteInput_JSONKeepsPresence(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		caps      []string // nil: absent
		perms     *string
		typeField string // a type error naming this field
	}{
		{"empty_object_is_absent", `{}`, nil, nil, ""},
		{"null_capabilities_is_present_and_empty", `{"capabilities": null}`, []string{}, nil, ""},
		{"empty_capabilities_is_present_and_empty", `{"capabilities": []}`, []string{}, nil, ""},
		{"a_list_is_kept", `{"capabilities": ["read"]}`, []string{"read"}, nil, ""},
		{"null_permissions_is_present_and_empty", `{"permissions": null}`, nil, new(""), ""},
		{"empty_permissions_is_present", `{"permissions": ""}`, nil, new(""), ""},
		{"capabilities_of_the_wrong_type_names_the_field", `{"capabilities": "read"}`, nil, nil, "capabilities"},
		{"permissions_of_the_wrong_type_names_the_field", `{"permissions": 7}`, nil, nil, "permissions"},
		{"other_fields_keep_their_names", `{"max_uses": "x"}`, nil, nil, "max_uses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in room.InviteInput
			err := json.Unmarshal([]byte(tc.body), &in)
			if tc.typeField != "" {
				te, ok := err.(*json.UnmarshalTypeError)
				if !ok || te.Field != tc.typeField {
					t.Fatalf("error %#v, want a type error naming %s", err, tc.typeField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (in.Capabilities == nil) != (tc.caps == nil) || !slices.Equal(in.Capabilities, tc.caps) {
				t.Errorf("capabilities = %#v, want %#v", in.Capabilities, tc.caps)
			}
			if (in.Permissions == nil) != (tc.perms == nil) || (in.Permissions != nil && *in.Permissions != *tc.perms) {
				t.Errorf("permissions = %v, want %v", in.Permissions, tc.perms)
			}
			// And back: what the CLI sends a running room decodes the same.
			b, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var again room.InviteInput
			if err := json.Unmarshal(b, &again); err != nil {
				t.Fatal(err)
			}
			if (again.Capabilities == nil) != (in.Capabilities == nil) || (again.Permissions == nil) != (in.Permissions == nil) {
				t.Errorf("round trip %s changed presence: %s", tc.body, b)
			}
		})
	}
}

func TestInvites_ScopedToTheirCreator(t *testing.T) {
	e := newEnv(t)
	principal := func(g room.SessionGrant) room.Principal {
		caps, err := room.ParseCaps(g.Capabilities)
		if err != nil {
			t.Fatal(err)
		}
		return room.Principal{ParticipantID: g.ParticipantID, SessionRef: g.SessionRef, Caps: caps}
	}
	a := principal(e.joinGrant("a", "read", "invite"))
	b := principal(e.joinGrant("b", "read", "invite"))
	admin := principal(e.joinGrant("admin", "admin"))
	mine, err := e.invite(a, room.InviteInput{Capabilities: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := e.invite(b, room.InviteInput{Capabilities: []string{"read"}})
	if err != nil {
		t.Fatal(err)
	}
	hosts := e.mustInvite(room.InviteInput{})

	list := func(p room.Principal) []string {
		t.Helper()
		is, err := read(e, func(eng *room.Engine, q room.Querier) ([]room.InviteInfo, error) {
			return eng.ListInvites(context.Background(), q, p, room.Empty{})
		})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, i := range is {
			ids = append(ids, i.InviteID)
		}
		return ids
	}
	t.Run("a_non_admin_lists_only_its_own", func(t *testing.T) {
		if got := list(a); !slices.Equal(got, []string{mine.InviteID}) {
			t.Errorf("a lists %v, want only %s", got, mine.InviteID)
		}
	})
	t.Run("the_host_and_admins_list_all", func(t *testing.T) {
		for _, p := range []room.Principal{e.op(), admin} {
			got := list(p)
			for _, id := range []string{mine.InviteID, theirs.InviteID, hosts.InviteID} {
				if !slices.Contains(got, id) {
					t.Errorf("%s lists %v, missing %s", p.ParticipantID, got, id)
				}
			}
		}
	})
	t.Run("revoking_anothers_answers_as_an_unknown_one", func(t *testing.T) {
		_, unknownErr := e.revoke(a, room.RevokeInput{InviteID: "invite_0000000000000000"})
		for _, in := range []room.RevokeInput{
			{InviteID: theirs.InviteID}, {Token: theirs.Token},
			{InviteID: hosts.InviteID}, {Token: hosts.Token, EndSessions: true},
		} {
			before, mark := e.identityDump(), e.lastEventID()
			_, err := e.revoke(a, in)
			wantKind(t, err, room.KindUnauthorized)
			if err.Error() != unknownErr.Error() {
				t.Errorf("foreign %q, unknown %q: distinguishable", err, unknownErr)
			}
			if e.identityDump() != before || e.lastEventID() != mark {
				t.Fatal("a refused revoke changed state")
			}
		}
		if _, err := e.joinVia(hosts.Token, "still works"); err != nil {
			t.Errorf("the host's invitation no longer admits: %v", err)
		}
	})
	t.Run("revoking_its_own_works", func(t *testing.T) {
		if _, err := e.revoke(a, room.RevokeInput{Token: mine.Token}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.joinVia(mine.Token, "late"); room.ErrorKind(err) != room.KindInvitationRevoked {
			t.Errorf("join after revoke: %v", err)
		}
	})
	t.Run("an_admin_revokes_anothers", func(t *testing.T) {
		if _, err := e.revoke(admin, room.RevokeInput{InviteID: theirs.InviteID}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("without_invite_nothing", func(t *testing.T) {
		reader := principal(e.joinGrant("reader", "read"))
		_, err := e.revoke(reader, room.RevokeInput{InviteID: theirs.InviteID})
		wantKind(t, err, room.KindPermissionDenied)
	})
}

func TestValueErrors_AreInvalidRequest(t *testing.T) {
	e := newEnv(t)
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name  string
		run   func() error
		field string
	}{
		{"expires_in_minutes_above_a_week", func() error {
			_, err := e.invite(e.op(), room.InviteInput{ExpiresInMinutes: n(10081)})
			return err
		}, "expires_in_minutes"},
		{"expires_in_minutes_overflowing_a_duration", func() error {
			_, err := e.invite(e.op(), room.InviteInput{ExpiresInMinutes: n(1 << 62)})
			return err
		}, "expires_in_minutes"},
		{"a_session_longer_than_a_day", func() error {
			inv := e.mustInvite(room.InviteInput{})
			_, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.SessionGrant, error) {
				return eng.Join(tx, room.JoinInput{Secret: inv.Token, Name: "x", SessionMinutes: 1441})
			})
			return err
		}, "session_minutes"},
		{"a_negative_session_length", func() error {
			inv := e.mustInvite(room.InviteInput{})
			_, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.SessionGrant, error) {
				return eng.Join(tx, room.JoinInput{Secret: inv.Token, Name: "x", SessionMinutes: -5})
			})
			return err
		}, "session_minutes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			wantKind(t, err, room.KindInvalidRequest)
			if f := room.AsError(err).Fields["field"]; f != tc.field {
				t.Errorf("field = %v, want %s", f, tc.field)
			}
			if room.AsError(err).Fields["limit"] == nil {
				t.Errorf("no limit in %v", room.AsError(err).Fields)
			}
		})
	}
}

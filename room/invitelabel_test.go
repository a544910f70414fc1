package room_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestInviteLabel: a label is stored, listed and put on the event; a bad
// one is refused with the field named and creates nothing.
func TestInviteLabel(t *testing.T) {
	e := newEnv(t)
	invite := func(label string) (room.InviteGrant, error) {
		return do(e, func(eng *room.Engine, tx *room.Tx) (room.InviteGrant, error) {
			return eng.CreateInvite(tx, e.op(), room.InviteInput{Label: label})
		})
	}
	list := func() []room.InviteInfo {
		t.Helper()
		l, err := read(e, func(eng *room.Engine, q room.Querier) ([]room.InviteInfo, error) {
			return eng.ListInvites(context.Background(), q, e.op(), room.Empty{})
		})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	t.Run("stored_listed_and_on_the_event", func(t *testing.T) {
		before := e.lastEventID()
		g, err := invite("for the reviewer — Zoë")
		if err != nil {
			t.Fatal(err)
		}
		if g.Label != "for the reviewer — Zoë" {
			t.Fatalf("grant label = %q", g.Label)
		}
		if l := list(); l[0].InviteID != g.InviteID || l[0].Label != g.Label {
			t.Fatalf("listed %+v", l[0])
		}
		evs := e.eventsAfter(before)
		if len(evs) != 1 || evs[0].Type != "invite.created" || !strings.Contains(evs[0].Payload, `"label":"for the reviewer — Zoë"`) {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("absent_is_empty", func(t *testing.T) {
		g, err := invite("")
		if err != nil {
			t.Fatal(err)
		}
		if l := list(); l[0].InviteID != g.InviteID || l[0].Label != "" {
			t.Fatalf("listed %+v", l[0])
		}
	})
	t.Run("at_the_bound_is_kept", func(t *testing.T) {
		if _, err := invite(strings.Repeat("é", 80)); err != nil {
			t.Fatal(err)
		}
	})

	bad := []struct{ name, label string }{
		{"too_long_is_refused", strings.Repeat("x", 81)},
		{"a_newline_is_refused", "two\nlines"},
		{"a_nul_is_refused", "nul\x00"},
		{"an_escape_is_refused", "\x1b[31mred"},
		{"a_bidi_override_is_refused", "abc\u202Edef"},
		{"surrounding_spaces_are_refused", " padded "},
		{"invalid_utf8_is_refused", "bad\xff"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			n := len(list())
			before := e.lastEventID()
			_, err := invite(tc.label)
			var re *room.Error
			if !errors.As(err, &re) || (re.Kind != room.KindInvalidRequest && re.Kind != room.KindLimitExceeded) || re.Fields["field"] != "label" {
				t.Fatalf("err = %v, want invalid_request or limit_exceeded naming label", err)
			}
			if len(list()) != n || e.lastEventID() != before {
				t.Fatal("a refused label created something")
			}
		})
	}
}

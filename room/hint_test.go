package room_test

import (
	"reflect"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestHintsInInvitations: every hint the transport exposed goes into new
// invitations in order, with the fields a plugin needs to dial (IPs,
// Params), and what the engine keeps cannot be changed behind its back.
func TestHintsInInvitations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exposed := room.Hint{Type: "exec:relay", Address: "room.relay.example", IPs: []string{"192.0.2.7", "2001:db8::7"}, Port: 8443,
		Encrypted: true, Mode: "private", Params: map[string]string{"relay": "eu-1"}}
	loop := room.Hint{Type: "loopback", Address: "127.0.0.1", Port: 4000, Mode: "local"}
	given := []room.Hint{exposed, loop}
	e.eng.SetHints(given)

	t.Run("an_invitation_carries_every_hint_first_the_exposed_one", func(t *testing.T) {
		g, err := do(e, func(eng *room.Engine, tx *room.Tx) (room.InviteGrant, error) {
			return eng.CreateInvite(tx, room.Operator(eng.HostID), room.InviteInput{})
		})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := room.DecodeInvitation(g.URI, room.Defaults().MaxInvitePayload)
		if err != nil {
			t.Fatal(err)
		}
		// The loopback hint also names this machine (issue 25): a joiner
		// elsewhere never dials it.
		tagged := loop
		if tag := room.MachineTag(e.eng.WorkspaceID); tag != "" {
			tagged.Params = map[string]string{room.HintParamMachine: tag}
		}
		if !reflect.DeepEqual(inv.Transport, exposed) || !reflect.DeepEqual(inv.Transports, []room.Hint{exposed, tagged}) {
			t.Fatalf("transport %+v\ntransports %+v", inv.Transport, inv.Transports)
		}
	})
	t.Run("the_engine_keeps_its_own_copy", func(t *testing.T) {
		given[0].Address = "evil.example"
		got := e.eng.Hints()
		got[0].IPs[0] = "203.0.113.1"
		got[0].Params["relay"] = "elsewhere"
		again := e.eng.Hints()
		if !reflect.DeepEqual(again, []room.Hint{exposed, loop}) {
			t.Fatalf("hints changed from outside: %+v", again)
		}
	})
	t.Run("describe_is_the_line_people_read", func(t *testing.T) {
		for _, c := range []struct {
			h    room.Hint
			want string
		}{
			{exposed, "exec:relay (private, encrypted) room.relay.example:8443"},
			{loop, "loopback (local, not encrypted) 127.0.0.1:4000"},
			{room.Hint{Type: "v6", Address: "2001:db8::7", Port: 80, Mode: "public"}, "v6 (public, not encrypted) [2001:db8::7]:80"},
			{room.Hint{Type: "local", Mode: "local"}, "local (local, not encrypted)"},
		} {
			if got := c.h.Describe(); got != c.want {
				t.Errorf("%+v: %q, want %q", c.h, got, c.want)
			}
		}
	})
}

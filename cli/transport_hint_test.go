package cli

import (
	"reflect"
	"testing"

	"github.com/commonroom/ce/transport"
)

// TestHintConversion: the room's copy of a hint carries every field of the
// transport's and reads the same line, so what a plugin exposed is what
// invitations carry and what people read.
func TestHintConversion(t *testing.T) {
	for _, h := range []transport.Hint{
		{Type: "exec:relay", Address: "room.relay.example", IPs: []string{"192.0.2.7", "2001:db8::7"}, Port: 443, Encrypted: true, Mode: "private",
			Params: map[string]string{"relay": "eu-1"}},
		{Type: "loopback", Address: "127.0.0.1", Port: 8080, Mode: "local"},
		{Type: "v6", Address: "2001:db8::1", Port: 80, Mode: "public"},
		{Type: "bare", Mode: "local"},
	} {
		r := toRoomHint(h)
		if got := fromRoomHint(r); !reflect.DeepEqual(got, h) {
			t.Errorf("round trip %+v -> %+v", h, got)
		}
		if r.Describe() != h.Describe() {
			t.Errorf("room %q, transport %q", r.Describe(), h.Describe())
		}
	}
	if got := showHint(toRoomHint(transport.Hint{Type: "loopback", Address: "127.0.0.1", Port: 8080, Mode: "local"})); got != "loopback (local, not encrypted)" {
		t.Errorf("loopback shows %q", got)
	}
}

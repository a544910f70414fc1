package present

import (
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// frameOf is what one stream writes for a published change.
func frameOf(t *testing.T, change any, id json.RawMessage) string {
	t.Helper()
	f, ok := EncodeChange(listen.Message{Change: change})
	if !ok || f == nil {
		t.Fatalf("EncodeChange(%#v) = %v, %v", change, f, ok)
	}
	return string(f.AppendTo(nil, SubscriptionTag(id)))
}

// TestEncodeChangePinsTheWire pins the frames the core's domain changes
// become, byte for byte, as they were when the actor still named the
// methods: a task in MCP form with _meta first (the subscription id joining
// the handoff id), a resource's URI, an event for /workspace/observe.
func TestEncodeChangePinsTheWire(t *testing.T) {
	failed := room.DetailedTask{TaskID: "task_1", Status: room.TaskFailed, StatusMessage: "task expired",
		CreatedAt: "2026-08-01T09:00:00Z", LastUpdatedAt: "2026-08-02T09:00:00Z", TTLMs: 86400000, PollIntervalMs: 5000,
		Meta: map[string]any{room.HandoffMetaKey: "ho_1"}, Failure: room.TaskFailureExpired}
	cases := []struct {
		name   string
		change any
		id     json.RawMessage
		want   string
	}{
		{"an expired task carries D34's error", room.TaskNotice{TaskID: "task_1", Task: failed}, json.RawMessage(`7`),
			`data: {"jsonrpc":"2.0","method":"notifications/tasks","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7,"commonroom/handoff_id":"ho_1"},` +
				`"createdAt":"2026-08-01T09:00:00Z","error":{"code":-32603,"message":"task expired"},"lastUpdatedAt":"2026-08-02T09:00:00Z",` +
				`"pollIntervalMs":5000,"status":"failed","statusMessage":"task expired","taskId":"task_1","ttlMs":86400000}}` + "\n\n"},
		{"a resource change names its URI", actor.ResourceChanged{URI: "commonroom://workspace/w/section/Goals"}, json.RawMessage(`"s"`),
			`data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"s"},"uri":"commonroom://workspace/w/section/Goals"}}` + "\n\n"},
		{"the legacy stream has no subscription id", actor.ResourceChanged{URI: "commonroom://workspace/w"}, nil,
			`data: {"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"commonroom://workspace/w"}}` + "\n\n"},
		{"an event for observe", room.Event{ID: 3, Type: "task.failed", Payload: json.RawMessage(`{"reason":"task_expired"}`), CreatedAt: "2026-08-02T09:00:00Z"}, nil,
			`data: {"jsonrpc":"2.0","method":"notifications/commonroom/event","params":{"event_id":3,"event_type":"task.failed","payload":{"reason":"task_expired"},"created_at":"2026-08-02T09:00:00Z"}}` + "\n\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := frameOf(t, tc.change, tc.id); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	t.Run("a change the door does not know is not sent", func(t *testing.T) {
		if f, ok := EncodeChange(listen.Message{Change: "something else"}); f != nil || ok {
			t.Fatalf("EncodeChange = %v, %v; want nothing, not ok", f, ok)
		}
	})
}

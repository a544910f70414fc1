package present

import (
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// BenchmarkEncodeChangeTask is the hub's cost per published task change:
// the task as tasks/get returns it, encoded once into the frame every
// stream then splices its subscription id into (BenchmarkSpliceFrame).
// The task carries its own _meta (the handoff id), so this includes
// moving _meta first.
func BenchmarkEncodeChangeTask(b *testing.B) {
	m := listen.Message{Topic: "task:t", Change: room.TaskNotice{TaskID: "task_01J9ZK3M4N5P6Q7R8S9T0V1W2X", Task: room.DetailedTask{
		TaskID: "task_01J9ZK3M4N5P6Q7R8S9T0V1W2X", Status: "input_required", StatusMessage: "waiting for review of section 2",
		CreatedAt: "2026-08-01T10:00:00Z", LastUpdatedAt: "2026-08-01T10:05:00Z", TTLMs: 3600000, PollIntervalMs: 1000,
		InputRequests: map[string]json.RawMessage{"confirm": json.RawMessage(`{"method":"elicitation/create","params":{"mode":"form","message":"Accept the handoff?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}}}}}`)},
		Meta:          map[string]any{"commonroom/handoff_id": "hnd_01J9ZK3M4N5P6Q7R8S9T0V1W2X"},
	}}}
	b.ReportAllocs()
	var f listen.Frame
	for b.Loop() {
		var ok bool
		if f, ok = EncodeChange(m); !ok || f == nil {
			b.Fatal("task change not encoded")
		}
	}
	if out := f.AppendTo(nil, appendMeta(nil, json.RawMessage(`42`))); !json.Valid(out[len(framePrefix) : len(out)-len(frameEnd)]) {
		b.Fatalf("frame is not JSON: %s", out)
	}
}

package mcp

import (
	"bytes"
	"encoding/json"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"net/http/httptest"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// TestTaskGetResult_TheMemoSendsTheBytesTaskResultSent: tasks/get's result,
// encoded once per cached task version, is byte for byte the taskResult
// encoding rpc.WriteResult sent before; the next poll of the same version
// sends the same bytes from the memo; a handler with another version
// (another serverInfo) never sends the first handler's bytes.
func TestTaskGetResult_TheMemoSendsTheBytesTaskResultSent(t *testing.T) {
	tasks := map[string]room.DetailedTask{
		"working": {TaskID: "task_1", Status: "working", CreatedAt: "2026-08-01T09:00:00.000Z", LastUpdatedAt: "2026-08-01T09:00:00.000Z",
			TTLMs: 86_400_000, PollIntervalMs: 5000, Meta: map[string]any{"commonroom/handoffId": "handoff_1"}},
		"input_required": {TaskID: "task_2", Status: "input_required", StatusMessage: "asks <you> & \"me\" é \u2028",
			InputRequests: map[string]json.RawMessage{"b": json.RawMessage(`{"method":"elicitation/create","params":{"message":"<q>"}}`), "a": json.RawMessage(`{ "x" : 1 }`)},
			Meta:          map[string]any{"commonroom/handoffId": "handoff_2"}},
		"completed": {TaskID: "task_3", Status: "completed", Result: json.RawMessage(`{"content":[{"type":"text","text":"done \u2028 <&>"}]}`)},
		"failed":    {TaskID: "task_4", Status: "failed", Failure: room.TaskFailureExpired, StatusMessage: "expired"},
		"no meta":   {TaskID: "task_5", Status: "cancelled"},
	}
	for name, task := range tasks {
		t.Run(name+" is sent as taskResult was", func(t *testing.T) {
			s := newTestHandler(t, "1.<2>")
			other := newTestHandler(t, "other")
			var memo actor.Memo
			want := httptest.NewRecorder()
			rpc.WriteResult(want, json.RawMessage(`5`), s.taskResult(task))
			for i, h := range []*Handler{s, s, other, s} {
				got := httptest.NewRecorder()
				rpc.WriteResult(got, json.RawMessage(`5`), h.taskGetResult(task, &memo))
				w := want.Body.Bytes()
				if h == other {
					ref := httptest.NewRecorder()
					rpc.WriteResult(ref, json.RawMessage(`5`), other.taskResult(task))
					w = ref.Body.Bytes()
				}
				if !bytes.Equal(got.Body.Bytes(), w) {
					t.Fatalf("poll %d: %s\nwant %s", i, got.Body.Bytes(), w)
				}
				if memo.Load() == nil {
					t.Fatalf("poll %d left no memo", i)
				}
			}
		})
	}
}

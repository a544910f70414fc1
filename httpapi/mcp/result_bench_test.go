package mcp

import (
	"encoding/json"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"net/http/httptest"
	"testing"

	"github.com/commonroom/ce/room"
)

// BenchmarkWriteResult writes the answers of the lifecycle's steps as the
// door sends them: the task handle of handoff_create, and an accepted
// handoff with its task (what accept, complete and approve answer), each
// the old way (maps) beside the way the door writes it now.
func BenchmarkWriteResult(b *testing.B) {
	s := newTestHandler(b, "dev")
	task := room.DetailedTask{TaskID: "task_96b963ff8c9043d1e417d7e19eadf3f0", Status: "working", CreatedAt: "2026-12-02T03:46:08.484Z",
		LastUpdatedAt: "2026-12-02T03:46:08.484Z", TTLMs: 86_400_000, PollIntervalMs: 5000,
		Meta: map[string]any{"commonroom/handoff_id": "handoff_be480b5e5379d04eb9ab58933636bec1"}}
	answer := struct {
		Handoff room.Handoff       `json:"handoff"`
		Task    *room.DetailedTask `json:"task"`
	}{room.Handoff{HandoffID: "handoff_be480b5e5379d04eb9ab58933636bec1", Status: "accepted", Summary: "bench work 3/17",
		TaskID: task.TaskID, Artifacts: []room.Artifact{}}, &task}
	id := json.RawMessage(`17`)
	cases := []struct {
		name   string
		result func() any
	}{
		{"task-handle-map", func() any { return taskHandleMap(s, task) }},
		{"task-handle-struct", func() any { return s.createTaskResult(task) }},
		{"tool-result-map", func() any {
			text, _ := json.Marshal(answer)
			return s.complete(map[string]any{"content": []map[string]any{{"type": "text", "text": string(text)}}, "structuredContent": answer, "isError": false})
		}},
		{"tool-result-bytes", func() any { r, _ := s.toolResult(answer); return r }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				rpc.WriteResult(w, id, c.result())
			}
		})
	}
}

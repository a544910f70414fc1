package mcp

import (
	"bytes"
	"encoding/json"
	"github.com/commonroom/ce/httpapi/mcp/internal/rpc"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestTaskHandleIsTheMapEncoding: the task handle (createTaskResult, a
// struct) is byte for byte what the map it replaced sent (taskHandleMap),
// whatever the task and its _meta hold: HTML-unsafe and non-ASCII
// characters, U+2028, control bytes, invalid UTF-8, a _meta that names the
// server-info key itself (the server's wins), values of any type, no status
// message, and any request id.
func TestTaskHandleIsTheMapEncoding(t *testing.T) {
	s := newTestHandler(t, "v<1>&\u2028\"\\")
	base := room.DetailedTask{TaskID: "task_1", Status: "working", CreatedAt: "2026-12-02T03:46:08.484Z",
		LastUpdatedAt: "2026-12-02T03:46:08.484Z", TTLMs: 86_400_000, PollIntervalMs: 5000,
		Meta: map[string]any{"commonroom/handoff_id": "handoff_be48"}}
	odd := "fix <b> & \"quote\" \\ é 😀\u2028\u2029\n\t\x01 \xff\xfe"
	tasks := map[string]room.DetailedTask{
		"the lifecycle's handle": base,
		"a status message":       with(base, func(d *room.DetailedTask) { d.StatusMessage = "waiting on input" }),
		"odd strings everywhere": with(base, func(d *room.DetailedTask) {
			d.TaskID, d.Status, d.StatusMessage, d.CreatedAt, d.LastUpdatedAt = odd, odd+"s", odd+"m", odd+"c", odd+"l"
			d.TTLMs, d.PollIntervalMs = -1, 0
		}),
		"a _meta of many kinds": with(base, func(d *room.DetailedTask) {
			d.Meta = map[string]any{"z": 1.5, "a": []any{nil, true, "<&>"}, "ü": map[string]any{"y": odd}, odd: json.RawMessage(` { "r" : 1 } `),
				"io.modelcontextprotocol/serverInfo!": "sorts after", "io.modelcontextprotocol": "sorts before", "": ""}
		}),
		"a _meta naming the server-info key": with(base, func(d *room.DetailedTask) {
			d.Meta = map[string]any{"io.modelcontextprotocol/serverInfo": "the task's", "k": "v"}
		}),
		"no _meta":    with(base, func(d *room.DetailedTask) { d.Meta = nil }),
		"a long task": with(base, func(d *room.DetailedTask) { d.StatusMessage = strings.Repeat("\"\\x", 10_000) }),
	}
	for name, task := range tasks {
		for _, id := range []string{`7`, `"id <&>"`, ` 12 `} {
			t.Run(name+" with id "+id+" gives the same bytes", func(t *testing.T) {
				got := httptest.NewRecorder()
				rpc.WriteResult(got, json.RawMessage(id), s.createTaskResult(task))
				want := httptest.NewRecorder()
				rpc.WriteResult(want, json.RawMessage(id), taskHandleMap(s, task))
				if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
					t.Fatalf("status %d, body\n%.600q\nwant status %d, body\n%.600q", got.Code, got.Body.Bytes(), want.Code, want.Body.Bytes())
				}
			})
		}
	}
	t.Run("a _meta value that cannot be encoded fails as it did", func(t *testing.T) {
		task := with(base, func(d *room.DetailedTask) { d.Meta = map[string]any{"f": func() {}} })
		got := httptest.NewRecorder()
		rpc.WriteResult(got, json.RawMessage(`1`), s.createTaskResult(task))
		want := httptest.NewRecorder()
		rpc.WriteResult(want, json.RawMessage(`1`), taskHandleMap(s, task))
		if !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || !bytes.Contains(got.Body.Bytes(), []byte(`"error"`)) {
			t.Fatalf("body %q, want %q (an internal error)", got.Body.Bytes(), want.Body.Bytes())
		}
	})
}

// taskHandleMap is the task handle as the door built it before it was a
// struct: the reference taskHandleResult must encode as.
func taskHandleMap(h *Handler, t room.DetailedTask) map[string]any {
	m := map[string]any{
		"resultType":     "task",
		"taskId":         t.TaskID,
		"status":         t.Status,
		"createdAt":      t.CreatedAt,
		"lastUpdatedAt":  t.LastUpdatedAt,
		"ttlMs":          t.TTLMs,
		"pollIntervalMs": t.PollIntervalMs,
	}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	meta := map[string]any{}
	for k, v := range t.Meta {
		meta[k] = v
	}
	for k, v := range h.serverInfo() {
		meta[k] = v
	}
	m["_meta"] = meta
	return m
}

// newTestHandler is a door with nothing behind it but its version, enough
// to encode results as it does.
func newTestHandler(t testing.TB, version string) *Handler {
	s := &Handler{version: version}
	s.setServerInfo() // as New does
	return s
}

// with is d changed by f (a copy: the map of d is shared unless f replaces it).
func with(d room.DetailedTask, f func(*room.DetailedTask)) room.DetailedTask {
	f(&d)
	return d
}

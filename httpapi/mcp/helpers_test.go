package mcp_test

// What the MCP door's tests need beyond the kit (internal/roomtest): small
// JSON helpers, the tool names as the operations table lists them, and the
// two facts about the other doors these tests compare with (the owner
// page's cookie name, the plain door's form of a task).

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// ownerCookie is the owner page's cookie as a browser sees it; the door
// must refuse it as a credential.
const ownerCookie = "commonroom_owner"

// tableTools is the tool names of the operations table, in its order: what
// tools/list lists.
func tableTools() []string {
	var out []string
	for _, op := range ops.Table {
		if op.Tool != "" {
			out = append(out, op.Tool)
		}
	}
	return out
}

// threeSections builds a document from the three sections' bodies.
func threeSections(idea, goals, plan string) string {
	return "# Idea\n\n" + idea + "\n\n## Goals\n\n" + goals + "\n\n## Plan\n\n" + plan + "\n"
}

// taskRow reads a task's status and last update from the sidecar.
func taskRow(t testing.TB, h *apitest.Harness, taskID string) (status string, updated int64) {
	t.Helper()
	if err := h.Store.Reader.QueryRow(`SELECT status, last_updated_at FROM tasks WHERE task_id = ?`, taskID).Scan(&status, &updated); err != nil {
		t.Fatalf("task %s: %v", taskID, err)
	}
	return status, updated
}

// httpTwin is what GET /workspace/task must equal: the tasks/get result
// without resultType and without serverInfo in _meta.
func httpTwin(t testing.TB, res map[string]any) map[string]any {
	t.Helper()
	out := generic(t, res).(map[string]any)
	delete(out, "resultType")
	if meta, ok := out["_meta"].(map[string]any); ok {
		delete(meta, mcptest.MetaServerInfo)
	}
	return out
}

// rawPOST writes one request on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded header values).
func rawPOST(t testing.TB, hostport string, headerLines []string, body []byte) roomtest.MCPResponse {
	t.Helper()
	r, err := mcptest.RawPOST(hostport, headerLines, body)
	if err != nil {
		t.Fatal(err)
	}
	return roomtest.DecodeMCP(t, r.Status, r.Header, r.Raw)
}

// hostPort is a test server's host:port.
func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// isoTimeRE is the ISO 8601 prefix conformance checks on task times.
var isoTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`)

// withKey is a copy of m with k set to v.
func withKey(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

// withoutKey is a copy of m without k.
func withoutKey(m map[string]any, k string) map[string]any {
	out := withKey(m, k, nil)
	delete(out, k)
	return out
}

// hasKey reports whether any object anywhere inside v has key k.
func hasKey(v any, k string) bool {
	switch x := v.(type) {
	case map[string]any:
		for kk, vv := range x {
			if kk == k || hasKey(vv, k) {
				return true
			}
		}
	case []any:
		for _, vv := range x {
			if hasKey(vv, k) {
				return true
			}
		}
	}
	return false
}

// generic round-trips v through JSON into generic values, so Go structs and
// decoded answers compare with reflect.DeepEqual.
func generic(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// stringsOf turns a decoded []any of strings into []string.
func stringsOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// str reads a decoded JSON string ("" when v is not one).
func str(v any) string {
	s, _ := v.(string)
	return s
}

// num reads a decoded JSON number (-1 when v is not one).
func num(v any) int64 {
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

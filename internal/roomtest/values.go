package roomtest

// Decoded-JSON helpers that the plain door's tests (httpapi) and the MCP
// door's tests (httpapi/mcp) both use to compare answers across doors; one
// copy here so the two sides cannot drift apart.

import (
	"encoding/json"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// WithKey is a copy of m with k set to v, for a request that differs from a
// good one in one field.
func WithKey(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

// WithoutKey is a copy of m without k, for a request missing one field.
func WithoutKey(m map[string]any, k string) map[string]any {
	out := WithKey(m, k, nil)
	delete(out, k)
	return out
}

// HasKey reports whether any object anywhere inside v has key k, so a test
// can say a field never appears, however deep.
func HasKey(v any, k string) bool {
	switch x := v.(type) {
	case map[string]any:
		for kk, vv := range x {
			if kk == k || HasKey(vv, k) {
				return true
			}
		}
	case []any:
		for _, vv := range x {
			if HasKey(vv, k) {
				return true
			}
		}
	}
	return false
}

// Generic round-trips v through JSON into generic values, so Go structs and
// decoded answers compare with reflect.DeepEqual.
func Generic(t testing.TB, v any) any {
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

// StringsOf turns a decoded []any of strings into []string.
func StringsOf(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// Str reads a decoded JSON string ("" when v is not one).
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// Num reads a decoded JSON number (-1 when v is not one, which no count or
// time in an answer is).
func Num(v any) int64 {
	f, ok := v.(float64)
	if !ok {
		return -1
	}
	return int64(f)
}

// HTTPTwin is what GET /workspace/task must equal for a tasks/get result:
// the result without resultType and without serverInfo in _meta (the two
// things only the MCP door says).
func HTTPTwin(t testing.TB, res map[string]any) map[string]any {
	t.Helper()
	out := Generic(t, res).(map[string]any)
	delete(out, "resultType")
	if meta, ok := out["_meta"].(map[string]any); ok {
		delete(meta, mcptest.MetaServerInfo)
	}
	return out
}

// TaskRow reads a task's status and last update from the sidecar, for the
// tests that check a door's answer against what was stored.
func (h *Harness) TaskRow(t testing.TB, taskID string) (status string, updated int64) {
	t.Helper()
	if err := h.Store.Reader.QueryRow(`SELECT status, last_updated_at FROM tasks WHERE task_id = ?`, taskID).Scan(&status, &updated); err != nil {
		t.Fatalf("task %s: %v", taskID, err)
	}
	return status, updated
}

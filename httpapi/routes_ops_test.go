package httpapi

import (
	"net/http"
	"strconv"
	"testing"
)

// TestOpsQueryDecoding pins how the table's GET routes read their query
// (decodeQuery): a parameter a GET route requires is refused by name when
// absent, a non-integer is refused by name, max_items is changes_since's
// other name for a smaller limit, and unknown parameters are ignored.
func TestOpsQueryDecoding(t *testing.T) {
	h := newHarness(t, "# Doc\n\n## A\n\none\n")
	g := h.join("reader", "read")
	for i := 2; i <= 4; i++ {
		okJSON(t, h.operator(t, "/workspace/commit", map[string]any{"base_version": i - 1, "summary": "v", "content": "# Doc\n\n## A\n\n" + strconv.Itoa(i) + "\n"}))
	}
	for _, tc := range []struct{ query, field, message string }{
		{"/workspace/diff", "base_version", "base_version is required"},
		{"/workspace/diff?base_version=one", "base_version", "base_version must be an integer"},
		{"/workspace/changes_since", "version", "version is required"},
		{"/workspace/changes_since?version=0&limit=x", "limit", "limit must be an integer"},
		{"/workspace/changes_since?version=0&max_items=1.5", "max_items", "max_items must be an integer"},
		{"/workspace/history?since_event_id=-", "since_event_id", "since_event_id must be an integer"},
		{"/workspace/read?offset=ten", "offset", "offset must be an integer"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			m := wantError(t, h.get(t, g.SessionToken, tc.query), http.StatusBadRequest, "invalid_request")
			if m["field"] != tc.field || m["message"] != tc.message {
				t.Errorf("error = %v, want field %s, message %q", m, tc.field, tc.message)
			}
		})
	}
	count := func(query string) int {
		t.Helper()
		changes, _ := okJSON(t, h.get(t, g.SessionToken, query))["changes"].([]any)
		return len(changes)
	}
	for query, want := range map[string]int{
		"/workspace/changes_since?version=0":                     4,
		"/workspace/changes_since?version=0&limit=3":             3,
		"/workspace/changes_since?version=0&max_items=2":         2,
		"/workspace/changes_since?version=0&limit=3&max_items=1": 1,
		"/workspace/changes_since?version=0&limit=1&max_items=3": 1,
		"/workspace/changes_since?version=1&no_such_parameter=x": 3,
	} {
		if got := count(query); got != want {
			t.Errorf("GET %s: %d changes, want %d", query, got, want)
		}
	}
}

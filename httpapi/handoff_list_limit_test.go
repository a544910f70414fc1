package httpapi

// The inbox's limit at the HTTP and MCP doors (issue 25 item 7): a limit
// over the maximum is refused exactly like a negative one, naming the
// maximum, instead of being clamped without a word.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestHandoffListLimitRefusedBothWays(t *testing.T) {
	h := newHarness(t, "")
	p := h.join("worker", "read", "checkout")
	const max = 200 // room.Defaults().MaxListItems, what the message must name
	for _, tc := range []struct {
		name  string
		limit int
	}{
		{"minus_one_is_refused", -1},
		{"one_over_the_maximum_is_refused", max + 1},
		{"a_billion_is_refused", 1_000_000_000},
	} {
		t.Run("HTTP_"+tc.name, func(t *testing.T) {
			before := h.Snapshot()
			r := h.get(t, p.SessionToken, fmt.Sprintf("/workspace/handoffs?limit=%d", tc.limit))
			m := wantError(t, r, http.StatusBadRequest, "invalid_request")
			if m["field"] != "limit" || m["limit"] != float64(max) || !strings.Contains(fmt.Sprint(m["message"]), fmt.Sprintf("1 to %d", max)) {
				t.Errorf("the refusal does not name the field and the maximum: %v", m)
			}
			h.AssertUnchanged(t, before)
		})
		t.Run("MCP_"+tc.name, func(t *testing.T) {
			sc := p.mcp.toolErr(t, "handoff_list", map[string]any{"limit": tc.limit}, "invalid_request")
			if sc["field"] != "limit" || sc["limit"] != float64(max) || !strings.Contains(fmt.Sprint(sc["message"]), fmt.Sprintf("1 to %d", max)) {
				t.Errorf("the refusal does not name the field and the maximum: %v", sc)
			}
		})
	}
	t.Run("HTTP_the_maximum_itself_is_answered", func(t *testing.T) {
		r := h.get(t, p.SessionToken, fmt.Sprintf("/workspace/handoffs?limit=%d", max))
		if r.Status != http.StatusOK {
			t.Fatalf("limit=%d: %d %s", max, r.Status, r.Body)
		}
	})
	t.Run("MCP_the_maximum_itself_is_answered", func(t *testing.T) {
		p.mcp.toolOK(t, "handoff_list", map[string]any{"limit": max})
	})
}

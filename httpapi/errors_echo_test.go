package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/room"
)

// TestErrorsDoNotEchoLongInput: a client's string comes back in an error
// cut to wirejson.MaxErrorString bytes, or not at all, at HTTP and MCP alike.
func TestErrorsDoNotEchoLongInput(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("reader", "read")
	huge := strings.Repeat("x", 900_000)
	run := strings.Repeat("x", wirejson.MaxErrorString+1) // more of the input than any error may carry
	small := func(t *testing.T, what string, b []byte) {
		t.Helper()
		if len(b) > 4096 || bytes.Contains(b, []byte(run)) {
			t.Errorf("%s: a %d-byte answer that carries the input back: %.300s…", what, len(b), b)
		}
	}
	t.Run("GET /workspace/read with a 900 KB section: invalid_request, small", func(t *testing.T) {
		r := h.do("GET", h.IngressURL("/workspace/read?section="+huge), s.SessionToken, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_request")
		small(t, "GET /workspace/read", r.Body)
	})
	mcp := newMCPClient(h, s.SessionToken, false)
	t.Run("workspace_read with a 900 KB section: invalid_request, small", func(t *testing.T) {
		r := mcp.call(t, "tools/call", map[string]any{"name": "workspace_read", "arguments": map[string]any{"section": huge}})
		res := wantResult(t, r)
		if res["isError"] != true || jsonAt(res, "structuredContent", "error") != "invalid_request" {
			t.Errorf("result %.300s, want isError with invalid_request", r.Raw)
		}
		small(t, "workspace_read", r.Raw)
	})
	for _, tc := range []struct{ method, field string }{
		{"tools/call", "name"}, {"prompts/get", "name"}, {"resources/read", "uri"},
	} {
		t.Run(tc.method+" with a 900 KB "+tc.field+": a small error", func(t *testing.T) {
			r := mcp.call(t, tc.method, map[string]any{tc.field: huge, "arguments": map[string]any{}})
			if r.Error == nil {
				t.Fatalf("want a JSON-RPC error, got %.300s", r.Raw)
			}
			small(t, tc.method, r.Raw)
		})
	}
	t.Run("a request id over 256 bytes is refused without being echoed", func(t *testing.T) {
		raw, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": strings.Repeat("i", 300), "method": "tools/list",
			"params": map[string]any{"_meta": mcptest.Meta(mcptest.Version, map[string]any{}, "ce-tests")}})
		if err != nil {
			t.Fatal(err)
		}
		r := mcp.do(t, mcpReq{Raw: raw, Method: "tools/list"})
		if r.Error == nil || r.Status != http.StatusBadRequest {
			t.Fatalf("status %d %.300s, want 400 with an error", r.Status, r.Raw)
		}
		if bytes.Contains(r.Raw, []byte(strings.Repeat("i", 300))) {
			t.Errorf("the id was echoed: %.400s", r.Raw)
		}
	})
	t.Run("the longest selector allowed still gets invalid_region", func(t *testing.T) {
		r := h.do("GET", h.IngressURL("/workspace/read?section="+strings.Repeat("y", room.MaxSelectorBytes)), s.SessionToken, nil)
		wantError(t, r, http.StatusBadRequest, "invalid_region")
		small(t, "GET /workspace/read", r.Body)
	})
}

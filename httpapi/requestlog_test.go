package httpapi

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestRequestLog_TheIDInTheHeaderIsTheIDInTheLog: every answer carries a
// fresh 16-hex-digit X-Request-Id, on both listeners, and the request's
// debug line names that same id (the id now lives in one context value
// with the ingress mark).
func TestRequestLog_TheIDInTheHeaderIsTheIDInTheLog(t *testing.T) {
	h := newHarness(t, "")
	hexID := regexp.MustCompile(`^[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for _, c := range []struct {
		name, method, url string
		body              any
		status            int
	}{
		{"owner health", http.MethodGet, h.OwnerURL("/healthz"), nil, http.StatusOK},
		{"ingress health", http.MethodGet, h.IngressURL("/healthz"), nil, http.StatusOK},
		{"ingress unauthenticated read", http.MethodGet, h.IngressURL("/workspace/status"), nil, http.StatusUnauthorized},
		{"owner unknown route", http.MethodGet, h.OwnerURL("/nope"), nil, http.StatusNotFound},
		// A request with a body: bound copies it and keeps the notes there.
		{"ingress join with a body", http.MethodPost, h.IngressURL("/session/join"), map[string]any{"invite": "nope", "name": "x"}, http.StatusUnauthorized},
		{"ingress unauthenticated mcp post", http.MethodPost, h.IngressURL("/mcp"), map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, http.StatusBadRequest},
		{"owner write with a body", http.MethodPost, h.OwnerURL("/workspace/propose"), map[string]any{"nope": true}, http.StatusUnauthorized},
	} {
		t.Run(c.name+" logs the id it sends", func(t *testing.T) {
			r := h.do(c.method, c.url, "", c.body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d", r.Status, c.status)
			}
			id := r.Header.Get("X-Request-Id")
			if !hexID.MatchString(id) || seen[id] {
				t.Fatalf("X-Request-Id %q (seen before: %v)", id, seen[id])
			}
			seen[id] = true
			if !strings.Contains(h.Logs.String(), "request_id="+id) {
				t.Fatalf("no log line names request_id=%s:\n%s", id, h.Logs.String())
			}
		})
	}
}

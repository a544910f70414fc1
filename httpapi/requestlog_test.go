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
		name, url string
		status    int
	}{
		{"owner health", h.ownerURL("/healthz"), http.StatusOK},
		{"ingress health", h.ingressURL("/healthz"), http.StatusOK},
		{"ingress unauthenticated read", h.ingressURL("/workspace/status"), http.StatusUnauthorized},
		{"owner unknown route", h.ownerURL("/nope"), http.StatusNotFound},
	} {
		t.Run(c.name+" logs the id it sends", func(t *testing.T) {
			r := h.do(http.MethodGet, c.url, "", nil)
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

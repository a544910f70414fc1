package roomtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// WantCaching checks a result's caching hints: ttlMs an integer >= 0,
// cacheScope public or private. Both the MCP door's tests and the
// cross-door tests (a resource read twice) check them.
func WantCaching(t testing.TB, res map[string]any) {
	t.Helper()
	ttl, ok := res["ttlMs"].(float64)
	if !ok || ttl < 0 || ttl != float64(int64(ttl)) {
		t.Errorf("ttlMs = %v (%T), want an integer >= 0", res["ttlMs"], res["ttlMs"])
	}
	if s := res["cacheScope"]; s != "public" && s != "private" {
		t.Errorf("cacheScope = %v, want public or private", s)
	}
}

// JSONText is v as compact JSON, for failure messages (fmt's form when v
// does not encode).
func JSONText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// WantUnauthorized checks a 401 with the code and a Bearer challenge: what
// every door answers a request without a valid session.
func WantUnauthorized(t testing.TB, r Response, code string) {
	t.Helper()
	WantError(t, r, http.StatusUnauthorized, code)
	if ch := r.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer") {
		t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", ch)
	}
}

// OwnerCookie is the owner page's cookie name in the room with this
// workspace id, as a browser sees it: the page's tests set it, and every
// other door's tests check it is refused as a credential. (httpapi's own
// tests pin that the server names it so.)
func OwnerCookie(workspaceID string) string { return "commonroom_owner_" + workspaceID }

// ServerPort is a test server's port as text, for building the Origin or
// Host a browser on another name of the same server would send.
func ServerPort(s *httptest.Server) string {
	return fmt.Sprint(s.Listener.Addr().(*net.TCPAddr).Port)
}

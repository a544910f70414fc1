package roomtest

import (
	"encoding/json"
	"fmt"
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

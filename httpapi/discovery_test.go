package httpapi

// The discovery documents (the operations table, ARCHITECTURE.md §8 and D35): public, well formed,
// and true: every advertised operation is a registered route enforcing the
// advertised capability, every /workspace and /session route is advertised,
// and every tool the skill names is in the MCP catalog.

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/internal/mcptest"
)

// specErrors are the error codes of spec §1.11 and §6.5.
var specErrors = []string{"unauthorized", "permission_denied", "invitation_expired", "invitation_revoked",
	"invitation_redeemed", "unsupported_version", "session_expired", "lease_conflict", "stale_version",
	"proposal_not_found", "proposal_conflict", "invalid_region", "version_not_found", "transport_unavailable",
	"limit_exceeded", "invalid_request", "handoff_not_found", "handoff_conflict", "task_not_found"}

func TestDiscoveryDocumentsArePublic(t *testing.T) {
	h := newHarness(t, "")
	for _, base := range []struct{ name, url string }{{"ingress", h.Ingress.URL}, {"owner", h.Owner.URL}} {
		t.Run(base.name, func(t *testing.T) {
			for _, tc := range []struct {
				path, contentType string
			}{
				{"/.well-known/agent-workspace", "application/json"},
				{"/protocol", "application/json"},
				{"/skills", "application/json"},
				{"/skills/commonroom", "text/markdown"},
			} {
				t.Run(tc.path+" answers 200 without a bearer", func(t *testing.T) {
					r := h.Do(t, "GET", base.url+tc.path, "", nil)
					if r.Status != http.StatusOK {
						t.Fatalf("status %d: %s", r.Status, r.Body)
					}
					if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
						t.Errorf("Content-Type = %q, want %s", ct, tc.contentType)
					}
					for _, leak := range []string{serverPort(h.Ingress), serverPort(h.Owner), "127.0.0.1", h.OpToken, h.Doc} {
						if strings.Contains(string(r.Body), leak) {
							t.Errorf("the public document contains %q", leak)
						}
					}
				})
			}
		})
	}

	t.Run("agent-workspace names the room, its documents, operations, workflow and errors", func(t *testing.T) {
		m := okJSON(t, h.do("GET", h.IngressURL("/.well-known/agent-workspace"), "", nil))
		if m["protocol"] != "commonroom" || m["protocol_version"] != "1" || m["workspace_id"] != h.Eng.WorkspaceID || m["name"] != h.Eng.Name {
			t.Errorf("identity = %v", m)
		}
		want := map[string]any{"protocol": "/protocol", "skills": "/skills", "skill": "/skills/commonroom", "join": "/session/join", "mcp": "/mcp"}
		for k, v := range want {
			if jsonAt(m, "discovery", k) != v {
				t.Errorf("discovery.%s = %v, want %v", k, jsonAt(m, "discovery", k), v)
			}
		}
		var names []string
		for _, op := range operations {
			names = append(names, op.Name)
		}
		if got := stringsOf(m["operations"]); !slices.Equal(got, names) {
			t.Errorf("operations = %v, want the table's names %v", got, names)
		}
		if wf := stringsOf(m["workflow"]); len(wf) < 5 {
			t.Errorf("workflow = %v", wf)
		}
		errs := stringsOf(m["errors"])
		for _, code := range specErrors {
			if !slices.Contains(errs, code) {
				t.Errorf("errors lack %q", code)
			}
		}
	})

	t.Run("protocol lists every operation with its route and capability", func(t *testing.T) {
		m := okJSON(t, h.do("GET", h.IngressURL("/protocol"), "", nil))
		if m["protocol"] != "commonroom" || m["version"] != "1" {
			t.Errorf("protocol = %v", m)
		}
		ops, _ := m["operations"].([]any)
		if len(ops) != len(operations) {
			t.Fatalf("%d operations, want %d", len(ops), len(operations))
		}
		httpRE := regexp.MustCompile(`^(GET|POST) /[a-z_./-]*[a-z]$`)
		seenName, seenHTTP := map[string]bool{}, map[string]bool{}
		for i, raw := range ops {
			name, route, capability := str(jsonAt(raw, "name")), str(jsonAt(raw, "http")), str(jsonAt(raw, "capability"))
			if name != operations[i].Name || route != operations[i].HTTP || capability != operations[i].Capability {
				t.Errorf("operation %d = %v, want %+v", i, raw, operations[i])
			}
			if name == "" || capability == "" || !httpRE.MatchString(route) {
				t.Errorf("operation %v is not well formed", raw)
			}
			if seenName[name] || seenHTTP[route] {
				t.Errorf("operation %v repeats a name or a route", raw)
			}
			seenName[name], seenHTTP[route] = true, true
		}
		for _, k := range []string{"header", "join", "note"} {
			if str(jsonAt(m, "auth", k)) == "" {
				t.Errorf("auth.%s missing: %v", k, m["auth"])
			}
		}
		if num(jsonAt(m, "bounds", "max_bytes")) != h.Eng.Limits.MaxBodyBytes || num(jsonAt(m, "bounds", "max_items")) != int64(h.Eng.Limits.MaxListItems) {
			t.Errorf("bounds = %v", m["bounds"])
		}
		if jsonAt(m, "mcp", "endpoint") != "/mcp" || jsonAt(m, "mcp", "protocol_version") != mcptest.Version {
			t.Errorf("mcp = %v", m["mcp"])
		}
		errs := stringsOf(m["errors"])
		for _, code := range specErrors {
			if !slices.Contains(errs, code) {
				t.Errorf("errors lack %q", code)
			}
		}
	})

	t.Run("skills lists the commonroom skill at a path that serves it", func(t *testing.T) {
		m := okJSON(t, h.do("GET", h.IngressURL("/skills"), "", nil))
		list, _ := m["skills"].([]any)
		if len(list) != 1 || jsonAt(list[0], "name") != "commonroom" || str(jsonAt(list[0], "description")) == "" {
			t.Fatalf("skills = %v", m)
		}
		path := str(jsonAt(list[0], "path"))
		r := h.do("GET", h.IngressURL(path), "", nil)
		if r.Status != http.StatusOK || string(r.Body) != skillText {
			t.Errorf("GET %s = %d, want the skill text", path, r.Status)
		}
		if !strings.HasPrefix(string(r.Body), "---\nname: commonroom\n") {
			t.Errorf("the skill does not start with its front matter: %.80q", r.Body)
		}
	})
}

func TestDiscoveryOperationsMatchTheRouter(t *testing.T) {
	h := newHarness(t, "")
	for _, tc := range []struct {
		name    string
		handler http.Handler
	}{
		{"ingress", h.API.IngressHandler()},
		{"owner", h.API.OwnerHandler()},
	} {
		routes := routePatterns(t, tc.handler)
		advertised := map[string]bool{}
		for _, op := range operations {
			advertised[op.HTTP] = true
		}
		t.Run(tc.name+": every operation is a registered route", func(t *testing.T) {
			for _, op := range operations {
				if !slices.Contains(routes, op.HTTP) {
					t.Errorf("operation %s advertises %q, which the router does not have", op.Name, op.HTTP)
				}
			}
		})
		t.Run(tc.name+": only the routes that are not one engine call are wired by hand", func(t *testing.T) {
			var byHand []string
			for _, op := range operations {
				if !op.Call.Routed() {
					byHand = append(byHand, op.Name)
				} else if op.Call.Input() == nil {
					t.Errorf("operation %s has a call without an input type", op.Name)
				}
				if op.Tool != "" && !op.Call.Routed() {
					t.Errorf("tool %s has no engine call", op.Tool)
				}
			}
			if want := []string{"session.join", "session.join_challenge", "session.page", "observe", "mcp", "mcp.legacy_stream"}; !slices.Equal(byHand, want) {
				t.Errorf("operations without a call = %v, want %v", byHand, want)
			}
		})
		t.Run(tc.name+": every /workspace and /session route is an operation", func(t *testing.T) {
			n := 0
			for _, r := range routes {
				_, path, _ := strings.Cut(r, " ")
				if !strings.HasPrefix(path, "/workspace/") && !strings.HasPrefix(path, "/session/") {
					continue
				}
				n++
				if !advertised[r] {
					t.Errorf("route %q is not in the operations table", r)
				}
			}
			if n < 30 {
				t.Errorf("only %d /workspace and /session routes found: %v", n, routes)
			}
		})
	}
}

// TestDiscoveryCapabilitiesAreEnforced: for every operation advertised with
// one plain capability, a session holding every other capability (and not
// admin) is refused with 403 naming exactly that capability.
func TestDiscoveryCapabilitiesAreEnforced(t *testing.T) {
	h := newHarness(t, "")
	plain := []string{"read", "observe", "propose", "checkout", "commit", "approve", "invite"}
	without := map[string]party{}
	for _, c := range plain {
		var caps []string
		for _, o := range plain {
			if o != c {
				caps = append(caps, o)
			}
		}
		without[c] = h.join("without-"+c, caps...)
	}
	// Inputs that get a request past decoding to the capability check.
	bodies := map[string]any{
		"/workspace/diff":                  "?base_version=1",
		"/workspace/changes_since":         "?version=1",
		"/workspace/proposal/diff":         "?proposal_id=proposal_0000000000000000",
		"/workspace/version":               "?version=1",
		"/workspace/handoff":               "?handoff_id=handoff_00000000000000000000000000000000",
		"/workspace/handoff/events":        "?handoff_id=handoff_00000000000000000000000000000000",
		"/workspace/commit":                map[string]any{"proposal_id": "proposal_0000000000000000"},
		"/workspace/handoff/accept":        map[string]any{"handoff_id": "handoff_00000000000000000000000000000000"},
		"/workspace/handoff/complete":      map[string]any{"handoff_id": "handoff_00000000000000000000000000000000", "result": map[string]any{"text": "x"}},
		"/workspace/handoff/approve":       map[string]any{"handoff_id": "handoff_00000000000000000000000000000000"},
		"/workspace/handoff/reject":        map[string]any{"handoff_id": "handoff_00000000000000000000000000000000"},
		"/workspace/handoff/request_input": map[string]any{"handoff_id": "handoff_00000000000000000000000000000000", "requests": []any{map[string]any{"key": "k", "message": "m"}}},
	}
	checked := 0
	for _, op := range operations {
		if !slices.Contains(plain, op.Capability) || !strings.HasPrefix(op.HTTP, "GET /workspace/") && !strings.HasPrefix(op.HTTP, "POST /workspace/") {
			continue
		}
		checked++
		t.Run(op.Name+" without "+op.Capability+" is 403 naming it", func(t *testing.T) {
			method, path, _ := strings.Cut(op.HTTP, " ")
			url := h.IngressURL(path)
			var body any
			switch b := bodies[path].(type) {
			case string:
				if method == "GET" {
					url += b
				}
			case nil:
				if method == "POST" {
					body = map[string]any{}
				}
			default:
				if method == "POST" {
					body = b
				}
			}
			before := h.Snapshot()
			m := wantError(t, h.Do(t, method, url, without[op.Capability].SessionToken, body), http.StatusForbidden, "permission_denied")
			if m["required"] != op.Capability {
				t.Errorf("required = %v, want %s", m["required"], op.Capability)
			}
			h.AssertUnchanged(t, before)
		})
	}
	if checked < 20 {
		t.Errorf("only %d operations checked", checked)
	}
}

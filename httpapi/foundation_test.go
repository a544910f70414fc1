package httpapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/room"
)

// wantUnauthorized checks a 401 with the code and a Bearer challenge.
var wantUnauthorized = roomtest.WantUnauthorized

// TestBearerAuthRefused: every /workspace route on both listeners refuses a
// request without a valid session with 401, a Bearer challenge, and no change.
func TestBearerAuthRefused(t *testing.T) {
	h := newHarness(t, "")
	left := h.join("leaver", "read")
	wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), left.SessionToken, nil))
	live := h.join("live", "read")

	creds := []struct {
		name  string
		opt   reqOpt
		code  string
		where string // "both", or "ingress" only
	}{
		{"missing Authorization is unauthorized", nil, "unauthorized", "both"},
		{"Bearer garbage is unauthorized", withHeader("Authorization", "Bearer garbage"), "unauthorized", "both"},
		{"Bearer with no token is unauthorized", withHeader("Authorization", "Bearer "), "unauthorized", "both"},
		{"Basic scheme is unauthorized", withHeader("Authorization", "Basic dXNlcjpwYXNz"), "unauthorized", "both"},
		{"token without the Bearer scheme is unauthorized", withHeader("Authorization", live.SessionToken), "unauthorized", "both"},
		{"session_ref instead of the token is unauthorized", withHeader("Authorization", "Bearer "+live.SessionRef), "unauthorized", "both"},
		{"token with a character changed is unauthorized", withHeader("Authorization", "Bearer "+changeLast(live.SessionToken)), "unauthorized", "both"},
		{"token of a session that left is unauthorized", withHeader("Authorization", "Bearer "+left.SessionToken), "unauthorized", "both"},
		{"operator token on the ingress listener is unauthorized", withHeader("Authorization", "Bearer "+h.OpToken), "unauthorized", "ingress"},
	}
	before := h.Snapshot()
	for _, c := range creds {
		t.Run(c.name, func(t *testing.T) {
			bases := []struct{ name, url string }{{"ingress", h.Ingress.URL}, {"owner", h.Owner.URL}}
			if c.where == "ingress" {
				bases = bases[:1]
			}
			for _, base := range bases {
				for _, rt := range workspaceRoutes {
					opts := []reqOpt{}
					if c.opt != nil {
						opts = append(opts, c.opt)
					}
					r := h.Do(t, rt.Method, base.url+rt.Path, "", rt.Body, opts...)
					if r.Status != http.StatusUnauthorized {
						t.Errorf("%s %s %s: status %d, want 401; body %s", base.name, rt.Method, rt.Path, r.Status, r.Body)
						continue
					}
					wantUnauthorized(t, r, c.code)
				}
			}
		})
	}
	t.Run("auth is checked before the body is parsed", func(t *testing.T) {
		for _, rt := range workspaceRoutes {
			if rt.Method != "POST" {
				continue
			}
			wantUnauthorized(t, h.Do(t, "POST", h.IngressURL(rt.Path), "garbage", `{"broken":`), "unauthorized")
		}
	})
	h.AssertUnchanged(t, before)
}

// TestBearerAuthExpiredSession: a session idle for its 8 hours is refused
// with session_expired everywhere, before and after the sweeper ends it; a
// use before then slides its expiry (issue 16).
func TestBearerAuthExpiredSession(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("agent", "read", "invite")
	wantOK(t, h.do("GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))

	h.Clock.Advance(8*time.Hour - time.Millisecond)
	t.Run("one millisecond before expiry the session works", func(t *testing.T) {
		wantOK(t, h.Do(t, "GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
	})
	h.Clock.Advance(time.Millisecond)
	t.Run("that use slid the expiry past the first 8 hours", func(t *testing.T) {
		wantOK(t, h.Do(t, "GET", h.IngressURL("/workspace/status"), s.SessionToken, nil))
	})
	h.Clock.Advance(8 * time.Hour) // idle for the whole window since that last use
	check := func(t *testing.T) {
		for _, base := range []string{h.Ingress.URL, h.Owner.URL} {
			for _, rt := range workspaceRoutes {
				r := h.Do(t, rt.Method, base+rt.Path, s.SessionToken, rt.Body)
				if r.Status != http.StatusUnauthorized {
					t.Errorf("%s %s%s: status %d, want 401; body %s", rt.Method, base, rt.Path, r.Status, r.Body)
					continue
				}
				wantUnauthorized(t, r, "session_expired")
			}
		}
	}
	t.Run("at expiry, before the sweep, every route is session_expired", check)
	h.Sweep()
	t.Run("after the sweep every route is session_expired", check)
	t.Run("the sweep ended the session once with session.expired", func(t *testing.T) {
		evs := h.Events("session.expired")
		if len(evs) != 1 || evs[0].Payload["session_ref"] != s.SessionRef {
			t.Errorf("session.expired events = %+v, want one for %s", evs, s.SessionRef)
		}
		if n := h.Count(`SELECT count(*) FROM sessions WHERE session_ref = ? AND end_reason = 'expired'`, s.SessionRef); n != 1 {
			t.Errorf("session not ended as expired")
		}
	})
}

// TestOperatorToken: accepted on the owner listener only.
func TestOperatorToken(t *testing.T) {
	h := newHarness(t, "")
	t.Run("owner listener accepts it on every read and on invite", func(t *testing.T) {
		for _, rt := range workspaceRoutes {
			if rt.Path == "/workspace/leave" || rt.Path == "/workspace/invite/revoke" || rt.Path == "/workspace/session/end" {
				continue
			}
			wantOK(t, h.Do(t, rt.Method, h.OwnerURL(rt.Path), h.OpToken, rt.Body))
		}
	})
	t.Run("ingress listener refuses it on every route", func(t *testing.T) {
		before := h.Snapshot()
		for _, rt := range workspaceRoutes {
			wantUnauthorized(t, h.Do(t, rt.Method, h.IngressURL(rt.Path), h.OpToken, rt.Body), "unauthorized")
		}
		h.AssertUnchanged(t, before)
	})
	t.Run("lowercase bearer scheme is accepted", func(t *testing.T) {
		wantOK(t, h.Do(t, "GET", h.OwnerURL("/workspace/status"), "", nil, withHeader("Authorization", "bearer "+h.OpToken)))
	})
}

// TestCapabilities: routes check the session's capabilities.
func TestCapabilities(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent") // default agent set: no invite
	if !slices.Equal(agent.Capabilities, []string{"read", "observe", "propose", "checkout", "commit"}) {
		t.Fatalf("default grant = %v", agent.Capabilities)
	}
	inviter := h.join("inviter", "read", "invite")
	admin := h.join("admin", "admin")
	blind := h.join("blind", "observe") // no read
	target := h.Invite(nil)

	denied := []struct {
		name, method, path, token string
		body                      any
		required                  string
	}{
		{"no invite capability: POST /workspace/invite", "POST", "/workspace/invite", agent.SessionToken, map[string]any{}, "invite"},
		{"no invite capability: GET /workspace/invites", "GET", "/workspace/invites", agent.SessionToken, nil, "invite"},
		{"no invite capability: POST /workspace/invite/revoke", "POST", "/workspace/invite/revoke", agent.SessionToken, map[string]any{"invite_id": target.InviteID}, "invite"},
		{"inviter cannot grant propose it lacks", "POST", "/workspace/invite", inviter.SessionToken, map[string]any{"capabilities": []string{"read", "propose"}}, "propose"},
		{"inviter cannot grant admin", "POST", "/workspace/invite", inviter.SessionToken, map[string]any{"capabilities": []string{"admin"}}, "admin"},
		{"inviter cannot grant the wildcard", "POST", "/workspace/invite", inviter.SessionToken, map[string]any{"capabilities": []string{"*"}}, "*"},
		{"inviter cannot grant the legacy admin word", "POST", "/workspace/invite", inviter.SessionToken, map[string]any{"permissions": "admin"}, "*"},
		{"inviter cannot grant the default set it does not hold", "POST", "/workspace/invite", inviter.SessionToken, map[string]any{}, "observe"},
	}
	for _, p := range readRoutes {
		denied = append(denied, struct {
			name, method, path, token string
			body                      any
			required                  string
		}{"no read capability: GET " + p, "GET", p, blind.SessionToken, nil, "read"})
	}
	before := h.Snapshot()
	for _, d := range denied {
		t.Run(d.name+" is 403 permission_denied", func(t *testing.T) {
			m := wantError(t, h.Do(t, d.method, h.IngressURL(d.path), d.token, d.body), http.StatusForbidden, "permission_denied")
			if m["required"] != d.required {
				t.Errorf("required = %v, want %q", m["required"], d.required)
			}
		})
	}
	h.AssertUnchanged(t, before)

	allowed := []struct {
		name  string
		token string
		body  map[string]any
		want  []string
	}{
		{"inviter may grant a subset of what it holds", inviter.SessionToken, map[string]any{"capabilities": []string{"read"}}, []string{"read"}},
		{"inviter may grant exactly what it holds", inviter.SessionToken, map[string]any{"capabilities": []string{"invite", "read"}}, []string{"read", "invite"}},
		{"admin may grant the wildcard", admin.SessionToken, map[string]any{"capabilities": []string{"*"}}, []string{"*"}},
	}
	for _, a := range allowed {
		t.Run(a.name, func(t *testing.T) {
			r := h.Do(t, "POST", h.IngressURL("/workspace/invite"), a.token, a.body)
			wantOK(t, r)
			var g inviteGrant
			r.Into(t, &g)
			if !slices.Equal(g.Capabilities, a.want) {
				t.Errorf("capabilities = %v, want %v", g.Capabilities, a.want)
			}
		})
	}
	t.Run("observe-only session may still leave", func(t *testing.T) {
		wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/leave"), blind.SessionToken, nil))
	})
}

// TestHostAndOrigin: DNS rebinding and cross-site requests are refused on
// both listeners before anything else; loopback names pass.
func TestHostAndOrigin(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("agent", "read")
	g := h.Invite(nil)
	type target struct {
		name, base, port, token string
	}
	targets := []target{
		{"ingress", h.Ingress.URL, serverPort(h.Ingress), s.SessionToken},
		{"owner", h.Owner.URL, serverPort(h.Owner), h.OpToken},
	}
	refused := []struct {
		name string
		opts func(tg target) []reqOpt
	}{
		{"Host evil.example.com", func(target) []reqOpt { return []reqOpt{withHost("evil.example.com")} }},
		{"Host evil.example.com with the listener's port", func(tg target) []reqOpt { return []reqOpt{withHost("evil.example.com:" + tg.port)} }},
		{"Host localhost.evil.example.com", func(tg target) []reqOpt { return []reqOpt{withHost("localhost.evil.example.com:" + tg.port)} }},
		{"Host 127.0.0.2", func(tg target) []reqOpt { return []reqOpt{withHost("127.0.0.2:" + tg.port)} }},
		{"Origin http://evil.example.com", func(target) []reqOpt {
			return []reqOpt{withHeader("Origin", "http://evil.example.com")}
		}},
		{"Origin null", func(target) []reqOpt { return []reqOpt{withHeader("Origin", "null")} }},
	}
	requests := []struct {
		name, method, path string
		auth               bool
		body               func() any
	}{
		{"GET /healthz", "GET", "/healthz", false, nil},
		{"GET /", "GET", "/", false, nil},
		{"GET /workspace/status", "GET", "/workspace/status", true, nil},
		{"GET /workspace/status without a token", "GET", "/workspace/status", false, nil},
		{"POST /workspace/invite", "POST", "/workspace/invite", true, func() any { return map[string]any{} }},
		{"POST /session/join with a live invitation", "POST", "/session/join", false, func() any {
			return map[string]any{"invite": g.URI, "name": "rebound"}
		}},
	}
	before := h.Snapshot()
	for _, ref := range refused {
		for _, tg := range targets {
			t.Run(ref.name+" on "+tg.name+" is 403", func(t *testing.T) {
				for _, rq := range requests {
					token := ""
					if rq.auth {
						token = tg.token
					}
					var body any
					if rq.body != nil {
						body = rq.body()
					}
					r := h.Do(t, rq.method, tg.base+rq.path, token, body, ref.opts(tg)...)
					if r.Status != http.StatusForbidden {
						t.Errorf("%s: status %d, want 403; body %s", rq.name, r.Status, r.Body)
					} else if m := r.JSON(t); m["error"] != "permission_denied" {
						t.Errorf("%s: error %v, want permission_denied", rq.name, m["error"])
					}
					if r.Header.Get("Set-Cookie") != "" {
						t.Errorf("%s: a refused request set a cookie", rq.name)
					}
				}
			})
		}
	}
	h.AssertUnchanged(t, before)

	accepted := []struct {
		name string
		opts func(tg target) []reqOpt
	}{
		{"Host 127.0.0.1:PORT", func(tg target) []reqOpt { return []reqOpt{withHost("127.0.0.1:" + tg.port)} }},
		{"Host localhost:PORT", func(tg target) []reqOpt { return []reqOpt{withHost("localhost:" + tg.port)} }},
		{"Host LOCALHOST:PORT", func(tg target) []reqOpt { return []reqOpt{withHost("LOCALHOST:" + tg.port)} }},
		{"Host [::1]:PORT", func(tg target) []reqOpt { return []reqOpt{withHost("[::1]:" + tg.port)} }},
		{"Origin http://127.0.0.1:PORT", func(tg target) []reqOpt {
			return []reqOpt{withHeader("Origin", "http://127.0.0.1:"+tg.port)}
		}},
		{"Origin http://localhost:PORT", func(tg target) []reqOpt {
			return []reqOpt{withHeader("Origin", "http://localhost:"+tg.port)}
		}},
	}
	for _, acc := range accepted {
		for _, tg := range targets {
			t.Run(acc.name+" on "+tg.name+" is accepted", func(t *testing.T) {
				wantOK(t, h.Do(t, "GET", tg.base+"/healthz", "", nil, acc.opts(tg)...))
				wantOK(t, h.Do(t, "GET", tg.base+"/workspace/status", tg.token, nil, acc.opts(tg)...))
			})
		}
	}
	t.Run("join with Host localhost:PORT is accepted", func(t *testing.T) {
		wantOK(t, h.joinRaw(map[string]any{"invite": g.URI, "name": "local"}, withHost("localhost:"+serverPort(h.Ingress))))
	})
}

// TestSecretsNeverStored: tokens and invitation secrets appear only in the
// answers that hand them out: not in events, not in any column (hashes
// only), not in the sidecar files, not in logs, not in error bodies.
func TestSecretsNeverStored(t *testing.T) {
	h := newHarness(t, "")
	inv := h.Invite(map[string]any{"capabilities": []string{"read", "invite"}, "max_uses": 1})
	s := h.redeem(inv.URI, "agent")
	inv2R := h.do("POST", h.IngressURL("/workspace/invite"), s.SessionToken, map[string]any{"capabilities": []string{"read"}})
	wantOK(t, inv2R)
	var inv2 inviteGrant
	inv2R.Into(t, &inv2)
	s2 := h.redeem(inv2.Token, "second")
	revoked := h.Invite(nil)
	wantOK(t, h.do("POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"token": revoked.Token}))
	pageKey := h.API.NewPageKey()
	page := h.do("GET", h.OwnerURL("/?key="+url.QueryEscape(pageKey)), "", nil)
	var cookie string
	for _, c := range (&http.Response{Header: page.Header}).Cookies() {
		cookie = c.Value
	}

	// Error answers that were handed secrets, so any echo would show.
	wantError(t, h.joinRaw(map[string]any{"invite": revoked.URI}), 403, "invitation_revoked")
	wantError(t, h.joinRaw(map[string]any{"invite": inv.URI}), 403, "invitation_redeemed")
	wantError(t, h.joinRaw(`{"invite": "`+inv.Token+`", "name": 7}`), 400, "invalid_request")
	wantError(t, h.joinRaw(`{"invite": "`+s.SessionToken+`"`), 400, "invalid_request")
	wantError(t, h.joinRaw(map[string]any{"invite": s.SessionToken + "x"}), 401, "unauthorized")
	wantError(t, h.joinRaw(map[string]any{"invite": strings.Replace(string(invitePayload(t, inv.URI)), `"version":"1"`, `"version":"9"`, 1)}), 400, "unsupported_version")
	wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), h.OpToken, nil), "unauthorized")
	wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/status"), inv.Token, nil), "unauthorized")
	wantError(t, h.do("POST", h.IngressURL("/workspace/invite/revoke"), s.SessionToken, map[string]any{"token": s.SessionToken}), 401, "unauthorized")
	wantError(t, h.do("GET", h.IngressURL("/workspace/read?section="+url.QueryEscape(s2.SessionToken)), s.SessionToken, nil), 400, "invalid_region")
	wantError(t, h.do("GET", h.IngressURL("/workspace/summary?max_lines="+url.QueryEscape(s2.SessionToken)), s.SessionToken, nil), 400, "invalid_request")
	h.do("GET", h.OwnerURL("/?key="+url.QueryEscape(pageKey)), "", nil) // reused key: 403

	type secret struct{ name, value string }
	secrets := []secret{
		{"operator token", h.OpToken},
		{"invitation secret", inv.Token}, {"invitation URI payload", strings.TrimPrefix(inv.URI, room.InvitePrefix)},
		{"session-made invitation secret", inv2.Token},
		{"revoked invitation secret", revoked.Token},
		{"session token", s.SessionToken}, {"second session token", s2.SessionToken},
		{"owner page key", pageKey},
	}
	if cookie != "" {
		secrets = append(secrets, secret{"owner cookie", cookie})
	} else {
		t.Errorf("the page key exchange set no cookie")
	}
	// The read-section error legitimately echoes the region the caller named;
	// only look for the secrets that request did not carry itself.
	echoAllowed := func(body, value string) bool {
		return value == s2.SessionToken && strings.Contains(body, `"region"`)
	}

	t.Run("no secret in any event payload", func(t *testing.T) {
		for _, ev := range h.Events("") {
			for _, sec := range secrets {
				if strings.Contains(ev.Raw, sec.value) {
					t.Errorf("event %d %s holds the %s: %s", ev.ID, ev.Type, sec.name, ev.Raw)
				}
			}
		}
	})
	t.Run("no secret in any column of any table", func(t *testing.T) {
		for _, table := range sidecarTables {
			cols, rows := h.QueryRows(t, "SELECT * FROM "+table)
			for _, vals := range rows {
				for i, v := range vals {
					var text string
					switch x := v.(type) {
					case string:
						text = x
					case []byte:
						text = string(x) + " " + hex.EncodeToString(x)
					default:
						text = fmt.Sprint(x)
					}
					for _, sec := range secrets {
						if strings.Contains(text, sec.value) {
							t.Errorf("%s.%s holds the %s", table, cols[i], sec.name)
						}
					}
				}
			}
		}
	})
	t.Run("sessions and invites hold SHA-256 hashes", func(t *testing.T) {
		for _, sg := range []party{s, s2} {
			var got []byte
			if err := h.Store.Reader.QueryRow(`SELECT token_sha256 FROM sessions WHERE session_ref = ?`, sg.SessionRef).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, sha256Of(sg.SessionToken)) {
				t.Errorf("sessions.token_sha256 of %s is not SHA-256 of the token", sg.SessionRef)
			}
		}
		for _, ig := range []inviteGrant{inv, inv2, revoked} {
			var got []byte
			if err := h.Store.Reader.QueryRow(`SELECT secret_sha256 FROM invites WHERE invite_id = ?`, ig.InviteID).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, sha256Of(ig.Token)) {
				t.Errorf("invites.secret_sha256 of %s is not SHA-256 of the secret", ig.InviteID)
			}
		}
	})
	t.Run("no secret in the sidecar files", func(t *testing.T) {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(h.Store.Path + suffix)
			if err != nil {
				continue // -wal/-shm may be absent
			}
			for _, sec := range secrets {
				if bytes.Contains(b, []byte(sec.value)) {
					t.Errorf("sidecar file %s holds the %s", h.Store.Path+suffix, sec.name)
				}
			}
		}
	})
	t.Run("no secret in the log", func(t *testing.T) {
		logs := h.Logs.String()
		if !strings.Contains(logs, "route=/session/join") {
			t.Fatalf("the request log was not captured; got:\n%s", logs)
		}
		for _, sec := range secrets {
			if strings.Contains(logs, sec.value) {
				t.Errorf("the log holds the %s", sec.name)
			}
		}
	})
	t.Run("no secret in any error body", func(t *testing.T) {
		bodies := h.ErrorBodies()
		if len(bodies) < 10 {
			t.Fatalf("only %d error bodies recorded", len(bodies))
		}
		for _, b := range bodies {
			for _, sec := range secrets {
				if strings.Contains(b, sec.value) && !echoAllowed(b, sec.value) {
					t.Errorf("an error body holds the %s: %s", sec.name, b)
				}
			}
		}
	})
}

// TestInvitations: create, list, revoke over HTTP, and the refused inputs.
func TestInvitations(t *testing.T) {
	h := newHarness(t, "")
	now := h.Clock.Now()

	t.Run("defaults are 60 minutes, one use, the agent set", func(t *testing.T) {
		r := h.Do(t, "POST", h.OwnerURL("/workspace/invite"), h.OpToken, map[string]any{})
		wantOK(t, r)
		var g inviteGrant
		r.Into(t, &g)
		if want := wire(now.Add(60 * time.Minute)); g.ExpiresAt != want {
			t.Errorf("expires_at = %s, want %s", g.ExpiresAt, want)
		}
		if g.MaxUses == nil || *g.MaxUses != 1 {
			t.Errorf("max_uses = %v, want 1", g.MaxUses)
		}
		if want := []string{"read", "observe", "propose", "checkout", "commit"}; !slices.Equal(g.Capabilities, want) {
			t.Errorf("capabilities = %v, want %v", g.Capabilities, want)
		}
		if !strings.HasPrefix(g.InviteID, "invite_") || g.WorkspaceID != h.Eng.WorkspaceID || !strings.HasPrefix(g.URI, room.InvitePrefix) {
			t.Errorf("grant = %+v", g)
		}
		var payload map[string]any
		if err := json.Unmarshal(invitePayload(t, g.URI), &payload); err != nil {
			t.Fatal(err)
		}
		if payload["secret"] != g.Token || payload["workspace_id"] != h.Eng.WorkspaceID || payload["protocol"] != "commonroom" ||
			payload["version"] != "1" || payload["expires_at"] != g.ExpiresAt {
			t.Errorf("URI payload = %v", payload)
		}
		hint, _ := payload["transport"].(map[string]any)
		if hint["type"] != "loopback" || fmt.Sprint(hint["port"]) != serverPort(h.Ingress) {
			t.Errorf("URI transport hint = %v, want loopback to the ingress port %s", hint, serverPort(h.Ingress))
		}
		evs := h.Events("invite.created")
		last := evs[len(evs)-1]
		if last.Payload["invite_id"] != g.InviteID || last.Payload["max_uses"] != float64(1) || last.Payload["expires_at"] != g.ExpiresAt {
			t.Errorf("invite.created payload = %s", last.Raw)
		}
	})

	t.Run("listing shows handles only", func(t *testing.T) {
		g := h.Invite(map[string]any{"capabilities": []string{"read"}, "target": "Goals"})
		r := h.Do(t, "GET", h.OwnerURL("/workspace/invites"), h.OpToken, nil)
		wantOK(t, r)
		var list []map[string]any
		r.Into(t, &list)
		var found map[string]any
		for _, it := range list {
			for _, k := range []string{"token", "uri", "secret", "secret_sha256"} {
				if _, ok := it[k]; ok {
					t.Errorf("listing entry has %q: %v", k, it)
				}
			}
			if it["invite_id"] == g.InviteID {
				found = it
			}
		}
		if found == nil {
			t.Fatalf("new invite %s not listed: %s", g.InviteID, r.Body)
		}
		for _, k := range []string{"invite_id", "capabilities", "target", "expires_at", "max_uses", "used_count", "revoked_at", "created_at"} {
			if _, ok := found[k]; !ok {
				t.Errorf("listing entry lacks %q: %v", k, found)
			}
		}
		if found["target"] != "Goals" || found["used_count"] != float64(0) || found["revoked_at"] != nil {
			t.Errorf("listing entry = %v", found)
		}
		if strings.Contains(string(r.Body), g.Token) || strings.Contains(string(r.Body), room.InvitePrefix) {
			t.Errorf("listing holds a secret or a URI")
		}
	})

	t.Run("revoke by invite_id, then again changes nothing", func(t *testing.T) {
		g := h.Invite(nil)
		n0 := len(h.Events("invite.revoked"))
		r := h.Do(t, "POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"invite_id": g.InviteID})
		wantOK(t, r)
		if r.JSON(t)["status"] != "ok" {
			t.Errorf("revoke answer = %s", r.Body)
		}
		evs := h.Events("invite.revoked")
		if len(evs) != n0+1 || evs[len(evs)-1].Payload["invite_id"] != g.InviteID {
			t.Fatalf("invite.revoked events = %+v, want one more for %s", evs, g.InviteID)
		}
		if n := h.Count(`SELECT count(*) FROM invites WHERE invite_id = ? AND revoked_at IS NOT NULL`, g.InviteID); n != 1 {
			t.Errorf("revoked_at not set")
		}
		before := h.Snapshot()
		wantOK(t, h.Do(t, "POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"invite_id": g.InviteID}))
		wantOK(t, h.Do(t, "POST", h.OwnerURL("/workspace/invite/revoke"), h.OpToken, map[string]any{"token": g.Token}))
		h.AssertUnchanged(t, before)
		wantError(t, h.joinRaw(map[string]any{"invite": g.URI}), 403, "invitation_revoked")
	})

	t.Run("revoke by token, by a session holding invite, of its own invitation", func(t *testing.T) {
		inviter := h.join("inviter", "read", "invite")
		var g inviteGrant
		gr := h.Do(t, "POST", h.IngressURL("/workspace/invite"), inviter.SessionToken, map[string]any{"capabilities": []string{"read"}})
		wantOK(t, gr)
		gr.Into(t, &g)
		n0 := len(h.Events("invite.revoked"))
		wantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/invite/revoke"), inviter.SessionToken, map[string]any{"token": g.Token}))
		evs := h.Events("invite.revoked")
		if len(evs) != n0+1 || evs[len(evs)-1].Payload["invite_id"] != g.InviteID {
			t.Fatalf("invite.revoked events = %+v, want one more for %s", evs, g.InviteID)
		}
		if strings.Contains(evs[len(evs)-1].Raw, g.Token) {
			t.Errorf("invite.revoked holds the secret")
		}
		wantError(t, h.joinRaw(map[string]any{"invite": g.Token}), 403, "invitation_revoked")
	})
}

// TestInvitationInputs: what POST /workspace/invite and its revocation make
// of each input, one scenario each on a fresh room, as the operator on the
// owner listener. Every refusal changes nothing.
func TestInvitationInputs(t *testing.T) {
	caps := func(want ...string) func(t testing.TB, _ *roomtest.Setup, raw []byte) {
		return func(t testing.TB, _ *roomtest.Setup, raw []byte) {
			var g inviteGrant
			roomtest.Response{Body: raw}.Into(t, &g)
			if !slices.Equal(g.Capabilities, want) {
				t.Errorf("capabilities = %v, want %v", g.Capabilities, want)
			}
		}
	}
	invite := func(name string, body any, status int, code string) roomtest.Scenario {
		return roomtest.Scenario{Name: name, Route: "POST /workspace/invite", Owner: true, As: roomtest.Operator,
			Body: body, Status: status, Error: code}
	}
	revoke := func(name string, body any, status int, code string) roomtest.Scenario {
		return roomtest.Scenario{Name: "revoke: " + name, Route: "POST /workspace/invite/revoke", Owner: true, As: roomtest.Operator,
			Body: body, Status: status, Error: code}
	}
	granting := func(name string, body map[string]any, want ...string) roomtest.Scenario {
		sc := invite(name, body, 0, "")
		sc.After = caps(want...)
		return sc
	}
	bounds := invite("expires_in_minutes 10080 and max_uses 0 are accepted: 7 days, unlimited",
		map[string]any{"expires_in_minutes": 10080, "max_uses": 0}, 0, "")
	bounds.After = func(t testing.TB, s *roomtest.Setup, raw []byte) {
		var g inviteGrant
		roomtest.Response{Body: raw}.Into(t, &g)
		if g.MaxUses != nil || g.ExpiresAt != wire(roomtest.Epoch.Add(10080*time.Minute)) {
			t.Errorf("max_uses = %v expires_at = %s, want unlimited and 7 days", g.MaxUses, g.ExpiresAt)
		}
	}
	roomtest.Scenarios{Open: openScenarioRoom, Cases: []roomtest.Scenario{
		granting("duplicate capabilities are dropped and sorted", map[string]any{"capabilities": []string{"propose", " read ", "read"}}, "read", "propose"),
		granting("the wildcard collapses the list", map[string]any{"capabilities": []string{"read", "*"}}, "*"),
		granting("permissions read is read and observe", map[string]any{"permissions": "read"}, "read", "observe"),
		granting("permissions read_write is the agent set", map[string]any{"permissions": "read_write"}, "read", "observe", "propose", "checkout", "commit"),
		granting("permissions takes a comma list", map[string]any{"permissions": "read,approve"}, "read", "approve"),
		bounds,

		invite("expires_in_minutes 0 is 400", map[string]any{"expires_in_minutes": 0}, 400, "invalid_request"),
		invite("expires_in_minutes -1 is 400", map[string]any{"expires_in_minutes": -1}, 400, "invalid_request"),
		// Above the maximum is a value error (400), not a bound the room
		// reached (429 would invite a retry that never succeeds; issue 13).
		invite("expires_in_minutes 10081 is 400 invalid_request", map[string]any{"expires_in_minutes": 10081}, 400, "invalid_request"),
		// minutes*time.Minute overflows int64 for these: the wrapped duration
		// must not slip under the 7-day check (it used to create an invitation
		// that expired in 1733, or a minute ago, and answer 200).
		invite("expires_in_minutes 153722868 (overflows a Duration) is 400 invalid_request", map[string]any{"expires_in_minutes": 153722868}, 400, "invalid_request"),
		invite("expires_in_minutes MaxInt64 is 400 invalid_request", `{"expires_in_minutes": 9223372036854775807}`, 400, "invalid_request"),
		invite("expires_in_minutes as text is 400", `{"expires_in_minutes": "60"}`, 400, "invalid_request"),
		invite("expires_in_minutes fractional is 400", `{"expires_in_minutes": 1.5}`, 400, "invalid_request"),
		invite("max_uses -1 is 400", map[string]any{"max_uses": -1}, 400, "invalid_request"),
		invite("unknown capability is 400", map[string]any{"capabilities": []string{"read", "fly"}}, 400, "invalid_request"),
		invite("capabilities as a string is 400", `{"capabilities": "read"}`, 400, "invalid_request"),
		invite("unknown target section is 400 invalid_region", map[string]any{"target": "Nowhere"}, 400, "invalid_region"),
		invite("malformed JSON is 400", `{"max_uses": `, 400, "invalid_request"),

		revoke("unknown invite_id is 401 unauthorized", map[string]any{"invite_id": "invite_ffffffffffffffff"}, 401, "unauthorized"),
		revoke("unknown token is 401 unauthorized", map[string]any{"token": "no-such-secret"}, 401, "unauthorized"),
		revoke("neither invite_id nor token is 400", map[string]any{}, 400, "invalid_request"),
		revoke("invite_id of the wrong type is 400", `{"invite_id": 7}`, 400, "invalid_request"),
	}}.Run(t)
}

// TestInvitationListingOrder: GET /workspace/invites is newest first
// (ListInvites' contract), also for invitations created in the same
// millisecond (one group-commit batch shares one clock reading).
func TestInvitationListingOrder(t *testing.T) {
	cases := []struct {
		name string
		tick time.Duration
	}{
		{"newest first when created a millisecond apart", time.Millisecond},
		{"newest first when created in the same millisecond", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			var want []any
			for range 8 {
				h.Clock.Advance(tc.tick)
				want = append([]any{h.Invite(nil).InviteID}, want...)
			}
			r := h.Do(t, "GET", h.OwnerURL("/workspace/invites"), h.OpToken, nil)
			wantOK(t, r)
			var list []map[string]any
			r.Into(t, &list)
			var got []any
			for _, it := range list {
				got = append(got, it["invite_id"])
			}
			if !slices.Equal(got, want) {
				t.Errorf("invites order = %v\nwant newest first: %v", got, want)
			}
		})
	}
}

// TestReads: the read routes answer from the current version, bounded;
// bad arguments are refused naming the field. One shared room: no case
// writes.
func TestReads(t *testing.T) {
	summary := func(check func(t testing.TB, s room.Summary)) func(t testing.TB, _ *roomtest.Setup, raw []byte) {
		return func(t testing.TB, _ *roomtest.Setup, raw []byte) {
			var sm room.Summary
			roomtest.Response{Body: raw}.Into(t, &sm)
			check(t, sm)
		}
	}
	read := func(check func(t testing.TB, rr room.ReadResult)) func(t testing.TB, _ *roomtest.Setup, raw []byte) {
		return func(t testing.TB, _ *roomtest.Setup, raw []byte) {
			var rr room.ReadResult
			roomtest.Response{Body: raw}.Into(t, &rr)
			check(t, rr)
		}
	}
	cases := []roomtest.Scenario{
		{Name: "status hides the path from a non-admin session", Route: "GET /workspace/status", As: "agent",
			Contains: []string{`"path":null`, `"version":1`, `"name":"idea"`, `"participants":2`},
			After: func(t testing.TB, s *roomtest.Setup, raw []byte) {
				m := rawJSON(t, raw)
				if m["workspace_id"] != s.H.Eng.WorkspaceID {
					t.Errorf("workspace_id = %v, want %s", m["workspace_id"], s.H.Eng.WorkspaceID)
				}
				if tree, _ := m["heading_tree"].([]any); len(tree) != 3 {
					t.Errorf("heading_tree has %d entries, want 3", len(tree))
				}
				if strings.Contains(string(raw), s.H.Dir) {
					t.Errorf("status leaks the host's directory to a session")
				}
			}},
		{Name: "status shows the path to the operator", Route: "GET /workspace/status", Owner: true, As: roomtest.Operator,
			After: func(t testing.TB, s *roomtest.Setup, raw []byte) {
				if got := rawJSON(t, raw)["path"]; got != s.H.Eng.DocPath {
					t.Errorf("path = %v, want %s", got, s.H.Eng.DocPath)
				}
			}},
		{Name: "summary defaults to the whole short document and its outline", Route: "GET /workspace/summary", As: "agent",
			After: summary(func(t testing.TB, s room.Summary) {
				if s.Excerpt != strings.TrimSuffix(harnessDoc, "\n") && s.Excerpt != harnessDoc {
					t.Errorf("excerpt = %q, want the whole short document", s.Excerpt)
				}
				if len(s.Outline) != 3 || s.Outline[0].Title != "Idea" || s.Outline[1].Title != "Goals" {
					t.Errorf("outline = %+v", s.Outline)
				}
			})},
		{Name: "summary honours max_lines", Route: "GET /workspace/summary", As: "agent", Body: map[string]any{"max_lines": 3},
			After: summary(func(t testing.TB, s room.Summary) {
				if s.Excerpt != "# Idea\n\nhello world" || !s.Truncated {
					t.Errorf("excerpt %q truncated %v", s.Excerpt, s.Truncated)
				}
			})},
		{Name: "summary honours max_bytes", Route: "GET /workspace/summary", As: "agent", Body: map[string]any{"max_bytes": 5},
			After: summary(func(t testing.TB, s room.Summary) {
				if s.Excerpt != "# Ide" || !s.Truncated {
					t.Errorf("excerpt %q truncated %v", s.Excerpt, s.Truncated)
				}
			})},
		{Name: "summary honours max_depth", Route: "GET /workspace/summary", As: "agent", Body: map[string]any{"max_depth": 1},
			After: summary(func(t testing.TB, s room.Summary) {
				if len(s.Outline) != 1 {
					t.Errorf("outline %+v", s.Outline)
				}
			})},
		{Name: "summary max_lines=-1 is 400 invalid_request", Route: "GET /workspace/summary", As: "agent",
			Body: map[string]any{"max_lines": -1}, Status: http.StatusBadRequest, Error: "invalid_request"},
		{Name: "regions lists every heading with its level, line and path", Route: "GET /workspace/regions", As: "agent",
			After: func(t testing.TB, _ *roomtest.Setup, raw []byte) {
				var regs []map[string]any
				roomtest.Response{Body: raw}.Into(t, &regs)
				if len(regs) != 3 {
					t.Fatalf("regions = %s", raw)
				}
				if regs[0]["title"] != "Idea" || regs[0]["level"] != float64(1) || regs[0]["line"] != float64(1) ||
					regs[1]["title"] != "Goals" || regs[1]["level"] != float64(2) || regs[1]["line"] != float64(5) {
					t.Errorf("regions = %s", raw)
				}
				for _, k := range []string{"region", "title", "level", "line", "path"} {
					if _, ok := regs[1][k]; !ok {
						t.Errorf("region lacks %q", k)
					}
				}
			}},
		{Name: "read a section", Route: "GET /workspace/read", As: "agent", Body: map[string]any{"section": "Goals"},
			After: read(func(t testing.TB, rr room.ReadResult) {
				if rr.Content != "## Goals\n\nship it\nsoon\n\n" || rr.Section == nil || *rr.Section != "Goals" || rr.Truncated || rr.Version != 1 {
					t.Errorf("read Goals = %+v", rr)
				}
			})},
		{Name: "read the whole document", Route: "GET /workspace/read", As: "agent",
			After: read(func(t testing.TB, rr room.ReadResult) {
				if rr.Content != harnessDoc || rr.Section != nil {
					t.Errorf("read = %+v", rr)
				}
			})},
		{Name: "read a section bounded by max_lines", Route: "GET /workspace/read", As: "agent",
			Body: map[string]any{"section": "Plan", "max_lines": 3},
			After: read(func(t testing.TB, rr room.ReadResult) {
				if rr.Content != "## Plan\n\nstep one" || !rr.Truncated {
					t.Errorf("read Plan max_lines=3 = %+v", rr)
				}
			})},
		{Name: "read an unknown section is 400 invalid_region naming it", Route: "GET /workspace/read", As: "agent",
			Body: map[string]any{"section": "Nowhere"}, Status: http.StatusBadRequest, Error: "invalid_region",
			Contains: []string{`"region":"Nowhere"`}},
		{Name: "read max_bytes=abc is 400 invalid_request", Route: "GET /workspace/read", As: "agent",
			Body: map[string]any{"max_bytes": "abc"}, Status: http.StatusBadRequest, Error: "invalid_request"},
		{Name: "history since_event_id=abc is 400 invalid_request", Route: "GET /workspace/history", As: "agent",
			Body: map[string]any{"since_event_id": "abc"}, Status: http.StatusBadRequest, Error: "invalid_request"},
		{Name: "history limit=abc is 400 invalid_request", Route: "GET /workspace/history", As: "agent",
			Body: map[string]any{"limit": "abc"}, Status: http.StatusBadRequest, Error: "invalid_request"},
	}
	for _, bad := range [][2]string{{"max_lines", "abc"}, {"max_bytes", "1e3"}, {"max_depth", "x"}} {
		cases = append(cases, roomtest.Scenario{Name: "summary " + bad[0] + "=" + bad[1] + " is 400 invalid_request naming it",
			Route: "GET /workspace/summary", As: "agent", Body: map[string]any{bad[0]: bad[1]},
			Status: http.StatusBadRequest, Error: "invalid_request", After: fieldIs(bad[0])})
	}
	roomtest.Scenarios{Open: openScenarioRoom, Shared: true, Parties: []roomtest.PartySpec{{Name: "agent", Caps: []string{"read"}}},
		Cases: cases}.Run(t)
}

// TestHistoryPages: newest first, ascending after since_event_id, limit,
// and the ring's oldest and newest ids.
func TestHistoryPages(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent", "read")
	r := h.get(t, agent.SessionToken, "/workspace/history")
	wantOK(t, r)
	var hist room.History
	r.Into(t, &hist)
	all := h.Events("")
	if len(hist.Events) != len(all) || len(all) < 4 {
		t.Fatalf("history has %d events, the ring %d", len(hist.Events), len(all))
	}
	for i := 1; i < len(hist.Events); i++ {
		if hist.Events[i].ID >= hist.Events[i-1].ID {
			t.Fatalf("history is not newest first: %d then %d", hist.Events[i-1].ID, hist.Events[i].ID)
		}
	}
	if hist.OldestEventID != all[0].ID || hist.NewestEventID != all[len(all)-1].ID {
		t.Errorf("oldest/newest = %d/%d, want %d/%d", hist.OldestEventID, hist.NewestEventID, all[0].ID, all[len(all)-1].ID)
	}
	if !strings.Contains(string(r.Body), `"oldest_event_id"`) {
		t.Errorf("history lacks oldest_event_id")
	}
	since := all[1].ID
	r = h.get(t, agent.SessionToken, fmt.Sprintf("/workspace/history?since_event_id=%d", since))
	wantOK(t, r)
	var asc room.History
	r.Into(t, &asc)
	if len(asc.Events) != len(all)-2 {
		t.Fatalf("since_event_id=%d gave %d events, want %d", since, len(asc.Events), len(all)-2)
	}
	for i, ev := range asc.Events {
		if ev.ID != all[i+2].ID {
			t.Errorf("since: event %d = %d, want %d (ascending)", i, ev.ID, all[i+2].ID)
		}
	}
	r = h.get(t, agent.SessionToken, "/workspace/history?limit=2")
	wantOK(t, r)
	r.Into(t, &hist)
	if len(hist.Events) != 2 || hist.Events[0].ID != all[len(all)-1].ID {
		t.Errorf("limit=2 gave %d events", len(hist.Events))
	}
}

// TestOutOfBandEdit: an edit of the file by hand becomes a version, once,
// by no participant.
func TestOutOfBandEdit(t *testing.T) {
	h := newHarness(t, "")
	agent := h.join("agent", "read")
	versions := h.Count(`SELECT count(*) FROM versions`)
	edited := "# Idea\n\nhello world, edited by hand\n\n## Goals\n\nship it today\n"
	if err := os.WriteFile(h.Doc, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.get(t, agent.SessionToken, "/workspace/read")
	wantOK(t, r)
	var rr room.ReadResult
	r.Into(t, &rr)
	if rr.Content != edited || rr.Version != int64(versions+1) {
		t.Fatalf("read after the edit: version %d content %q", rr.Version, rr.Content)
	}
	var summary, source string
	var pid *string
	if err := h.Store.Reader.QueryRow(`SELECT summary, source, participant_id FROM versions ORDER BY version DESC LIMIT 1`).
		Scan(&summary, &source, &pid); err != nil {
		t.Fatal(err)
	}
	if summary != "external substrate edit" || source != "external" || pid != nil {
		t.Errorf("new version: summary %q source %q participant %v", summary, source, pid)
	}
	evs := h.Events("change.committed")
	if len(evs) != 1 {
		t.Fatalf("change.committed events = %d, want 1", len(evs))
	}
	p := evs[0].Payload
	if v, ok := p["participant_id"]; !ok || v != nil || p["version"] != float64(versions+1) || p["summary"] != "external substrate edit" {
		t.Errorf("change.committed payload = %s", evs[0].Raw)
	}
	// Reading again does not record the same edit twice.
	wantOK(t, h.get(t, agent.SessionToken, "/workspace/status"))
	if n := h.Count(`SELECT count(*) FROM versions`); n != versions+1 {
		t.Errorf("%d versions after a second read, want %d", n, versions+1)
	}
	r = h.get(t, agent.SessionToken, "/workspace/read?section=Goals")
	wantOK(t, r)
	r.Into(t, &rr)
	if rr.Content != "## Goals\n\nship it today\n" {
		t.Errorf("section after the edit = %q", rr.Content)
	}
}

// TestParticipants: the listing holds who has not left, the host first,
// then oldest first, each with the transport of its newest live session.
func TestParticipants(t *testing.T) {
	cases := []struct {
		name string
		tick time.Duration // clock advance before each join
	}{
		{"host first then oldest first when joins are a millisecond apart", time.Millisecond},
		// All commands of one group-commit batch share one clock reading, so
		// joins in the same millisecond are ordinary; the listing must still
		// put the host first and keep join order.
		{"host first then join order when joins share a millisecond", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			var want []any
			want = append(want, h.Eng.HostID)
			var tokens []string
			for i := range 8 {
				h.Clock.Advance(tc.tick)
				g := h.InviteCaps("read")
				r := h.joinRaw(map[string]any{"invite": g.URI, "name": fmt.Sprintf("agent-%d", i), "transport": fmt.Sprintf("plugin-%d", i)})
				wantOK(t, r)
				var s sessionGrant
				r.Into(t, &s)
				want = append(want, s.ParticipantID)
				tokens = append(tokens, s.SessionToken)
			}
			r := h.Do(t, "GET", h.IngressURL("/workspace/participants"), tokens[0], nil)
			wantOK(t, r)
			var ps []map[string]any
			r.Into(t, &ps)
			var got []any
			for _, p := range ps {
				got = append(got, p["participant_id"])
			}
			if !slices.Equal(got, want) {
				t.Errorf("participants order = %v\nwant host first, then join order: %v", got, want)
			}
			for _, p := range ps {
				switch {
				case p["participant_id"] == h.Eng.HostID:
					if p["kind"] != "human" || p["name"] != "host" || p["is_host"] != true || p["transport"] != nil {
						t.Errorf("host entry = %v", p)
					}
				default:
					// The room's own label, whatever the client claimed.
					if tr, _ := p["transport"].(string); tr != "loopback" || p["kind"] != "agent" {
						t.Errorf("agent entry = %v", p)
					}
				}
			}
		})
	}
}

// TestLeave: leaving ends the session and the participant's presence.
func TestLeave(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("agent", "read")
	other := h.join("other", "read")
	r := h.do("POST", h.IngressURL("/workspace/leave"), s.SessionToken, nil)
	wantOK(t, r)
	if r.JSON(t)["status"] != "ok" {
		t.Errorf("leave answer = %s", r.Body)
	}
	t.Run("the token is refused afterwards", func(t *testing.T) {
		for _, base := range []string{h.Ingress.URL, h.Owner.URL} {
			wantUnauthorized(t, h.Do(t, "GET", base+"/workspace/status", s.SessionToken, nil), "unauthorized")
		}
	})
	t.Run("participant.left is written once", func(t *testing.T) {
		evs := h.Events("participant.left")
		if len(evs) != 1 || evs[0].Payload["participant_id"] != s.ParticipantID {
			t.Errorf("participant.left events = %+v", evs)
		}
		if n := h.Count(`SELECT count(*) FROM sessions WHERE session_ref = ? AND end_reason = 'left' AND ended_at IS NOT NULL`, s.SessionRef); n != 1 {
			t.Errorf("session not ended with reason left")
		}
	})
	t.Run("the participant is gone from the listing", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/workspace/participants"), other.SessionToken, nil)
		wantOK(t, r)
		var ps []map[string]any
		r.Into(t, &ps)
		for _, p := range ps {
			if p["participant_id"] == s.ParticipantID {
				t.Errorf("participant who left is still listed")
			}
		}
		if len(ps) != 2 {
			t.Errorf("participants = %s, want host and other", r.Body)
		}
		st := h.Do(t, "GET", h.IngressURL("/workspace/status"), other.SessionToken, nil)
		if st.JSON(t)["participants"] != float64(2) {
			t.Errorf("status participants = %v, want 2", st.JSON(t)["participants"])
		}
	})
	t.Run("leaving again with the dead token is 401 and changes nothing", func(t *testing.T) {
		before := h.Snapshot()
		wantUnauthorized(t, h.Do(t, "POST", h.IngressURL("/workspace/leave"), s.SessionToken, nil), "unauthorized")
		h.AssertUnchanged(t, before)
	})
}

// TestLeaveOperator: the operator credential is not a session; it must not
// make the host participant leave (the host would vanish from the room and a
// second host would be created on the next start).
func TestLeaveOperator(t *testing.T) {
	h := newHarness(t, "")
	before := h.Snapshot()
	r := h.do("POST", h.OwnerURL("/workspace/leave"), h.OpToken, nil)
	if r.Status == http.StatusOK {
		t.Errorf("operator leave answered 200 %s; want a refusal (there is no session to end)", r.Body)
	}
	h.AssertUnchanged(t, before)
	if n := h.Count(`SELECT count(*) FROM participants WHERE participant_id = ? AND left_at IS NULL`, h.Eng.HostID); n != 1 {
		t.Errorf("the host participant left")
	}
	host := h.Eng.HostID
	h.Restart()
	if h.Eng.HostID != host || h.Count(`SELECT count(*) FROM participants WHERE is_host = 1`) != 1 {
		t.Errorf("after restart host %s (was %s), %d host rows; want the same single host",
			h.Eng.HostID, host, h.Count(`SELECT count(*) FROM participants WHERE is_host = 1`))
	}
}

// TestOwnerPageKey: the one-time key is exchanged for an HttpOnly,
// SameSite=Strict cookie on the owner listener only.
func TestOwnerPageKey(t *testing.T) {
	h := newHarness(t, "")
	cookieOf := func(r apiResp) *http.Cookie {
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			if c.Name == h.API.pages.name {
				return c
			}
		}
		return nil
	}
	key := h.API.NewPageKey()

	t.Run("ingress never sets a cookie, even with a valid key", func(t *testing.T) {
		// The ingress's page keys are participants' (issue 28): an owner key
		// is unknown there, refused like any spent one.
		for path, status := range map[string]int{"/": http.StatusOK, "/?key=" + url.QueryEscape(key): http.StatusForbidden, "/?key=garbage": http.StatusForbidden} {
			r := h.Do(t, "GET", h.IngressURL(path), "", nil)
			if r.Status != status {
				t.Errorf("ingress GET %s: %d, want %d", path, r.Status, status)
			}
			if sc := r.Header.Values("Set-Cookie"); len(sc) > 0 {
				t.Errorf("ingress GET %s set a cookie: %v", path, sc)
			}
		}
	})
	var cookie *http.Cookie
	t.Run("owner exchanges the key for a strict HttpOnly cookie and redirects", func(t *testing.T) {
		r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil)
		if r.Status != http.StatusSeeOther && r.Status != http.StatusFound {
			t.Fatalf("status = %d, want a redirect", r.Status)
		}
		if loc := r.Header.Get("Location"); loc != "/" {
			t.Errorf("Location = %q, want /", loc)
		}
		cookie = cookieOf(r)
		if cookie == nil {
			t.Fatalf("no %s cookie in %v", h.API.pages.name, r.Header.Values("Set-Cookie"))
		}
		if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/" || cookie.Value == "" || cookie.Value == key {
			t.Errorf("cookie = %+v", cookie)
		}
		if want := roomtest.OwnerCookie(h.Eng.WorkspaceID); cookie.Name != want || h.Eng.WorkspaceID == "" || cookieSafe(h.Eng.WorkspaceID) != h.Eng.WorkspaceID {
			t.Errorf("cookie name %q, want %q (the room's workspace id, which needs no escaping)", cookie.Name, want)
		}
	})
	t.Run("the cookie opens the page, names escaped", func(t *testing.T) {
		if cookie == nil {
			t.Skip("no cookie") // the previous subtest already failed
		}
		h.join(`<script>alert(1)</script>`, "read")
		r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, withCookie(&http.Cookie{Name: h.API.pages.name, Value: cookie.Value}))
		wantOK(t, r)
		if !strings.Contains(string(r.Body), "<h1>idea</h1>") {
			t.Errorf("page = %s", r.Body)
		}
		if strings.Contains(string(r.Body), "<script>alert(1)") || !strings.Contains(string(r.Body), "&lt;script&gt;") {
			t.Errorf("participant name not escaped on the page: %s", r.Body)
		}
	})
	t.Run("the same key a second time is 403", func(t *testing.T) {
		r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil)
		if r.Status != http.StatusForbidden || cookieOf(r) != nil {
			t.Errorf("second use: %d cookie %v", r.Status, cookieOf(r))
		}
	})
	t.Run("an unknown key is 403", func(t *testing.T) {
		r := h.Do(t, "GET", h.OwnerURL("/?key=nope"), "", nil)
		if r.Status != http.StatusForbidden || cookieOf(r) != nil {
			t.Errorf("unknown key: %d", r.Status)
		}
	})
	t.Run("the page without a cookie is 401", func(t *testing.T) {
		if r := h.Do(t, "GET", h.OwnerURL("/"), "", nil); r.Status != http.StatusUnauthorized {
			t.Errorf("status = %d, want 401", r.Status)
		}
		r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, withCookie(&http.Cookie{Name: h.API.pages.name, Value: "forged"}))
		if r.Status != http.StatusUnauthorized {
			t.Errorf("forged cookie: status = %d, want 401", r.Status)
		}
	})
	t.Run("the owner cookie works only on the owner listener and never on /mcp", func(t *testing.T) {
		if cookie == nil {
			t.Fatal("the key exchange set no cookie")
		}
		c := &http.Cookie{Name: h.API.pages.name, Value: cookie.Value}
		if r := h.Do(t, "GET", h.OwnerURL("/workspace/status"), "", nil, withCookie(c)); r.Status != http.StatusOK {
			t.Errorf("owner listener with the cookie: status %d, want 200", r.Status)
		}
		wantUnauthorized(t, h.Do(t, "GET", h.IngressURL("/workspace/status"), "", nil, withCookie(c)), "unauthorized")
		wantUnauthorized(t, h.Do(t, "GET", h.OwnerURL("/workspace/status"), c.Value, nil), "unauthorized")
		mcp := h.Do(t, "POST", h.OwnerURL("/mcp"), "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list",
			"params": map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{}}}},
			withCookie(c), withHeader("MCP-Protocol-Version", "2026-07-28"), withHeader("Mcp-Method", "tools/list"))
		if mcp.Status != http.StatusUnauthorized {
			t.Errorf("/mcp with only the owner cookie: status %d, want 401", mcp.Status)
		}
	})
	t.Run("a key shown to the ingress is still unspent on the owner", func(t *testing.T) {
		k := h.API.NewPageKey()
		h.Do(t, "GET", h.IngressURL("/?key="+url.QueryEscape(k)), "", nil)
		r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(k)), "", nil)
		if r.Status != http.StatusSeeOther || cookieOf(r) == nil {
			t.Errorf("owner after ingress: %d, cookie %v", r.Status, cookieOf(r))
		}
	})
}

// TestRestart: closing and reopening the room on the same files keeps the
// workspace, its participants, sessions, invitations and events.
func TestRestart(t *testing.T) {
	h := newHarness(t, "")
	s := h.join("agent", "read", "invite")
	pending := h.Invite(map[string]any{"capabilities": []string{"read"}})
	ws, host := h.Eng.WorkspaceID, h.Eng.HostID
	partsBefore := h.do("GET", h.IngressURL("/workspace/participants"), s.SessionToken, nil)
	wantOK(t, partsBefore)
	evBefore := h.Events("")
	oldOwner, oldIngress := h.Owner.URL, h.Ingress.URL

	h.Restart()

	if h.Owner.URL == oldOwner && h.Ingress.URL == oldIngress {
		t.Logf("listeners reused the same ports")
	}
	t.Run("same workspace_id and host", func(t *testing.T) {
		if h.Eng.WorkspaceID != ws || h.Eng.HostID != host {
			t.Errorf("after restart workspace %s host %s, want %s %s", h.Eng.WorkspaceID, h.Eng.HostID, ws, host)
		}
	})
	t.Run("a session issued before the restart still works", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/workspace/status"), s.SessionToken, nil)
		wantOK(t, r)
		if r.JSON(t)["workspace_id"] != ws {
			t.Errorf("status workspace_id = %v", r.JSON(t)["workspace_id"])
		}
	})
	t.Run("participants kept", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/workspace/participants"), s.SessionToken, nil)
		wantOK(t, r)
		var a, b []map[string]any
		partsBefore.Into(t, &a)
		r.Into(t, &b)
		ids := func(ps []map[string]any) []any {
			var out []any
			for _, p := range ps {
				out = append(out, p["participant_id"])
			}
			return out
		}
		if !slices.Equal(ids(a), ids(b)) {
			t.Errorf("participants before %v after %v", ids(a), ids(b))
		}
	})
	t.Run("events kept", func(t *testing.T) {
		after := h.Events("")
		if len(after) < len(evBefore) {
			t.Fatalf("%d events after restart, %d before", len(after), len(evBefore))
		}
		for i, ev := range evBefore {
			if after[i].ID != ev.ID || after[i].Raw != ev.Raw {
				t.Errorf("event %d changed across the restart", ev.ID)
			}
		}
	})
	t.Run("an invitation made before the restart admits after it", func(t *testing.T) {
		g := h.redeem(pending.URI, "after-restart")
		if g.WorkspaceID != ws {
			t.Errorf("workspace_id = %s", g.WorkspaceID)
		}
	})
	t.Run("the old operator page keys do not survive", func(t *testing.T) {
		// Keys live in memory only; a restart hands out fresh ones.
		k := h.API.NewPageKey()
		r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(k)), "", nil)
		if r.Status != http.StatusSeeOther {
			t.Errorf("fresh key after restart: %d", r.Status)
		}
	})
}

// changeLast returns token with its last character replaced by a different one.
func changeLast(token string) string {
	last := token[len(token)-1]
	repl := byte('x')
	if last == repl {
		repl = 'y'
	}
	return token[:len(token)-1] + string(repl)
}

package httpapi

// A participant's page (issue 28) on real listeners: a session mints a
// one-time key (POST /session/page, bearer only), the ingress spends it for
// a cookie named for the room, and the cookie stands for that session on
// the ingress's page and /workspace routes only — not on the owner
// listener, not on /mcp, not after the session ends, not in another room.
// Writes with it need the page's own Origin, and the server enforces the
// session's capabilities as for any door. Every helper starts with "pp".
// The browser side is e2e/participant-page.test.mjs.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// ppKey mints a one-time page key for token.
func ppKey(t testing.TB, h *roomHarness, token string) string {
	t.Helper()
	r := h.Do(t, "POST", h.IngressURL("/session/page"), token, nil)
	wantOK(t, r)
	m := r.JSON(t)
	if m["path"] != "/?key=" {
		t.Fatalf("POST /session/page path = %v", m["path"])
	}
	k, _ := m["key"].(string)
	if len(k) < 40 {
		t.Fatalf("POST /session/page key = %q", k)
	}
	return k
}

// ppRedeem opens the page link as a browser does (opts add what that
// browser sends, such as a cookie it already holds) and returns the cookie
// set, or nil with the answer.
func ppRedeem(t testing.TB, h *roomHarness, key string, opts ...reqOpt) (*http.Cookie, apiResp) {
	t.Helper()
	r := h.Do(t, "GET", h.IngressURL("/?key="+url.QueryEscape(key)), "", nil, opts...)
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Name == h.API.sessionPages.name {
			return c, r
		}
	}
	return nil, r
}

// ppCookie is a participant cookie for token, as the browser sends it back.
func ppCookie(t testing.TB, h *roomHarness, token string) *http.Cookie {
	t.Helper()
	c, r := ppRedeem(t, h, ppKey(t, h, token))
	if c == nil {
		t.Fatalf("page key exchange: %d %s", r.Status, r.Body)
	}
	return &http.Cookie{Name: c.Name, Value: c.Value}
}

// TestParticipantPageKeyOnce: the key is exchanged once, on the ingress
// only, for a strict HttpOnly cookie named for the room.
func TestParticipantPageKeyOnce(t *testing.T) {
	h := newHarness(t, "")
	alice := h.join("alice", "read", "observe", "propose", "checkout")
	key := ppKey(t, h, alice.SessionToken)

	t.Run("the owner listener does not know it", func(t *testing.T) {
		r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil)
		if r.Status != http.StatusForbidden || len(r.Header.Values("Set-Cookie")) > 0 {
			t.Errorf("owner listener: %d, Set-Cookie %v", r.Status, r.Header.Values("Set-Cookie"))
		}
	})
	c, r := ppRedeem(t, h, key)
	if c == nil {
		t.Fatalf("page key exchange set no cookie: %d %s", r.Status, r.Body)
	}
	t.Run("first use sets the cookie and drops the key from the address", func(t *testing.T) {
		if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
			t.Fatalf("first use: %d, Location %q", r.Status, r.Header.Get("Location"))
		}
		if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Fatalf("cookie = %+v", c)
		}
		if want := participantCookiePrefix + cookieSafe(h.Eng.WorkspaceID); c.Name != want || h.Eng.WorkspaceID == "" {
			t.Errorf("cookie name %q, want %q (the room's own)", c.Name, want)
		}
		if strings.Contains(c.Value, alice.SessionToken) || c.Value == key {
			t.Errorf("the cookie carries the token or the key")
		}
	})
	t.Run("reused is refused and sets nothing", func(t *testing.T) {
		again, r := ppRedeem(t, h, key)
		if again != nil || r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "already used") {
			t.Errorf("reuse: %d %q, cookie %v", r.Status, r.Body, again)
		}
	})
	t.Run("unknown is refused", func(t *testing.T) {
		if again, r := ppRedeem(t, h, key+"x"); again != nil || r.Status != http.StatusForbidden {
			t.Errorf("unknown key: %d", r.Status)
		}
	})
	t.Run("no secret in the logs", func(t *testing.T) {
		logs := h.Logs.String()
		for what, secret := range map[string]string{"key": key, "cookie": c.Value, "token": alice.SessionToken} {
			if strings.Contains(logs, secret) {
				t.Errorf("the %s is in the logs", what)
			}
		}
	})
	t.Run("the page opens with the cookie and names its viewer", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/"), "", nil, withCookie(&http.Cookie{Name: c.Name, Value: c.Value}))
		wantOK(t, r)
		body := string(r.Body)
		for _, want := range []string{`data-operator="false"`, `data-participant-id="` + alice.ParticipantID + `"`,
			`data-caps="read observe propose checkout"`, `id="compose"`} {
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %s", want)
			}
		}
		if strings.Contains(body, `id="invite-create"`) || r.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("participant page offers invitations, or has no CSP")
		}
	})
}

// TestParticipantPageCookieWhere: the cookie opens the ingress's page, its
// document and /workspace routes; nothing on the owner listener, not /mcp,
// and it never mints a key itself.
func TestParticipantPageCookieWhere(t *testing.T) {
	h := newHarness(t, "")
	alice := h.join("alice", "read", "observe", "propose", "checkout")
	c := ppCookie(t, h, alice.SessionToken)
	for _, p := range []string{"/", "/page/document", "/workspace/room", "/workspace/status", "/workspace/read?section=Idea/Goals"} {
		t.Run("ingress "+p+" answers", func(t *testing.T) {
			wantOK(t, h.Do(t, "GET", h.IngressURL(p), "", nil, withCookie(c)))
		})
	}
	t.Run("the room view is the participant's", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/workspace/room"), "", nil, withCookie(c))
		if m := r.JSON(t); m["invites"] != nil || m["task_shares"] != nil {
			t.Errorf("a participant without invite/admin was shown invites or task shares")
		}
	})
	for _, p := range []string{"/", "/page/document", "/workspace/room"} {
		t.Run("owner listener "+p+" refuses", func(t *testing.T) {
			r := h.Do(t, "GET", h.OwnerURL(p), "", nil, withCookie(c))
			if r.Status != http.StatusUnauthorized {
				t.Errorf("owner %s with a participant cookie: %d", p, r.Status)
			}
		})
	}
	t.Run("not on /mcp", func(t *testing.T) {
		r := h.Do(t, "POST", h.IngressURL("/mcp"), "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list",
			"params": map[string]any{"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}},
			withCookie(c), withOrigin(h.Ingress.URL), withHeader("MCP-Protocol-Version", "2026-07-28"), withHeader("Mcp-Method", "tools/list"))
		if r.Status != http.StatusUnauthorized {
			t.Errorf("/mcp with a participant cookie: %d %.200s", r.Status, r.Body)
		}
	})
	t.Run("it does not mint page keys", func(t *testing.T) {
		before, _ := h.API.sessionPages.size()
		r := h.Do(t, "POST", h.IngressURL("/session/page"), "", nil, withCookie(c), withOrigin(h.Ingress.URL))
		wantError(t, r, http.StatusUnauthorized, "unauthorized")
		if after, _ := h.API.sessionPages.size(); after != before {
			t.Errorf("keys %d -> %d", before, after)
		}
	})
	t.Run("no /session/page on the owner listener", func(t *testing.T) {
		r := h.Do(t, "POST", h.OwnerURL("/session/page"), alice.SessionToken, nil)
		if r.Status != http.StatusNotFound && r.Status != http.StatusMethodNotAllowed {
			t.Errorf("owner POST /session/page: %d", r.Status)
		}
	})
}

// TestParticipantPageEndsWithSession: when the session ends (left, ended by
// the host, expired) its cookie fails at once, and so does an unspent key;
// the store forgets both.
func TestParticipantPageEndsWithSession(t *testing.T) {
	cases := []struct {
		name string
		end  func(h *roomHarness, p party)
	}{
		{"left", func(h *roomHarness, p party) {
			wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), p.SessionToken, nil))
		}},
		{"ended by the host", func(h *roomHarness, p party) {
			wantOK(t, h.do("POST", h.OwnerURL("/workspace/session/end"), h.OpToken, map[string]any{"participant_id": p.ParticipantID}))
		}},
		{"expired", func(h *roomHarness, p party) {
			h.Clock.Advance(h.Eng.Limits.SessionMaxLifetime + time.Minute)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name+": cookie and key refused", func(t *testing.T) {
			h := newHarness(t, "")
			alice := h.join("alice", "read", "observe", "propose", "checkout")
			c := ppCookie(t, h, alice.SessionToken)
			key := ppKey(t, h, alice.SessionToken)
			wantOK(t, h.Do(t, "GET", h.IngressURL("/workspace/room"), "", nil, withCookie(c)))
			tc.end(h, alice)
			r := h.Do(t, "GET", h.IngressURL("/workspace/room"), "", nil, withCookie(c))
			if r.Status != http.StatusUnauthorized {
				t.Errorf("cookie after the end: %d %s", r.Status, r.Body)
			}
			r = h.Do(t, "GET", h.IngressURL("/"), "", nil, withCookie(c))
			if r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "session ended") || strings.Contains(string(r.Body), "<html") {
				t.Errorf("page after the end: %d %q", r.Status, r.Body)
			}
			if k, r := ppRedeem(t, h, key); k != nil || r.Status != http.StatusForbidden {
				t.Errorf("key after the end: %d, cookie %v", r.Status, k)
			}
			if keys, cookies := h.API.sessionPages.size(); keys != 0 || cookies != 0 {
				t.Errorf("store still holds %d keys, %d cookies of an ended session", keys, cookies)
			}
		})
	}
}

// TestParticipantPageOtherRoomsCookie: two rooms on one host name their
// cookies apart; a cookie this room never issued is refused in words.
func TestParticipantPageOtherRoomsCookie(t *testing.T) {
	a, b := newHarness(t, ""), newHarness(t, "")
	ca := ppCookie(t, a, a.join("alice", "read", "observe").SessionToken)
	cb := ppCookie(t, b, b.join("bob", "read", "observe").SessionToken)
	if ca.Name == cb.Name {
		t.Fatalf("two rooms share the cookie name %q", ca.Name)
	}
	t.Run("room A's cookie as it is: room B sees no page cookie", func(t *testing.T) {
		wantUnauthorized(t, b.do("GET", b.IngressURL("/workspace/room"), "", nil, withCookie(ca)), "unauthorized")
		r := b.do("GET", b.IngressURL("/"), "", nil, withCookie(ca))
		if !strings.HasPrefix(string(r.Body), "Commonroom ingress.") {
			t.Errorf("room B served a page for room A's cookie: %d %.80s", r.Status, r.Body)
		}
	})
	t.Run("room A's cookie under room B's name is refused", func(t *testing.T) {
		forged := &http.Cookie{Name: cb.Name, Value: ca.Value}
		m := wantError(t, b.do("GET", b.IngressURL("/workspace/room"), "", nil, withCookie(forged)), http.StatusUnauthorized, "unauthorized")
		if msg, _ := m["message"].(string); !strings.Contains(msg, "not signed in for this room") {
			t.Errorf("message %q", msg)
		}
		r := b.do("GET", b.IngressURL("/"), "", nil, withCookie(forged))
		if r.Status != http.StatusUnauthorized || !strings.Contains(string(r.Body), "Page: link") {
			t.Errorf("page: %d %q", r.Status, r.Body)
		}
	})
	t.Run("both cookies sent: each room reads its own", func(t *testing.T) {
		wantOK(t, b.do("GET", b.IngressURL("/workspace/room"), "", nil, withCookie(ca), withCookie(cb)))
		wantOK(t, a.do("GET", a.IngressURL("/workspace/room"), "", nil, withCookie(ca), withCookie(cb)))
	})
}

// TestParticipantPageCrossOriginWrites: a write with the cookie needs the
// page's own Origin; refused ones change nothing.
func TestParticipantPageCrossOriginWrites(t *testing.T) {
	h := newHarness(t, "")
	alice := h.join("alice", "read", "observe", "propose", "checkout")
	c := ppCookie(t, h, alice.SessionToken)
	body := map[string]any{"target": "Idea/Goals"}
	for name, origin := range map[string]string{
		"no Origin":                   "",
		"a foreign site":              "https://evil.example",
		"the owner listener's origin": h.Owner.URL,
		"https, same authority":       "https://" + strings.TrimPrefix(h.Ingress.URL, "http://"),
	} {
		t.Run(name+": refused, nothing changed", func(t *testing.T) {
			before := h.Snapshot()
			opts := []reqOpt{withCookie(c)}
			if origin != "" {
				opts = append(opts, withOrigin(origin))
			}
			wantError(t, h.Do(t, "POST", h.IngressURL("/workspace/checkout"), "", body, opts...), http.StatusForbidden, "permission_denied")
			h.AssertUnchanged(t, before)
		})
	}
	t.Run("the page's own origin: leased", func(t *testing.T) {
		wantOK(t, h.do("POST", h.IngressURL("/workspace/checkout"), "", body, withCookie(c), withOrigin(h.Ingress.URL)))
		if n := h.Count(`SELECT COUNT(*) FROM leases WHERE participant_id = ?`, alice.ParticipantID); n != 1 {
			t.Errorf("leases of alice = %d", n)
		}
	})
}

// TestParticipantPageReadOnly: a read-only participant's page offers no
// write, and each write made by hand with its cookie is refused by the
// server (its capabilities, as for any door) with nothing changed.
// TestPageSaysWhoIsSignedIn: each page names, at its top, whose session
// it acts as and what it may do, so a page opened from someone else's link
// does not pass for one's own; a hostile name stays text.
func TestPageSaysWhoIsSignedIn(t *testing.T) {
	h := newHarness(t, "")
	name := `<img src=x onerror=alert(1)> bo`
	bo := h.join(name, "read", "propose")
	for _, c := range []struct {
		outcome string
		page    apiResp
		want    string
	}{
		{"a participant's page names the participant and its capabilities",
			h.Do(t, "GET", h.IngressURL("/"), "", nil, withCookie(ppCookie(t, h, bo.SessionToken))),
			`Signed in as <strong>&lt;img src=x onerror=alert(1)&gt; bo</strong> · may read, propose</p>`},
		{"the owner page names the host",
			h.Do(t, "GET", h.OwnerURL("/"), "", nil, withCookie(func() *http.Cookie { _, c := h.pageCookie(t); return c }())),
			`(the host) · may read, observe, propose, checkout, commit, approve, invite, admin</p>`},
	} {
		t.Run(c.outcome, func(t *testing.T) {
			wantOK(t, c.page)
			if !strings.Contains(string(c.page.Body), c.want) {
				i := strings.Index(string(c.page.Body), `id="you"`)
				t.Errorf("page lacks %q; has %.200s", c.want, string(c.page.Body)[max(i, 0):])
			}
		})
	}
}

func TestParticipantPageReadOnly(t *testing.T) {
	h := newHarness(t, "")
	writer := h.join("writer", "read", "observe", "propose", "checkout")
	wantOK(t, h.do("POST", h.IngressURL("/workspace/checkout"), writer.SessionToken, map[string]any{"target": "Idea/Goals"}))
	r := h.do("POST", h.IngressURL("/workspace/propose"), writer.SessionToken, map[string]any{
		"target": "Idea/Goals", "base_version": 1, "summary": "sharper",
		"change": map[string]any{"section": "Idea/Goals", "content": "## Goals\n\nship it now\n\n"}})
	wantOK(t, r)
	proposalID, _ := r.JSON(t)["proposal_id"].(string)
	reader := h.join("reader", "read", "observe")
	c := ppCookie(t, h, reader.SessionToken)

	t.Run("the page shows no write action", func(t *testing.T) {
		r := h.Do(t, "GET", h.IngressURL("/"), "", nil, withCookie(c))
		wantOK(t, r)
		body := string(r.Body)
		if !strings.Contains(body, `data-caps="read observe"`) {
			t.Errorf("page caps attribute missing")
		}
		for _, bad := range []string{`id="compose"`, `id="compose-lease"`, `id="compose-propose"`, `id="handoff-new"`, `id="invite-create"`} {
			if strings.Contains(body, bad) {
				t.Errorf("read-only page has %s", bad)
			}
		}
	})
	writes := []struct {
		path string
		body map[string]any
	}{
		{"/workspace/checkout", map[string]any{"target": "Idea/Plan"}},
		{"/workspace/propose", map[string]any{"target": "Idea/Plan", "base_version": 1, "summary": "x",
			"change": map[string]any{"section": "Idea/Plan", "content": "## Plan\n\nmine\n"}}},
		{"/workspace/proposal/review", map[string]any{"proposal_id": proposalID, "approve": true}},
		{"/workspace/commit", map[string]any{"proposal_id": proposalID}},
		{"/workspace/handoff", map[string]any{"summary": "do it"}},
		{"/workspace/invite", map[string]any{}},
		{"/workspace/session/end", map[string]any{"participant_id": writer.ParticipantID}},
	}
	for _, w := range writes {
		t.Run(w.path+": refused, nothing changed", func(t *testing.T) {
			before := h.Snapshot()
			wantError(t, h.Do(t, "POST", h.IngressURL(w.path), "", w.body, withCookie(c), withOrigin(h.Ingress.URL)), http.StatusForbidden, "permission_denied")
			h.AssertUnchanged(t, before)
		})
	}
}

// TestParticipantPageBadRequests: POST /session/page takes a bearer session
// and an empty or JSON-object body; anything else is refused with nothing
// minted.
func TestParticipantPageBadRequests(t *testing.T) {
	h := newHarness(t, "")
	alice := h.join("alice", "read", "observe")
	cases := []struct {
		name   string
		token  string
		body   any
		status int
		code   string
	}{
		{"no session", "", nil, http.StatusUnauthorized, "unauthorized"},
		{"unknown session", "cr_sess_nope", nil, http.StatusUnauthorized, "unauthorized"},
		{"the operator credential", h.OpToken, nil, http.StatusUnauthorized, "unauthorized"},
		{"malformed JSON", alice.SessionToken, []byte("{not json"), http.StatusBadRequest, "invalid_request"},
		{"not an object", alice.SessionToken, []byte(`[1,2]`), http.StatusBadRequest, "invalid_request"},
		{"oversize", alice.SessionToken, []byte(`{"x":"` + strings.Repeat("a", int(h.Eng.Limits.MaxBodyBytes)) + `"}`), http.StatusRequestEntityTooLarge, "limit_exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name+": refused", func(t *testing.T) {
			wantError(t, h.Do(t, "POST", h.IngressURL("/session/page"), tc.token, tc.body), tc.status, tc.code)
			if keys, _ := h.API.sessionPages.size(); keys != 0 {
				t.Errorf("%d keys minted", keys)
			}
		})
	}
	t.Run("an empty object: minted", func(t *testing.T) {
		wantOK(t, h.do("POST", h.IngressURL("/session/page"), alice.SessionToken, map[string]any{}))
	})
}

// TestParticipantPageCaps: a session holds at most maxPageKeysPerSession
// keys and maxPageCookiesPerSession cookies, the room roomCap entries; past
// a bound the oldest goes and the newest works.
func TestParticipantPageCaps(t *testing.T) {
	t.Run("keys per session: the oldest is dropped", func(t *testing.T) {
		h := newHarness(t, "")
		alice := h.join("alice", "read", "observe")
		var keys []string
		for range maxPageKeysPerSession + 1 {
			keys = append(keys, ppKey(t, h, alice.SessionToken))
		}
		if n, _ := h.API.sessionPages.size(); n != maxPageKeysPerSession {
			t.Errorf("%d keys held", n)
		}
		if c, _ := ppRedeem(t, h, keys[0]); c != nil {
			t.Errorf("the oldest key still works")
		}
		if c, r := ppRedeem(t, h, keys[len(keys)-1]); c == nil {
			t.Errorf("the newest key: %d", r.Status)
		}
	})
	t.Run("cookies per session: the oldest is dropped", func(t *testing.T) {
		h := newHarness(t, "")
		alice := h.join("alice", "read", "observe")
		var cookies []*http.Cookie
		for range maxPageCookiesPerSession + 1 {
			cookies = append(cookies, ppCookie(t, h, alice.SessionToken))
		}
		if _, n := h.API.sessionPages.size(); n != maxPageCookiesPerSession {
			t.Errorf("%d cookies held", n)
		}
		wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(cookies[0])), "unauthorized")
		wantOK(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(cookies[1])))
	})
	t.Run("the room: the oldest of anyone's is dropped", func(t *testing.T) {
		h := newHarness(t, "")
		h.API.sessionPages.mu.Lock()
		h.API.sessionPages.roomCap = 3
		h.API.sessionPages.mu.Unlock()
		alice, bob := h.join("alice", "read", "observe"), h.join("bob", "read", "observe")
		ca := ppCookie(t, h, alice.SessionToken)
		k1 := ppKey(t, h, bob.SessionToken)
		k2 := ppKey(t, h, bob.SessionToken)
		k3 := ppKey(t, h, bob.SessionToken) // the fourth entry: alice's cookie, the oldest, goes
		if keys, cookies := h.API.sessionPages.size(); keys+cookies != 3 {
			t.Errorf("%d keys + %d cookies held, want 3", keys, cookies)
		}
		wantUnauthorized(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(ca)), "unauthorized")
		for _, k := range []string{k1, k2, k3} {
			if c, r := ppRedeem(t, h, k); c == nil {
				t.Errorf("a key within the cap: %d", r.Status)
				break
			}
		}
	})
}

// TestParticipantPageKeyFromTheProvenJoin: a proven join that asks for a
// page gets its key sealed beside the token (what `ce join` prints as the
// Page: link without sending the new token anywhere); the key opens the
// page once, and nothing on the wire carries it in clear.
func TestParticipantPageKeyFromTheProvenJoin(t *testing.T) {
	h := newHarness(t, "")
	g := h.InviteCaps("read", "observe", "propose")
	c := newProvenClient(t, h, g.URI)
	tr := c.challenge(t)
	body := c.second(tr, "ann")
	body["page"] = true
	r := h.joinRaw(body)
	wantOK(t, r)
	var pg struct {
		sessionGrant
		Sealed     string `json:"sealed_session_token"`
		SealedPage string `json:"sealed_page_key"`
	}
	r.Into(t, &pg)
	key, err := room.OpenPageKey(c.k, tr, pg.SessionRef, pg.ParticipantID, pg.SealedPage)
	if err != nil {
		t.Fatalf("no sealed page key in %s: %v", r.Body, err)
	}
	if strings.Contains(string(r.Body), key) {
		t.Fatalf("the answer carries the page key in clear")
	}
	ck, rr := ppRedeem(t, h, key)
	if ck == nil {
		t.Fatalf("the sealed key does not open the page: %d %s", rr.Status, rr.Body)
	}
	if again, _ := ppRedeem(t, h, key); again != nil {
		t.Errorf("the sealed key worked twice")
	}
	wantOK(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(&http.Cookie{Name: ck.Name, Value: ck.Value})))

	t.Run("without page: none sealed, none kept", func(t *testing.T) {
		keysBefore, _ := h.API.sessionPages.size()
		g := h.InviteCaps("read")
		c := newProvenClient(t, h, g.URI)
		r := h.joinRaw(c.second(c.challenge(t), "bo"))
		wantOK(t, r)
		if _, has := r.JSON(t)["sealed_page_key"]; has {
			t.Errorf("a page key sealed without one asked for: %s", r.Body)
		}
		if keys, _ := h.API.sessionPages.size(); keys != keysBefore {
			t.Errorf("keys %d -> %d", keysBefore, keys)
		}
	})
}

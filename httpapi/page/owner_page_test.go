package page_test

// The owner page (package page, page/*) on real listeners: served only with the
// cookie, under a Content Security Policy that allows no inline script or
// style, its two static files on the owner listener only, the one-time key
// spent once, cookie writes refused from any other origin, forged ids
// refused — and in every refused case no row changes. Every helper here
// starts with "pg" so it cannot collide with the package's other helpers.
// The browser side (the script itself, live updates, keyboard use) is
// e2e/owner-page.test.mjs, run by scripts/e2e.sh.

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// browserCookie exchanges a fresh one-time key for the owner cookie, as a
// browser opening the printed link does.
func browserCookie(t testing.TB, h *apitest.Harness) *http.Cookie {
	t.Helper()
	r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(h.API.NewPageKey())), "", nil)
	if r.Status != http.StatusSeeOther {
		t.Fatalf("page key exchange: %d %s", r.Status, r.Body)
	}
	if c := cookieOf(r); c != nil {
		return &http.Cookie{Name: c.Name, Value: c.Value}
	}
	t.Fatalf("page key exchange set no %s cookie: %v", ownerCookie(h), r.Header.Values("Set-Cookie"))
	return nil
}

// cookieOf is the owner cookie a response sets, of this room or any
// other (TestOwnerPageKeyOnce pins the name).
func cookieOf(r roomtest.Response) *http.Cookie {
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if strings.HasPrefix(c.Name, roomtest.OwnerCookie("")) {
			return c
		}
	}
	return nil
}

// withOrigin sets the Origin header (the page's own is h.Owner.URL).
func withOrigin(o string) mcptest.ReqOpt { return mcptest.WithHeader("Origin", o) }

// pageRoom is a room with a handoff waiting on the host's answer (alice
// owns it, bob asked one question), a pending proposal, and a lease.
type pageRoom struct {
	h                  *apitest.Harness
	alice, bob         roomtest.Party
	handoffID, taskID  string
	proposalID         string
	cookie             *http.Cookie
	ownerOrigin        string
	ingressOrigin      string
	hostnameSamePort   string // http://localhost:<owner port>: same port, another origin
	httpsSameAuthority string // https://127.0.0.1:<owner port>
}

func newPageRoom(t *testing.T) *pageRoom {
	t.Helper()
	h := apitest.New(t, roomtest.Options{}, nil)
	f := &pageRoom{h: h,
		alice: h.Join("alice", "read", "observe", "propose", "checkout", "commit"),
		bob:   h.Join("bob", "read", "observe", "propose", "checkout", "commit"),
	}
	r := h.Do(t, "POST", h.IngressURL("/workspace/handoff"), f.alice.SessionToken,
		map[string]any{"summary": "draft the goals", "assignee": f.bob.ParticipantID})
	roomtest.WantOK(t, r)
	var created struct {
		Handoff struct {
			HandoffID string `json:"handoff_id"`
			TaskID    string `json:"task_id"`
		} `json:"handoff"`
	}
	r.Into(t, &created)
	f.handoffID, f.taskID = created.Handoff.HandoffID, created.Handoff.TaskID
	roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff/accept"), f.bob.SessionToken, map[string]any{"handoff_id": f.handoffID}))
	roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff/request_input"), f.bob.SessionToken, map[string]any{
		"handoff_id": f.handoffID, "requests": []any{map[string]any{"key": "tone", "message": "which tone?"}}}))
	roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/checkout"), f.alice.SessionToken, map[string]any{"target": "Idea/Goals"}))
	r = h.Do(t, "POST", h.IngressURL("/workspace/propose"), f.alice.SessionToken, map[string]any{
		"target": "Idea/Goals", "base_version": 1, "summary": "sharper goals",
		"change": map[string]any{"section": "Idea/Goals", "content": "## Goals\n\nship it now\n\n"}})
	roomtest.WantOK(t, r)
	f.proposalID, _ = r.JSON(t)["proposal_id"].(string)
	f.cookie = browserCookie(t, h)
	f.ownerOrigin = h.Owner.URL
	f.ingressOrigin = h.Ingress.URL
	f.hostnameSamePort = "http://localhost:" + serverPort(h.Owner)
	f.httpsSameAuthority = "https://127.0.0.1:" + serverPort(h.Owner)
	return f
}

// pageWrite is one write the page's script makes.
type pageWrite struct {
	path string
	body func(f *pageRoom) map[string]any
}

var pageWrites = []pageWrite{
	{"/workspace/handoff/approve", func(f *pageRoom) map[string]any { return map[string]any{"handoff_id": f.handoffID, "note": "ok"} }},
	{"/workspace/handoff/reject", func(f *pageRoom) map[string]any { return map[string]any{"handoff_id": f.handoffID, "note": "no"} }},
	{"/workspace/task/update", func(f *pageRoom) map[string]any {
		return map[string]any{"task_id": f.taskID, "input_responses": map[string]any{
			"tone": map[string]any{"action": "accept", "content": map[string]any{"answer": "forged"}}}}
	}},
	{"/workspace/task/cancel", func(f *pageRoom) map[string]any { return map[string]any{"task_id": f.taskID} }},
	{"/workspace/proposal/review", func(f *pageRoom) map[string]any { return map[string]any{"proposal_id": f.proposalID, "approve": true} }},
	{"/workspace/commit", func(f *pageRoom) map[string]any { return map[string]any{"proposal_id": f.proposalID} }},
	{"/workspace/invite", func(f *pageRoom) map[string]any { return map[string]any{} }},
}

// TestOwnerPageServedOnlyWithTheCookie: the page needs the cookie; it is
// sent under a CSP without 'unsafe-inline', and holds no inline script or
// style for such a policy to have to allow.
func TestOwnerPageServedOnlyWithTheCookie(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	h.Join(`<img src=x onerror=alert(1)>`, "read")
	cookie := browserCookie(t, h)

	t.Run("no cookie, a forged one, or a bearer instead: no page", func(t *testing.T) {
		for name, opts := range map[string][]mcptest.ReqOpt{
			"none":    nil,
			"forged":  {mcptest.WithCookie(&http.Cookie{Name: ownerCookie(h), Value: "forged"})},
			"renamed": {mcptest.WithCookie(&http.Cookie{Name: ownerCookie(h) + "x", Value: cookie.Value})},
			"unnamed": {mcptest.WithCookie(&http.Cookie{Name: "commonroom_owner", Value: cookie.Value})},
		} {
			r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, opts...)
			if r.Status != http.StatusUnauthorized || strings.Contains(string(r.Body), "<html") {
				t.Errorf("%s: %d %.200s", name, r.Status, r.Body)
			}
		}
		r := h.Do(t, "GET", h.OwnerURL("/"), h.OpToken, nil)
		if r.Status != http.StatusUnauthorized {
			t.Errorf("operator bearer opened the page: %d (the page is for the browser's cookie only)", r.Status)
		}
	})

	r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, mcptest.WithCookie(cookie))
	roomtest.WantOK(t, r)
	body := string(r.Body)

	t.Run("headers", func(t *testing.T) {
		if ct := r.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("Content-Type = %q", ct)
		}
		csp := r.Header.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "form-action 'none'", "base-uri 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("CSP %q lacks %q", csp, want)
			}
		}
		for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http:"} {
			if strings.Contains(csp, bad) {
				t.Errorf("CSP %q allows %q", csp, bad)
			}
		}
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
			"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"} {
			if got := r.Header.Get(k); got != want {
				t.Errorf("%s = %q, want %q", k, got, want)
			}
		}
		if sc := r.Header.Values("Set-Cookie"); len(sc) > 0 {
			t.Errorf("the page itself set a cookie: %v", sc)
		}
	})

	t.Run("no inline script, style or handler: the CSP needs no exception", func(t *testing.T) {
		scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(body, -1)
		if len(scripts) != 1 {
			t.Fatalf("%d script elements, want 1 (the external page.js)", len(scripts))
		}
		if !strings.Contains(scripts[0][1], `src="/page/page.js"`) || strings.TrimSpace(scripts[0][2]) != "" {
			t.Errorf("script element %q is not just the external /page/page.js", scripts[0][0])
		}
		if !strings.Contains(body, `<link rel="stylesheet" href="/page/page.css">`) {
			t.Errorf("no stylesheet link to /page/page.css")
		}
		if regexp.MustCompile(`(?i)<style\b`).MatchString(body) {
			t.Errorf("page holds a <style> element")
		}
		// Attributes, inside tags only (a participant's name is text).
		for _, tag := range regexp.MustCompile(`<[a-zA-Z][^>]*>`).FindAllString(body, -1) {
			for _, re := range []string{`(?i)\sstyle\s*=`, `(?i)\son[a-z]+\s*=`, `(?i)javascript:`} {
				if regexp.MustCompile(re).MatchString(tag) {
					t.Errorf("tag %q matches %s", tag, re)
				}
			}
		}
	})

	t.Run("structure and data, escaped", func(t *testing.T) {
		if !strings.Contains(body, "<h1>idea</h1>") {
			t.Errorf("no <h1> with the room's name")
		}
		var h2 []string
		for _, m := range regexp.MustCompile(`<h2 id="[^"]+">([^<]+)</h2>`).FindAllStringSubmatch(body, -1) {
			h2 = append(h2, m[1])
		}
		want := []string{"Connection", "Handoffs", "Work on a section", "Proposals", "Document", "Participants", "Leases", "Invitation", "Outline", "Activity"}
		if strings.Join(h2, "|") != strings.Join(want, "|") {
			t.Errorf("sections %v, want %v", h2, want)
		}
		for _, s := range []string{`role="alert"`, `id="live"`, "loopback · local · not encrypted", `<li class="lvl-1">Goals</li>`, "human: host (host)"} {
			if !strings.Contains(body, s) {
				t.Errorf("page lacks %q", s)
			}
		}
		if strings.Contains(body, "<img src=x") || !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("a participant's name is not escaped")
		}
		if strings.Contains(body, h.OpToken) || strings.Contains(body, cookie.Value) {
			t.Errorf("the page shows a credential")
		}
	})

	t.Run("the room view the script reads answers to the cookie", func(t *testing.T) {
		r := h.Do(t, "GET", h.OwnerURL("/workspace/room"), "", nil, mcptest.WithCookie(cookie))
		roomtest.WantOK(t, r)
		var v struct {
			Handoffs []any  `json:"handoffs"`
			Invites  *[]any `json:"invites"`
		}
		r.Into(t, &v)
		if v.Handoffs == nil || v.Invites == nil {
			t.Errorf("the room view for the page lacks handoffs or invites: %.300s", r.Body)
		}
	})
}

// TestOwnerPageAssets: the script and stylesheet come from the binary, on
// the owner listener only, as the right types, never sniffed; nothing else
// under /page/ is served.
func TestOwnerPageAssets(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	for name, ct := range map[string]string{"page.js": "text/javascript; charset=utf-8", "page.css": "text/css; charset=utf-8"} {
		t.Run(name, func(t *testing.T) {
			want, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			r := h.Do(t, "GET", h.OwnerURL("/page/"+name), "", nil) // holds no room data: no cookie needed
			roomtest.WantOK(t, r)
			if r.Header.Get("Content-Type") != ct || r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("headers %v", r.Header)
			}
			if string(r.Body) != string(want) {
				t.Errorf("body is not the embedded %s", name)
			}
			etag := r.Header.Get("ETag")
			if etag == "" {
				t.Fatalf("no ETag")
			}
			r = h.Do(t, "GET", h.OwnerURL("/page/"+name), "", nil, mcptest.WithHeader("If-None-Match", etag))
			if r.Status != http.StatusNotModified || len(r.Body) != 0 {
				t.Errorf("revalidation: %d, %d bytes", r.Status, len(r.Body))
			}
			// A participant's page (issue 28) is the same code: the ingress
			// serves the same file, which holds no room data either.
			r = h.Do(t, "GET", h.IngressURL("/page/"+name), "", nil)
			if r.Status != http.StatusOK || string(r.Body) != string(want) {
				t.Errorf("ingress %s: %d, not the embedded file", name, r.Status)
			}
		})
	}
	t.Run("nothing else under /page/", func(t *testing.T) {
		for _, p := range []string{"/page/index.html", "/page/", "/page", "/page/page.go", "/page/..%2fpage.go", "/page/page.js/x", "/page/PAGE.JS"} {
			r := h.Do(t, "GET", h.OwnerURL(p), "", nil)
			if r.Status != http.StatusNotFound {
				t.Errorf("GET %s: %d, want 404", p, r.Status)
			}
			if strings.Contains(string(r.Body), "{{") {
				t.Errorf("GET %s leaked the template", p)
			}
		}
	})
	t.Run("the script builds the page from text and stays same-origin", func(t *testing.T) {
		js, err := os.ReadFile("page.js")
		if err != nil {
			t.Fatal(err)
		}
		src := string(js)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "credentials: 'include'", "setAttribute('style'", ".style."} {
			if strings.Contains(src, bad) {
				t.Errorf("page.js uses %q", bad)
			}
		}
		for _, want := range []string{"credentials: 'same-origin'", "'Content-Type'] = 'application/json'", "new EventSource('/workspace/observe')", "'/workspace/room'"} {
			if !strings.Contains(src, want) {
				t.Errorf("page.js lacks %q", want)
			}
		}
	})
}

// TestOwnerPageIngressNeverServesIt: on the ingress listener there is no
// owner page, no owner cookie, and the owner cookie means nothing.
func TestOwnerPageIngressNeverServesIt(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	cookie := browserCookie(t, h)
	key := h.API.NewPageKey()
	for _, p := range []string{"/", "/?key=" + url.QueryEscape(key), "/?key=garbage"} {
		r := h.Do(t, "GET", h.IngressURL(p), "", nil, mcptest.WithCookie(cookie))
		// A key on the ingress is a participant's page key (issue 28): an
		// owner key is unknown there and refused in plain words.
		if p == "/" && (r.Status != http.StatusOK || !strings.HasPrefix(string(r.Body), "Commonroom ingress.")) ||
			p != "/" && r.Status != http.StatusForbidden || strings.Contains(string(r.Body), "<html") {
			t.Errorf("ingress GET %s: %d %.100s", p, r.Status, r.Body)
		}
		if sc := r.Header.Values("Set-Cookie"); len(sc) > 0 {
			t.Errorf("ingress GET %s set a cookie: %v", p, sc)
		}
	}
	for _, p := range []string{"/workspace/room", "/workspace/observe"} {
		roomtest.WantUnauthorized(t, h.Do(t, "GET", h.IngressURL(p), "", nil, mcptest.WithCookie(cookie)), "unauthorized")
	}
	// The key shown to the ingress is still good on the owner listener.
	r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil)
	if r.Status != http.StatusSeeOther || cookieOf(r) == nil {
		t.Errorf("owner after ingress: %d", r.Status)
	}
}

// TestOwnerCookiesOfTwoRooms: two rooms served on one machine share the
// browser's cookie jar (cookies are keyed by host, not port). Each room's
// owner cookie has its own name, so neither clobbers the other, and one
// room's cookie opens nothing in the other under either name.
func TestOwnerCookiesOfTwoRooms(t *testing.T) {
	a := apitest.New(t, roomtest.Options{}, nil)
	b := apitest.New(t, roomtest.Options{}, nil)
	ca, cb := browserCookie(t, a), browserCookie(t, b)
	if ca.Name == cb.Name {
		t.Fatalf("both rooms name their owner cookie %q", ca.Name)
	}
	for name, c := range map[string]*http.Cookie{
		"a's cookie as sent":       ca,
		"a's value under b's name": {Name: cb.Name, Value: ca.Value},
	} {
		if r := b.Do(t, "GET", b.OwnerURL("/"), "", nil, mcptest.WithCookie(c)); r.Status != http.StatusUnauthorized {
			t.Errorf("%s on b's owner page: %d, want 401", name, r.Status)
		}
	}
	// A browser holding both sends both; each room reads its own.
	for _, h := range []*apitest.Harness{a, b} {
		if r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, mcptest.WithCookie(ca), mcptest.WithCookie(cb)); r.Status != http.StatusOK {
			t.Errorf("both cookies on %s: %d, want 200", h.Eng.WorkspaceID, r.Status)
		}
	}
}

// TestOwnerPageKeyOnce: a key works once; a reused or stale one (minted
// before a restart) is refused and sets nothing.
func TestOwnerPageKeyOnce(t *testing.T) {
	h := apitest.New(t, roomtest.Options{}, nil)
	key := h.API.NewPageKey()
	r := h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/" {
		t.Fatalf("first use: %d, Location %q", r.Status, r.Header.Get("Location"))
	}
	c := cookieOf(r)
	if c == nil || c.Name != ownerCookie(h) || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie = %+v", c)
	}
	cookie := &http.Cookie{Name: c.Name, Value: c.Value}

	refused := func(t *testing.T, r roomtest.Response) {
		t.Helper()
		if r.Status != http.StatusForbidden || cookieOf(r) != nil {
			t.Errorf("status %d, cookie %v; want 403 and none", r.Status, cookieOf(r))
		}
		if !strings.Contains(string(r.Body), "already used or is not valid") || strings.Contains(string(r.Body), "<html") {
			t.Errorf("refusal page = %q", r.Body)
		}
	}
	t.Run("reused", func(t *testing.T) {
		refused(t, h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil))
		// Even while holding the cookie: the key is spent, not the browser.
		refused(t, h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key)), "", nil, mcptest.WithCookie(cookie)))
		roomtest.WantOK(t, h.Do(t, "GET", h.OwnerURL("/"), "", nil, mcptest.WithCookie(cookie)))
	})
	t.Run("unknown", func(t *testing.T) {
		refused(t, h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(key+"x")), "", nil))
	})
	t.Run("stale: minted before a restart", func(t *testing.T) {
		stale := h.API.NewPageKey()
		h.Restart()
		refused(t, h.Do(t, "GET", h.OwnerURL("/?key="+url.QueryEscape(stale)), "", nil))
		if r := h.Do(t, "GET", h.OwnerURL("/"), "", nil, mcptest.WithCookie(cookie)); r.Status != http.StatusUnauthorized {
			t.Errorf("a cookie from before the restart opened the page: %d", r.Status)
		}
	})
}

// TestOwnerPageCrossOriginWrites: the cookie alone never makes a write.
// From any origin but the page's own (another port, another name for the
// same port, https, a foreign site, none at all) every write the page can
// make is 403 and changes nothing; from the page's own origin they work.
func TestOwnerPageCrossOriginWrites(t *testing.T) {
	f := newPageRoom(t)
	h := f.h
	origins := map[string]string{
		"the ingress listener":       f.ingressOrigin,
		"localhost, same port":       f.hostnameSamePort,
		"https, same host and port":  f.httpsSameAuthority,
		"a foreign site":             "http://evil.example",
		"null":                       "null",
		"the owner origin plus path": f.ownerOrigin + "/",
	}
	before := h.Snapshot()
	for _, w := range pageWrites {
		for name, o := range origins {
			t.Run(w.path+" from "+name, func(t *testing.T) {
				r := h.Do(t, "POST", h.OwnerURL(w.path), "", w.body(f), mcptest.WithCookie(f.cookie), withOrigin(o))
				roomtest.WantError(t, r, http.StatusForbidden, "permission_denied")
			})
		}
		t.Run(w.path+" without Origin", func(t *testing.T) {
			r := h.Do(t, "POST", h.OwnerURL(w.path), "", w.body(f), mcptest.WithCookie(f.cookie))
			roomtest.WantError(t, r, http.StatusForbidden, "permission_denied")
		})
		t.Run(w.path+" as text/plain from the ingress origin", func(t *testing.T) {
			b, _ := json.Marshal(w.body(f))
			r := h.Do(t, "POST", h.OwnerURL(w.path), "", string(b), mcptest.WithCookie(f.cookie), withOrigin(f.ingressOrigin),
				mcptest.WithHeader("Content-Type", "text/plain"))
			roomtest.WantError(t, r, http.StatusForbidden, "permission_denied")
		})
	}
	h.AssertUnchanged(t, before)

	t.Run("from the page's own origin the same writes work", func(t *testing.T) {
		same := withOrigin(f.ownerOrigin)
		post := func(path string, body map[string]any) map[string]any {
			t.Helper()
			r := h.Do(t, "POST", h.OwnerURL(path), "", body, mcptest.WithCookie(f.cookie), same)
			roomtest.WantOK(t, r)
			return r.JSON(t)
		}
		post("/workspace/task/update", map[string]any{"task_id": f.taskID, "input_responses": map[string]any{
			"tone": map[string]any{"action": "accept", "content": map[string]any{"answer": "friendly"}}}})
		r := h.Do(t, "GET", h.IngressURL("/workspace/task?task_id="+f.taskID), f.alice.SessionToken, nil)
		roomtest.WantOK(t, r)
		if st := r.JSON(t)["status"]; st != "working" {
			t.Errorf("task after the answer: %v, want working", st)
		}
		roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff/complete"), f.bob.SessionToken,
			map[string]any{"handoff_id": f.handoffID, "result": map[string]any{"text": "done"}}))
		if got := post("/workspace/handoff/approve", map[string]any{"handoff_id": f.handoffID, "note": "thanks"})["status"]; got != "approved" {
			t.Errorf("approve: status %v", got)
		}
		post("/workspace/proposal/review", map[string]any{"proposal_id": f.proposalID, "approve": true})
		post("/workspace/commit", map[string]any{"proposal_id": f.proposalID})
		if uri, _ := post("/workspace/invite", map[string]any{})["uri"].(string); !strings.HasPrefix(uri, "commonroom://join/") {
			t.Errorf("invite uri = %q", uri)
		}
		if n := h.Count(`SELECT count(*) FROM events WHERE event_type = 'handoff.approved'`); n != 1 {
			t.Errorf("%d handoff.approved events, want 1", n)
		}
	})
}

// TestOwnerPageForgedIDs: a well-formed request from the page's own origin
// naming a handoff or task that does not exist is refused with the not-found
// error and changes nothing.
func TestOwnerPageForgedIDs(t *testing.T) {
	f := newPageRoom(t)
	h := f.h
	same := withOrigin(f.ownerOrigin)
	noHandoff := "handoff_" + strings.Repeat("0", 32)
	noTask := "task_" + strings.Repeat("0", 32)
	before := h.Snapshot()
	for _, c := range []struct {
		path string
		body map[string]any
		code string
	}{
		{"/workspace/handoff/approve", map[string]any{"handoff_id": noHandoff, "note": "forged"}, "handoff_not_found"},
		{"/workspace/handoff/reject", map[string]any{"handoff_id": noHandoff}, "handoff_not_found"},
		{"/workspace/handoff/approve", map[string]any{"handoff_id": f.handoffID[:len(f.handoffID)-1] + "x"}, "handoff_not_found"},
		{"/workspace/handoff/approve", map[string]any{"handoff_id": f.taskID}, "handoff_not_found"},
		{"/workspace/task/cancel", map[string]any{"task_id": noTask}, "task_not_found"},
		{"/workspace/task/update", map[string]any{"task_id": noTask, "input_responses": map[string]any{
			"tone": map[string]any{"action": "accept", "content": map[string]any{"answer": "x"}}}}, "task_not_found"},
	} {
		t.Run(c.path+" "+c.code, func(t *testing.T) {
			r := h.Do(t, "POST", h.OwnerURL(c.path), "", c.body, mcptest.WithCookie(f.cookie), same)
			m := roomtest.WantError(t, r, http.StatusNotFound, c.code)
			if msg, _ := m["message"].(string); strings.Contains(msg, f.cookie.Value) {
				t.Errorf("message echoes the cookie")
			}
		})
	}
	h.AssertUnchanged(t, before)
}

// TestOwnerPageLiveStream: the page's live path works with the cookie: the
// observe stream opens and carries the next change as a notification frame.
func TestOwnerPageLiveStream(t *testing.T) {
	f := newPageRoom(t)
	h := f.h
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.OwnerURL("/workspace/observe"), nil)
	req.AddCookie(f.cookie)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("observe with the cookie: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	frames := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				frames <- line
			}
		}
		close(frames)
	}()
	roomtest.WantOK(t, h.Do(t, "POST", h.IngressURL("/workspace/handoff"), f.alice.SessionToken, map[string]any{"summary": "one more"}))
	for {
		select {
		case line, ok := <-frames:
			if !ok {
				t.Fatal("the stream ended before the change arrived")
			}
			var fr struct {
				Method string `json:"method"`
				Params struct {
					EventID   int64  `json:"event_id"`
					EventType string `json:"event_type"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(line), &fr); err != nil {
				t.Fatalf("frame is not JSON: %v: %s", err, line)
			}
			if fr.Method != "notifications/commonroom/event" || fr.Params.EventID == 0 {
				t.Fatalf("frame = %s", line)
			}
			if fr.Params.EventType == "handoff.created" {
				return
			}
		case <-ctx.Done():
			t.Fatal("no handoff.created frame within 10 s")
		}
	}
}

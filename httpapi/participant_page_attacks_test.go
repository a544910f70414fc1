package httpapi

// Attacks on a participant's page (the security review of issue 28): each
// test is one attack a hostile holder of a page cookie, or a hostile site
// beside the room, could try, and what the room answers.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestParticipantPageRateLimited: the page (GET /) and its rendered
// document (GET /page/document) count against the session's rate limit as
// every /workspace route does, so a cookie is no way around it (rendering
// up to 2 MiB of Markdown for each request, as often as one likes).
func TestParticipantPageRateLimited(t *testing.T) {
	const limit = 3
	h := newHarness(t, "", harnessOpts{Limits: func(l *room.Limits) { l.RateLimitPerMinute = limit }})
	for _, path := range []string{"/", "/page/document"} {
		t.Run(path+": refused with 429 limit_exceeded past the session's budget", func(t *testing.T) {
			s := h.join("reader-"+path, "read", "observe")
			c := ppCookie(t, h, s.SessionToken) // POST /session/page spends one
			for i := 1; i < limit; i++ {
				wantOK(t, h.do("GET", h.IngressURL(path), "", nil, withCookie(c)))
			}
			r := h.do("GET", h.IngressURL(path), "", nil, withCookie(c))
			m := wantError(t, r, http.StatusTooManyRequests, "limit_exceeded")
			if s, _ := m["retry_after_seconds"].(float64); s < 1 || r.Header.Get("Retry-After") != fmt.Sprint(s) {
				t.Errorf("retry_after_seconds %v, Retry-After %q: want the same whole seconds in both", m["retry_after_seconds"], r.Header.Get("Retry-After"))
			}
			wantError(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(c)), http.StatusTooManyRequests, "limit_exceeded")
		})
	}
	t.Run("another session's page is not limited by it", func(t *testing.T) {
		s := h.join("other", "read", "observe")
		wantOK(t, h.do("GET", h.IngressURL("/page/document"), "", nil, withCookie(ppCookie(t, h, s.SessionToken))))
	})
	t.Run("the owner page is not limited", func(t *testing.T) {
		_, c := h.pageCookie(t)
		for range limit + 2 {
			wantOK(t, h.do("GET", h.OwnerURL("/page/document"), "", nil, withCookie(c)))
		}
	})
}

// TestParticipantPageTossedCookie: a site on the same registrable domain
// as the room (another node of a transport's tailnet, serving
// Domain=tailnet.ts.net cookies; another port of the same host) can plant
// a cookie of the room's name beside the page's own, with a longer Path so
// the browser sends it first. A request carrying more than one cookie of
// the room's name is refused, never taken as the first one: otherwise the
// victim's page would act, unseen, as the planter's session (the
// planter's own cookie, from a key of its own), and what the victim wrote
// there would be the planter's to read.
func TestParticipantPageTossedCookie(t *testing.T) {
	h := newHarness(t, "")
	victim := h.join("victim", "read", "observe", "propose", "checkout")
	planter := h.join("planter", "read", "observe", "propose", "checkout")
	mine, tossed := ppCookie(t, h, victim.SessionToken), ppCookie(t, h, planter.SessionToken)
	forged := &http.Cookie{Name: mine.Name, Value: "forged"}
	for name, cookies := range map[string][]*http.Cookie{
		"the planter's cookie sent first": {tossed, mine},
		"the page's own sent first":       {mine, tossed},
		"a forged one sent first":         {forged, mine},
	} {
		opts := func(extra ...reqOpt) []reqOpt {
			for _, c := range cookies {
				extra = append(extra, withCookie(c))
			}
			return extra
		}
		t.Run(name+": a write is refused, nothing changed", func(t *testing.T) {
			before := h.Snapshot()
			m := wantError(t, h.do("POST", h.IngressURL("/workspace/checkout"), "", map[string]any{"target": "Idea/Goals"},
				opts(withOrigin(h.Ingress.URL))...), http.StatusUnauthorized, "unauthorized")
			if msg, _ := m["message"].(string); !strings.Contains(msg, "more than one") {
				t.Errorf("message %q does not say why", msg)
			}
			h.AssertUnchanged(t, before)
		})
		for _, path := range []string{"/", "/page/document", "/workspace/room"} {
			t.Run(name+": "+path+" is refused", func(t *testing.T) {
				if r := h.do("GET", h.IngressURL(path), "", nil, opts()...); r.Status != http.StatusUnauthorized {
					t.Errorf("%d %.120s", r.Status, r.Body)
				}
			})
		}
	}
	t.Run("the page's own cookie alone still works", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(mine)))
	})
}

// TestParticipantPageKeySwap: a hostile participant puts a link to the
// room's page with a key of its own (/?key=…) where a victim clicks it —
// in the document, which the page renders with its links. Spending it
// would replace the victim's live cookie with one for the planter's
// session, and the victim's page would go on, unseen, as the planter. A
// key for another participant never replaces a live cookie of the room:
// it is refused (and spent, like any key a browser showed), and the
// victim's page stays the victim's.
func TestParticipantPageKeySwap(t *testing.T) {
	h := newHarness(t, "")
	victim := h.join("victim", "read", "observe", "propose", "checkout")
	planter := h.join("planter", "read", "observe", "propose", "checkout")
	mine := ppCookie(t, h, victim.SessionToken)
	redeem := func(key string, c *http.Cookie) (*http.Cookie, apiResp) {
		return ppRedeem(t, h, key, withCookie(c), withHeader("Sec-Fetch-Site", "same-origin"))
	}
	t.Run("another participant's key beside a live cookie: refused, spent", func(t *testing.T) {
		key := ppKey(t, h, planter.SessionToken)
		c, r := redeem(key, mine)
		if c != nil || r.Status != http.StatusForbidden || !strings.Contains(string(r.Body), "another participant") {
			t.Errorf("swap: %d %q, cookie %v", r.Status, r.Body, c)
		}
		page := h.do("GET", h.IngressURL("/"), "", nil, withCookie(mine))
		if !strings.Contains(string(page.Body), `data-participant-id="`+victim.ParticipantID+`"`) {
			t.Errorf("the victim's page is no longer the victim's")
		}
		if c, _ := ppRedeem(t, h, key); c != nil {
			t.Errorf("the refused key still opens a page")
		}
	})
	t.Run("the same participant's fresh key beside its cookie: a new cookie", func(t *testing.T) {
		if c, r := redeem(ppKey(t, h, victim.SessionToken), mine); c == nil {
			t.Errorf("own key: %d %q", r.Status, r.Body)
		}
	})
	t.Run("another participant's key beside a dead cookie: a new cookie", func(t *testing.T) {
		gone := h.join("gone", "read", "observe")
		dead := ppCookie(t, h, gone.SessionToken)
		wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), gone.SessionToken, nil))
		if c, r := redeem(ppKey(t, h, planter.SessionToken), dead); c == nil {
			t.Errorf("key beside a dead cookie: %d %q", r.Status, r.Body)
		}
	})
}

// TestParticipantPageChurn: the room's store of keys and cookies is
// bounded, its oldest entry dropped past the bound. A participant with a
// many-use invitation could join, mint keys and leave over and over: were
// an ended session's keys kept until someone presented them, that churn
// alone would push every other participant's live cookie out. A session's
// keys and cookies go when it ends, so only live sessions hold any.
func TestParticipantPageChurn(t *testing.T) {
	h := newHarness(t, "")
	h.API.sessionPages.mu.Lock()
	h.API.sessionPages.roomCap = 3
	h.API.sessionPages.mu.Unlock()
	victim := h.join("victim", "read", "observe")
	mine := ppCookie(t, h, victim.SessionToken)
	for range 4 {
		s := h.join("churn", "read", "observe")
		ppKey(t, h, s.SessionToken)
		ppKey(t, h, s.SessionToken)
		wantOK(t, h.do("POST", h.IngressURL("/workspace/leave"), s.SessionToken, nil))
		waitFor(t, "the left session's keys are forgotten", func() bool {
			keys, _ := h.API.sessionPages.size()
			return keys == 0
		})
	}
	t.Run("the victim's cookie still works", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/room"), "", nil, withCookie(mine)))
	})
}

// TestPageCookieSubresourceFromAnotherOrigin: SameSite=Strict keeps the
// cookie off cross-site requests, not off same-site ones, and another port
// of the host or another node of a tailnet is the same site. Such a page
// cannot read the answers (no CORS), but each <img src=…/workspace/observe>
// it embeds would open a stream as the victim's session (taking its four
// slots, or the operator's without bound) and each read would spend the
// session's rate budget. A cookie-authenticated request the browser marks
// as coming from another origin (Sec-Fetch-Site other than same-origin)
// is refused on every route but the page's own navigation (GET /); a
// client that sends no Sec-Fetch-Site (not a browser) is unaffected.
func TestPageCookieSubresourceFromAnotherOrigin(t *testing.T) {
	h := newHarness(t, "")
	alice := h.join("alice", "read", "observe")
	_, owner := h.pageCookie(t)
	doors := []struct {
		name   string
		url    func(string) string
		cookie *http.Cookie
	}{
		{"participant", h.IngressURL, ppCookie(t, h, alice.SessionToken)},
		{"owner", h.OwnerURL, owner},
	}
	for _, d := range doors {
		for _, path := range []string{"/workspace/room", "/workspace/observe", "/page/document"} {
			for _, site := range []string{"same-site", "cross-site"} {
				t.Run(d.name+" "+path+" from "+site+": refused", func(t *testing.T) {
					r := h.do("GET", d.url(path), "", nil, withCookie(d.cookie), withHeader("Sec-Fetch-Site", site))
					if r.Status != http.StatusForbidden {
						t.Errorf("%d %.120s", r.Status, r.Body)
					}
				})
			}
		}
		for _, site := range []string{"same-origin", ""} {
			t.Run(d.name+" /workspace/room from "+site+"(or none): answered", func(t *testing.T) {
				opts := []reqOpt{withCookie(d.cookie)}
				if site != "" {
					opts = append(opts, withHeader("Sec-Fetch-Site", site))
				}
				wantOK(t, h.do("GET", d.url("/workspace/room"), "", nil, opts...))
				wantOK(t, h.do("GET", d.url("/page/document"), "", nil, opts...))
			})
		}
		t.Run(d.name+" page navigation from another site: still served", func(t *testing.T) {
			wantOK(t, h.do("GET", d.url("/"), "", nil, withCookie(d.cookie), withHeader("Sec-Fetch-Site", "same-site")))
		})
	}
	t.Run("a bearer token from another site is not a cookie: answered", func(t *testing.T) {
		wantOK(t, h.do("GET", h.IngressURL("/workspace/room"), alice.SessionToken, nil, withHeader("Sec-Fetch-Site", "cross-site")))
	})
}

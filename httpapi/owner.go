package httpapi

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"github.com/commonroom/ce/room"
	"net/http"
	"sync"
	"time"
)

// ownerCookiePrefix starts the name of the owner page's credential; the
// room's workspace id completes it, as for the participant cookie, so the
// owner pages of two rooms served on one machine (a browser keys cookies
// by host, not port) each keep their own. It exists only on the owner
// listener, is HttpOnly and SameSite=Strict, and is never accepted on /mcp.
const ownerCookiePrefix = "commonroom_owner_"

// pageKeys holds one-time page keys and the cookies they were exchanged for,
// both as hashes, in memory only: a restart prints a fresh key.
type pageKeys struct {
	mu      sync.Mutex
	keys    map[[32]byte]bool      // unused one-time keys
	cookies map[[32]byte]time.Time // cookie hash -> expiry
	// now is the room's clock (Engine.Now), so a cookie expires on the
	// same clock as a session, and tests move it as they move the room's.
	now func() time.Time
	// name is the cookie's name: ownerCookiePrefix + the workspace id.
	name string
}

func newPageKeys(workspaceID string, now func() time.Time) pageKeys {
	return pageKeys{keys: map[[32]byte]bool{}, cookies: map[[32]byte]time.Time{}, now: now,
		name: ownerCookiePrefix + cookieSafe(workspaceID)}
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// NewPageKey mints a one-time key for the owner page URL `ce serve` prints.
func (s *Server) NewPageKey() string { return s.pages.mint() }

// mint records a fresh one-time page key and returns it.
func (k *pageKeys) mint() string {
	key := randomToken()
	k.mu.Lock()
	k.keys[sha256.Sum256([]byte(key))] = true
	k.mu.Unlock()
	return key
}

// Redeem spends a key and returns a fresh owner cookie (HttpOnly,
// SameSite=Strict, a day long), or nil if the key is unknown or was already
// used. The page door (package page) sets it.
func (k *pageKeys) Redeem(key string) *http.Cookie {
	h := sha256.Sum256([]byte(key))
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.keys[h] {
		return nil
	}
	delete(k.keys, h)
	c := randomToken()
	k.cookies[sha256.Sum256([]byte(c))] = k.now().Add(ownerCookieLife)
	return &http.Cookie{Name: k.name, Value: c, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: 24 * 3600}
}

// ownerCookieLife is how long an owner cookie is good for after its key
// was redeemed.
const ownerCookieLife = 24 * time.Hour

// Valid reports whether the request carries a live owner cookie. The page
// door asks it before showing the room; authenticate before taking the
// request as the operator's.
func (k *pageKeys) Valid(r *http.Request) bool {
	_, ok := k.expiry(r)
	return ok
}

// expiry is when the request's owner cookie stops being valid, and whether
// it carries a live one. The cookie is not a session of the room (nothing
// in the sidecar names it, and the sweeper never ends it), so a stream
// opened with it is told this time and ends there itself (observe).
func (k *pageKeys) expiry(r *http.Request) (time.Time, bool) {
	c, err := r.Cookie(k.name)
	if err != nil || c.Value == "" {
		return time.Time{}, false
	}
	h := sha256.Sum256([]byte(c.Value))
	k.mu.Lock()
	defer k.mu.Unlock()
	exp, ok := k.cookies[h]
	if ok && !k.now().Before(exp) {
		delete(k.cookies, h)
		return time.Time{}, false
	}
	return exp, ok
}

// newPageKey is POST /owner/key: the operator asks for a fresh one-time page
// link (ce open), since each key works once.
func (s *Server) newPageKey(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	if !p.Trusted || bearer(r) == "" {
		s.sendError(w, r, room.Errorf(room.KindPermissionDenied, "only the local operator credential can mint a page key"))
		return
	}
	sendJSON(w, http.StatusOK, map[string]string{"key": s.NewPageKey(), "path": "/?key="})
}

// ingressPage is GET / on the ingress: a participant's page for a page
// key or the participant cookie, the plain-text index otherwise.
func (s *Server) ingressPage(w http.ResponseWriter, r *http.Request) {
	if _, present, _ := s.sessionPages.cookie(r); present || r.URL.Query().Get("key") != "" {
		s.participantPage.Index(w, r)
		return
	}
	s.ingressIndex(w, r)
}

// ingressIndex is what the session-only listener shows at / to a request
// without a page key or cookie: an endpoint is not access; joining takes
// an invitation.
func (s *Server) ingressIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("Commonroom ingress. Reaching this endpoint grants nothing: join with a commonroom://join/… invitation (POST /session/join), then send Authorization: Bearer <session_token>. MCP: POST /mcp (2026-07-28).\n"))
}

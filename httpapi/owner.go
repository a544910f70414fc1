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

// ownerCookie is the owner page's credential. It exists only on the owner
// listener, is HttpOnly and SameSite=Strict, and is never accepted on /mcp.
const ownerCookie = "commonroom_owner"

// pageKeys holds one-time page keys and the cookies they were exchanged for,
// both as hashes, in memory only: a restart prints a fresh key.
type pageKeys struct {
	mu      sync.Mutex
	keys    map[[32]byte]bool      // unused one-time keys
	cookies map[[32]byte]time.Time // cookie hash -> expiry
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// NewPageKey mints a one-time key for the owner page URL `ce serve` prints.
func (s *Server) NewPageKey() string {
	k := randomToken()
	s.pages.mu.Lock()
	s.pages.keys[sha256.Sum256([]byte(k))] = true
	s.pages.mu.Unlock()
	return k
}

// redeemPageKey spends a key and returns a fresh cookie value, or "" if the
// key is unknown or was already used.
func (s *Server) redeemPageKey(key string) string {
	h := sha256.Sum256([]byte(key))
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	if !s.pages.keys[h] {
		return ""
	}
	delete(s.pages.keys, h)
	c := randomToken()
	s.pages.cookies[sha256.Sum256([]byte(c))] = time.Now().Add(24 * time.Hour)
	return c
}

// ownerCookieValid reports whether the request carries a live owner cookie.
func (s *Server) ownerCookieValid(r *http.Request) bool {
	c, err := r.Cookie(ownerCookie)
	if err != nil || c.Value == "" {
		return false
	}
	h := sha256.Sum256([]byte(c.Value))
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	exp, ok := s.pages.cookies[h]
	if ok && time.Now().After(exp) {
		delete(s.pages.cookies, h)
		return false
	}
	return ok
}

// ownerIndex exchanges a page key for the cookie (then redirects to drop the
// key from the address bar), or serves the page to a holder of the cookie.
func (s *Server) ownerIndex(w http.ResponseWriter, r *http.Request) {
	if key := r.URL.Query().Get("key"); key != "" {
		c := s.redeemPageKey(key)
		if c == "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte("This owner-page link was already used or is not valid. Restart `ce serve` (or run `ce open`) for a fresh one.\n"))
			return
		}
		http.SetCookie(w, &http.Cookie{Name: ownerCookie, Value: c, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, MaxAge: 24 * 3600})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !s.ownerCookieValid(r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte("Open the owner page through the link `ce serve` printed.\n"))
		return
	}
	s.servePage(w, r)
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

// ingressIndex is what the session-only listener shows at /: an endpoint is
// not access; joining takes an invitation.
func (s *Server) ingressIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("Commonroom ingress. Reaching this endpoint grants nothing: join with a commonroom://join/… invitation (POST /session/join), then send Authorization: Bearer <session_token>. MCP: POST /mcp (2026-07-28).\n"))
}

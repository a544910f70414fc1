package httpapi

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"

	"github.com/commonroom/ce/room"
)

// A participant's page (issue 28, DESIGN §7): the owner page's code,
// rendered from a session's capabilities and served on the ingress. A
// session asks for a one-time page key (POST /session/page, bearer only);
// GET /?key= on the ingress spends it for a cookie bound to that session.
// The store keeps, for each key and cookie, only its hash and the hash of
// the session's token, in memory: the cookie authenticates through the same
// engine path as the token (Engine.AuthenticateHash), so it fails the moment
// the session ends or expires, and a restart of the room forgets them all
// (`ce page` mints a fresh link).

// Bounds on what one session, and the whole room, may hold outstanding.
// Past a bound the oldest is dropped: a fresh link always works, and no
// session can grow the store without limit.
const (
	maxPageKeysPerSession    = 4
	maxPageCookiesPerSession = 8
	maxPageEntriesPerRoom    = 4096 // keys and cookies together
)

// participantCookiePrefix starts the participant cookie's name; the room's
// workspace id completes it, so the pages of two rooms on one host (a
// browser keys cookies by host, not port) do not clobber each other.
const participantCookiePrefix = "commonroom_page_"

// sessionPages holds the participant pages' one-time keys and cookies.
type sessionPages struct {
	mu      sync.Mutex
	keys    map[[32]byte]pageGrant // one-time key hash -> its session
	cookies map[[32]byte]pageGrant // cookie hash -> its session
	seq     uint64                 // orders entries, so the oldest is dropped first
	// name is the cookie's name: participantCookiePrefix + the workspace id.
	name string
	// roomCap bounds keys and cookies together (maxPageEntriesPerRoom;
	// tests lower it to reach it).
	roomCap int
}

// pageGrant is what a key or cookie stands for: a session, by the hash of
// its token (never the token itself).
type pageGrant struct {
	tokenHash  [32]byte
	sessionRef string
	seq        uint64
}

func newSessionPages(workspaceID string) sessionPages {
	return sessionPages{keys: map[[32]byte]pageGrant{}, cookies: map[[32]byte]pageGrant{},
		name: participantCookiePrefix + cookieSafe(workspaceID), roomCap: maxPageEntriesPerRoom}
}

// cookieSafe keeps the characters a cookie name may carry.
func cookieSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// add records one entry in m, dropping the session's oldest past perSession
// and the room's oldest past maxPageEntriesPerRoom. Called with mu held.
func (sp *sessionPages) add(m map[[32]byte]pageGrant, h [32]byte, g pageGrant, perSession int) {
	sp.seq++
	g.seq = sp.seq
	m[h] = g
	for countOf(m, g.sessionRef) > perSession {
		dropOldest(m, func(x pageGrant) bool { return x.sessionRef == g.sessionRef })
	}
	for len(sp.keys)+len(sp.cookies) > sp.roomCap {
		// The room's oldest entry, key or cookie.
		kh, kg, kok := oldest(sp.keys, nil)
		ch, cg, cok := oldest(sp.cookies, nil)
		if kok && (!cok || kg.seq < cg.seq) {
			delete(sp.keys, kh)
		} else {
			delete(sp.cookies, ch)
		}
	}
}

func countOf(m map[[32]byte]pageGrant, ref string) int {
	n := 0
	for _, g := range m {
		if g.sessionRef == ref {
			n++
		}
	}
	return n
}

func oldest(m map[[32]byte]pageGrant, match func(pageGrant) bool) ([32]byte, pageGrant, bool) {
	var best [32]byte
	var bg pageGrant
	found := false
	for h, g := range m {
		if match != nil && !match(g) {
			continue
		}
		if !found || g.seq < bg.seq {
			best, bg, found = h, g, true
		}
	}
	return best, bg, found
}

func dropOldest(m map[[32]byte]pageGrant, match func(pageGrant) bool) {
	if h, _, ok := oldest(m, match); ok {
		delete(m, h)
	}
}

// mint records a fresh one-time key for the session whose token hashes to
// tokenHash.
func (sp *sessionPages) mint(tokenHash [32]byte, ref string) string {
	key := randomToken()
	sp.adopt(key, tokenHash, ref)
	return key
}

// adopt records key as a one-time key for the session whose token hashes
// to tokenHash (the proven join makes the key before the session exists,
// and seals it into its answer).
func (sp *sessionPages) adopt(key string, tokenHash [32]byte, ref string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.add(sp.keys, sha256.Sum256([]byte(key)), pageGrant{tokenHash: tokenHash, sessionRef: ref}, maxPageKeysPerSession)
}

// spend takes a key out of the store (it works once) and returns whom it
// stands for.
func (sp *sessionPages) spend(key string) (pageGrant, bool) {
	h := sha256.Sum256([]byte(key))
	sp.mu.Lock()
	defer sp.mu.Unlock()
	g, ok := sp.keys[h]
	delete(sp.keys, h)
	return g, ok
}

// issue records a fresh cookie for g's session and returns it.
func (sp *sessionPages) issue(g pageGrant) *http.Cookie {
	c := randomToken()
	sp.mu.Lock()
	sp.add(sp.cookies, sha256.Sum256([]byte(c)), g, maxPageCookiesPerSession)
	sp.mu.Unlock()
	// No Max-Age: the cookie lasts as long as the browser keeps it and
	// works only as long as its session does.
	return &http.Cookie{Name: sp.name, Value: c, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// cookie returns the grant for the request's participant cookie; present
// says the request carries this room's cookie at all. More than one
// cookie of this room's name is refused, whichever comes first: the room
// sets one (host-only, Path=/), so a second was planted by a site on the
// same registrable domain (another node of a tailnet's ts.net name,
// another port of the host) with a longer Path or a Domain so the browser
// sends it too — taking the first would let the planter's own cookie
// stand, unseen, for the page of whoever opened it.
func (sp *sessionPages) cookie(r *http.Request) (g pageGrant, present bool, err error) {
	cs := r.CookiesNamed(sp.name)
	if len(cs) == 0 || len(cs) == 1 && cs[0].Value == "" {
		return pageGrant{}, false, nil
	}
	if len(cs) > 1 {
		return pageGrant{}, true, errTwoPageCookies()
	}
	h := sha256.Sum256([]byte(cs[0].Value))
	sp.mu.Lock()
	defer sp.mu.Unlock()
	g, ok := sp.cookies[h]
	if !ok {
		return pageGrant{}, true, errNoPageCookie()
	}
	return g, true, nil
}

// forget drops every key and cookie of a session that no longer
// authenticates (ended, expired): they could never work again.
func (sp *sessionPages) forget(ref string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, m := range []map[[32]byte]pageGrant{sp.keys, sp.cookies} {
		for h, g := range m {
			if g.sessionRef == ref {
				delete(m, h)
			}
		}
	}
}

// size is how many keys and cookies are held (tests read it).
func (sp *sessionPages) size() (keys, cookies int) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.keys), len(sp.cookies)
}

// grantPrincipal authenticates g's session by its token's hash, the
// bearer token's own path; a session that no longer authenticates takes
// its keys and cookies with it.
func (s *Server) grantPrincipal(ctx context.Context, g pageGrant) (room.Principal, error) {
	p, err := s.sessionPrincipalHash(ctx, g.tokenHash[:])
	if err != nil {
		if room.ErrorKind(err) == room.KindUnauthorized || room.ErrorKind(err) == room.KindSessionExpired {
			s.sessionPages.forget(g.sessionRef)
			return room.Principal{}, room.Errorf(room.ErrorKind(err), "the session this page belongs to has ended; join again (ce join) and open the new Page: link")
		}
		return room.Principal{}, err
	}
	return p, nil
}

// errNoPageCookie is the answer to a page request without a live cookie of
// this room: none, one this room never issued (another room's, a forged
// one) or one the room forgot (it restarted).
func errNoPageCookie() error {
	return room.Errorf(room.KindUnauthorized, "this page is not signed in for this room (its session ended, the room restarted, or the cookie is another room's): open the Page: link `ce join` printed, or run `ce page` for a fresh one")
}

// errTwoPageCookies is the answer to a request carrying more than one
// cookie of this room's name (sessionPages.cookie says why).
func errTwoPageCookies() error {
	return room.Errorf(room.KindUnauthorized, "this page carries more than one cookie of this room: another site on the same domain set one. Clear this site's cookies in the browser, then open a fresh Page: link (ce page)")
}

// participantPrincipal resolves the participant cookie of an ingress
// request; present says the request carries one.
func (s *Server) participantPrincipal(r *http.Request) (p room.Principal, present bool, err error) {
	g, present, err := s.sessionPages.cookie(r)
	if !present {
		return room.Principal{}, false, nil
	}
	if err != nil {
		return room.Principal{}, true, err
	}
	p, err = s.grantPrincipal(r.Context(), g)
	return p, true, err
}

// cookieRoute says whether the participant cookie may authenticate a
// request for path: the page, its document and the /workspace routes;
// never /mcp, /session/* or anything else.
func cookieRoute(path string) bool {
	return path == "/" || path == "/page/document" || strings.HasPrefix(path, "/workspace/")
}

// newSessionPage is POST /session/page on the ingress: a session asks for a
// one-time link to its page. It is mounted behind authenticate, which on
// this path takes the bearer token only (cookieRoute), so a page's cookie
// cannot mint more links.
func (s *Server) newSessionPage(w http.ResponseWriter, r *http.Request) {
	var in struct{}
	if err := s.decodeJSON(w, r, &in); err != nil {
		s.sendError(w, r, err)
		return
	}
	p, token := principalOf(r), bearer(r)
	if p.SessionRef == "" || token == "" {
		s.sendError(w, r, room.Errorf(room.KindUnauthorized, "a session is required: send Authorization: Bearer <session_token>"))
		return
	}
	if err := p.Require(room.CapRead); err != nil {
		s.sendError(w, r, err)
		return
	}
	key := s.sessionPages.mint([32]byte(room.HashSecret(token)), p.SessionRef)
	sendJSON(w, http.StatusOK, map[string]string{"key": key, "path": "/?key="})
}

// sessionPageElsewhere is POST /session/page on the owner listener: a
// participant's page lives on the ingress only (the owner listener serves
// the owner's page alone), so the link is minted there.
func (s *Server) sessionPageElsewhere(w http.ResponseWriter, r *http.Request) {
	s.sendError(w, r, room.Errorf(room.KindNotFound, "a participant's page is on the room's ingress, not the owner listener: POST /session/page there"))
}

// participantKeys is the page door's credential store on the ingress
// (page.Keys): the participant's one-time key and cookie.
type participantKeys struct{ s *Server }

// Redeem spends a one-time key for a cookie, if its session still
// authenticates. A key of another participant never replaces a live
// cookie of this room: a page link with a key of its own, planted where a
// participant clicks it (the document's links), would otherwise turn the
// victim's page, unseen, into the planter's session. It is refused (and
// spent, as every key a browser showed: its link stays in that browser's
// history); the same participant's fresh key (ce page, a new join)
// replaces its cookie as before, and so does any key beside a cookie that
// no longer works.
func (k participantKeys) Redeem(r *http.Request, key string) (*http.Cookie, error) {
	g, ok := k.s.sessionPages.spend(key)
	if !ok {
		return nil, nil
	}
	p, err := k.s.grantPrincipal(r.Context(), g)
	if err != nil {
		return nil, nil
	}
	if cur, present, err := k.s.participantPrincipal(r); present && err == nil && cur.ParticipantID != p.ParticipantID {
		return nil, room.Errorf(room.KindPermissionDenied, "This browser already has this room's page open as another participant, so this link was not opened here (and is now spent). "+
			"To switch, clear this site's cookies (or use another browser profile), then open a fresh link (ce page).")
	}
	return k.s.sessionPages.issue(g), nil
}

// Viewer is the session the request's cookie stands for. The page and its
// rendered document are outside the authenticated routes' middleware, so
// the session's rate limit is counted here: a cookie is no way around the
// budget its session's token has (rendering the document is the dearest
// read the ingress serves).
func (k participantKeys) Viewer(r *http.Request) (room.Principal, error) {
	p, present, err := k.s.participantPrincipal(r)
	if !present {
		return room.Principal{}, errNoPageCookie()
	}
	if err != nil {
		return p, err
	}
	if err := k.s.spendRate(p.SessionRef); err != nil {
		return room.Principal{}, err
	}
	return p, nil
}

// ownerKeys is the page door's credential store on the owner listener: the
// owner cookie, which stands for the operator.
type ownerKeys struct{ s *Server }

// Redeem spends an owner page key.
func (k ownerKeys) Redeem(_ *http.Request, key string) (*http.Cookie, error) {
	return k.s.pages.Redeem(key), nil
}

// Viewer is the operator, for a holder of the owner cookie.
func (k ownerKeys) Viewer(r *http.Request) (room.Principal, error) {
	if !k.s.pages.Valid(r) {
		return room.Principal{}, room.Errorf(room.KindUnauthorized, "Open the owner page through the link `ce serve` printed.")
	}
	return room.Operator(k.s.eng.HostID), nil
}

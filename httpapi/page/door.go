// Package page is the owner page's door: the one-time page link exchanged
// for the owner cookie, the page rendered from the room as the operator sees
// it, and its stylesheet and script. It is a door of its own so that what
// the owner's browser is shown can be read and changed without reading the
// MCP adapter or the plain routes. It decides nothing about who may act:
// the credential store, what the cookie lets a request do on /workspace
// routes, the Host/Origin guard and the error shape stay with the front door
// (package httpapi), which mounts this handler on the owner listener only
// and hands it what it needs (Config).
package page

import (
	"log/slog"
	"net/http"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// Keys is the front door's credential store as the page needs it: spend a
// one-time page key, and say whom the cookie it was exchanged for stands
// for. It is an interface so the store (its hashes, expiry and cookie
// attributes) stays with the front door's auth, which accepts the same
// cookie on /workspace routes, while the exchange itself is the page's. The
// owner listener's store stands for the operator; the ingress's for one
// participant's session (issue 28), so the one page renders from whoever
// views it.
type Keys interface {
	// Redeem spends a one-time page key and returns the cookie to set, or
	// nil if the key is unknown, was already used or its session ended; an
	// error says, in words for a person, why a good key was not spent.
	Redeem(r *http.Request, key string) (*http.Cookie, error)
	// Viewer is whom the request's cookie stands for; an error (unauthorized,
	// session_expired) says, in words for a person, why there is nobody.
	Viewer(r *http.Request) (room.Principal, error)
}

// Config is what the page needs from the running room and the front door.
// The error writer and request ids are injected, not imported, so the page
// answers refusals in the front door's one error shape and logs under its
// correlation id without an import cycle.
type Config struct {
	// Room is the running room; the page reads it through the read pool.
	Room *actor.Room
	// Keys is the credential store of the listener the page is mounted on.
	Keys Keys
	// UsedKey is what a spent or unknown page key is told (default: the
	// owner page's words).
	UsedKey string
	// Logger receives failures to render the page (default: discarded).
	Logger *slog.Logger
	// SendError answers a request with the front door's error body
	// (required).
	SendError func(http.ResponseWriter, *http.Request, error)
	// RequestID returns the request's correlation id, for log lines
	// (default: none).
	RequestID func(*http.Request) string
}

// Handler serves the owner page. Its methods are the page's routes; the
// front door mounts them (GET /, GET /page/page.css, GET /page/page.js).
type Handler struct {
	cfg Config // with its defaults filled in
}

// New builds the page's handler from what the front door hands it.
func New(cfg Config) *Handler {
	if cfg.SendError == nil {
		panic("page: Config.SendError is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UsedKey == "" {
		cfg.UsedKey = "This owner-page link was already used or is not valid. Restart `ce serve` (or run `ce open`) for a fresh one."
	}
	if cfg.RequestID == nil {
		cfg.RequestID = func(*http.Request) string { return "" }
	}
	return &Handler{cfg: cfg}
}

// Index is GET / on the listener the page is mounted on: it exchanges a
// page key for the cookie (then redirects to drop the key from the address
// bar), or serves the page to a holder of the cookie, rendered for whom the
// cookie stands for.
func (d *Handler) Index(w http.ResponseWriter, r *http.Request) {
	if key := r.URL.Query().Get("key"); key != "" {
		c, err := d.cfg.Keys.Redeem(r, key)
		if c == nil {
			msg := d.cfg.UsedKey
			if err != nil {
				msg = room.AsError(err).Message
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(msg + "\n"))
			return
		}
		http.SetCookie(w, c)
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	p, ok := d.viewer(w, r)
	if !ok {
		return
	}
	d.servePage(w, r, p)
}

// viewer resolves the request's cookie; a request without a live one is
// answered in plain words (a person reads it in a browser tab), any other
// failure in the front door's error shape.
func (d *Handler) viewer(w http.ResponseWriter, r *http.Request) (room.Principal, bool) {
	p, err := d.cfg.Keys.Viewer(r)
	if err == nil {
		return p, true
	}
	switch room.ErrorKind(err) {
	case room.KindUnauthorized, room.KindSessionExpired:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(room.AsError(err).Message + "\n"))
	default:
		d.cfg.SendError(w, r, err)
	}
	return room.Principal{}, false
}

// FromPage refuses a cookie-authenticated request that a browser says came
// from another origin (Sec-Fetch-Site same-site or cross-site). The
// cookie is SameSite=Strict, which keeps it off cross-site requests only:
// another port of the host, or another node of a tailnet, is the same
// site, and a page there could embed <img src=…/workspace/observe> to open
// streams as the cookie's holder, or spend its session's rate budget,
// without reading a byte. The page's own requests are same-origin; a
// client that sends no Sec-Fetch-Site is no browser and carries no cookie
// it did not choose. The page's navigation (GET /) does not ask this: it
// is what a link opens.
func FromPage(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return nil
	}
	return room.Errorf(room.KindPermissionDenied, "requests with the page's cookie must come from the page itself (Sec-Fetch-Site)")
}

// Package httpapi is the HTTP front door of a room: the router that mounts
// its doors — the plain HTTP routes (/session/join, /workspace/...), which
// live here, the MCP JSON-RPC adapter on /mcp (package httpapi/mcp) and the
// owner page (httpapi/page) — and the middleware that guards them
// (Host/Origin, bearer sessions, body limits, rate limits). Every route
// calls the same engine methods as the CLI, through the room actor for
// writes and the read pool for reads.
package httpapi

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"github.com/commonroom/ce/httpapi/internal/reqnote"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/httpapi/page"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
)

// Config wires the front door to a running room.
type Config struct {
	Room   *actor.Room
	Hub    *listen.Hub
	Logger *slog.Logger
	// OperatorToken is the local operator's credential (written to the
	// room's .owner file). It is accepted only on the owner listener.
	OperatorToken string
	Version       string
	// BodyReadTimeout bounds reading one request body (default 30s), so a
	// client trickling a body cannot hold a handler.
	BodyReadTimeout time.Duration
	// WriteTimeout bounds writing one response that is not a live stream
	// (default DefaultWriteTimeout), so an answer nobody reads is dropped.
	WriteTimeout time.Duration
	// MaxConns caps the ingress listener's connections held at once
	// (default DefaultMaxConns); OwnerMaxConns the owner listener's
	// (default DefaultOwnerMaxConns). See OwnerListener, IngressListener.
	MaxConns, OwnerMaxConns int
	// MaxConnsPerPeer is the share of the ingress's connections one peer
	// (a transport's node, a remote address) may hold (default MaxConns/8),
	// so that no single peer can hold them all; the loopback pool has no
	// share (see connPolicy).
	MaxConnsPerPeer int
	// ConnClock is the connection policy's clock (default time.Now); tests
	// inject one to drive the unauthenticated idle time without waiting.
	ConnClock func() time.Time
	// TransportUp says whether the transport's way in is up (nil error),
	// for /readyz; nil means the room is reached on loopback only, which
	// is up while the room serves.
	TransportUp func() error
}

// Server holds what the handlers share. It has no package-level state.
type Server struct {
	room    *actor.Room
	eng     *room.Engine
	hub     *listen.Hub
	log     *slog.Logger
	limits  room.Limits
	version string
	opHash  [32]byte
	hasOp   bool
	started time.Time
	rate    *rateLimiter
	pages   pageKeys
	page    *page.Handler // the owner page's door, mounted on the owner listener
	// sessionPages and participantPage are a participant's page (issue 28):
	// its keys and cookies, and the same page door mounted on the ingress
	// with them.
	sessionPages    sessionPages
	participantPage *page.Handler
	mcp             *mcp.Handler // the MCP door, /mcp on both listeners

	bodyTimeout  time.Duration
	writeTimeout time.Duration
	ownerConns   *connPolicy
	ingressConns *connPolicy
	metricsConns *connPolicy // the opt-in metrics listener's (MetricsListener)

	prom        *promMetrics // GET /metrics
	transportUp func() error // Config.TransportUp

	totals totalsCache // sidecar-wide counts for /debug/metrics

	records actor.RecordCache // CachedRead answers of the plain routes until the next commit

	// beforeSubscribe, when set (by tests), runs in observe, subscriptions/
	// listen and GET /mcp after the request was authenticated and before its
	// stream registers with the hub: the window in which a credential that
	// ends would leave a stream behind.
	beforeSubscribe func()
}

// New builds the server.
func New(cfg Config) *Server {
	s := &Server{room: cfg.Room, eng: cfg.Room.Engine(), hub: cfg.Hub, log: cfg.Logger,
		limits: cfg.Room.Engine().Limits, version: cfg.Version, started: time.Now()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = "dev"
	}
	s.bodyTimeout = cfg.BodyReadTimeout
	if s.bodyTimeout <= 0 {
		s.bodyTimeout = DefaultBodyReadTimeout
	}
	s.writeTimeout = cmp.Or(max(cfg.WriteTimeout, 0), DefaultWriteTimeout)
	s.ingressConns = newConnPolicy(cmp.Or(max(cfg.MaxConns, 0), DefaultMaxConns), cfg.MaxConnsPerPeer, UnauthenticatedIdleTimeout, cfg.ConnClock)
	s.ownerConns = newConnPolicy(cmp.Or(max(cfg.OwnerMaxConns, 0), DefaultOwnerMaxConns), 0, UnauthenticatedIdleTimeout, cfg.ConnClock)
	s.metricsConns = newConnPolicy(DefaultMetricsMaxConns, 0, UnauthenticatedIdleTimeout, cfg.ConnClock)
	s.transportUp = cfg.TransportUp
	s.prom = newPromMetrics(s)
	if cfg.OperatorToken != "" {
		s.opHash = sha256.Sum256([]byte(cfg.OperatorToken))
		s.hasOp = true
	}
	s.pages = newPageKeys(s.eng.WorkspaceID, s.eng.Now)
	s.page = page.New(page.Config{Room: cfg.Room, Keys: ownerKeys{s}, Logger: s.log, SendError: s.sendError, RequestID: requestID})
	s.sessionPages = newSessionPages(s.eng.WorkspaceID)
	if s.hub != nil {
		// A session's page keys and cookies go when it ends (leave, expiry,
		// ended by the host), not when someone next presents them: the
		// store's bound then counts live sessions only, and a participant
		// that joins and leaves over and over cannot push everyone else's
		// cookie out as the oldest.
		s.hub.OnSessionEnd(s.sessionPages.forget)
	}
	s.participantPage = page.New(page.Config{Room: cfg.Room, Keys: participantKeys{s}, Logger: s.log, SendError: s.sendError, RequestID: requestID,
		UsedKey: "This page link was already used, is not valid, or its session has ended. Run `ce page` (or join again) for a fresh one."})
	s.rate = newRateLimiter(s.limits.RateLimitPerMinute, time.Minute, cfg.Room.Engine().Now)
	s.mcp = mcp.New(mcp.Config{Room: cfg.Room, Hub: s.hub, Logger: s.log, Version: s.version,
		Principal: func(r *http.Request) (room.Principal, error) {
			p, err := s.sessionPrincipal(r.Context(), bearer(r))
			if err == nil {
				credentialShown(r.Context())
				noteParticipant(r, p.ParticipantID)
			}
			return p, err
		},
		Note: func(r *http.Request, n reqnote.Note) {
			noteMCP(r, n)
			s.prom.observeRequest(n)
		},
		ReadBody: s.readBody, Allow: s.rate.allow, BeforeSubscribe: func() {
			if f := s.beforeSubscribe; f != nil {
				f()
			}
		}})
	return s
}

// listener says which of the two listeners a handler tree serves.
type listener int

const (
	ownerListener   listener = iota // loopback only; operator credential and the owner page
	ingressListener                 // session only: what a transport plugin exposes
)

// OwnerHandler serves the owner listener.
func (s *Server) OwnerHandler() http.Handler { return s.routes(ownerListener) }

// IngressHandler serves the session-only ingress listener.
func (s *Server) IngressHandler() http.Handler { return s.routes(ingressListener) }

// MCP is the MCP door this server mounts on /mcp, so what it holds in
// memory (its legacy subscription registry, mcp.Handler.Subscriptions) can
// be inspected from outside: the door's black-box tests check that a
// session's subscriptions are forgotten when it ends, which no answer on
// the wire shows.
func (s *Server) MCP() *mcp.Handler { return s.mcp }

func (s *Server) routes(l listener) http.Handler {
	r := chi.NewRouter()
	r.Use(s.bound)
	r.Use(s.requestLog)
	r.Use(s.hostGuard(l))
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	// The one page door, mounted with the listener's credential store: the
	// owner's on the owner listener, a participant's on the ingress.
	pg, index := s.page, http.HandlerFunc(s.page.Index)
	if l == ownerListener {
		r.Post("/session/page", s.sessionPageElsewhere)
	} else {
		pg, index = s.participantPage, s.ingressPage
	}
	r.Get("/", index)
	r.Get("/page/page.css", pg.Asset)
	r.Get("/page/page.js", pg.Asset)
	r.Get("/page/favicon.svg", pg.Asset)
	r.Get("/page/document", pg.Document)
	r.Post("/session/join", s.join)
	r.Post("/session/join/challenge", s.joinChallenge)
	r.Get("/.well-known/agent-workspace", s.wellKnown)
	r.Get("/protocol", s.protocol)
	r.Get("/skills", s.skills)
	r.Get("/skills/commonroom", s.skill)
	r.Post("/mcp", s.mcp.Post)
	r.Get("/mcp", s.mcp.Get)
	r.Delete("/mcp", s.mcp.MethodNotAllowed)
	r.Put("/mcp", s.mcp.MethodNotAllowed)
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate(l))
		r.Use(s.rateLimit)
		s.mountOps(r)
		r.Get("/workspace/observe", func(w http.ResponseWriter, r *http.Request) { s.observe(w, r, l) })
		if l == ingressListener {
			// Authenticated and rate limited like any session call; the
			// page's cookie never counts here (cookieRoute).
			r.Post("/session/page", s.newSessionPage)
		}
		if l == ownerListener {
			r.Get("/debug/metrics", s.metrics)
			r.Get("/metrics", s.promScrape)
			r.Get("/debug/pprof/*", s.pprof)
			r.Post("/owner/key", s.newPageKey)
			r.Post("/owner/compact", s.compact)
		}
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.sendError(w, r, room.Errorf(room.KindNotFound, "no such route: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, POST")
		noteError(r, string(room.KindInvalidRequest))
		sendJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "invalid_request", "message": "method not allowed"})
	})
	return r
}

func (s *Server) rejectHost(w http.ResponseWriter, r *http.Request) {
	noteError(r, string(room.KindPermissionDenied))
	sendJSON(w, http.StatusForbidden, map[string]any{"error": string(room.KindPermissionDenied),
		"message": "requests must come from this machine (Host and Origin must be loopback names)"})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	sendJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// isOperator compares a bearer value with the operator token in constant time.
func (s *Server) isOperator(token string) bool {
	if !s.hasOp || token == "" {
		return false
	}
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], s.opHash[:]) == 1
}

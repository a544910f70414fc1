package httpapi

import (
	"net"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/room"
)

// DefaultMetricsMaxConns is the metrics listener's connection cap: a
// scraper or two and a prober need a handful, and a flood of it must not
// cost the room more.
const DefaultMetricsMaxConns = 16

// MetricsHandler serves the opt-in metrics listener (ce serve
// --metrics-addr), for a scraper that holds no credential: GET /metrics,
// /healthz and /readyz, and nothing else (404). It answers only requests
// whose Host is an IP literal or a loopback name, so a web page cannot
// reach it through a name of its own (DNS rebinding).
func (s *Server) MetricsHandler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.bound)
	r.Use(s.requestLog)
	r.Use(literalHostOnly)
	r.Get("/metrics", s.prom.handler.ServeHTTP)
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.sendError(w, r, room.Errorf(room.KindNotFound, "the metrics listener serves /metrics, /healthz and /readyz only"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		sendJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": "invalid_request", "message": "method not allowed"})
	})
	return r
}

// MetricsListener wraps the metrics listener's socket with a connection
// policy of its own (DefaultMetricsMaxConns, the same idle rules as the
// other listeners), so a busy scraper can take nothing from the room's.
func (s *Server) MetricsListener(ln net.Listener) net.Listener {
	return s.metricsConns.wrap(ln)
}

// literalHostOnly refuses a request whose Host names the server by a DNS
// name other than localhost.
func literalHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if IsLoopbackHost(r.Host) || net.ParseIP(host) != nil {
			next.ServeHTTP(w, r)
			return
		}
		sendJSON(w, http.StatusForbidden, map[string]any{"error": string(room.KindPermissionDenied),
			"message": "the metrics listener answers requests addressed to its IP address or a loopback name only"})
	})
}

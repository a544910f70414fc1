package httpapi

import (
	"context"
	"net/http"
	"time"
)

// readyTimeout bounds the whole readiness check: a writer that cannot
// answer a ping within it is not ready, whatever it is doing.
const readyTimeout = 2 * time.Second

// readyReasons are what /readyz says when it answers 503: one word each,
// with a sentence that names no path, address or secret (it is public).
var readyReasons = map[string]string{
	"writer":    "the room's writer did not answer",
	"sidecar":   "the room's sidecar is gone or cannot be read",
	"transport": "the transport's way in is down",
}

// readiness returns "" when the room can serve, else the first reason it
// cannot: the writer answers a ping through its queue, the sidecar is
// still in its directory and readable, and the transport (when ce serve
// gave one, Config.TransportUp) is up. The cause is logged at debug only:
// a prober may ask every second.
func (s *Server) readiness(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	fail := func(reason string, err error) string {
		s.log.Debug("not ready", "reason", reason, "err", err)
		return reason
	}
	if err := s.room.Ping(ctx); err != nil {
		return fail("writer", err)
	}
	if err := s.room.Store().Check(ctx); err != nil {
		return fail("sidecar", err)
	}
	if s.transportUp != nil {
		if err := s.transportUp(); err != nil {
			return fail("transport", err)
		}
	}
	return ""
}

// readyz is GET /readyz on every listener, with no credential: 200 when
// the room can serve, 503 with the reason otherwise, so a supervisor or a
// load balancer can tell a live process (/healthz) from a working room.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	reason := s.readiness(r.Context())
	if reason == "" {
		sendJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	w.Header().Set("Retry-After", "1")
	sendJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": reason, "message": readyReasons[reason]})
}

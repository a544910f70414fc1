package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/commonroom/ce/httpapi/internal/reqnote"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/commonroom/ce/httpapi/internal/traceparent"
	"github.com/commonroom/ce/room"
)

// statusRecorder remembers the status for the access log. It passes
// Flush and Unwrap through so SSE and ResponseController keep working.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func requestID(r *http.Request) string {
	if info := requestInfoOf(r); info != nil {
		return info.id
	}
	return ""
}

// requestInfo is what the front door's middleware notes about a request, in
// one context value (one copy of the request, not one per note): its
// correlation id, whether it came in on the ingress listener, and what the
// request log (and the room's metrics) say about it.
type requestInfo struct {
	id      string
	ingress bool
	// idHeader is the X-Request-Id header's value slice, kept here so
	// that setting the header allocates nothing of its own.
	idHeader [1]string
	// start is when the request was taken (bound): the log's duration.
	start time.Time

	// The notes below are filled in as the request is served, by whoever
	// learns them. Each is a name this server chose or checked — never a
	// secret, never text a client sent unchecked — so they can be logged
	// and counted as they are.

	// rpcMethod is the JSON-RPC method of a POST /mcp (reqnote.Note).
	rpcMethod string
	// tool is the tool of a tools/call.
	tool string
	// errKind is the error code the request ended with: a Commonroom code
	// (not_found, permission_denied, limit_exceeded…, also for an MCP
	// tool's isError result) or a JSON-RPC fault's name; "" on success.
	errKind string
	// participantID is who the request acted for, once its credential was
	// resolved (a join: who joined).
	participantID string
	// traceID is the W3C trace id of a valid traceparent header, or of
	// params._meta.traceparent on an MCP request (which wins).
	traceID string
}

// listener names the listener the request came in on, as the log and the
// metrics label it.
func (info *requestInfo) listener() string {
	if info.ingress {
		return "ingress"
	}
	return "owner"
}

func requestInfoOf(r *http.Request) *requestInfo {
	info, _ := r.Context().Value(requestInfoKey).(*requestInfo)
	return info
}

// noteParticipant records who r acts for, for the request log.
func noteParticipant(r *http.Request, participantID string) {
	if info := requestInfoOf(r); info != nil {
		info.participantID = participantID
	}
}

// noteError records the error code r is answered with, for the request log.
func noteError(r *http.Request, kind string) {
	if info := requestInfoOf(r); info != nil {
		info.errKind = kind
	}
}

// noteMCP records what the MCP door noted about r.
func noteMCP(r *http.Request, n reqnote.Note) {
	if info := requestInfoOf(r); info != nil {
		info.rpcMethod, info.tool, info.errKind = n.RPCMethod, n.Tool, n.ErrKind
		if n.TraceID != "" {
			info.traceID = n.TraceID
		}
	}
}

// requestLog gives each request a correlation id and, once it is answered,
// logs one line for it (logRequest). Never headers, query strings, raw
// paths or bodies, which may hold secrets or a document's text. bound put
// the notes into the request's context; without it (a handler mounted
// alone) they go into a copy made here. Without info lines (the level is
// fixed when the server starts) no line is written; the request is still
// counted in the HTTP histogram (promMetrics.observeHTTP).
func (s *Server) requestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		rand.Read(b[:])
		var x [16]byte
		hex.Encode(x[:], b[:])
		info := requestInfoOf(r)
		if info == nil {
			info = &requestInfo{start: time.Now()}
			r = r.WithContext(context.WithValue(r.Context(), requestInfoKey, info))
		}
		info.id = string(x[:])
		info.idHeader[0] = info.id
		w.Header()["X-Request-Id"] = info.idHeader[:] // Set, without its []string
		if tp := r.Header["Traceparent"]; len(tp) == 1 {
			info.traceID, _ = traceparent.TraceID(tp[0])
		}
		// bound's writer records the status; anything else is wrapped.
		bw, bound := w.(*boundWriter)
		var rec *statusRecorder
		if !bound {
			rec = &statusRecorder{ResponseWriter: w}
			w = rec
		}
		next.ServeHTTP(w, r)
		status := 0
		if bound {
			status = bw.status
		} else {
			status = rec.status
		}
		if status == 0 { // nothing written: net/http answers 200
			status = http.StatusOK
		}
		route := "" // the router's pattern; none outside a router
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = rc.RoutePattern()
		}
		s.prom.observeHTTP(r, info, route, status)
		if s.log.Enabled(r.Context(), slog.LevelInfo) {
			s.logRequest(r, info, route, status)
		}
	})
}

// logRequest writes a request's line: "request" at info, with request_id,
// method, route (the router's pattern, never the raw path), listener, the
// MCP method and tool, status, error_kind, duration_ms, participant_id and
// trace_id, each when known. A probe that succeeds (/healthz, /readyz,
// /metrics, /debug/metrics) is logged at debug: polled every few seconds, it would
// drown the lines an operator reads the log for.
func (s *Server) logRequest(r *http.Request, info *requestInfo, route string, status int) {
	ctx := r.Context()
	level := slog.LevelInfo
	if status < 400 && (route == "/healthz" || route == "/readyz" || route == "/metrics" || route == "/debug/metrics") {
		level = slog.LevelDebug
		if !s.log.Enabled(ctx, level) {
			return
		}
	}
	var buf [12]slog.Attr
	a := append(buf[:0], slog.String("request_id", info.id), slog.String("method", logMethod(r.Method)))
	if route != "" {
		a = append(a, slog.String("route", route))
	}
	a = append(a, slog.String("listener", info.listener()))
	if info.rpcMethod != "" {
		a = append(a, slog.String("rpc_method", info.rpcMethod))
	}
	if info.tool != "" {
		a = append(a, slog.String("tool", info.tool))
	}
	a = append(a, slog.Int("status", status))
	if info.errKind != "" {
		a = append(a, slog.String("error_kind", info.errKind))
	}
	a = append(a, slog.Float64("duration_ms", float64(time.Since(info.start).Microseconds())/1000))
	if info.participantID != "" {
		a = append(a, slog.String("participant_id", info.participantID))
	}
	if info.traceID != "" {
		a = append(a, slog.String("trace_id", info.traceID))
	}
	s.log.LogAttrs(ctx, level, "request", a...)
}

// logMethod is an HTTP method as the log names it: the standard ones as
// they are, anything else (a client's free text) as "other".
func logMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodPut, http.MethodDelete,
		http.MethodPatch, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// rateLimiter counts requests per credential in fixed windows. It is in
// memory only; a restart forgets it, which is fine for abuse control.
type rateLimiter struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	now    func() time.Time
	start  time.Time
	counts map[string]int
}

func newRateLimiter(limit int, window time.Duration, now func() time.Time) *rateLimiter {
	return &rateLimiter{limit: limit, window: window, now: now, counts: map[string]int{}}
}

// allow reports whether key may make one more request, and if not, how many
// seconds until the window turns.
func (l *rateLimiter) allow(key string) (bool, int) {
	if l.limit <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.start) >= l.window || now.Before(l.start) {
		l.start = now
		clear(l.counts)
	}
	if l.counts[key] >= l.limit {
		wait := int(math.Ceil(l.start.Add(l.window).Sub(now).Seconds()))
		return false, max(wait, 1)
	}
	l.counts[key]++
	return true, 0
}

// rateLimit bounds each session (or the operator) to the room's per-minute budget.
func (s *Server) rateLimit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		key := p.SessionRef
		if key == "" {
			next.ServeHTTP(w, r) // the local operator is not rate limited
			return
		}
		if err := s.spendRate(key); err != nil {
			s.sendError(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// spendRate spends one request of a session's per-minute budget, or says
// it is spent (429 limit_exceeded, retry_after_seconds, which sendError
// also puts in Retry-After): the plain routes' middleware and the
// participant page, whose routes are outside it, count through here.
func (s *Server) spendRate(sessionRef string) error {
	if ok, wait := s.rate.allow(sessionRef); !ok {
		return room.Errorf(room.KindLimitExceeded, "too many requests for this session").With("retry_after_seconds", wait)
	}
	return nil
}

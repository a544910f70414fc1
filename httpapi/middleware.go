package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
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
// correlation id, and whether it came in on the ingress listener.
type requestInfo struct {
	id      string
	ingress bool
	// idHeader is the X-Request-Id header's value slice, kept here so
	// that setting the header allocates nothing of its own.
	idHeader [1]string
}

func requestInfoOf(r *http.Request) *requestInfo {
	info, _ := r.Context().Value(requestInfoKey).(*requestInfo)
	return info
}

// requestLog gives each request a correlation id and logs one line for it:
// method, path, status, duration. Never headers, query strings or bodies,
// which may hold secrets. The notes go where bound put them when it copied
// the request (a request with a body), else into a copy made here. Without
// debug lines (the level is fixed when the server starts) nothing is
// recorded for the line: no status recorder, no clock.
func (s *Server) requestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		rand.Read(b[:])
		var x [16]byte
		hex.Encode(x[:], b[:])
		info := requestInfoOf(r)
		if info == nil {
			info = &requestInfo{}
			r = r.WithContext(context.WithValue(r.Context(), requestInfoKey, info))
		}
		info.id = string(x[:])
		info.idHeader[0] = info.id
		w.Header()["X-Request-Id"] = info.idHeader[:] // Set, without its []string
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		s.log.Debug("request", "request_id", info.id, "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration_ms", time.Since(start).Milliseconds())
	})
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
		if ok, wait := s.rate.allow(key); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			sendJSON(w, http.StatusTooManyRequests, map[string]any{"error": "limit_exceeded",
				"message": "too many requests for this session", "retry_after_seconds": wait})
			return
		}
		next.ServeHTTP(w, r)
	})
}

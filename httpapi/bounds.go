package httpapi

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// bound is the outermost middleware of both listeners. It makes every
// request end within a bounded time whatever its handler does, without a
// server-wide ReadTimeout or WriteTimeout (either would cut live streams):
//
//   - A request target that is not a path (absolute-form "http://host/…",
//     authority-form, "*") is refused before any handler: net/http takes the
//     Host from such a URL and drops the Host header, so the loopback guard
//     would judge a name the client chose freely. We are an origin server,
//     not a proxy. (NewHTTPServer turns off net/http's own answer to
//     "OPTIONS *", which reads the body with no deadline.)
//   - A request that has a body gets a read deadline (the body timeout) from
//     its first byte of handling, whether or not its handler reads the body.
//     Once the body has been read to its end, net/http lifts the deadline
//     itself (startBackgroundRead) and reads the connection in the background
//     to notice a client that goes away. A request without a body is in that
//     background read from the start, so it gets no read deadline at all: a
//     deadline there would cancel the request (and end a live stream) for
//     nothing.
//   - Every response gets a write deadline (the write timeout): a client that
//     never reads holds the answer's memory and the connection no longer
//     than that. Live streams (listen.Serve) replace it with their own
//     per-flush deadlines.
//   - A handler that answers without reading its body to the end gets
//     "Connection: close" on its answer, so net/http does not first try to
//     drain the rest of the body (the answer would wait for it until the read
//     deadline). After the handler, net/http still reads up to 256 KiB of
//     what is left, bounded by the read deadline, and then closes the
//     connection.
func (s *Server) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w) // on the stack: no allocation
		now := time.Now()
		_ = rc.SetWriteDeadline(now.Add(s.writeBudget(r)))
		st := &boundState{} // the writer, the watched body and the request's notes: one allocation
		bw := &st.w
		bw.ResponseWriter = w
		// A copy of the request (the server's own keeps its body) carries
		// the request's notes (requestInfo), which requestLog and the
		// handlers fill in, so that nothing after copies it again.
		st.info.start = now
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey, &st.info))
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(now.Add(s.bodyTimeout))
			st.body.ReadCloser = r.Body
			bw.body = &st.body
			r.Body = bw.body
		}
		if !strings.HasPrefix(r.RequestURI, "/") {
			sendJSON(bw, http.StatusBadRequest, map[string]any{"error": "invalid_request",
				"message": "the request target must be a path: this server is not a proxy"})
			return
		}
		next.ServeHTTP(bw, r)
		bw.answered() // a handler that wrote nothing is answered by net/http after this
	})
}

// boundState is what bound keeps for one request, in one allocation.
type boundState struct {
	w    boundWriter
	body watchedBody // w.body points here when the request has a body
	info requestInfo // in the request's context
}

// writeBudget is how long a response may take to write. A profile or trace
// of N seconds is written only after it has run, so /debug/pprof gets its
// duration on top (net/http/pprof's default for a CPU profile is 30 s).
func (s *Server) writeBudget(r *http.Request) time.Duration {
	d := s.writeTimeout
	if strings.HasPrefix(r.URL.Path, "/debug/pprof/") {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs <= 0 {
			secs = 30
		}
		d += time.Duration(min(secs, 3600)) * time.Second
	}
	return d
}

// watchedBody notes when the request body has been read to its end.
type watchedBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// boundWriter marks the answer "Connection: close" when the request's body
// was left unread, and records the answer's status for the request log. It
// passes Flush and Unwrap through so streams and ResponseController keep
// working.
type boundWriter struct {
	http.ResponseWriter
	body   *watchedBody // nil when the request has no body
	wrote  bool
	status int // the answer's status once its headers went out (0: not yet)
}

// answered is called just before the response headers go out.
func (w *boundWriter) answered() {
	if w.wrote {
		return
	}
	w.wrote = true
	if w.body != nil && !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
	}
}

func (w *boundWriter) WriteHeader(code int) {
	if code >= 200 {
		w.answered()
		if w.status == 0 {
			w.status = code
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *boundWriter) Write(b []byte) (int, error) {
	w.answered()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *boundWriter) Flush() { _ = w.FlushError() }

// FlushError lets ResponseController.Flush report a failed flush.
func (w *boundWriter) FlushError() error {
	w.answered()
	if w.status == 0 {
		w.status = http.StatusOK // a flush sends the headers: 200 unless written
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *boundWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

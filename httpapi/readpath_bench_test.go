package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// BenchmarkReadPath drives the real ingress handler (chi router, bound,
// request log, host guard, the MCP door, the room on a real sidecar) in
// process with an httptest.ResponseRecorder, one request at a time: no
// client, no socket, so ns/op, allocs/op and cpu-ns/op are the handler's own
// cost of one read. BenchmarkMCPReads measures the same reads over loopback.
func BenchmarkReadPath(b *testing.B) {
	benchReadPath(b, newBenchServer(b))
}

// BenchmarkReadPathJSONLog is BenchmarkReadPath with the request log on, as
// ce serve runs by default: one info line per request, here through slog's
// JSON handler into io.Discard (the line's cost without a terminal's).
func BenchmarkReadPathJSONLog(b *testing.B) {
	benchReadPath(b, newBenchServerWith(b, slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))))
}

func benchReadPath(b *testing.B, env *benchServer) {
	h := env.handler
	cases := []struct {
		name string
		req  func(i int) *http.Request
	}{
		{"tasks-get", func(i int) *http.Request {
			id := env.tasks[i%len(env.tasks)]
			return env.local(b, "tasks/get", map[string]any{"taskId": id})
		}},
		{"handoff-get", func(i int) *http.Request {
			id := env.handoffs[i%len(env.handoffs)]
			return env.local(b, "tools/call", map[string]any{"name": "handoff_get", "arguments": map[string]any{"handoff_id": id}})
		}},
		{"handoff-list", func(int) *http.Request {
			return env.local(b, "tools/call", map[string]any{"name": "handoff_list", "arguments": map[string]any{"limit": 10}})
		}},
		{"plain-task", func(i int) *http.Request {
			return env.plain("/workspace/task?task_id=" + env.tasks[i%len(env.tasks)])
		}},
		{"plain-handoff", func(i int) *http.Request {
			return env.plain("/workspace/handoff?handoff_id=" + env.handoffs[i%len(env.handoffs)])
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			// Build the requests up front: only the handler is measured.
			const distinct = 32
			type prepared struct {
				r    *http.Request
				body []byte
			}
			reqs := make([]prepared, distinct)
			for i := range reqs {
				r := c.req(i)
				var body []byte
				if r.Body != nil {
					body, _ = io.ReadAll(r.Body)
				}
				reqs[i] = prepared{r, body}
			}
			// One warm-up round fills the caches a running room has warm.
			for _, p := range reqs {
				serveOnce(b, h, p.r, p.body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; b.Loop(); i++ {
				p := reqs[i%distinct]
				serveOnce(b, h, p.r, p.body)
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// serveOnce runs one request through h and fails the benchmark on an answer
// that is not a 200 with a JSON body (an error would be measured as a read).
func serveOnce(b *testing.B, h http.Handler, tmpl *http.Request, body []byte) {
	r := tmpl.Clone(tmpl.Context())
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	rec := newConnRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"isError":true`)) || bytes.Contains(rec.Body.Bytes(), []byte(`"error":{`)) {
		b.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
	}
}

// connRecorder is a recorder that takes read and write deadlines, as a real
// connection's writer does: with a plain recorder http.ResponseController
// answers each deadline with a newly made ErrNotSupported error, and the
// benchmarks would count allocations no served request makes.
type connRecorder struct{ *httptest.ResponseRecorder }

func newConnRecorder() connRecorder { return connRecorder{httptest.NewRecorder()} }

func (connRecorder) SetReadDeadline(time.Time) error  { return nil }
func (connRecorder) SetWriteDeadline(time.Time) error { return nil }

// local is an MCP request for the in-process handler: the same headers and
// body the loopback client sends, with a request target and a loopback Host.
func (e *benchServer) local(b *testing.B, method string, params map[string]any) *http.Request {
	return e.localAs(b, "", method, params)
}

// plain is a GET on a plain route with the session's bearer token.
func (e *benchServer) plain(target string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Host = "127.0.0.1"
	r.Header.Set("Authorization", "Bearer "+e.token)
	return r
}

// processCPU is the user+system CPU this process has used, in nanoseconds:
// unlike wall time it does not grow when other processes share the cores.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
